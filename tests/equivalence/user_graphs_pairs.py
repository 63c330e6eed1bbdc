"""Losses whose values mix the batch's examples (paired_rows.py): two towers scored by in-batch negatives (each user
against every item of the batch, its own item the label at its position, tf.range), on fed rows, on a dataset
sharded element-wise by parallax.shard, with a tape, with queries read by a GRU; scored both ways with accidental
hits masked and summed; a batch-hard triplet loss; RankNet's loss of every pair; a listwise softmax over the
batch's axis; a softmax over the batch kept where a boolean flag says an example is valid; a running total over
the batch and values divided by the batch's maximum. Before paired_rows.py each measured was warned of as not
exact (max abs diff 0.03-0.44 after 6 steps). Same conventions as cases.py."""
import numpy as np
import tensorflow as tf

import parallax

from tests.equivalence.cases import F64, Case, _dense, _init, _rows
from tests.equivalence.user_graphs_more import VOCAB
from tests.equivalence.user_graphs_stateful import _pairs

tf1 = tf.compat.v1


def _in_batch_softmax(users, items, lr_scale):
    """Users and items embedded and passed through a dense layer each, logits u @ v^T / temperature (a trained
    scalar), labels tf.range of the batch's size; plus an L2 penalty on the looked-up users."""
    user_emb = tf1.get_variable("user_embedding", [VOCAB, 4], F64, initializer=_init(481))
    item_emb = tf1.get_variable("item_embedding", [VOCAB, 4], F64, initializer=_init(482))
    u = _dense(tf.nn.embedding_lookup(user_emb, users), 4, "user_tower", 483, tf.nn.tanh)
    v = _dense(tf.nn.embedding_lookup(item_emb, items), 4, "item_tower", 484, tf.nn.tanh)
    temperature = tf1.get_variable("temperature", [], F64, initializer=tf1.constant_initializer(0.5))
    logits = tf.matmul(u, v, transpose_b=True) / temperature
    labels = tf.range(tf.shape(logits)[0])
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)) + \
        1e-3 * tf.reduce_mean(tf.reduce_sum(tf.square(u), axis=1))
    return tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(loss, tf1.train.get_or_create_global_step(),
                                                              name="train")


def in_batch_negatives(n, b, steps, graph_batch, lr_scale=1.0):
    """In-batch negatives on fed rows (each worker's a block of the batch)."""
    users, items = _pairs(n, b, steps, 480)
    g = tf.Graph()
    with g.as_default():
        up, ip = tf1.placeholder(tf.int32, [None], "users"), tf1.placeholder(tf.int32, [None], "items")
        train = _in_batch_softmax(up, ip, lr_scale)
    return Case(g, train, _rows((users, items), (up, ip)))


def in_batch_negatives_sharded(n, b, steps, graph_batch, lr_scale=1.0):
    """The same on a dataset sharded element-wise by parallax.shard: a worker's examples are every N-th."""
    users, items = _pairs(n, b, steps, 480)
    g = tf.Graph()
    with g.as_default():
        ds = parallax.shard(tf.data.Dataset.from_tensor_slices((users, items))).batch(graph_batch)
        train = _in_batch_softmax(*tf1.data.make_one_shot_iterator(ds).get_next(), lr_scale)
    return Case(g, train, None)


def in_batch_symmetric_summed(n, b, steps, graph_batch, lr_scale=1.0):
    """Embeddings alone (no towers), scored both ways (users against items and items against users, the logits
    transposed), accidental hits masked (another example's item equal to the user's own: tf.equal of the ids,
    the diagonal kept by tf.eye of the batch's size), each per-example loss summed; Adagrad."""
    users, items = _pairs(n, b, steps, 480)
    items = items % 7  # repeated items in a batch, so the mask has hits
    g = tf.Graph()
    with g.as_default():
        up, ip = tf1.placeholder(tf.int32, [None], "users"), tf1.placeholder(tf.int32, [None], "items")
        user_emb = tf1.get_variable("user_embedding", [VOCAB, 4], F64, initializer=_init(485))
        item_emb = tf1.get_variable("item_embedding", [VOCAB, 4], F64, initializer=_init(486))
        u, v = tf.nn.embedding_lookup(user_emb, up), tf.nn.embedding_lookup(item_emb, ip)
        logits = tf.matmul(u, v, transpose_b=True)
        size = tf.shape(logits)[0]
        hits = tf.logical_and(tf.equal(ip[None, :], ip[:, None]), tf.logical_not(tf.cast(tf.eye(size), tf.bool)))
        logits = tf.where(hits, tf.fill(tf.shape(logits), tf.constant(-1e9, F64)), logits)
        labels = tf.range(size)
        loss = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)) + \
            tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=tf.transpose(logits)))
        train = tf1.train.AdagradOptimizer(0.05 * lr_scale).minimize(loss, tf1.train.get_or_create_global_step(),
                                                                     name="train")
    return Case(g, train, _rows((users, items), (up, ip)))


