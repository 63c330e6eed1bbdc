"""Graphs that look at the batch as a whole, written as users write them without a rule in mind: a penalty on the
batch mean of a hidden layer, predictions and targets centered on their batch means, predictions over the batch's
largest one (its gradient through the maximum), errors weighted by their rank in the batch, a time-major input,
targets over the batch's median; and statistics of the data that no law combines, which each worker computed
from its own examples (warned, 0.006 and 5.0 off in MPI before): the number of distinct ids in the batch (also
summed into state, on a dataset sharded element-wise) and of distinct users among flagged examples, now computed
from every worker's rows (gathered_statistics.py). The mean of the hardest half of the batch's errors (also after
dropout) and SimCLR's NT-Xent over two views stacked along the batch: shares of the batch (paired_rows.py), listed
before (0.05 off). The batch's median error (gradient flows through the selection) is still listed, not exact. Also exact: inputs
replaced by their ranks over the batch, features l2-normalized over the batch's axis, tf.losses' SUM_BY_NONZERO_WEIGHTS,
inputs standardized by the batch's moments in a v1 tf.cond, a loss over the targets' standard deviation; and inputs
with the batch's size written in (static placeholders, Dataset.batch with drop_remainder): a summed loss and one over
the batch's sum of weights; batch-major sequences transposed to time-major in the graph, under a loss over their
token count. Where the graph also depends on a written-in size (a reshape to it), or is fed time-major, it cannot be
checked, and the warning says why: tests/rules/test_loss_law.py.
Same conventions as cases.py."""
import numpy as np
import tensorflow as tf

import parallax

from tests.equivalence.cases import F64, Case, _dense, _init, _rows
from tests.equivalence.user_graphs_more import VOCAB
from tests.equivalence.user_graphs_pairs import _regression
from tests.equivalence.user_graphs_unseen import _regression_head

tf1 = tf.compat.v1


def _regression_case(seed, n, b, steps, loss_of, optimizer, inputs=None):
    """A Case of _regression_head(seed + 1, inputs) on _regression(seed)'s data, trained by `optimizer` on
    loss_of(prediction, targets)."""
    x, y = _regression(seed, n, b, steps)
    g = tf.Graph()
    with g.as_default():
        xp, yp, pred = _regression_head(seed + 1, inputs)
        train = optimizer.minimize(loss_of(pred, yp), tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, y), (xp, yp)))


def activity_mean_penalty(n, b, steps, graph_batch, lr_scale=1.0):
    """The squared error plus a penalty on the square of the hidden layer's batch mean (activity regularization)."""
    x, y = _regression(1311, n, b, steps)
    g = tf.Graph()
    with g.as_default():
        xp, yp = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None], "y")
        h = _dense(xp, 4, "hidden", 1312, tf.nn.tanh)
        pred = tf.squeeze(_dense(h, 1, "out", 1313), 1)
        loss = tf.reduce_mean(tf.square(pred - yp)) + 0.5 * tf.reduce_sum(tf.square(tf.reduce_mean(h, 0)))
        train = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(loss, tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, y), (xp, yp)))


def loss_over_distinct_ids(n, b, steps, graph_batch, lr_scale=1.0):
    """A summed error over the number of distinct ids in the batch (tf.unique's size)."""
    rng = np.random.RandomState(1321)
    ids = rng.randint(0, VOCAB, size=(n * b * steps,)).astype(np.int32)
    y = np.cos(ids) + 0.1 * rng.randn(n * b * steps)
    g = tf.Graph()
    with g.as_default():
        idp, yp = tf1.placeholder(tf.int32, [None], "ids"), tf1.placeholder(F64, [None], "y")
        emb = tf1.get_variable("embedding", [VOCAB, 3], F64, initializer=_init(1322))
        pred = tf.squeeze(_dense(tf.nn.embedding_lookup(emb, idp), 1, "out", 1323), 1)
        distinct = tf.cast(tf.size(tf.unique(idp).y), F64)
        loss = tf.reduce_sum(tf.square(pred - yp)) / distinct
        train = tf1.train.GradientDescentOptimizer(0.05 * lr_scale).minimize(
            loss, tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((ids, y), (idp, yp)))


