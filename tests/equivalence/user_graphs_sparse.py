"""Training graphs fed tf.SparseTensors, as recommendation models read multi-valued categorical features: ids
looked up by embedding_lookup_sparse, a sparse matrix multiplied into a layer; fed through tf.compat.v1's
sparse_placeholder or a tf.data pipeline of sparse elements sharded by `parallax.shard`. Their batch is a value (the
dense shape's first entry), which shape inference cannot see through: parallax finds it by running the graph on
random sparse batches (sparse_inputs.py, batch_samples.with_extents_from_runs). Same conventions as cases.py.
"""
import numpy as np
import tensorflow as tf

import parallax
from tests.equivalence.cases import F64, Case, _dense, _init

tf1 = tf.compat.v1
VOCAB = 20


def _sparse_data(seed, rows):
    rng = np.random.RandomState(seed)
    lengths = rng.randint(1, 4, size=rows)
    return [rng.randint(0, VOCAB, size=k) for k in lengths], rng.randn(rows, 1)


def _feeds(sp, yp, ids, y):
    def feeds(k, first, count):
        chosen = ids[first:first + count]
        indices = [[r, j] for r, row in enumerate(chosen) for j in range(len(row))]
        return {sp: tf1.SparseTensorValue(np.array(indices, np.int64), np.concatenate(chosen).astype(np.int64),
                                          np.array([count, max(map(len, chosen))], np.int64)),
                yp: y[first:first + count]}
    return feeds


