"""Training graphs as users write them, which nobody tuned the rewrite for: the rows of the equivalence issue's
table. Same conventions as cases.py (float64, seeded initializers, rows [first, first+rows) of a global batch);
`step_fetch(k)` says what the k-th `run` fetches, so that train ops can alternate and micro-steps accumulate.
"""
import numpy as np
import tensorflow as tf

from tests.equivalence.cases import F64, Case, _dense, _init, _rows

tf1 = tf.compat.v1
VOCAB = 24


def _ids(seed, rows, width=3):
    return np.random.RandomState(seed).randint(0, VOCAB, size=(rows, width)).astype(np.int32)


# ---- two train ops, run alternately ----------------------------------------------------------------------------
def _two_train_ops(n, b, steps, use_resource):
    ids = _ids(21, n * b * steps)
    y = np.cos(ids).sum(axis=1, keepdims=True)
    g = tf.Graph()
    with g.as_default():
        idp, yp = tf1.placeholder(tf.int32, [None, 3], "ids"), tf1.placeholder(F64, [None, 1], "y")
        with tf1.variable_scope("m", use_resource=use_resource):
            emb = tf1.get_variable("embedding", [VOCAB, 4], F64, initializer=_init(21))
            head = tf1.get_variable("head", [4, 1], F64, initializer=_init(22))
        pred = tf.matmul(tf.reduce_sum(tf.nn.embedding_lookup(emb, idp), axis=1), head)
        loss = tf.reduce_mean(tf.square(pred - yp))
        step = tf1.train.get_or_create_global_step()
        ftrl = tf1.train.FtrlOptimizer(0.2, l1_regularization_strength=0.01, l2_regularization_strength=0.01)
        both = ftrl.minimize(loss, var_list=[emb, head], global_step=step)
        head_only = tf1.train.GradientDescentOptimizer(0.05).minimize(loss, var_list=[head])
    return Case(g, both, _rows((ids, y), (idp, yp)), step_fetch=lambda k: both if k % 2 == 0 else head_only)


def two_train_ops(n, b, steps, graph_batch, lr_scale=1.0):
    return _two_train_ops(n, b, steps, use_resource=True)


def two_train_ops_ref(n, b, steps, graph_batch, lr_scale=1.0):
    return _two_train_ops(n, b, steps, use_resource=False)


# ---- two losses with their own inputs, trained alternately ----------------------------------------------------
def two_losses_own_inputs(n, b, steps, graph_batch, lr_scale=1.0):
    """Each train op's step feeds only its own loss's input: dense gradients of the two losses must not share a
    fused allreduce (a step of one would then need the other's placeholder; fusion.py)."""
    rng = np.random.RandomState(23)
    xa, xb = rng.randn(n * b * steps, 3), rng.randn(n * b * steps, 2)
    ya, yb = np.sin(xa).sum(1, keepdims=True), np.cos(xb).sum(1, keepdims=True)
    g = tf.Graph()
    with g.as_default():
        xap, yap = tf1.placeholder(F64, [None, 3], "xa"), tf1.placeholder(F64, [None, 1], "ya")
        xbp, ybp = tf1.placeholder(F64, [None, 2], "xb"), tf1.placeholder(F64, [None, 1], "yb")
        loss_a = tf.reduce_mean(tf.square(_dense(_dense(xap, 4, "a1", 24, tf.tanh), 1, "a2", 25) - yap))
        loss_b = tf.reduce_mean(tf.square(_dense(_dense(xbp, 3, "b1", 26, tf.tanh), 1, "b2", 27) - ybp))
        step = tf1.train.get_or_create_global_step()
        vars_a = [v for v in tf1.trainable_variables() if v.op.name.startswith("a")]
        vars_b = [v for v in tf1.trainable_variables() if v.op.name.startswith("b")]
        train_a = tf1.train.GradientDescentOptimizer(0.1 * lr_scale).minimize(loss_a, step, var_list=vars_a)
        train_b = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(loss_b, var_list=vars_b)
    own = [((xa, ya), (xap, yap)), ((xb, yb), (xbp, ybp))]

    def feeds(k, first, rows):  # step k feeds only the placeholders of the loss it trains
        arrays, placeholders = own[k % 2]
        return {p: a[first:first + rows] for p, a in zip(placeholders, arrays)}
    return Case(g, train_a, feeds, step_fetch=lambda k: train_a if k % 2 == 0 else train_b)


