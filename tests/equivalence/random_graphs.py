"""Random training graphs for the equivalence suite: each seed draws independent features and composes a float64
graph from them, as a user might write it. `draw(seed)` gives the features; `build(seed, ...)` the Case.

Features: an optimizer per variable group (all of tf1.train's); a second embedding; tied, partitioned or
SparseTensor-read embeddings; ref or resource variables; an edit between compute and apply (clip by global norm,
scaling, accumulation over micro-steps); EMA; one or two train ops; while_loop or cond; a mean or a sum loss, under
the default Config, whose planner tells which it is (loss_law.py).
"""
import numpy as np
import tensorflow as tf

from tests.equivalence.cases import F64, Case, _init

tf1 = tf.compat.v1
VOCAB, DIM, MICRO = 20, 4, 2

OPTIMIZERS = {
    "SGD": lambda: tf1.train.GradientDescentOptimizer(0.1),
    "Momentum": lambda: tf1.train.MomentumOptimizer(0.05, 0.9),
    "Nesterov": lambda: tf1.train.MomentumOptimizer(0.05, 0.9, use_nesterov=True),
    "Adam": lambda: tf1.train.AdamOptimizer(0.02),
    "Adagrad": lambda: tf1.train.AdagradOptimizer(0.1),
    "RMSProp": lambda: tf1.train.RMSPropOptimizer(0.01, momentum=0.5),
    "Ftrl": lambda: tf1.train.FtrlOptimizer(0.1, l1_regularization_strength=0.01, l2_regularization_strength=0.01),
    "Adadelta": lambda: tf1.train.AdadeltaOptimizer(1.0),
    # Its hyperparameters stay float32 unless given as tensors of the variables' dtype.
    "ProximalAdagrad": lambda: tf1.train.ProximalAdagradOptimizer(
        tf.constant(0.1, F64), l1_regularization_strength=tf.constant(0.001, F64),
        l2_regularization_strength=tf.constant(0.001, F64)),
}


def draw(seed):
    rng = np.random.RandomState(seed)
    pick = lambda options: options[rng.randint(len(options))]  # noqa: E731
    f = {
        "variables": pick(["resource", "ref"]),
        "optimizers": [pick(sorted(OPTIMIZERS)) for _ in range(rng.randint(1, 3))],
        "embedding": pick(["plain", "partitioned", "tied", "sparse_input"]),
        "second_embedding": bool(rng.randint(2)),
        "edit": pick(["none", "clip", "scale", "accumulate"]),
        "ema": bool(rng.randint(2)),
        "train_ops": int(rng.randint(1, 3)),
        "control_flow": pick(["none", "while_loop", "cond"]),
        "loss": pick(["mean", "sum"]),
        "split": int(rng.randint(1 << 16)),  # which optimizer group each variable is in
    }
    if f["edit"] == "accumulate":
        f["train_ops"] = 1  # micro-steps already alternate two fetches
    return f


def describe(f):
    return (f"{f['variables']} {'+'.join(f['optimizers'])} emb={f['embedding']}{'+2nd' if f['second_embedding'] else ''}"
            f" edit={f['edit']}{' ema' if f['ema'] else ''} train_ops={f['train_ops']} cf={f['control_flow']}"
            f" loss={f['loss']}")


def parse(name):
    """`random:<seed>` or `random:<seed>:<feature>=<value>,...` (to minimize a failing seed) -> (seed, features)."""
    _, seed, *rest = name.split(":", 2)
    f = draw(int(seed))
    for item in filter(None, (rest[0] if rest else "").split(",")):
        key, value = item.split("=", 1)
        if key not in f:
            raise KeyError(f"unknown feature {key!r}; features: {sorted(f)}")
        f[key] = value.split("+") if key == "optimizers" else type(f[key])(int(value)) \
            if isinstance(f[key], (bool, int)) else value
    return int(seed), f


