"""Training-script idioms written without looking at parallax's rules: weight decay applied by hand after the
optimizer, a learning rate from a counter of the script's own, Huber loss with centered RMSProp, a two-tower model
whose looked-up rows carry an L2 penalty, weighted sparse lookups built from a mask, each gradient clipped by its
own norm, tf.compat.v1.losses' total of a mean, a sum and a penalty, tables made by tf.concat (a constant padding
row, two variables), inputs centred by a running mean kept by hand, a soft maximum of the batch's errors, and a
lazy Adam written by hand (moments gathered and scattered at the gradient's ids). The row penalty and the total
loss (a mean beside a sum over the batch) were not exact before loss_terms.py scaled mean terms: max abs diff 7e-4
and 8e-3, listed by rule 8; the others were exact when added. Same conventions as cases.py."""
import numpy as np
import tensorflow as tf

import parallax

from tests.equivalence.cases import F64, Case, _dense, _init, _rows
from tests.equivalence.user_graphs_more import VOCAB, _embedding_regression, _ids_and_targets

tf1 = tf.compat.v1


def decoupled_weight_decay(n, b, steps, graph_batch, lr_scale=1.0):
    """Adam, then (after it) every trainable variable shrunk by (1 - 0.01): AdamW written by hand, the embedding
    decayed whole."""
    ids, y = _ids_and_targets(300, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        idp, yp, emb, head, loss = _embedding_regression(301)
        adam = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(loss,
                                                                 global_step=tf1.train.get_or_create_global_step())
        with tf.control_dependencies([adam]):
            decay = [v.assign(v * (1 - 0.01)) for v in tf1.trainable_variables()]
        train = tf.group(*decay, name="train")
    return Case(g, train, _rows((ids, y), (idp, yp)))


def own_counter_learning_rate(n, b, steps, graph_batch, lr_scale=1.0):
    """The script's own step counter (a non-trainable variable, not the global step) sets Momentum's learning
    rate, 0.2 / sqrt(1 + count), and is incremented after each update."""
    ids, y = _ids_and_targets(310, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        idp, yp, emb, head, loss = _embedding_regression(311)
        count = tf1.get_variable("my_counter", [], F64, initializer=tf1.zeros_initializer(), trainable=False)
        lr = 0.2 * lr_scale / tf.sqrt(1.0 + count)
        update = tf1.train.MomentumOptimizer(lr, 0.9).minimize(loss, tf1.train.get_or_create_global_step())
        with tf.control_dependencies([update]):
            train = tf.group(count.assign_add(1.0), name="train")
    return Case(g, train, _rows((ids, y), (idp, yp)))


def huber_centered_rmsprop(n, b, steps, graph_batch, lr_scale=1.0):
    """tf.compat.v1.losses.huber_loss (its default reduction: the mean over nonzero weights), centered RMSProp
    with momentum for every variable, the embedding too."""
    ids, y = _ids_and_targets(320, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        idp, yp = tf1.placeholder(tf.int32, [None, 3], "ids"), tf1.placeholder(F64, [None, 1], "y")
        emb = tf1.get_variable("embedding", [VOCAB, 4], F64, initializer=_init(321))
        h = tf.nn.relu(tf.reduce_mean(tf.nn.embedding_lookup(emb, idp), axis=1))
        pred = _dense(h, 1, "head", 322)
        loss = tf1.losses.huber_loss(yp, pred, delta=0.5)
        opt = tf1.train.RMSPropOptimizer(0.02 * lr_scale, momentum=0.5, centered=True)
        train = opt.minimize(loss, global_step=tf1.train.get_or_create_global_step(), name="train")
    return Case(g, train, _rows((ids, y), (idp, yp)))


def two_tower_row_penalty(n, b, steps, graph_batch, lr_scale=1.0):
    """User and item embeddings, a dot product, sigmoid cross entropy averaged over the batch, plus 1e-3 times
    tf.nn.l2_loss of the looked-up rows (a sum over the batch's rows); Adagrad."""
    rng = np.random.RandomState(330)
    users = rng.randint(0, VOCAB, size=(n * b * steps, 1)).astype(np.int32)
    items = rng.randint(0, VOCAB, size=(n * b * steps, 1)).astype(np.int32)
    y = ((users + items) % 3 == 0).astype(np.float64)
    g = tf.Graph()
    with g.as_default():
        up, ip = tf1.placeholder(tf.int32, [None, 1], "users"), tf1.placeholder(tf.int32, [None, 1], "items")
        yp = tf1.placeholder(F64, [None, 1], "y")
        user_emb = tf1.get_variable("user_embedding", [VOCAB, 4], F64, initializer=_init(331))
        item_emb = tf1.get_variable("item_embedding", [VOCAB, 4], F64, initializer=_init(332))
        u = tf.reshape(tf.nn.embedding_lookup(user_emb, up), [-1, 4])
        v = tf.reshape(tf.nn.embedding_lookup(item_emb, ip), [-1, 4])
        logits = tf.reduce_sum(u * v, axis=1, keepdims=True)
        loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=yp, logits=logits)) + \
            1e-3 * (tf.nn.l2_loss(u) + tf.nn.l2_loss(v))
        train = tf1.train.AdagradOptimizer(0.3 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step(), name="train")
    return Case(g, train, _rows((users, items, y), (up, ip, yp)))


def masked_weighted_sparse_lookup(n, b, steps, graph_batch, lr_scale=1.0):
    """Ids padded with -1 and per-id weights turned into SparseTensors by tf.where on the mask, then
    tf.nn.embedding_lookup_sparse with weights and combiner='sqrtn'; SGD with a dense head."""
    rng = np.random.RandomState(340)
    rows = n * b * steps
    ids = rng.randint(0, VOCAB, size=(rows, 4)).astype(np.int64)
    ids[rng.rand(rows, 4) < 0.3] = -1
    ids[:, 0] = np.abs(ids[:, 0])
    weights = rng.rand(rows, 4) + 0.5
    y = np.sin(np.where(ids >= 0, ids, 0)).sum(axis=1, keepdims=True)
    g = tf.Graph()
    with g.as_default():
        idp, wp = tf1.placeholder(tf.int64, [None, 4], "ids"), tf1.placeholder(F64, [None, 4], "weights")
        yp = tf1.placeholder(F64, [None, 1], "y")
        where = tf.where(idp >= 0)
        shape = tf.shape(idp, out_type=tf.int64)
        sp_ids = tf.SparseTensor(where, tf.gather_nd(idp, where), shape)
        sp_weights = tf.SparseTensor(where, tf.gather_nd(wp, where), shape)
        emb = tf1.get_variable("embedding", [VOCAB, 4], F64, initializer=_init(341))
        h = tf.nn.embedding_lookup_sparse(emb, sp_ids, sp_weights, combiner="sqrtn")
        loss = tf.reduce_mean(tf.square(_dense(tf.tanh(h), 1, "head", 342) - yp))
        train = tf1.train.GradientDescentOptimizer(0.3 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step(), name="train")
    return Case(g, train, _rows((ids, weights, y), (idp, wp, yp)))


def clip_each_by_norm(n, b, steps, graph_batch, lr_scale=1.0):
    """Every gradient clipped by its own norm (an IndexedSlices' by its values' norm) before Adagrad."""
    ids, y = _ids_and_targets(350, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        idp, yp, emb, head, loss = _embedding_regression(351)
        opt = tf1.train.AdagradOptimizer(0.2 * lr_scale)
        clipped = []
        for grad, var in opt.compute_gradients(loss):
            if isinstance(grad, tf.IndexedSlices):
                grad = tf.IndexedSlices(tf.clip_by_norm(grad.values, 0.05), grad.indices, grad.dense_shape)
            else:
                grad = tf.clip_by_norm(grad, 0.05)
            clipped.append((grad, var))
        train = opt.apply_gradients(clipped, global_step=tf1.train.get_or_create_global_step(), name="train")
    return Case(g, train, _rows((ids, y), (idp, yp)))


def total_loss_of_three_kinds(n, b, steps, graph_batch, lr_scale=1.0):
    """tf.compat.v1.losses.get_total_loss over a mean squared error, an added loss that sums the batch's
    absolute errors, and a layer's kernel regularizer; two optimizers each incrementing the global step (it
    advances by 2 a step)."""
    ids, y = _ids_and_targets(360, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        idp, yp = tf1.placeholder(tf.int32, [None, 3], "ids"), tf1.placeholder(F64, [None, 1], "y")
        emb = tf1.get_variable("embedding", [VOCAB, 4], F64, initializer=_init(361))
        h = tf.tanh(tf.reduce_sum(tf.nn.embedding_lookup(emb, idp), axis=1))
        pred = tf1.layers.dense(h, 1, name="head", kernel_initializer=_init(362),
                                kernel_regularizer=lambda w: tf.cast(0.01 * tf.reduce_sum(tf.square(w)), tf.float32))
        tf1.losses.mean_squared_error(yp, pred)  # in float32, as tf.compat.v1.losses computes
        tf1.losses.add_loss(tf.cast(0.02 * tf.reduce_sum(tf.abs(pred - yp)), tf.float32))
        loss = tf1.losses.get_total_loss()
        step = tf1.train.get_or_create_global_step()
        head = tf1.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES, "head")
        train = tf.group(tf1.train.AdagradOptimizer(0.2 * lr_scale).minimize(loss, step, var_list=[emb]),
                         tf1.train.GradientDescentOptimizer(0.1 * lr_scale).minimize(loss, step, var_list=head),
                         name="train")
    return Case(g, train, _rows((ids, y), (idp, yp)), float32=True)


def padding_row_concat(n, b, steps, graph_batch, lr_scale=1.0):
    """A padding id 0 looked up in a table made of a constant zero row and the trained rows (tf.concat), and a
    second table looked up through the concatenation of two variables; Adam on both."""
    rng = np.random.RandomState(370)
    ids = rng.randint(0, VOCAB + 1, size=(n * b * steps, 4)).astype(np.int32)  # 0: padding
    y = np.cos(ids).sum(axis=1, keepdims=True)
    g = tf.Graph()
    with g.as_default():
        idp, yp = tf1.placeholder(tf.int32, [None, 4], "ids"), tf1.placeholder(F64, [None, 1], "y")
        words = tf1.get_variable("words", [VOCAB, 4], F64, initializer=_init(371))
        table = tf.concat([tf.zeros([1, 4], F64), words], 0)
        common = tf1.get_variable("common", [VOCAB // 2, 2], F64, initializer=_init(372))
        rare = tf1.get_variable("rare", [VOCAB - VOCAB // 2 + 1, 2], F64, initializer=_init(373))
        both = tf.concat([common, rare], 0)
        h = tf.concat([tf.reduce_sum(tf.nn.embedding_lookup(table, idp), 1),
                       tf.reduce_mean(tf.nn.embedding_lookup(both, idp), 1)], 1)
        loss = tf.reduce_mean(tf.square(_dense(tf.tanh(h), 1, "head", 374) - yp))
        train = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step(), name="train")
    return Case(g, train, _rows((ids, y), (idp, yp)))


def running_input_mean(n, b, steps, graph_batch, lr_scale=1.0):
    """Inputs centred by a running mean of the batches' features kept by hand (a non-trainable variable moved
    toward each batch's mean, after the update), the model reading the running mean."""
    rng = np.random.RandomState(380)
    x = rng.randn(n * b * steps, 3) * 2.0 + 1.0
    y = np.sin(x).sum(axis=1, keepdims=True)
    g = tf.Graph()
    with g.as_default():
        xp, yp = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None, 1], "y")
        running = tf1.get_variable("running_mean", [3], F64, initializer=tf1.zeros_initializer(), trainable=False)
        pred = _dense(tf.tanh(_dense(xp - running, 5, "hidden", 381)), 1, "out", 382)
        loss = tf.reduce_mean(tf.square(pred - yp))
        update = tf1.train.GradientDescentOptimizer(0.1 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
        with tf.control_dependencies([update]):
            train = tf.group(running.assign(0.8 * running + 0.2 * tf.reduce_mean(xp, 0)), name="train")
    return Case(g, train, _rows((x, y), (xp, yp)))


def log_sum_exp_of_errors(n, b, steps, graph_batch, lr_scale=1.0):
    """A soft maximum of the batch's squared errors (tf.reduce_logsumexp over the batch: its maximum, and a sum of
    exponentials shifted by it), beside a mean; Adam."""
    rng = np.random.RandomState(390)
    x = rng.randn(n * b * steps, 3)
    y = np.sin(x).sum(axis=1, keepdims=True)
    g = tf.Graph()
    with g.as_default():
        xp, yp = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None, 1], "y")
        errors = tf.square(_dense(tf.tanh(_dense(xp, 5, "hidden", 391)), 1, "out", 392) - yp)
        loss = tf.reduce_mean(errors) + 0.1 * tf.reduce_logsumexp(errors)
        train = tf1.train.AdamOptimizer(0.02 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step(), name="train")
    return Case(g, train, _rows((x, y), (xp, yp)))


def lazy_adam_by_hand(n, b, steps, graph_batch, lr_scale=1.0):
    """Lazy Adam written by hand for the embedding (tf.contrib's LazyAdamOptimizer is gone): the gradient's rows
    summed per id (tf.unique, unsorted_segment_sum), the moments gathered, updated and scattered back at those ids
    only, the rows moved by scatter_sub; tf1's Adam for the head."""
    ids, y = _ids_and_targets(400, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        idp, yp, emb, head, loss = _embedding_regression(401)
        m = tf1.get_variable("embedding_m", [VOCAB, 4], F64, initializer=tf1.zeros_initializer(), trainable=False)
        v = tf1.get_variable("embedding_v", [VOCAB, 4], F64, initializer=tf1.zeros_initializer(), trainable=False)
        grad_emb, grad_head = tf.gradients(loss, [emb, head])
        rows, index = tf.unique(grad_emb.indices)
        summed = tf.math.unsorted_segment_sum(grad_emb.values, index, tf.shape(rows)[0])
        m_rows = 0.9 * tf.gather(m, rows) + 0.1 * summed
        v_rows = 0.999 * tf.gather(v, rows) + 0.001 * tf.square(summed)
        step = tf1.train.get_or_create_global_step()
        t = tf.cast(step, F64) + 1.0
        beta1, beta2 = tf.constant(0.9, F64), tf.constant(0.999, F64)
        lr = 0.05 * lr_scale * tf.sqrt(1.0 - tf.pow(beta2, t)) / (1.0 - tf.pow(beta1, t))
        moved = tf1.scatter_sub(emb, rows, lr * m_rows / (tf.sqrt(v_rows) + 1e-8))
        with tf.control_dependencies([moved]):
            kept = tf.group(tf1.scatter_update(m, rows, m_rows), tf1.scatter_update(v, rows, v_rows))
        head_step = tf1.train.AdamOptimizer(0.05 * lr_scale).apply_gradients([(grad_head, head)])
        with tf.control_dependencies([kept, head_step]):
            train = tf.group(step.assign_add(1), name="train")
    return Case(g, train, _rows((ids, y), (idp, yp)))


def summed_with_keep_probability(n, b, steps, graph_batch, lr_scale=1.0):
    """A summed loss over a hidden layer dropped out with a keep probability fed as a placeholder of no shape (the
    TF1 tutorials' `keep_prob`), under a graph seed. Before batch_samples.py fed such settings, the loss could not
    be run on random batches, was taken for a mean and averaged, with no warning: max abs diff 0.13."""
    rng = np.random.RandomState(410)
    x = rng.randn(n * b * steps, 3)
    y = np.sin(x).sum(axis=1, keepdims=True)
    g = tf.Graph()
    g.seed = 11
    with g.as_default():
        xp, yp = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None, 1], "y")
        keep = tf1.placeholder(F64, name="keep_prob")
        hidden = tf1.nn.dropout(_dense(xp, 6, "hidden", 411, tf.tanh), keep_prob=keep)
        loss = tf.reduce_sum(tf.square(_dense(hidden, 1, "out", 412) - yp))
        train = tf1.train.GradientDescentOptimizer(0.01 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step(), name="train")
    rows = _rows((x, y), (xp, yp))
    return Case(g, train, lambda step, first, count: {**rows(step, first, count), keep: 0.8})


def shared_candidate_pool(n, b, steps, graph_batch, lr_scale=1.0):
    """Each example's query scored against a pool of 6 candidates fed alike in every worker (each step its own
    pool), marked by parallax.shared_input; a softmax cross entropy over the pool, a mean; Adam. Unmarked, the
    planner takes the pool's rows for examples and warns that the logits pair the batch's examples."""
    rng = np.random.RandomState(420)
    x = rng.randn(n * b * steps, 3)
    label = rng.randint(0, 6, size=n * b * steps).astype(np.int32)
    pools = rng.randn(steps, 6, 4)
    g = tf.Graph()
    with g.as_default():
        xp, lp = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(tf.int32, [None], "label")
        pool = parallax.shared_input(tf1.placeholder(F64, [None, 4], "candidate_pool"))
        logits = tf.matmul(_dense(xp, 4, "query", 421, tf.tanh), _dense(pool, 4, "candidate", 422),
                           transpose_b=True)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=lp, logits=logits))
        train = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step(), name="train")
    rows = _rows((x, label), (xp, lp))
    return Case(g, train, lambda step, first, count: {**rows(step, first, count), pool: pools[step % steps]})


USER_GRAPHS_PROBE = {f.__name__: f for f in (
    decoupled_weight_decay, own_counter_learning_rate, huber_centered_rmsprop, two_tower_row_penalty,
    masked_weighted_sparse_lookup, clip_each_by_norm, total_loss_of_three_kinds, padding_row_concat,
    running_input_mean, log_sum_exp_of_errors, lazy_adam_by_hand, summed_with_keep_probability,
    shared_candidate_pool)}