# ---- user-written gradient accumulation over micro-steps, SparseTensor input -----------------------------------
MICRO = 2


def grad_accumulation(n, b, steps, graph_batch, lr_scale=1.0):
    """Micro-steps k % 3 in {0, 1} add the gradients into non-trainable accumulators; k % 3 == 2 applies their
    mean with Momentum and zeroes them. The embedding is read by embedding_lookup_sparse from a tf.SparseTensor."""
    rng = np.random.RandomState(23)
    rows = n * b * steps
    lengths = rng.randint(1, 4, size=rows)  # 1..3 ids per example: a ragged, sparse input
    y = rng.randn(rows, 1)
    ids = [rng.randint(0, VOCAB, size=k) for k in lengths]
    g = tf.Graph()
    with g.as_default():
        sp = tf1.sparse_placeholder(tf.int64, name="ids")
        yp = tf1.placeholder(F64, [None, 1], "y")
        emb = tf1.get_variable("embedding", [VOCAB, 5], F64, initializer=_init(24), use_resource=True)
        h = tf.nn.embedding_lookup_sparse(emb, sp, None, combiner="mean")
        loss = tf.reduce_mean(tf.square(_dense(h, 1, "out", 25) - yp))
        opt = tf1.train.MomentumOptimizer(0.1, 0.9)
        grads_and_vars = opt.compute_gradients(loss)
        accumulate, accumulators = [], []
        for grad, var in grads_and_vars:
            acc = tf1.get_variable(f"acc/{var.op.name}", var.shape, F64, trainable=False,
                                   initializer=tf1.zeros_initializer(), use_resource=True)
            accumulators.append(acc)
            if isinstance(grad, tf.IndexedSlices):
                accumulate.append(acc.scatter_add(grad))
            else:
                accumulate.append(acc.assign_add(grad))
        accumulate = tf.group(*accumulate, name="accumulate")
        step = tf1.train.get_or_create_global_step()
        apply = opt.apply_gradients([(acc.read_value() / MICRO, v) for acc, (_, v) in zip(accumulators,
                                                                                           grads_and_vars)],
                                    global_step=step)
        with tf.control_dependencies([apply]):
            apply = tf.group(*[acc.assign(tf.zeros_like(acc)) for acc in accumulators], name="apply_and_zero")

    def feeds(k, first, count):
        chosen = ids[first:first + count]
        indices = [[r, j] for r, row in enumerate(chosen) for j in range(len(row))]
        values = np.concatenate(chosen).astype(np.int64)
        return {sp: tf1.SparseTensorValue(np.array(indices, np.int64), values,
                                          np.array([count, max(map(len, chosen))], np.int64)),
                yp: y[first:first + count]}
    return Case(g, apply, feeds, step_fetch=lambda k: accumulate if k % 3 < MICRO else apply)


# ---- partitioned embedding, EMA after the train op, RMSProp, ref variables --------------------------------------
def partitioned_ema_rmsprop_ref(n, b, steps, graph_batch, lr_scale=1.0):
    # A ref-variable script is a TF1 script: v1 control flow. (Under v2, initialized_value() of a ref variable is a
    # StatelessIf that reads the variable whether or not it is initialized: a race in TF, on one device too.)
    tf1.disable_control_flow_v2()
    ids = _ids(26, n * b * steps)
    y = np.sin(ids).sum(axis=1, keepdims=True)
    g = tf.Graph()
    with g.as_default():
        idp, yp = tf1.placeholder(tf.int32, [None, 3], "ids"), tf1.placeholder(F64, [None, 1], "y")
        emb = tf1.get_variable("embedding", [VOCAB, 4], F64, initializer=_init(26), use_resource=False,
                               partitioner=tf1.fixed_size_partitioner(3))
        w = tf1.get_variable("w", [4, 1], F64, initializer=_init(27), use_resource=False)
        pred = tf.matmul(tf.reduce_sum(tf.nn.embedding_lookup(emb, idp), axis=1), w)
        loss = tf.reduce_mean(tf.square(pred - yp))
        opt_op = tf1.train.RMSPropOptimizer(0.01, momentum=0.5).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
        with tf.control_dependencies([opt_op]):
            train = tf1.train.ExponentialMovingAverage(0.8).apply(tf1.trainable_variables())
    return Case(g, train, _rows((ids, y), (idp, yp)))