def build(seed, n, b, steps, graph_batch, lr_scale=1.0, features=None):
    f = features or draw(seed)
    ref = f["variables"] == "ref"
    if ref:
        tf1.disable_control_flow_v2()  # a ref-variable script is a TF1 script (one case per process)
    rng = np.random.RandomState(1000 + seed)
    rows = n * b * steps
    ids = rng.randint(0, VOCAB, size=(rows, 2)).astype(np.int32)
    x = rng.randn(rows, DIM)
    target = rng.randint(0, VOCAB, size=rows).astype(np.int32)
    y = np.tanh(x).sum(axis=1, keepdims=True) + 0.1 * np.cos(ids).sum(axis=1, keepdims=True)
    lengths = rng.randint(1, 3, size=rows)
    g = tf.Graph()
    with g.as_default(), tf1.variable_scope("m", use_resource=not ref):
        idp = tf1.placeholder(tf.int32, [None, 2], "ids")
        xp, yp = tf1.placeholder(F64, [None, DIM], "x"), tf1.placeholder(F64, [None, 1], "y")
        tp = tf1.placeholder(tf.int32, [None], "target")
        sp = tf1.sparse_placeholder(tf.int64, name="sparse_ids")
        partitioner = tf1.fixed_size_partitioner(2 + seed % 2) if f["embedding"] == "partitioned" else None
        emb = tf1.get_variable("emb", [VOCAB, DIM], F64, _init(seed), partitioner=partitioner)
        if f["embedding"] == "sparse_input":
            looked = tf.nn.embedding_lookup_sparse(emb, sp, None, combiner="sum")
        else:
            looked = tf.reduce_sum(tf.nn.embedding_lookup(emb, idp), 1)
        h = xp + looked
        if f["second_embedding"]:
            emb2 = tf1.get_variable("emb2", [VOCAB, DIM], F64, _init(seed + 1))
            h = h + tf.nn.embedding_lookup(emb2, idp[:, 1])
        w1 = tf1.get_variable("w1", [DIM, DIM], F64, _init(seed + 2))
        b1 = tf1.get_variable("b1", [DIM], F64, _init(seed + 3, scale=0.1))
        step = tf1.train.get_or_create_global_step()
        if f["control_flow"] == "while_loop":
            _, h = tf1.while_loop(lambda i, h: i < 2, lambda i, h: (i + 1, tf.tanh(tf.matmul(h, w1) + b1)),
                                  [tf.constant(0), h])
        else:
            h = tf.tanh(tf.matmul(h, w1) + b1)
        if f["control_flow"] == "cond":
            h = tf1.cond(tf.equal(step % 2, 0), lambda: h, lambda: h * 0.5)
        w2 = tf1.get_variable("w2", [DIM, 1], F64, _init(seed + 4))
        per_row = tf.square(tf.matmul(h, w2) - yp)[:, 0]
        if f["embedding"] == "tied":
            logits = tf.matmul(h, emb, transpose_b=True)
            per_row += 0.1 * tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tp, logits=logits)
        loss = tf.reduce_sum(per_row) if f["loss"] == "sum" else tf.reduce_mean(per_row)
        fetches = _training(f, loss, step)

    def feeds(k, first, count):
        chosen = ids[first:first + count]
        indices = [[r, j] for r in range(count) for j in range(lengths[first + r])]
        values = np.array([chosen[r][j] for r, j in indices], np.int64)
        return {idp: chosen, xp: x[first:first + count], yp: y[first:first + count], tp: target[first:first + count],
                sp: tf1.SparseTensorValue(np.array(indices, np.int64), values, np.array([count, 2], np.int64))}
    return Case(g, fetches[0], feeds, step_fetch=lambda k: fetches[k % len(fetches)])


def _training(f, loss, step):
    """The fetches, in the order the steps run them."""
    variables = tf1.trainable_variables()
    split = np.random.RandomState(f["split"])
    groups = [[] for _ in f["optimizers"]]
    for i, v in enumerate(variables):
        groups[i % len(groups) if i < len(groups) else split.randint(len(groups))].append(v)
    optimizers = [OPTIMIZERS[name]() for name in f["optimizers"]]
    grads = [opt.compute_gradients(loss, var_list=vs) for opt, vs in zip(optimizers, groups)]
    # Every gradient before any update, as TF1 users gate them (GATE_GRAPH): a ref variable's read aliases its
    # buffer, so an update could otherwise race with another optimizer's backward pass, on one device too.
    flat = tf.tuple([g for gv in grads for g, _ in gv])
    if f["edit"] == "clip":
        flat, _ = tf.clip_by_global_norm(flat, 0.5)
    elif f["edit"] == "scale":
        flat = [tf.IndexedSlices(g.values * 0.5, g.indices, g.dense_shape) if isinstance(g, tf.IndexedSlices)
                else g * 0.5 for g in flat]
    accumulate = None
    if f["edit"] == "accumulate":
        flat, accumulate, accumulators = _accumulators(flat, [v for vs in groups for v in vs])
    it = iter(flat)
    applies = [opt.apply_gradients([(next(it), v) for _, v in gv], global_step=step if k == 0 else None)
               for k, (opt, gv) in enumerate(zip(optimizers, grads))]
    train = tf.group(*applies, name="train")
    if accumulate is not None:
        with tf.control_dependencies([train]):  # zeroed after the apply read them (made inside the block)
            train = tf.group(*[tf1.assign(a, tf.zeros_like(a)) for a in accumulators], name="apply_and_zero")
    if f["ema"]:
        with tf.control_dependencies([train]):
            train = tf1.train.ExponentialMovingAverage(0.8).apply(variables)
    if accumulate is not None:
        return [accumulate] * MICRO + [train]
    if f["train_ops"] == 2:
        second = tf1.train.GradientDescentOptimizer(0.05).minimize(loss, var_list=groups[-1])
        return [train, second]
    return [train]


def _accumulators(grads, variables):
    """Micro-steps add each gradient into a non-trainable variable; the apply reads their mean."""
    adds, means, accumulators = [], [], []
    for g, v in zip(grads, variables):
        acc = tf1.get_variable(f"acc/{v.op.name}", v.shape, F64, tf1.zeros_initializer(), trainable=False)
        if isinstance(g, tf.IndexedSlices):
            adds.append(tf1.scatter_add(acc, g.indices, g.values))
        else:
            adds.append(tf1.assign_add(acc, g))
        means.append(acc.read_value() / MICRO)
        accumulators.append(acc)
    return means, tf.group(*adds, name="accumulate"), accumulators
