"""Training-script idioms written without looking at parallax's rules (the second probe): a small transformer
(positions gathered by tf.range, attention masked by padding, layer norm by hand, output tied to the embedding,
label smoothing over the tokens), towers made by tf.split with their gradients averaged by hand, a mixture of
experts with a load-balancing loss (a product of two means over the batch), spectral normalization by power
iteration (a vector assigned in the forward pass), a target network copied every other step, a center loss
(centers moved by scatter_sub, each example's step divided by its class's count in the batch), and a bank of the
last items as cross-batch negatives (on fed rows, and on a dataset sharded element-wise). Same conventions as
cases.py. Four were not exact, with no warning: in PS mode the power iteration's vector was never written
(sync_step.py found the step's side effects from what it fetches, not from the workers' contributions: max abs
diff 0.56 after one step); in every mode the centers moved by each worker's own counts (mixed_rows.py: 0.064
after 6 steps), and each worker's bank held its own items (state_writes.py: 0.52), and on the sharded dataset
also in the wrong order (the layout was told only where a random draw was found). The other four were exact
when added."""
import numpy as np
import tensorflow as tf

import parallax

from tests.equivalence.cases import F64, Case, _dense, _init, _rows
from tests.equivalence.user_graphs_more import VOCAB

tf1 = tf.compat.v1


def _layer_norm(x, name):
    mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
    scale = tf1.get_variable(name + "_scale", [x.shape[-1]], F64, initializer=tf1.ones_initializer())
    return (x - mean) * tf1.rsqrt(var + 1e-6) * scale


def transformer_positions_smoothed(n, b, steps, graph_batch, lr_scale=1.0):
    """Token embedding plus a position table read by tf.gather(table, tf.range(T)), one head of self-attention
    with padded keys masked, a hand-written layer norm, logits against the token embedding (tied), and
    tf.compat.v1.losses.softmax_cross_entropy with label smoothing weighted by the padding mask (its default
    reduction: the sum over the nonzero weights' count); Adam after clip_by_global_norm."""
    rng = np.random.RandomState(400)
    rows, t = n * b * steps, 5
    tokens = rng.randint(1, VOCAB, size=(rows, t)).astype(np.int32)
    lengths = rng.randint(2, t + 1, size=rows)
    tokens[np.arange(t)[None, :] >= lengths[:, None]] = 0
    targets = np.roll(tokens, -1, axis=1) * (tokens > 0)
    g = tf.Graph()
    with g.as_default():
        tp, yp = tf1.placeholder(tf.int32, [None, t], "tokens"), tf1.placeholder(tf.int32, [None, t], "targets")
        emb = tf1.get_variable("tokens", [VOCAB, 4], F64, initializer=_init(401))
        positions = tf1.get_variable("positions", [8, 4], F64, initializer=_init(402))
        mask = tf.cast(tp > 0, F64)
        x = tf.nn.embedding_lookup(emb, tp) + tf.gather(positions, tf.range(t))[None]
        q, k, v = (_dense(x, 4, name, 403 + i) for i, name in enumerate(("q", "k", "v")))
        scores = tf.matmul(q, k, transpose_b=True) / 2.0 + (1.0 - mask[:, None, :]) * -1e9
        h = _layer_norm(x + tf.matmul(tf.nn.softmax(scores), v), "ln")
        logits = tf.einsum("btd,vd->btv", h, emb)
        loss = tf1.losses.softmax_cross_entropy(tf.one_hot(yp, VOCAB, dtype=F64), logits, weights=mask,
                                                label_smoothing=0.1)
        opt = tf1.train.AdamOptimizer(0.05 * lr_scale)
        grads, variables = zip(*opt.compute_gradients(loss))
        clipped, _ = tf.clip_by_global_norm(grads, 1.0)
        train = opt.apply_gradients(zip(clipped, variables), tf1.train.get_or_create_global_step(), name="train")
    return Case(g, train, _rows((tokens, targets), (tp, yp)))