# ---- tied embedding (lookup + output projection), an untied one, L2-regularized dense layer ------------------------
def _tied(n, b, steps, two_optimizers):
    rng = np.random.RandomState(28)
    ids = rng.randint(0, VOCAB, size=(n * b * steps, 2)).astype(np.int32)
    other = rng.randint(0, VOCAB, size=(n * b * steps, 2)).astype(np.int32)
    target = rng.randint(0, VOCAB, size=(n * b * steps,)).astype(np.int32)
    g = tf.Graph()
    with g.as_default():
        idp = tf1.placeholder(tf.int32, [None, 2], "ids")
        op_ = tf1.placeholder(tf.int32, [None, 2], "other")
        tp = tf1.placeholder(tf.int32, [None], "target")
        tied = tf1.get_variable("tied", [VOCAB, 5], F64, initializer=_init(28), use_resource=True)
        untied = tf1.get_variable("untied", [VOCAB, 5], F64, initializer=_init(29), use_resource=True)
        x = tf.reduce_sum(tf.nn.embedding_lookup(tied, idp), 1) + tf.reduce_sum(tf.nn.embedding_lookup(untied, op_), 1)
        h = tf1.layers.dense(x, 5, tf.tanh, name="dense", kernel_initializer=_init(30))
        logits = tf.matmul(h, tied, transpose_b=True)  # the output projection is the embedding itself
        kernel = next(v for v in tf1.trainable_variables() if v.op.name == "dense/kernel")
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tp, logits=logits)) \
            + 0.01 * tf.nn.l2_loss(kernel)
        step = tf1.train.get_or_create_global_step()
        if not two_optimizers:
            train = tf1.train.AdamOptimizer(0.05).minimize(loss, global_step=step)
        else:
            adam, adagrad = tf1.train.AdamOptimizer(0.05), tf1.train.AdagradOptimizer(0.2)
            rest = [v for v in tf1.trainable_variables() if v is not untied]
            gv_rest = adam.compute_gradients(loss, var_list=rest)
            (g_untied, _), = adagrad.compute_gradients(loss, var_list=[untied])
            g_untied = tf.IndexedSlices(g_untied.values * 0.5, g_untied.indices, g_untied.dense_shape)
            grads, _ = tf.clip_by_global_norm([g for g, _ in gv_rest] + [g_untied], 1.0)
            train = tf.group(adam.apply_gradients(zip(grads[:-1], rest), global_step=step),
                             adagrad.apply_gradients([(grads[-1], untied)]))
    return Case(g, train, _rows((ids, other, target), (idp, op_, tp)))


def tied_embedding_adam(n, b, steps, graph_batch, lr_scale=1.0):
    return _tied(n, b, steps, two_optimizers=False)


def tied_embedding_two_optimizers_clip(n, b, steps, graph_batch, lr_scale=1.0):
    return _tied(n, b, steps, two_optimizers=True)


# ---- TF1 ref variables, minimize(global_step=...), while_loop and cond ---------------------------------------------
def ref_while_cond(n, b, steps, graph_batch, lr_scale=1.0):
    tf1.disable_control_flow_v2()  # as tf.compat.v1.disable_v2_behavior() does (process-wide: one case per process)
    rng = np.random.RandomState(31)
    x = rng.randn(n * b * steps, 3)
    y = np.tanh(x).sum(axis=1, keepdims=True)
    g = tf.Graph()
    with g.as_default():
        xp, yp = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None, 1], "y")
        w = tf1.get_variable("w", [3, 3], F64, initializer=_init(31), use_resource=False)
        v = tf1.get_variable("v", [3, 1], F64, initializer=_init(32), use_resource=False)

        def body(i, h):
            return i + 1, tf.tanh(tf.matmul(h, w))
        _, h = tf1.while_loop(lambda i, h: i < 3, body, [tf.constant(0), xp])
        step = tf1.train.get_or_create_global_step()
        # A predicate of the step, not of the batch: a batch statistic differs between a worker's batch and the
        # global batch, so a branch on it is not data-parallel (like batch norm).
        out = tf1.cond(tf.equal(step % 2, 0), lambda: tf.matmul(h, v), lambda: tf.matmul(h, v) * 0.5)
        loss = tf.reduce_mean(tf.square(out - yp))
        train = tf1.train.MomentumOptimizer(0.1, 0.9).minimize(loss, global_step=step)
    return Case(g, train, _rows((x, y), (xp, yp)))