def rank_weighted_errors(n, b, steps, graph_batch, lr_scale=1.0):
    """Each example's error weighted by its rank in the batch (argsort of argsort) over the batch size."""
    def loss_of(pred, y):
        errors = tf.square(pred - y)
        ranks = tf.cast(tf.argsort(tf.argsort(tf.stop_gradient(errors))), F64) + 1.0
        return tf.reduce_mean(ranks / tf.cast(tf.size(errors), F64) * errors)
    return _regression_case(1331, n, b, steps, loss_of, tf1.train.GradientDescentOptimizer(0.1 * lr_scale))


def predictions_over_batch_max(n, b, steps, graph_batch, lr_scale=1.0):
    """Predictions scaled by the batch's largest absolute prediction, its gradient flowing through the max."""
    def loss_of(pred, y):
        return tf.reduce_mean(tf.square(pred / (tf.reduce_max(tf.abs(pred)) + 1.0) - y / 4.0))
    return _regression_case(1341, n, b, steps, loss_of, tf1.train.GradientDescentOptimizer(0.1 * lr_scale))


def centered_predictions(n, b, steps, graph_batch, lr_scale=1.0):
    """Predictions and targets both centered on their batch means (a correlation-like loss), Momentum."""
    def loss_of(pred, y):
        return tf.reduce_mean(tf.square((pred - tf.reduce_mean(pred)) - (y - tf.reduce_mean(y))))
    return _regression_case(1361, n, b, steps, loss_of, tf1.train.MomentumOptimizer(0.05 * lr_scale, 0.9))


def time_major_sequences(n, b, steps, graph_batch, lr_scale=1.0):
    """A time-major sequence input [time, batch, 3] (as tf.nn.dynamic_rnn(time_major=True) takes it), a dense layer
    per step and the mean squared error over time and batch; fed by the batch's axis 1."""
    rng = np.random.RandomState(1371)
    x = rng.randn(5, n * b * steps, 3)
    y = np.sin(x).sum(axis=2)
    g = tf.Graph()
    with g.as_default():
        xp, yp = tf1.placeholder(F64, [5, None, 3], "x"), tf1.placeholder(F64, [5, None], "y")
        pred = tf.squeeze(_dense(_dense(xp, 4, "hidden", 1372, tf.nn.tanh), 1, "out", 1373), 2)
        loss = tf.reduce_mean(tf.square(pred - yp))
        train = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(loss, tf1.train.get_or_create_global_step())

    def feeds(step, first, rows):
        return {xp: x[:, first:first + rows], yp: y[:, first:first + rows]}
    return Case(g, train, feeds)


def _distinct_ids_loss(idp, yp, seed, lr_scale):
    emb = tf1.get_variable("embedding", [VOCAB, 3], F64, initializer=_init(seed))
    pred = tf.squeeze(_dense(tf.nn.embedding_lookup(emb, idp), 1, "out", seed + 1), 1)
    distinct = tf.cast(tf.size(tf.unique(idp).y), F64)
    seen = tf1.get_variable("distinct_seen", [], F64, initializer=tf1.zeros_initializer(), trainable=False)
    loss = tf.reduce_mean(tf.square(pred - yp)) * 8.0 / (distinct + 1.0)
    update = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(loss, tf1.train.get_or_create_global_step())
    return tf.group(update, seen.assign_add(distinct), name="train")


def distinct_ids_tracked_sharded(n, b, steps, graph_batch, lr_scale=1.0):
    """A mean error scaled by 8 / (distinct ids + 1), on a dataset sharded element-wise; the distinct count also
    summed into a non-trainable total; Adam."""
    rng = np.random.RandomState(1381)
    ids = rng.randint(0, 5, size=(n * b * steps,)).astype(np.int32)
    y = np.cos(ids) + 0.1 * rng.randn(n * b * steps)
    g = tf.Graph()
    with g.as_default():
        ds = parallax.shard(tf.data.Dataset.from_tensor_slices((ids, y))).batch(graph_batch)
        train = _distinct_ids_loss(*tf1.data.make_one_shot_iterator(ds).get_next(), 1382, lr_scale)
    return Case(g, train, None)