def batch_hard_triplet(n, b, steps, graph_batch, lr_scale=1.0):
    """Metric learning by the batch-hard triplet loss: each anchor's farthest example of its own class and nearest
    of another, from the batch's pairwise squared distances; momentum."""
    rng = np.random.RandomState(487)
    x = rng.randn(n * b * steps, 3)
    classes = rng.randint(0, 3, size=n * b * steps).astype(np.int32)
    g = tf.Graph()
    with g.as_default():
        xp, cp = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(tf.int32, [None], "classes")
        z = _dense(_dense(xp, 4, "hidden", 488, tf.nn.relu), 2, "embed", 489)
        squares = tf.reduce_sum(tf.square(z), axis=1)
        distances = squares[:, None] - 2.0 * tf.matmul(z, z, transpose_b=True) + squares[None, :]
        same = tf.cast(tf.equal(cp[:, None], cp[None, :]), F64)
        hardest_positive = tf.reduce_max(distances * same, axis=1)
        hardest_negative = tf.reduce_min(distances + 1e6 * same, axis=1)
        loss = tf.reduce_mean(tf.nn.relu(hardest_positive - hardest_negative + 0.5))
        train = tf1.train.MomentumOptimizer(0.05 * lr_scale, 0.9).minimize(
            loss, tf1.train.get_or_create_global_step(), name="train")
    return Case(g, train, _rows((x, classes), (xp, cp)))


def in_batch_negatives_tape(n, b, steps, graph_batch, lr_scale=1.0):
    """In-batch negatives with gradients from tf.GradientTape (no tf.gradients call) and Adam's apply_gradients;
    accuracy against the batch logged from the logits."""
    users, items = _pairs(n, b, steps, 480)
    g = tf.Graph()
    with g.as_default():
        up, ip = tf1.placeholder(tf.int32, [None], "users"), tf1.placeholder(tf.int32, [None], "items")
        user_emb = tf1.get_variable("user_embedding", [VOCAB, 4], F64, initializer=_init(490))
        item_emb = tf1.get_variable("item_embedding", [VOCAB, 4], F64, initializer=_init(491))
        with tf.GradientTape() as tape:
            u = _dense(tf.nn.embedding_lookup(user_emb, up), 4, "user_tower", 492, tf.nn.tanh)
            logits = tf.matmul(u, tf.nn.embedding_lookup(item_emb, ip), transpose_b=True)
            labels = tf.range(tf.shape(logits)[0])
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, axis=1, output_type=tf.int32), labels), F64))
        tf1.summary.scalar("accuracy", accuracy)
        variables = tf1.trainable_variables()
        train = tf1.train.AdamOptimizer(0.05 * lr_scale).apply_gradients(
            zip(tape.gradient(loss, variables), variables), global_step=tf1.train.get_or_create_global_step(),
            name="train")
    return Case(g, train, _rows((users, items), (up, ip)))


def _regression(seed, n, b, steps):
    rng = np.random.RandomState(seed)
    x = rng.randn(n * b * steps, 3)
    return x, np.sin(x).sum(axis=1) + 0.1 * rng.randn(n * b * steps)


def _errors(seed):
    xp, yp = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None], "y")
    hidden = _dense(xp, 4, "hidden", seed, tf.nn.tanh)
    return xp, yp, hidden, tf.square(tf.squeeze(_dense(hidden, 1, "out", seed + 1), 1) - yp)


def listwise_softmax_over_the_batch(n, b, steps, graph_batch, lr_scale=1.0):
    """ListNet-style: the batch's scores normalized by a softmax over the batch's axis, against the targets'
    softmax over it; plus each example's squared error, on a dataset sharded element-wise."""
    x, y = _regression(493, n, b, steps)
    g = tf.Graph()
    with g.as_default():
        ds = parallax.shard(tf.data.Dataset.from_tensor_slices((x, y))).batch(graph_batch)
        xs, ys = tf1.data.make_one_shot_iterator(ds).get_next()
        score = tf.squeeze(_dense(_dense(xs, 4, "hidden", 494, tf.nn.tanh), 1, "out", 495), 1)
        listwise = -tf.reduce_sum(tf.nn.softmax(ys, axis=0) * tf.nn.log_softmax(score, axis=0))
        loss = listwise + tf.reduce_mean(tf.square(score - ys))
        train = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(loss, tf1.train.get_or_create_global_step(),
                                                                  name="train")
    return Case(g, train, None)