# ---- a graph built without disabling eager execution ----------------------------------------------------------
def eager_left_on(n, b, steps, graph_batch, lr_scale=1.0):
    rng = np.random.RandomState(33)
    ids = rng.randint(0, VOCAB, size=(n * b * steps, 2)).astype(np.int32)
    y = np.sin(ids).sum(axis=1, keepdims=True)
    g = tf.Graph()
    with g.as_default():
        idp, yp = tf1.placeholder(tf.int32, [None, 2], "ids"), tf1.placeholder(F64, [None, 1], "y")
        emb = tf1.get_variable("embedding", [VOCAB, 3], F64, initializer=_init(33))
        loss = tf.reduce_mean(tf.square(_dense(tf.reduce_sum(tf.nn.embedding_lookup(emb, idp), 1), 1, "out", 34)
                                        - yp))
        train = tf1.train.AdagradOptimizer(0.3).minimize(loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((ids, y), (idp, yp)))  # run_case.KEEPS_EAGER


# ---- minimal regressions of failures the random suite found (random_graphs.py) -----------------------------------
def ema_of_server_and_replicated_variables(n, b, steps, graph_batch, lr_scale=1.0):
    """Seed 4 (HYBRID): the replicated variables' EMA waits for the train op, whose group also holds the server
    updates, so that wait is cut for the other workers; the server variables' EMA must still read them after the
    update on the chief."""
    ids = _ids(40, n * b * steps)
    y = np.sin(ids).sum(axis=1, keepdims=True)
    g = tf.Graph()
    with g.as_default():
        idp, yp = tf1.placeholder(tf.int32, [None, 3], "ids"), tf1.placeholder(F64, [None, 1], "y")
        emb = tf1.get_variable("embedding", [VOCAB, 4], F64, initializer=_init(40), use_resource=True)
        h = _dense(tf.reduce_sum(tf.nn.embedding_lookup(emb, idp), 1), 1, "out", 41)
        opt_op = tf1.train.RMSPropOptimizer(0.01).minimize(tf.reduce_mean(tf.square(h - yp)),
                                                           global_step=tf1.train.get_or_create_global_step())
        with tf.control_dependencies([opt_op]):
            train = tf1.train.ExponentialMovingAverage(0.8).apply(tf1.trainable_variables())
    return Case(g, train, _rows((ids, y), (idp, yp)))


def while_loop_gradients_with_embedding_ref(n, b, steps, graph_batch, lr_scale=1.0):
    """Seed 1 (HYBRID): a v1 while_loop's gradient keeps stacks that the step must not run as targets of its own
    (their ops lose their Python control-flow context in the copied graph); an embedding puts a server in the job."""
    tf1.disable_control_flow_v2()  # ref variables: a TF1 script
    rng = np.random.RandomState(42)
    ids, x = _ids(42, n * b * steps), rng.randn(n * b * steps, 4)
    y = np.tanh(x).sum(axis=1, keepdims=True)
    g = tf.Graph()
    with g.as_default():
        idp, xp, yp = (tf1.placeholder(tf.int32, [None, 3], "ids"), tf1.placeholder(F64, [None, 4], "x"),
                       tf1.placeholder(F64, [None, 1], "y"))
        emb = tf1.get_variable("embedding", [VOCAB, 4], F64, initializer=_init(42), use_resource=False)
        w = tf1.get_variable("w", [4, 4], F64, initializer=_init(43), use_resource=False)
        v = tf1.get_variable("v", [4, 1], F64, initializer=_init(44), use_resource=False)
        h0 = xp + tf.reduce_sum(tf.nn.embedding_lookup(emb, idp), 1)
        _, h = tf1.while_loop(lambda i, h: i < 2, lambda i, h: (i + 1, tf.tanh(tf.matmul(h, w))), [0, h0])
        train = tf1.train.MomentumOptimizer(0.05, 0.9).minimize(
            tf.reduce_mean(tf.square(tf.matmul(h, v) - yp)), global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((ids, x, y), (idp, xp, yp)))