def targets_over_batch_median(n, b, steps, graph_batch, lr_scale=1.0):
    """Targets scaled by the batch's median absolute target (the middle of a top_k over the batch), Momentum."""
    def loss_of(pred, y):
        size = tf.size(y)
        median = tf.gather(tf.nn.top_k(tf.abs(y), size).values, size // 2)
        return tf.reduce_mean(tf.square(pred - y / (median + 0.5)))
    return _regression_case(1391, n, b, steps, loss_of, tf1.train.MomentumOptimizer(0.05 * lr_scale, 0.9))


def distinct_flagged_users(n, b, steps, graph_batch, lr_scale=1.0):
    """The flagged examples' summed error over the number of distinct users among them (tf.unique of a
    boolean_mask by a bool input), plus one; Adagrad."""
    rng = np.random.RandomState(1401)
    ids = rng.randint(0, 6, size=(n * b * steps,)).astype(np.int32)
    flags = rng.rand(n * b * steps) < 0.6
    y = np.cos(ids) + 0.1 * rng.randn(n * b * steps)
    g = tf.Graph()
    with g.as_default():
        idp, fp, yp = (tf1.placeholder(tf.int32, [None], "ids"), tf1.placeholder(tf.bool, [None], "flags"),
                       tf1.placeholder(F64, [None], "y"))
        emb = tf1.get_variable("embedding", [VOCAB, 3], F64, initializer=_init(1402))
        pred = tf.squeeze(_dense(tf.nn.embedding_lookup(emb, idp), 1, "out", 1403), 1)
        users = tf.cast(tf.size(tf.unique(tf.boolean_mask(idp, fp)).y), F64)
        loss = tf.reduce_sum(tf.square(pred - yp) * tf.cast(fp, F64)) / (users + 1.0)
        train = tf1.train.AdagradOptimizer(0.1 * lr_scale).minimize(loss, tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((ids, flags, y), (idp, fp, yp)))


def rank_normalized_inputs(n, b, steps, graph_batch, lr_scale=1.0):
    """Gauss-rank-like features: each input feature replaced by its rank over the batch, scaled to (0, 1)."""
    def ranked(x):
        return (tf.cast(tf.argsort(tf.argsort(x, axis=0), axis=0), F64) + 0.5) / tf.cast(tf.shape(x)[0], F64)
    return _regression_case(1411, n, b, steps, lambda pred, y: tf.reduce_mean(tf.square(pred - y)),
                            tf1.train.AdamOptimizer(0.05 * lr_scale), ranked)


def features_l2_normalized_over_batch(n, b, steps, graph_batch, lr_scale=1.0):
    """Hidden features l2-normalized over the batch's axis (tf.nn.l2_normalize(h, axis=0)), then a linear head."""
    x, y = _regression(1421, n, b, steps)
    g = tf.Graph()
    with g.as_default():
        xp, yp = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None], "y")
        h = tf.nn.l2_normalize(_dense(xp, 4, "hidden", 1422, tf.nn.tanh), axis=0)
        pred = tf.squeeze(_dense(h, 1, "out", 1423), 1)
        loss = tf.reduce_mean(tf.square(pred - yp))
        train = tf1.train.GradientDescentOptimizer(0.5 * lr_scale).minimize(loss, tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, y), (xp, yp)))


def losses_sum_by_nonzero_weights(n, b, steps, graph_batch, lr_scale=1.0):
    """tf.compat.v1.losses.huber_loss with 0/1 weights from the data, SUM_BY_NONZERO_WEIGHTS."""
    x, y = _regression(1431, n, b, steps)
    wts = (np.random.RandomState(1432).rand(len(y)) < 0.7).astype(np.float64)
    g = tf.Graph()
    with g.as_default():
        xp, yp, pred = _regression_head(1433)
        wp = tf1.placeholder(F64, [None], "w")
        loss = tf1.losses.huber_loss(yp, pred, weights=wp, delta=0.5,
                                     reduction=tf1.losses.Reduction.SUM_BY_NONZERO_WEIGHTS)
        train = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(loss, tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, y, wts), (xp, yp, wp)))


