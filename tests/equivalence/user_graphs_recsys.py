"""Recommendation-style training graphs as users write them: lookups deduplicated with tf.unique and trained by
FTRL beside Adam, noise added to every gradient under a graph seed, and an embedding whose gradient rows are scaled
by how often each id has been seen (a count kept with scatter_add: keyed_writes.py). Same conventions as
cases.py (float64, seeded initializers, rows [first, first+rows) of a global batch)."""
import argparse

import numpy as np
import tensorflow as tf

import parallax
from tests.equivalence.cases import F64, Case, _dense, _init, _rows
from tests.equivalence.user_graphs_more import VOCAB, _ids_and_targets
from tests.models_for_tests.recsys_modules import recsys_modules

tf1 = tf.compat.v1


def unique_lookup_ftrl(n, b, steps, graph_batch, lr_scale=1.0):
    """Each distinct id looked up once (tf.unique, then a gather back to the examples); the embedding trained by
    FTRL with l1 and l2, the head by Adam, under one group."""
    ids, y = _ids_and_targets(201, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        idp, yp = tf1.placeholder(tf.int32, [None, 3], "ids"), tf1.placeholder(F64, [None, 1], "y")
        emb = tf1.get_variable("embedding", [VOCAB, 4], F64, initializer=_init(202))
        flat = tf.reshape(idp, [-1])
        uniq, idx = tf.unique(flat)
        rows = tf.gather(tf.nn.embedding_lookup(emb, uniq), idx)
        h = tf.reduce_sum(tf.reshape(rows, [-1, 3, 4]), 1)
        loss = tf.reduce_mean(tf.square(_dense(h, 1, "head", 203) - yp))
        step = tf1.train.get_or_create_global_step()
        ftrl = tf1.train.FtrlOptimizer(0.2, l1_regularization_strength=0.01, l2_regularization_strength=0.01)
        adam = tf1.train.AdamOptimizer(0.05)
        ge, = tf.gradients(loss, [emb])
        dense_vars = [v for v in tf1.trainable_variables() if v is not emb]
        gd = tf.gradients(loss, dense_vars)
        train = tf.group(ftrl.apply_gradients([(ge, emb)], global_step=step),
                         adam.apply_gradients(list(zip(gd, dense_vars))), name="train")
    return Case(g, train, _rows((ids, y), (idp, yp)))


def gradient_noise_seeded(n, b, steps, graph_batch, lr_scale=1.0):
    """Gaussian noise added to every gradient (an IndexedSlices' values too) under a graph-level seed."""
    ids, y = _ids_and_targets(204, n * b * steps)
    g = tf.Graph()
    g.seed = 7
    with g.as_default():
        idp, yp = tf1.placeholder(tf.int32, [None, 3], "ids"), tf1.placeholder(F64, [None, 1], "y")
        emb = tf1.get_variable("embedding", [VOCAB, 4], F64, initializer=_init(205))
        h = tf.tanh(tf.reduce_sum(tf.nn.embedding_lookup(emb, idp), axis=1))
        loss = tf.reduce_mean(tf.square(_dense(h, 1, "head", 206) - yp))
        opt = tf1.train.GradientDescentOptimizer(0.2)
        noisy = []
        for grad, var in opt.compute_gradients(loss):
            if isinstance(grad, tf.IndexedSlices):
                grad = tf.IndexedSlices(grad.values + 0.01 * tf.random.normal(tf.shape(grad.values), dtype=F64),
                                        grad.indices, grad.dense_shape)
            else:
                grad = grad + 0.01 * tf.random.normal(tf.shape(grad), dtype=F64)
            noisy.append((grad, var))
        train = opt.apply_gradients(noisy, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((ids, y), (idp, yp)))


def frequency_scaled_rows(n, b, steps, graph_batch, lr_scale=1.0):
    """A count of each id's occurrences so far (scatter_add of ones); the embedding's gradient rows divided by the
    square root of their id's count. Before keyed_writes.py: max abs diff 7 in the counts, and NaN in the
    variables (a row that another worker's ids brought had a count of 0 here), in every mode."""
    ids, y = _ids_and_targets(210, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        idp, yp = tf1.placeholder(tf.int32, [None, 3], "ids"), tf1.placeholder(F64, [None, 1], "y")
        emb = tf1.get_variable("embedding", [VOCAB, 4], F64, initializer=_init(211))
        counts = tf1.get_variable("counts", [VOCAB], F64, initializer=tf1.zeros_initializer(), trainable=False)
        h = tf.tanh(tf.reduce_sum(tf.nn.embedding_lookup(emb, idp), axis=1))
        loss = tf.reduce_mean(tf.square(_dense(h, 1, "head", 212) - yp))
        opt = tf1.train.GradientDescentOptimizer(0.3)
        counted = tf1.scatter_add(counts, tf.reshape(idp, [-1]), tf.ones_like(tf.reshape(idp, [-1]), F64))
        pairs = []
        for grad, var in opt.compute_gradients(loss):
            if var is emb:
                with tf.control_dependencies([counted]):
                    scale = tf.math.rsqrt(tf.gather(counts.read_value(), grad.indices))
                grad = tf.IndexedSlices(grad.values * scale[:, None], grad.indices, grad.dense_shape)
            pairs.append((grad, var))
        train = opt.apply_gradients(pairs, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((ids, y), (idp, yp)))


def dlrm_model(n, b, steps, graph_batch, lr_scale=1.0):
    """models/recsys's DLRM in float64 with tables capped at 40 rows, the four largest in 2 shards: impression
    lines as make_data.py writes them, through parallax.shard, parsed and hashed in the graph, Adagrad."""
    make_data, recsys = recsys_modules()
    rng = np.random.RandomState(220)
    lines = make_data.lines(*make_data.impressions(rng, n * b * steps, seed=0))
    args = argparse.Namespace(embedding_size=4, max_table_rows=40, partitions=2, bottom_units=8, top_units=(8,),
                              dtype="float64")
    cardinality = make_data.CARDINALITIES
    g = tf.Graph()
    g.seed = 22
    with g.as_default():
        batches = parallax.shard(tf.data.Dataset.from_tensor_slices(lines)).batch(graph_batch)
        rows = recsys.table_rows(cardinality, args)
        labels, counts, ids = tf1.data.make_one_shot_iterator(
            batches.map(lambda batch: recsys.parse(batch, rows, F64))).get_next()
        loss = recsys.loss_of(labels, recsys.logits_of(counts, ids, cardinality, args))
        train = tf1.train.AdagradOptimizer(0.2 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, None)


USER_GRAPHS_RECSYS = {"unique_lookup_ftrl": unique_lookup_ftrl, "gradient_noise_seeded": gradient_noise_seeded,
                      "frequency_scaled_rows": frequency_scaled_rows, "dlrm_model": dlrm_model}