# ---- a mixed plan: one sparse variable all-gathered and one on a server, one dense on a server and one all-reduced ----
MIXED_METHODS = {"sparse_ag": "AG", "sparse_ps": "PS", "dense_ps": "PS", "dense_ar": "AR"}


def mixed_methods(n, b, steps, graph_batch, lr_scale=1.0):
    """Config.methods overrides the run option's rule per variable, in every mode; a global-norm clip joins all
    four kinds of aggregate, and an EMA follows the update."""
    tf1.disable_control_flow_v2()  # ref variables with an EMA: a TF1 script (see partitioned_ema_rmsprop_ref)
    rng = np.random.RandomState(33)
    ids = rng.randint(0, VOCAB, size=(n * b * steps, 3)).astype(np.int32)
    other = rng.randint(0, VOCAB, size=(n * b * steps, 2)).astype(np.int32)
    y = np.tanh(ids.sum(axis=1, keepdims=True) / 10.0 - other.sum(axis=1, keepdims=True) / 20.0)
    g = tf.Graph()
    with g.as_default():
        idp, op_ = tf1.placeholder(tf.int32, [None, 3], "ids"), tf1.placeholder(tf.int32, [None, 2], "other")
        yp = tf1.placeholder(F64, [None, 1], "y")
        sparse_ag = tf1.get_variable("sparse_ag", [VOCAB, 4], F64, initializer=_init(33), use_resource=True)
        sparse_ps = tf1.get_variable("sparse_ps", [VOCAB, 4], F64, initializer=_init(34), use_resource=False)
        dense_ps = tf1.get_variable("dense_ps", [8, 6], F64, initializer=_init(35), use_resource=True)
        dense_ar = tf1.get_variable("dense_ar", [6, 1], F64, initializer=_init(36), use_resource=False)
        x = tf.concat([tf.reduce_sum(tf.nn.embedding_lookup(sparse_ag, idp), 1),
                       tf.reduce_sum(tf.nn.embedding_lookup(sparse_ps, op_), 1)], 1)
        loss = tf.reduce_mean(tf.square(tf.matmul(tf.tanh(tf.matmul(x, dense_ps)), dense_ar) - yp))
        opt = tf1.train.AdamOptimizer(0.05)
        grads_and_vars = opt.compute_gradients(loss)
        grads, _ = tf.clip_by_global_norm([gv[0] for gv in grads_and_vars], 0.5)
        update = opt.apply_gradients(zip(grads, [gv[1] for gv in grads_and_vars]),
                                     global_step=tf1.train.get_or_create_global_step())
        with tf.control_dependencies([update]):
            train = tf1.train.ExponentialMovingAverage(0.9).apply(tf1.trainable_variables())
    return Case(g, train, _rows((ids, other, y), (idp, op_, yp)), methods=MIXED_METHODS)


# ---- rows that one device holds once: deduplicated ids, a sampler's shared draw; a global-norm clip sees them ------
def sparse_input_clip(n, b, steps, graph_batch, lr_scale=1.0):
    """Random seeds 59, 65, 66: `embedding_lookup_sparse` deduplicates ids over the batch (a fused sparse segment sum
    on a ref variable; unique + partitions on a partitioned resource one), so one device's gradient has one row per
    distinct id; the clip's squared row norms tell that from every worker's rows side by side."""
    tf1.disable_control_flow_v2()  # ref variables: a TF1 script
    rng = np.random.RandomState(37)
    rows = n * b * steps
    lengths = rng.randint(1, 4, size=rows)
    ids = rng.randint(0, 6, size=(rows, 3)).astype(np.int64)  # few ids: the workers' batches share most of them
    y = np.cos(ids).sum(axis=1, keepdims=True)
    g = tf.Graph()
    with g.as_default():
        sp, yp = tf1.sparse_placeholder(tf.int64, name="sparse_ids"), tf1.placeholder(F64, [None, 1], "y")
        fused = tf1.get_variable("fused", [VOCAB, 4], F64, initializer=_init(37), use_resource=False)
        split = tf1.get_variable("split", [VOCAB, 4], F64, initializer=_init(38), use_resource=True,
                                 partitioner=tf1.fixed_size_partitioner(2))
        x = tf.nn.embedding_lookup_sparse(fused, sp, None, combiner="sum") + \
            tf.nn.embedding_lookup_sparse(split, sp, None, combiner="mean")
        w = tf1.get_variable("w", [4, 1], F64, initializer=_init(39), use_resource=True)
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - yp))
        opt = tf1.train.MomentumOptimizer(0.1, 0.5)
        grads, variables = zip(*opt.compute_gradients(loss))
        clipped, _ = tf.clip_by_global_norm(grads, 0.2)
        train = opt.apply_gradients(zip(clipped, variables), global_step=tf1.train.get_or_create_global_step())

    def feeds(step, first, count):
        indices = [[r, j] for r in range(count) for j in range(lengths[first + r])]
        values = np.array([ids[first + r][j] for r, j in indices], np.int64)
        return {sp: tf1.SparseTensorValue(np.array(indices, np.int64), values, np.array([count, 3], np.int64)),
                yp: y[first:first + count]}
    return Case(g, train, feeds)


