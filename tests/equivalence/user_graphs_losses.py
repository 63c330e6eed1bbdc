"""Losses as recommendation and classification scripts write them, none of which a rule names: an embedding looked
up with max_norm (rows renormalized), targets standardized by the batch's moments under stop_gradient, and class
weights gathered by label in a weighted mean with label smoothing; a sum over the batch made into a weight matrix.
Same conventions as cases.py."""
import numpy as np
import tensorflow as tf

from tests.equivalence.cases import F64, Case, _dense, _init, _rows

tf1 = tf.compat.v1
VOCAB = 16


def _data(seed, rows):
    rng = np.random.RandomState(seed)
    ids = rng.randint(0, VOCAB, size=(rows, 2)).astype(np.int32)
    labels = rng.randint(0, 3, size=(rows,)).astype(np.int32)
    return ids, np.cos(ids).sum(axis=1, keepdims=True) + 0.1 * rng.randn(rows, 1), labels


def max_norm_lookup(n, b, steps, graph_batch, lr_scale=1.0):
    """embedding_lookup with max_norm (rows renormalized), a summed loss; Adam."""
    ids, y, _ = _data(150, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        idp, yp = tf1.placeholder(tf.int32, [None, 2], "ids"), tf1.placeholder(F64, [None, 1], "y")
        emb = tf1.get_variable("embedding", [VOCAB, 3], F64, initializer=_init(151, scale=2.0))
        h = tf.reduce_sum(tf1.nn.embedding_lookup(emb, idp, max_norm=1.0), axis=1)
        loss = tf.reduce_sum(tf.square(_dense(h, 1, "head", 152) - yp))
        train = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((ids, y), (idp, yp)))


def standardized_targets(n, b, steps, graph_batch, lr_scale=1.0):
    """Targets standardized by the batch's mean and std under stop_gradient; a mean loss; SGD."""
    ids, y, _ = _data(153, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        idp, yp = tf1.placeholder(tf.int32, [None, 2], "ids"), tf1.placeholder(F64, [None, 1], "y")
        emb = tf1.get_variable("embedding", [VOCAB, 3], F64, initializer=_init(154))
        mean, var = tf.nn.moments(yp, axes=[0])
        target = tf.stop_gradient((yp - mean) / tf.sqrt(var + 1e-6))
        h = tf.reduce_sum(tf.nn.embedding_lookup(emb, idp), axis=1)
        loss = tf.reduce_mean(tf.square(_dense(h, 1, "head", 155) - target))
        train = tf1.train.GradientDescentOptimizer(0.1 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((ids, y), (idp, yp)))


def class_weighted_mean(n, b, steps, graph_batch, lr_scale=1.0):
    """Class weights gathered by label from a constant, a weighted mean (sum(w*l)/sum(w)) of softmax cross
    entropy with label smoothing; Momentum."""
    ids, _, labels = _data(156, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        idp, lp = tf1.placeholder(tf.int32, [None, 2], "ids"), tf1.placeholder(tf.int32, [None], "labels")
        emb = tf1.get_variable("embedding", [VOCAB, 3], F64, initializer=_init(157))
        logits = _dense(tf.reduce_sum(tf.nn.embedding_lookup(emb, idp), axis=1), 3, "head", 158)
        weights = tf.gather(tf.constant([1.0, 2.0, 0.5], F64), lp)
        per = tf1.losses.softmax_cross_entropy(tf.one_hot(lp, 3, dtype=F64), logits, label_smoothing=0.1,
                                               reduction=tf1.losses.Reduction.NONE)
        loss = tf.reduce_sum(weights * per) / tf.reduce_sum(weights)
        train = tf1.train.MomentumOptimizer(0.1 * lr_scale, 0.9).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((ids, labels), (idp, lp)))


def batch_sum_as_weights(n, b, steps, graph_batch, lr_scale=1.0):
    """A sum over the batch inside the network (issue 57, item 3): `reduce_sum(Dense(1280)(x), axis=0)` reshaped
    into a [160, 8] weight matrix that the examples are then multiplied with; float32, Adam. One device's sum is
    over the whole batch: each worker's must be made the global one. (Reported 1.8e-3 off with no warning; this
    graph of that kind is exact in every mode, and stays so here.)"""
    rng = np.random.RandomState(1390)
    x, y = rng.randn(n * b * steps, 8).astype(np.float32), rng.randn(n * b * steps, 1).astype(np.float32)
    g = tf.Graph()
    with g.as_default():
        xp, yp = tf1.placeholder(tf.float32, [None, 8], "x"), tf1.placeholder(tf.float32, [None, 1], "y")
        h = _dense(xp, 1280, "wide", 1391, dtype=tf.float32)
        weights = tf.reshape(tf.reduce_sum(h, axis=0), [160, 8])
        pred = _dense(tf.matmul(xp, weights, transpose_b=True), 1, "head", 1392, dtype=tf.float32)
        train = tf1.train.AdamOptimizer(0.01 * lr_scale).minimize(tf.reduce_mean(tf.square(pred - yp)),
                                                                  tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, y), (xp, yp)), float32=True)


USER_GRAPHS_LOSSES = {"max_norm_lookup": max_norm_lookup, "standardized_targets": standardized_targets,
                      "class_weighted_mean": class_weighted_mean, "batch_sum_as_weights": batch_sum_as_weights}