def towers_by_split(n, b, steps, graph_batch, lr_scale=1.0):
    """The old multi-GPU tutorial on one device: the batch cut in two by tf.split, a tower's mean loss each, their
    gradients stacked and averaged by hand (the embedding's made dense), then one Momentum update."""
    rng = np.random.RandomState(410)
    ids = rng.randint(0, VOCAB, size=(n * b * steps, 3)).astype(np.int32)
    y = np.sin(ids).sum(axis=1, keepdims=True)
    g = tf.Graph()
    with g.as_default():
        idp, yp = tf1.placeholder(tf.int32, [None, 3], "ids"), tf1.placeholder(F64, [None, 1], "y")
        opt = tf1.train.MomentumOptimizer(0.1 * lr_scale, 0.9)
        tower_grads = []
        for i, (ids_t, y_t) in enumerate(zip(tf.split(idp, 2), tf.split(yp, 2))):
            with tf1.variable_scope("model", reuse=i > 0):
                emb = tf1.get_variable("embedding", [VOCAB, 4], F64, initializer=_init(411))
                h = tf.tanh(tf.reduce_sum(tf.nn.embedding_lookup(emb, ids_t), axis=1))
                loss = tf.reduce_mean(tf.square(_dense(h, 1, "head", 412) - y_t))
            tower_grads.append(opt.compute_gradients(loss))
        averaged = []
        for pairs in zip(*tower_grads):
            stacked = tf.stack([tf.convert_to_tensor(grad) for grad, _ in pairs])
            averaged.append((tf.reduce_mean(stacked, axis=0), pairs[0][1]))
        train = opt.apply_gradients(averaged, tf1.train.get_or_create_global_step(), name="train")
    return Case(g, train, _rows((ids, y), (idp, yp)))


def experts_load_balanced(n, b, steps, graph_batch, lr_scale=1.0):
    """Three experts, top-1 routing by a softmax router, the output the chosen expert's times its gate, and the
    Switch load-balancing loss: E * sum_e (fraction of the batch routed to e) * (mean router probability of e),
    added to the mean squared error; Adam."""
    rng = np.random.RandomState(420)
    x = rng.randn(n * b * steps, 3)
    y = np.tanh(x @ rng.randn(3, 1))
    g = tf.Graph()
    with g.as_default():
        xp, yp = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None, 1], "y")
        probs = tf.nn.softmax(_dense(xp, 3, "router", 421))
        chosen = tf.one_hot(tf.argmax(probs, axis=1), 3, dtype=F64)
        experts = tf.concat([_dense(xp, 1, f"expert{e}", 422 + e, tf.tanh) for e in range(3)], axis=1)
        pred = tf.reduce_sum(experts * chosen * probs, axis=1, keepdims=True)
        balance = 3.0 * tf.reduce_sum(tf.reduce_mean(chosen, axis=0) * tf.reduce_mean(probs, axis=0))
        loss = tf.reduce_mean(tf.square(pred - yp)) + 0.1 * balance
        train = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(loss, tf1.train.get_or_create_global_step(),
                                                                  name="train")
    return Case(g, train, _rows((x, y), (xp, yp)))


def spectral_norm_power_iteration(n, b, steps, graph_batch, lr_scale=1.0):
    """A hidden layer's kernel divided by its largest singular value, estimated by one step of power iteration a
    step: the vector u is a non-trainable variable the forward pass assigns (the GAN spectral-norm recipe)."""
    rng = np.random.RandomState(430)
    x = rng.randn(n * b * steps, 3)
    y = np.sin(x).sum(axis=1, keepdims=True)
    g = tf.Graph()
    with g.as_default():
        xp, yp = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None, 1], "y")
        kernel = tf1.get_variable("kernel", [3, 4], F64, initializer=_init(431))
        u = tf1.get_variable("u", [1, 4], F64, initializer=_init(432), trainable=False)
        v_hat = tf.math.l2_normalize(tf.matmul(u, kernel, transpose_b=True))
        u_hat = tf.math.l2_normalize(tf.matmul(v_hat, kernel))
        u_hat, v_hat = tf.stop_gradient(u_hat), tf.stop_gradient(v_hat)
        sigma = tf.squeeze(tf.matmul(tf.matmul(v_hat, kernel), u_hat, transpose_b=True))
        with tf.control_dependencies([u.assign(u_hat)]):
            normalized = kernel / sigma
        loss = tf.reduce_mean(tf.square(_dense(tf.tanh(tf.matmul(xp, normalized)), 1, "head", 433) - yp))
        train = tf1.train.GradientDescentOptimizer(0.1 * lr_scale).minimize(
            loss, tf1.train.get_or_create_global_step(), name="train")
    return Case(g, train, _rows((x, y), (xp, yp)))


def _q_values(x, scope, trainable):
    with tf1.variable_scope(scope):
        w1 = tf1.get_variable("w1", [3, 4], F64, initializer=_init(441), trainable=trainable)
        w2 = tf1.get_variable("w2", [4, 2], F64, initializer=_init(442), trainable=trainable)
    return tf.matmul(tf.tanh(tf.matmul(x, w1)), w2), [w1, w2]