def sampled_softmax_clip(n, b, steps, graph_batch, lr_scale=1.0):
    """Sampled softmax, as LM-1B trains: the seeded sampler draws the same candidates in every worker and on one
    device, whose gradient has one row per candidate summed over the whole batch, beside one row per label;
    partitioned output weights; clipped by global norm. Float32: TF's sampled softmax computes in float32."""
    f32 = tf.float32
    rng = np.random.RandomState(40)
    x = rng.randn(n * b * steps, 5).astype(np.float32)
    labels = rng.randint(0, VOCAB, size=(n * b * steps, 1)).astype(np.int64)
    g = tf.Graph()
    with g.as_default():
        xp, lp = tf1.placeholder(f32, [None, 5], "x"), tf1.placeholder(tf.int64, [None, 1], "labels")
        hidden = _dense(xp, 4, "hidden", 41, tf.tanh, dtype=f32)
        weights = tf1.get_variable("softmax_w", [VOCAB, 4], f32, initializer=_init(42, f32), use_resource=True,
                                   partitioner=tf1.fixed_size_partitioner(2))
        biases = tf1.get_variable("softmax_b", [VOCAB], f32, initializer=_init(43, f32), use_resource=True)
        loss = tf.reduce_mean(tf.nn.sampled_softmax_loss(weights, biases, lp, hidden, 6, VOCAB, seed=44))
        opt = tf1.train.AdagradOptimizer(0.3)
        grads, variables = zip(*opt.compute_gradients(loss))
        clipped, _ = tf.clip_by_global_norm(grads, 0.5)
        train = opt.apply_gradients(zip(clipped, variables), global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, labels), (xp, lp)), float32=True)


USER_GRAPHS = {
    "sparse_input_clip": sparse_input_clip,
    "sampled_softmax_clip": sampled_softmax_clip,
    "mixed_methods": mixed_methods,
    "ema_of_server_and_replicated_variables": ema_of_server_and_replicated_variables,
    "while_loop_gradients_with_embedding_ref": while_loop_gradients_with_embedding_ref,
    "two_train_ops": two_train_ops,
    "two_losses_own_inputs": two_losses_own_inputs,
    "two_train_ops_ref": two_train_ops_ref,
    "grad_accumulation": grad_accumulation,
    "partitioned_ema_rmsprop_ref": partitioned_ema_rmsprop_ref,
    "tied_embedding_adam": tied_embedding_adam,
    "tied_embedding_two_optimizers_clip": tied_embedding_two_optimizers_clip,
    "ref_while_cond": ref_while_cond,
    "eager_left_on": eager_left_on,
}

# The second table (user_graphs_more.py): hand-written updates, rarer optimizers, Keras layers, a loss-scaled step.
from tests.equivalence.user_graphs_more import USER_GRAPHS_MORE  # noqa: E402

USER_GRAPHS.update(USER_GRAPHS_MORE)

# The third (user_graphs_statistics.py): statistics of the batch computed from variables.
from tests.equivalence.user_graphs_statistics import USER_GRAPHS_STATISTICS  # noqa: E402

USER_GRAPHS.update(USER_GRAPHS_STATISTICS)

# The fourth (user_graphs_sparse.py): graphs fed tf.SparseTensors.
from tests.equivalence.user_graphs_sparse import USER_GRAPHS_SPARSE  # noqa: E402