def inputs_standardized_in_v1_cond(n, b, steps, graph_batch, lr_scale=1.0):
    """The same with v1 control flow (tf.compat.v1.disable_v2_behavior's)."""
    tf1.disable_control_flow_v2()
    return inputs_standardized_in_cond(n, b, steps, graph_batch, lr_scale)


def inputs_standardized_in_cond(n, b, steps, graph_batch, lr_scale=1.0):
    """Inputs standardized by the batch's moments inside a tf.cond on a fed `training` flag (default True)."""
    def standardized(x):
        def by_the_batch():
            mean, var = tf.nn.moments(x, [0])
            return (x - mean) / tf.sqrt(var + 1e-3)
        return tf.cond(tf1.placeholder_with_default(True, [], "training"), by_the_batch, lambda: x)
    return _regression_case(1441, n, b, steps, lambda pred, y: tf.reduce_mean(tf.square(pred - y)),
                            tf1.train.AdamOptimizer(0.05 * lr_scale), standardized)


def loss_over_batch_std_of_targets(n, b, steps, graph_batch, lr_scale=1.0):
    """Targets' standard deviation over the batch (tf.math.reduce_std) scales the loss."""
    def loss_of(pred, y):
        return tf.reduce_mean(tf.square(pred - y)) / (tf.math.reduce_std(y) + 0.1)
    return _regression_case(1451, n, b, steps, loss_of, tf1.train.MomentumOptimizer(0.05 * lr_scale, 0.9))


def static_batch_summed(n, b, steps, graph_batch, lr_scale=1.0):
    """Placeholders with the batch's size written in ([graph_batch, 3]); a summed squared error."""
    x, y = _regression(1501, n, b, steps)
    g = tf.Graph()
    with g.as_default():
        xp, yp = tf1.placeholder(F64, [graph_batch, 3], "x"), tf1.placeholder(F64, [graph_batch], "y")
        pred = tf.squeeze(_dense(_dense(xp, 4, "hidden", 1502, tf.nn.tanh), 1, "out", 1503), 1)
        loss = tf.reduce_sum(tf.square(pred - yp))
        train = tf1.train.GradientDescentOptimizer(0.02 * lr_scale).minimize(
            loss, tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, y), (xp, yp)))


def static_batch_weighted_mean(n, b, steps, graph_batch, lr_scale=1.0):
    """The same with a static batch, a loss weighted by fed weights over their sum; and a reshape by the batch."""
    x, y = _regression(1511, n, b, steps)
    w = np.random.RandomState(1512).rand(len(y))
    g = tf.Graph()
    with g.as_default():
        xp, yp, wp = (tf1.placeholder(F64, [graph_batch, 3], "x"), tf1.placeholder(F64, [graph_batch], "y"),
                      tf1.placeholder(F64, [graph_batch], "w"))
        pred = tf.squeeze(_dense(_dense(xp, 4, "hidden", 1513, tf.nn.tanh), 1, "out", 1514), 1)
        loss = tf.reduce_sum(wp * tf.square(pred - yp)) / tf.reduce_sum(wp)
        train = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(loss, tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, y, w), (xp, yp, wp)))


def dropped_remainder_weighted_mean(n, b, steps, graph_batch, lr_scale=1.0):
    """A dataset batched with drop_remainder=True (a static batch dimension), sharded element-wise; weighted mean."""
    x, y = _regression(1531, n, b, steps)
    w = np.random.RandomState(1532).rand(len(y))
    g = tf.Graph()
    with g.as_default():
        ds = parallax.shard(tf.data.Dataset.from_tensor_slices((x, y, w))).batch(graph_batch, drop_remainder=True)
        xp, yp, wp = tf1.data.make_one_shot_iterator(ds).get_next()
        pred = tf.squeeze(_dense(_dense(xp, 4, "hidden", 1533, tf.nn.tanh), 1, "out", 1534), 1)
        loss = tf.reduce_sum(wp * tf.square(pred - yp)) / tf.reduce_sum(wp)
        train = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(loss, tf1.train.get_or_create_global_step())
    return Case(g, train, None)