def target_network_copy(n, b, steps, graph_batch, lr_scale=1.0):
    """DQN: a Q network trained on r + 0.9 max_a Q_target(s', a), the target network's non-trainable variables
    copied from the online ones every other step (a tf.cond on the global step, after the update); Huber loss,
    RMSProp."""
    rng = np.random.RandomState(440)
    rows = n * b * steps
    s, s_next = rng.randn(rows, 3), rng.randn(rows, 3)
    actions, rewards = rng.randint(0, 2, size=rows).astype(np.int32), rng.randn(rows)
    g = tf.Graph()
    with g.as_default():
        sp, snp = tf1.placeholder(F64, [None, 3], "s"), tf1.placeholder(F64, [None, 3], "s_next")
        ap, rp = tf1.placeholder(tf.int32, [None], "a"), tf1.placeholder(F64, [None], "r")
        q, online = _q_values(sp, "online", True)
        q_next, target = _q_values(snp, "target", False)
        chosen = tf.reduce_sum(q * tf.one_hot(ap, 2, dtype=F64), axis=1)
        loss = tf1.losses.huber_loss(tf.stop_gradient(rp + 0.9 * tf.reduce_max(q_next, axis=1)), chosen)
        step = tf1.train.get_or_create_global_step()
        update = tf1.train.RMSPropOptimizer(0.02 * lr_scale).minimize(loss, step)
        with tf.control_dependencies([update]):
            copy = tf.cond(tf.equal(step % 2, 0), lambda: tf.group(*[t.assign(o) for t, o in zip(target, online)]),
                           tf.no_op)
        train = tf.group(update, copy, name="train")
    return Case(g, train, _rows((s, s_next, actions, rewards), (sp, snp, ap, rp)))


def center_loss(n, b, steps, graph_batch, lr_scale=1.0):
    """Softmax cross entropy plus 0.05 times the mean squared distance of each example's features to its class's
    center; the centers (non-trainable) move by scatter_sub toward the batch's features, each example's step
    divided by 1 + its class's count in the batch (tf.unique_with_counts), as the center-loss paper's code does."""
    rng = np.random.RandomState(450)
    x = rng.randn(n * b * steps, 3)
    labels = (x[:, 0] + x[:, 1] > 0).astype(np.int32) + (x[:, 2] > 1).astype(np.int32)
    g = tf.Graph()
    with g.as_default():
        xp, lp = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(tf.int32, [None], "labels")
        features = _dense(xp, 4, "features", 451, tf.tanh)
        logits = _dense(features, 3, "classes", 452)
        centers = tf1.get_variable("centers", [3, 4], F64, initializer=tf1.zeros_initializer(), trainable=False,
                                   use_resource=False)
        own = tf.gather(centers, lp)
        _, index, counts = tf.unique_with_counts(lp)
        step = (own - features) / tf.cast(1 + tf.gather(counts, index), F64)[:, None]
        move = tf1.scatter_sub(centers, lp, 0.5 * step)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=lp, logits=logits)) + \
            0.05 * tf.reduce_mean(tf.reduce_sum(tf.square(features - own), axis=1))
        with tf.control_dependencies([move]):
            train = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(
                loss, tf1.train.get_or_create_global_step(), name="train")
    return Case(g, train, _rows((x, labels), (xp, lp)))


def _memory_bank(users, items, lr_scale):
    """(loss, train op): each user scored against its item and against a bank of the last 10 item vectors (the
    cross-batch negatives of retrieval models), pushed after the update: bank = concat(items, bank)[:10]."""
    user_emb = tf1.get_variable("user_embedding", [VOCAB, 4], F64, initializer=_init(461))
    item_emb = tf1.get_variable("item_embedding", [VOCAB, 4], F64, initializer=_init(462))
    bank = tf1.get_variable("bank", [10, 4], F64, initializer=_init(463), trainable=False)
    u, v = tf.nn.embedding_lookup(user_emb, users), tf.nn.embedding_lookup(item_emb, items)
    logits = tf.concat([tf.reduce_sum(u * v, axis=1, keepdims=True), tf.matmul(u, bank, transpose_b=True)], axis=1)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.zeros_like(users),
                                                                         logits=logits))
    update = tf1.train.AdagradOptimizer(0.1 * lr_scale).minimize(loss, tf1.train.get_or_create_global_step())
    with tf.control_dependencies([update]):
        push = bank.assign(tf.concat([tf.stop_gradient(v), bank], axis=0)[:10])
    return tf.group(update, push, name="train")


def _pairs(n, b, steps, seed=460):
    """Random (user, item) ids, a row per example."""
    rng = np.random.RandomState(seed)
    return (rng.randint(0, VOCAB, size=(n * b * steps,)).astype(np.int32),
            rng.randint(0, VOCAB, size=(n * b * steps,)).astype(np.int32))