def running_total_and_scaled_by_the_batch_maximum(n, b, steps, graph_batch, lr_scale=1.0):
    """Errors weighted by their running total over the batch (tf.cumsum), and the hidden units scaled by the
    batch's largest absolute value (a maximum of values computed from variables, which gradient flows into)."""
    x, y = _regression(496, n, b, steps)
    g = tf.Graph()
    with g.as_default():
        xp, yp, hidden, errors = _errors(497)
        scaled = hidden / tf.reduce_max(tf.abs(hidden))
        loss = tf.reduce_mean(tf.sqrt(tf.cumsum(errors) + 1.0)) + 0.1 * tf.reduce_mean(tf.square(scaled))
        train = tf1.train.MomentumOptimizer(0.05 * lr_scale, 0.9).minimize(
            loss, tf1.train.get_or_create_global_step(), name="train")
    return Case(g, train, _rows((x, y), (xp, yp)))


def attention_over_valid_examples(n, b, steps, graph_batch, lr_scale=1.0):
    """Each example's squared error weighted by a softmax of its score over the batch, kept where a per-example
    boolean flag of the data says it is valid (a bool read where the examples mix)."""
    x, y = _regression(498, n, b, steps)
    valid = np.random.RandomState(499).rand(len(y)) < 0.7
    g = tf.Graph()
    with g.as_default():
        xp, yp, hidden, errors = _errors(500)
        vp = tf1.placeholder(tf.bool, [None], "valid")
        score = tf.squeeze(_dense(hidden, 1, "score", 502), 1)
        weights = tf.where(vp, tf.nn.softmax(score), tf.zeros_like(score))
        loss = tf.reduce_sum(weights * errors) + tf.reduce_mean(errors)
        train = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(loss, tf1.train.get_or_create_global_step(),
                                                                  name="train")
    return Case(g, train, _rows((x, y, valid), (xp, yp, vp)))


def in_batch_negatives_text_tower(n, b, steps, graph_batch, lr_scale=1.0):
    """Queries of 4 words read by a GRU (tf.compat.v1.nn.dynamic_rnn: a v1 while loop) scored against every item
    of the batch (in-batch negatives); Adam."""
    users, items = _pairs(n, b, steps, 480)
    words = np.random.RandomState(503).randint(0, VOCAB, size=(len(users), 4)).astype(np.int32)
    g = tf.Graph()
    with g.as_default():
        wp, ip = tf1.placeholder(tf.int32, [None, 4], "words"), tf1.placeholder(tf.int32, [None], "items")
        word_emb = tf1.get_variable("word_embedding", [VOCAB, 3], F64, initializer=_init(504))
        item_emb = tf1.get_variable("item_embedding", [VOCAB, 4], F64, initializer=_init(505))
        cell = tf1.nn.rnn_cell.GRUCell(4, kernel_initializer=_init(506), bias_initializer=_init(507), dtype=F64)
        _, query = tf1.nn.dynamic_rnn(cell, tf.nn.embedding_lookup(word_emb, wp), dtype=F64)
        logits = tf.matmul(query, tf.nn.embedding_lookup(item_emb, ip), transpose_b=True)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.range(tf.shape(logits)[0]), logits=logits))
        train = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(loss, tf1.train.get_or_create_global_step(),
                                                                  name="train")
    return Case(g, train, _rows((words, items), (wp, ip)))


def pairwise_ranking_loss(n, b, steps, graph_batch, lr_scale=1.0):
    """RankNet: for every pair of the batch's examples, the logistic loss of their score difference against the
    order of their targets, averaged over the pairs (the batch on two axes, reduced away whole)."""
    x, y = _regression(508, n, b, steps)
    g = tf.Graph()
    with g.as_default():
        xp, yp, hidden, _ = _errors(509)
        score = tf.squeeze(_dense(hidden, 1, "score", 511), 1)
        order = tf.sign(yp[:, None] - yp[None, :])
        pairs = tf.nn.softplus(-order * (score[:, None] - score[None, :])) * tf.abs(order)
        train = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(
            tf.reduce_mean(pairs), tf1.train.get_or_create_global_step(), name="train")
    return Case(g, train, _rows((x, y), (xp, yp)))


USER_GRAPHS_PAIRS = {f.__name__: f for f in (attention_over_valid_examples, in_batch_negatives, pairwise_ranking_loss,
                                               in_batch_negatives_text_tower,
                                               in_batch_negatives_sharded,
                                               in_batch_symmetric_summed, batch_hard_triplet,
                                               in_batch_negatives_tape, listwise_softmax_over_the_batch,
                                               running_total_and_scaled_by_the_batch_maximum)}