def time_major_token_weighted(n, b, steps, graph_batch, lr_scale=1.0):
    """Batch-major inputs of varied lengths, transposed to time-major in the graph (as the NMT tutorial's model
    runs its decoder): each step's error masked by tf.sequence_mask of the lengths, summed over the token count.
    (Inputs fed time-major, [time, None], cannot be checked, and the warning says so: tests/rules/test_loss_law.py.)"""
    rng = np.random.RandomState(1541)
    x = rng.randn(n * b * steps, 5, 3)
    y = np.sin(x).sum(axis=2)
    lengths = rng.randint(1, 6, size=(n * b * steps,)).astype(np.int32)
    g = tf.Graph()
    with g.as_default():
        xp, yp = tf1.placeholder(F64, [None, 5, 3], "x"), tf1.placeholder(F64, [None, 5], "y")
        lp = tf1.placeholder(tf.int32, [None], "lengths")
        steps_first = tf.transpose(xp, [1, 0, 2])
        pred = tf.squeeze(_dense(_dense(steps_first, 4, "hidden", 1542, tf.nn.tanh), 1, "out", 1543), 2)
        mask = tf.transpose(tf.sequence_mask(lp, 5, dtype=F64))
        loss = tf.reduce_sum(tf.square(pred - tf.transpose(yp)) * mask) / tf.reduce_sum(mask)
        train = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(loss, tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, y, lengths), (xp, yp, lp)))

def fed_class_weights(n, b, steps, graph_batch, lr_scale=1.0, shared=False):
    """Class weights fed as a [3] placeholder, the same in every worker, looked up by each example's class; the
    mean weighted error. Not marked parallax.shared_input, the loss cannot be checked (it is exact, being a mean),
    and the warning names the placeholder and the mark."""
    x, y = _regression(1551, n, b, steps)
    labels = np.digitize(y, [-0.5, 1.0]).astype(np.int32)
    class_weights = np.array([0.5, 1.0, 2.0])
    g = tf.Graph()
    with g.as_default():
        xp, yp, pred = _regression_head(1552)
        lp, cwp = tf1.placeholder(tf.int32, [None], "labels"), tf1.placeholder(F64, [3], "class_weights")
        cwp = parallax.shared_input(cwp) if shared else cwp
        loss = tf.reduce_mean(tf.gather(cwp, lp) * tf.square(pred - yp))
        train = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(loss, tf1.train.get_or_create_global_step())

    def feeds(step, first, rows):
        return {xp: x[first:first + rows], yp: y[first:first + rows], lp: labels[first:first + rows],
                cwp: class_weights}
    return Case(g, train, feeds)


def fed_class_weights_shared(n, b, steps, graph_batch, lr_scale=1.0):
    """The same, the class weights marked parallax.shared_input: the loss is checked, and nothing is warned of."""
    return fed_class_weights(n, b, steps, graph_batch, lr_scale, shared=True)