def memory_bank_negatives(n, b, steps, graph_batch, lr_scale=1.0):
    """Cross-batch negatives from a bank of the last items, on fed rows (each worker's a block of the batch)."""
    users, items = _pairs(n, b, steps)
    g = tf.Graph()
    with g.as_default():
        up, ip = tf1.placeholder(tf.int32, [None], "users"), tf1.placeholder(tf.int32, [None], "items")
        train = _memory_bank(up, ip, lr_scale)
    return Case(g, train, _rows((users, items), (up, ip)))


def memory_bank_sharded(n, b, steps, graph_batch, lr_scale=1.0):
    """The same on a dataset sharded element-wise by parallax.shard: a worker's examples are every N-th, so the
    bank's newest items are the workers' interleaved."""
    users, items = _pairs(n, b, steps)
    g = tf.Graph()
    with g.as_default():
        ds = parallax.shard(tf.data.Dataset.from_tensor_slices((users, items))).batch(graph_batch)
        train = _memory_bank(*tf1.data.make_one_shot_iterator(ds).get_next(), lr_scale)
    return Case(g, train, None)


def hardest_example_kept(n, b, steps, graph_batch, lr_scale=1.0):
    """The batch's hardest example (largest error) and its error kept in non-trainable variables for replay, and
    the mean error's running maximum; the loss the mean squared error."""
    rng = np.random.RandomState(470)
    x = rng.randn(n * b * steps, 3)
    y = np.sin(x).sum(axis=1, keepdims=True)
    g = tf.Graph()
    with g.as_default():
        xp, yp = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None, 1], "y")
        errors = tf.square(_dense(xp, 1, "head", 471) - yp)[:, 0]
        hardest = tf1.get_variable("hardest", [3], F64, initializer=tf1.zeros_initializer(), trainable=False)
        worst = tf1.get_variable("worst", [], F64, initializer=tf1.zeros_initializer(), trainable=False)
        update = tf1.train.GradientDescentOptimizer(0.1 * lr_scale).minimize(
            tf.reduce_mean(errors), tf1.train.get_or_create_global_step())
        index = tf.argmax(errors)
        keep = [hardest.assign(tf.gather(xp, index)), worst.assign(tf.maximum(worst, tf.gather(errors, index)))]
        train = tf.group(update, *keep, name="train")
    return Case(g, train, _rows((x, y), (xp, yp)))


def ema_of_global_step_decay_ref(n, b, steps, graph_batch, lr_scale=1.0):
    """A TF1 script's moving averages whose decay reads the global step (`num_updates`), applied after a centered
    RMSProp with momentum, over ref variables (the global step's too, as under disable_v2_behavior): a
    partitioned embedding and two dense layers."""
    tf1 = tf.compat.v1
    tf1.disable_control_flow_v2()
    rng = np.random.RandomState(470)
    ids = rng.randint(0, VOCAB, size=(n * b * steps, 3)).astype(np.int32)
    y = np.sin(ids).sum(axis=1, keepdims=True)
    g = tf.Graph()
    with g.as_default():
        idp, yp = tf1.placeholder(tf.int32, [None, 3], "ids"), tf1.placeholder(F64, [None, 1], "y")
        emb = tf1.get_variable("embedding", [VOCAB, 4], F64, initializer=_init(471), use_resource=False,
                               partitioner=tf1.fixed_size_partitioner(3))
        w1 = tf1.get_variable("w1", [4, 6], F64, initializer=_init(472), use_resource=False)
        w2 = tf1.get_variable("w2", [6, 1], F64, initializer=_init(473), use_resource=False)
        hidden = tf.tanh(tf.matmul(tf.reduce_sum(tf.nn.embedding_lookup(emb, idp), axis=1), w1))
        loss = tf.reduce_mean(tf.square(tf.matmul(hidden, w2) - yp))
        step = tf1.get_variable("global_step", [], tf.int64, tf1.zeros_initializer(), trainable=False,
                                use_resource=False, collections=[tf1.GraphKeys.GLOBAL_VARIABLES,
                                                                 tf1.GraphKeys.GLOBAL_STEP])
        opt_op = tf1.train.RMSPropOptimizer(0.01 * lr_scale, momentum=0.5, centered=True).minimize(loss, step)
        with tf.control_dependencies([opt_op]):
            train = tf1.train.ExponentialMovingAverage(0.9, num_updates=step).apply(tf1.trainable_variables())
    return Case(g, train, _rows((ids, y), (idp, yp)))


USER_GRAPHS_STATEFUL = {f.__name__: f for f in (
    transformer_positions_smoothed, towers_by_split, experts_load_balanced, spectral_norm_power_iteration,
    target_network_copy, center_loss, memory_bank_negatives, memory_bank_sharded, hardest_example_kept,
    ema_of_global_step_decay_ref)}