def sparse_summed(n, b, steps, graph_batch, lr_scale=1.0):
    """A summed loss over sparse ids, default Config: the loss is found to be a sum, so gradients are summed."""
    ids, y = _sparse_data(61, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        sp = tf1.sparse_placeholder(tf.int64, name="ids")
        yp = tf1.placeholder(F64, [None, 1], "y")
        emb = tf1.get_variable("embedding", [VOCAB, 4], F64, initializer=_init(62))
        h = tf.nn.embedding_lookup_sparse(emb, sp, None, combiner="sum")
        loss = tf.reduce_sum(tf.square(_dense(h, 1, "out", 63) - yp))
        train = tf1.train.GradientDescentOptimizer(0.02 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _feeds(sp, yp, ids, y))


def sparse_batch_norm(n, b, steps, graph_batch, lr_scale=1.0):
    """The looked-up rows normalized by the batch's moments: statistics combined over workers."""
    ids, y = _sparse_data(64, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        sp = tf1.sparse_placeholder(tf.int64, name="ids")
        yp = tf1.placeholder(F64, [None, 1], "y")
        emb = tf1.get_variable("embedding", [VOCAB, 4], F64, initializer=_init(65))
        h = tf.nn.embedding_lookup_sparse(emb, sp, None, combiner="mean")
        mean, variance = tf.nn.moments(h, axes=[0])
        h = tf.nn.batch_normalization(h, mean, variance, None, None, 1e-3)
        loss = tf.reduce_mean(tf.square(_dense(h, 1, "out", 66) - yp))
        train = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _feeds(sp, yp, ids, y))


def sparse_dropout(n, b, steps, graph_batch, lr_scale=1.0):
    """Dropout on the looked-up rows: a draw whose batch dimension only a run shows, split."""
    ids, y = _sparse_data(67, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        sp = tf1.sparse_placeholder(tf.int64, name="ids")
        yp = tf1.placeholder(F64, [None, 1], "y")
        emb = tf1.get_variable("embedding", [VOCAB, 4], F64, initializer=_init(68))
        h = tf1.nn.dropout(tf.nn.embedding_lookup_sparse(emb, sp, None, combiner="sqrtn"), rate=0.3, seed=3)
        loss = tf.reduce_mean(tf.square(_dense(h, 1, "out", 69) - yp))
        train = tf1.train.AdagradOptimizer(0.2 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _feeds(sp, yp, ids, y))


def sparse_dense_matmul(n, b, steps, graph_batch, lr_scale=1.0):
    """A sparse matrix (dense shape [batch, VOCAB]) times a weight, centred by the batch's mean."""
    ids, y = _sparse_data(70, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        sp = tf1.sparse_placeholder(F64, [None, VOCAB], name="x")
        yp = tf1.placeholder(F64, [None, 1], "y")
        w = tf1.get_variable("w", [VOCAB, 3], F64, initializer=_init(71))
        h = tf.sparse.sparse_dense_matmul(sp, w)
        out = _dense(tf.nn.relu(h - tf.reduce_mean(h, 0)), 1, "out", 72)
        loss = tf.reduce_mean(tf.square(out - yp))
        train = tf1.train.MomentumOptimizer(0.01 * lr_scale, 0.9).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())

    def feeds(k, first, count):
        chosen = ids[first:first + count]
        indices = sorted({(r, int(c)) for r, row in enumerate(chosen) for c in row})
        return {sp: tf1.SparseTensorValue(np.array(indices, np.int64), np.ones(len(indices)),
                                          np.array([count, VOCAB], np.int64)), yp: y[first:first + count]}
    return Case(g, train, feeds)


def sparse_dataset(n, b, steps, graph_batch, lr_scale=1.0):
    """Sparse elements through tf.data, sharded element-wise: dropout on the looked-up rows, centred by the
    batch's mean, and a summed loss (found to be a sum with the mean and the draw as the rewrite makes them)."""
    ids, y = _sparse_data(73, n * b * steps)
    indices = [[r, j] for r, row in enumerate(ids) for j in range(len(row))]
    g = tf.Graph()
    with g.as_default():
        sp = tf.sparse.SparseTensor(np.array(indices, np.int64), np.concatenate(ids).astype(np.int64),
                                    [len(ids), 3])
        ds = parallax.shard(tf.data.Dataset.from_tensor_slices((sp, y))).batch(graph_batch)
        spb, yb = tf1.data.make_one_shot_iterator(ds).get_next()
        emb = tf1.get_variable("embedding", [VOCAB, 4], F64, initializer=_init(74))
        h = tf1.nn.dropout(tf.nn.embedding_lookup_sparse(emb, spb, None, combiner="mean"), rate=0.3, seed=5)
        h = h - tf.reduce_mean(h, 0)
        loss = tf.reduce_sum(tf.square(_dense(h, 1, "out", 75) - yb))
        train = tf1.train.AdagradOptimizer(0.05 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, None)


def _examples(ids, y, x):
    """Each row as a serialized tf.train.Example: its ids (a list), its target and its dense features."""
    def example(r):
        feature = {"ids": tf.train.Feature(int64_list=tf.train.Int64List(value=ids[r].tolist())),
                   "y": tf.train.Feature(float_list=tf.train.FloatList(value=y[r].tolist())),
                   "x": tf.train.Feature(float_list=tf.train.FloatList(value=x[r].tolist()))}
        return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
    return np.array([example(r) for r in range(len(y))], dtype=object)


def parsed_examples_summed(n, b, steps, graph_batch, lr_scale=1.0):
    """Serialized tf.train.Examples fed to a string placeholder and parsed in the graph (tf.io.parse_example: a
    VarLenFeature of ids, two FixedLenFeatures): the ids' embedding mean beside the dense features, a summed loss
    plus an L2 penalty on the table; Adagrad. The checks that run the graph cannot make random serialized
    examples, so they feed the parse's outputs random values instead."""
    ids, y = _sparse_data(76, n * b * steps)
    x = np.random.RandomState(77).randn(n * b * steps, 2)
    serialized = _examples(ids, y, x)
    g = tf.Graph()
    with g.as_default():
        sp = tf1.placeholder(tf.string, [None], "serialized")
        features = tf.io.parse_example(sp, {"ids": tf.io.VarLenFeature(tf.int64),
                                            "y": tf.io.FixedLenFeature([1], tf.float32),
                                            "x": tf.io.FixedLenFeature([2], tf.float32)})
        emb = tf1.get_variable("embedding", [VOCAB, 3], F64, initializer=_init(78))
        h = tf.concat([tf.nn.embedding_lookup_sparse(emb, features["ids"], None, combiner="mean"),
                       tf.cast(features["x"], F64)], axis=1)
        errors = tf.reduce_sum(tf.square(_dense(h, 1, "out", 79) - tf.cast(features["y"], F64)))
        loss = errors + 0.05 * tf.nn.l2_loss(emb)
        train = tf1.train.AdagradOptimizer(0.05 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, lambda k, first, count: {sp: serialized[first:first + count]})


USER_GRAPHS_SPARSE = {"sparse_dataset": sparse_dataset, "sparse_summed": sparse_summed,
                      "sparse_batch_norm": sparse_batch_norm, "sparse_dropout": sparse_dropout,
                      "sparse_dense_matmul": sparse_dense_matmul, "parsed_examples_summed": parsed_examples_summed}