def hardest_half_mined(n, b, steps, graph_batch, lr_scale=1.0):
    """Online hard example mining: the mean error of the batch's hardest half (top_k of half the batch)."""
    def loss_of(pred, y):
        errors = tf.square(pred - y)
        return tf.reduce_mean(tf.nn.top_k(errors, tf.shape(errors)[0] // 2).values)
    return _regression_case(1301, n, b, steps, loss_of, tf1.train.GradientDescentOptimizer(0.1 * lr_scale))


def median_error_loss(n, b, steps, graph_batch, lr_scale=1.0):
    """A robust loss: the batch's median squared error (the middle of a top_k over the whole batch)."""
    def loss_of(pred, y):
        errors = tf.square(pred - y)
        size = tf.size(errors)
        return tf.gather(tf.nn.top_k(errors, size).values, size // 2)
    return _regression_case(1351, n, b, steps, loss_of, tf1.train.GradientDescentOptimizer(0.1 * lr_scale))

def hardest_half_after_dropout(n, b, steps, graph_batch, lr_scale=1.0):
    """The hardest half of the batch's errors after dropout on them (a draw rule 6 splits, then the top_k)."""
    def loss_of(pred, y):
        errors = tf1.nn.dropout(tf.square(pred - y), rate=0.3, seed=7)
        return tf.reduce_mean(tf.nn.top_k(errors, tf.shape(errors)[0] // 2).values)
    return _regression_case(1561, n, b, steps, loss_of, tf1.train.AdamOptimizer(0.05 * lr_scale))


def nt_xent_two_views(n, b, steps, graph_batch, lr_scale=1.0):
    """SimCLR's NT-Xent: two views of each example (two towers), stacked along the batch (2b rows), normalized,
    every row scored against every other (itself masked out), the positive the other view of its example."""
    rng = np.random.RandomState(1571)
    first, second = rng.randn(n * b * steps, 3), rng.randn(n * b * steps, 3)
    second = 0.5 * first + second
    g = tf.Graph()
    with g.as_default():
        fp, sp = tf1.placeholder(F64, [None, 3], "view_1"), tf1.placeholder(F64, [None, 3], "view_2")
        z = tf.math.l2_normalize(tf.concat([_dense(fp, 4, "tower_1", 1572, tf.nn.tanh),
                                            _dense(sp, 4, "tower_2", 1573, tf.nn.tanh)], 0), axis=1)
        logits = tf.matmul(z, z, transpose_b=True) / 0.5 - 1e9 * tf.eye(tf.shape(z)[0], dtype=F64)
        size = tf.shape(fp)[0]
        labels = tf.concat([tf.range(size, 2 * size), tf.range(0, size)], 0)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        train = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(loss, tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((first, second), (fp, sp)))


USER_GRAPHS_BATCHWISE = {f.__name__: f for f in (activity_mean_penalty, loss_over_distinct_ids,
                                                 rank_weighted_errors, predictions_over_batch_max,
                                                 centered_predictions, time_major_sequences,
                                                 distinct_ids_tracked_sharded, targets_over_batch_median,
                                                 distinct_flagged_users, rank_normalized_inputs,
                                                 features_l2_normalized_over_batch, losses_sum_by_nonzero_weights,
                                                 inputs_standardized_in_v1_cond, loss_over_batch_std_of_targets,
                                                 static_batch_summed, static_batch_weighted_mean,
                                                 dropped_remainder_weighted_mean, time_major_token_weighted,
                                                 fed_class_weights, fed_class_weights_shared,
                                                 hardest_half_mined, hardest_half_after_dropout, nt_xent_two_views)}
# Not registered: median_error_loss (listed by the last check, with the job's warning).
# Not registered: inputs_standardized_in_cond (v2 control flow: the moments inside the cond's functions, which no
# rule looks inside; listed with the way out, tests/rules/test_gradient_check.py).


def activity_mean_over_merged_batch(n, b, steps, graph_batch, lr_scale=1.0):
    """A penalty on the mean of per-step hidden states [b, 4, 5] taken over the batch merged with the steps
    (`reduce_mean(reshape(h, [-1, 5]), 0)`): 4 rows an example, a statistic of the batch all the same (issue 57,
    item 2: each worker's own mean before, listed)."""
    rng = np.random.RandomState(1380)
    x, y = rng.randn(n * b * steps, 4, 3), rng.randn(n * b * steps, 1)
    g = tf.Graph()
    with g.as_default():
        xp, yp = tf1.placeholder(F64, [None, 4, 3], "x"), tf1.placeholder(F64, [None, 1], "y")
        w = tf1.get_variable("w", [3, 5], F64, initializer=_init(1381))
        h = tf.tanh(tf.einsum("btk,kj->btj", xp, w))
        pred = _dense(tf.reduce_mean(h, 1), 1, "out", 1382)
        penalty = tf.reduce_sum(tf.square(tf.reduce_mean(tf.reshape(h, [-1, 5]), 0)))
        train = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(tf.reduce_mean(tf.square(pred - yp)) + penalty,
                                                                  tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, y), (xp, yp)))


USER_GRAPHS_BATCHWISE["activity_mean_over_merged_batch"] = activity_mean_over_merged_batch