USER_GRAPHS.update(USER_GRAPHS_SPARSE)

# The fifth (user_graphs_padded.py): sentences padded per batch by the dataset.
from tests.equivalence.user_graphs_padded import USER_GRAPHS_PADDED  # noqa: E402

USER_GRAPHS.update(USER_GRAPHS_PADDED)

# The sixth (user_graphs_idioms.py): feature columns, NCE, map_fn, a custom gradient, tf.losses' regularizers.
from tests.equivalence.user_graphs_idioms import USER_GRAPHS_IDIOMS  # noqa: E402

USER_GRAPHS.update(USER_GRAPHS_IDIOMS)

# The seventh (user_graphs_tape.py): gradients taken with tf.GradientTape in a v1 graph.
from tests.equivalence.user_graphs_tape import USER_GRAPHS_TAPE  # noqa: E402

USER_GRAPHS.update(USER_GRAPHS_TAPE)

# The eighth (user_graphs_losses.py): weighted, standardized and renormalized losses.
from tests.equivalence.user_graphs_losses import USER_GRAPHS_LOSSES  # noqa: E402

USER_GRAPHS.update(USER_GRAPHS_LOSSES)

# The ninth (user_graphs_recsys.py): deduplicated lookups with FTRL, gradient noise, ids counted by scatter_add.
from tests.equivalence.user_graphs_recsys import USER_GRAPHS_RECSYS  # noqa: E402

USER_GRAPHS.update(USER_GRAPHS_RECSYS)

# The tenth (user_graphs_probe.py): weight decay by hand, the script's own counter, Huber with centered RMSProp,
# two towers with a row penalty, weighted sparse lookups from a mask, each gradient clipped by its own norm, and a
# total loss of a mean, a sum and a penalty.
from tests.equivalence.user_graphs_probe import USER_GRAPHS_PROBE  # noqa: E402

USER_GRAPHS.update(USER_GRAPHS_PROBE)

# The eleventh (user_graphs_stateful.py): a small transformer, towers by tf.split, a mixture of experts balanced
# over the batch, spectral normalization, a target network, a center loss.
from tests.equivalence.user_graphs_stateful import USER_GRAPHS_STATEFUL  # noqa: E402

USER_GRAPHS.update(USER_GRAPHS_STATEFUL)

# The twelfth (user_graphs_pairs.py): losses that mix the batch's examples: in-batch negatives, a triplet loss,
# a softmax and a running total over the batch.
from tests.equivalence.user_graphs_pairs import USER_GRAPHS_PAIRS  # noqa: E402

USER_GRAPHS.update(USER_GRAPHS_PAIRS)

# The thirteenth (user_graphs_unplanned.py): batch renormalization beside an embedding, neighbours' differences by
# tf.roll, examples pooled by a fed session id, a label-smoothed sequence loss under clipping and a decayed rate,
# a running loss and streaming metrics kept in variables, a variational autoencoder with accuracy and AUC, a GAN
# step that takes the generator's gradients after the discriminator's update.
from tests.equivalence.user_graphs_unplanned import USER_GRAPHS_UNPLANNED  # noqa: E402

USER_GRAPHS.update(USER_GRAPHS_UNPLANNED)

# The fourteenth (user_graphs_unseen.py): a Cox partial likelihood (the batch sorted in the graph, a reverse
# cumulative logsumexp), WGAN's weight clipping after the update, class counts kept by scatter_add before the loss,
# example weights from a py_func, EMAs of tensors, a calibration term summed per id over the batch.
from tests.equivalence.user_graphs_unseen import USER_GRAPHS_UNSEEN  # noqa: E402

USER_GRAPHS.update(USER_GRAPHS_UNSEEN)

# The fifteenth (user_graphs_batchwise.py): losses that look at the batch as a whole; distinct ids in the batch.
from tests.equivalence.user_graphs_batchwise import USER_GRAPHS_BATCHWISE  # noqa: E402

USER_GRAPHS.update(USER_GRAPHS_BATCHWISE)

# The sixteenth (user_graphs_fetches.py): what a step fetches beside its train op, compared step by step.
from tests.equivalence.user_graphs_fetches import USER_GRAPHS_FETCHES  # noqa: E402

USER_GRAPHS.update(USER_GRAPHS_FETCHES)
