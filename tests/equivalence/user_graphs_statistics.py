"""Training graphs that compute with statistics of the batch (batch_statistics.py, fused_batch_norm.py), on data
whose workers' batches differ (unlike cases.batch_norm, whose data is built so that they agree): batch
normalization as tf.nn.moments computes it (float64) and as the fused kernel of tf1.layers.batch_normalization on
images computes it (float32); layer normalization, whose statistics are over features (nothing to combine); a loss
that is a nonlinear function of means over the batch; a learning rate computed from the batch; and means over the
examples a mask keeps, whose number the data (or the model's own predictions) set (counts_by_values.py). Same
conventions as cases.py.
"""
import contextlib

import numpy as np
import tensorflow as tf

from tests.equivalence.cases import F64, Case, _dense, _init, _rows

tf1 = tf.compat.v1


def batch_norm_moments(n, b, steps, graph_batch, lr_scale=1.0, tape=False):
    """Two hidden layers normalized by their batch's mean and variance (tf.nn.moments, then tf.nn.batch_normalization
    with trained scale and offset), moving statistics updated by assign ops in UPDATE_OPS, Momentum. With `tape`, the
    gradients come from a tf.GradientTape, as Keras takes them: ungated, each offset's gradient is the very tensor
    the backward pass carries on to the mean (the gradient of `beta - m` is (g, -g))."""
    x, y = _moments_data(n * b * steps)
    g = tf.Graph()
    with g.as_default():
        xp, yp = tf1.placeholder(F64, [None, 4], "x"), tf1.placeholder(F64, [None, 1], "y")
        with tf.GradientTape() if tape else contextlib.nullcontext() as recorded:
            loss = _normalized_regression(xp, yp)
        optimizer = tf1.train.MomentumOptimizer(0.05 * lr_scale, 0.9)
        step = tf1.train.get_or_create_global_step()
        with tf.control_dependencies(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)):
            if tape:
                variables = tf1.trainable_variables()
                train = optimizer.apply_gradients(zip(recorded.gradient(loss, variables), variables), step)
            else:
                train = optimizer.minimize(loss, global_step=step)
    return Case(g, train, _rows((x, y), (xp, yp)))


def _moments_data(rows):
    rng = np.random.RandomState(21)
    x = rng.randn(rows, 4) * rng.uniform(0.5, 3.0, size=(rows, 1)) + rng.randn(4)
    return x, np.sin(x).sum(axis=1, keepdims=True)


def _normalized_regression(xp, yp):
    h = xp
    for k in range(2):
        h = _dense(h, 6, f"hidden{k}", 30 + k)
        mean, variance = tf.nn.moments(h, axes=[0])
        with tf1.variable_scope(f"bn{k}"):
            gamma = tf1.get_variable("gamma", [6], F64, initializer=tf1.ones_initializer())
            beta = tf1.get_variable("beta", [6], F64, initializer=tf1.zeros_initializer())
            moving = [tf1.get_variable(name, [6], F64, initializer=init, trainable=False)
                      for name, init in (("moving_mean", tf1.zeros_initializer()),
                                         ("moving_variance", tf1.ones_initializer()))]
        for var, value in zip(moving, (mean, variance)):
            tf1.add_to_collection(tf1.GraphKeys.UPDATE_OPS, var.assign(0.9 * var + 0.1 * value))
        h = tf.nn.relu(tf.nn.batch_normalization(h, mean, variance, beta, gamma, 1e-3))
    return tf.reduce_mean(tf.square(_dense(h, 1, "out", 39) - yp))


def _images(seed, rows, size, reduce):
    """(images [rows, size, size, 2] at random scales, targets [rows, 1] = tanh(reduce(image)) summed, their
    float32 placeholders x and y)."""
    rng = np.random.RandomState(seed)
    x = (rng.randn(rows, size, size, 2) * rng.uniform(0.5, 2.0, size=(rows, 1, 1, 1))).astype(np.float32)
    y = np.tanh(reduce(x, axis=(1, 2))).sum(axis=1, keepdims=True).astype(np.float32)
    return x, y, tf1.placeholder(tf.float32, [None, size, size, 2], "x"), tf1.placeholder(tf.float32, [None, 1], "y")


def batch_norm_fused_conv(n, b, steps, graph_batch, lr_scale=1.0):
    """A convolution over 4x4 images (no bias: batch norm removes it, and its gradient is float noise that Adam
    scales up), then tf1.layers.batch_normalization in training mode (on 4-D input it runs
    TF's fused kernel, whose statistics are inside one op), float32, Adam."""
    g = tf.Graph()
    with g.as_default():
        x, y, xp, yp = _images(22, n * b * steps, 4, np.mean)
        h = tf1.layers.conv2d(xp, 3, 3, padding="same", use_bias=False, name="conv",
                              kernel_initializer=_init(40, tf.float32))
        h = tf.nn.relu(tf1.layers.batch_normalization(h, training=True, momentum=0.9, name="bn"))
        h = tf.reshape(h, [-1, 4 * 4 * 3])
        pred = tf1.layers.dense(h, 1, name="out", kernel_initializer=_init(41, tf.float32))
        loss = tf.reduce_mean(tf.square(pred - yp))
        with tf.control_dependencies(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)):
            train = tf1.train.AdamOptimizer(0.01 * lr_scale).minimize(
                loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, y), (xp, yp)), float32=True)


def keras_batch_norm(n, b, steps, graph_batch, lr_scale=1.0):
    """tf.keras.layers.BatchNormalization in a v1 graph on images (the fused kernel, its moving averages from the
    layer's own updates) and on features (moments), float32, SGD with momentum."""
    g = tf.Graph()
    with g.as_default():
        x, y, xp, yp = _images(26, n * b * steps, 3, np.sum)
        init = tf.keras.initializers.RandomUniform(-0.4, 0.4, seed=26)
        layers = [tf.keras.layers.BatchNormalization(momentum=0.8), tf.keras.layers.BatchNormalization(momentum=0.8)]
        h = tf.keras.layers.Conv2D(3, 2, padding="same", use_bias=False, kernel_initializer=init)(xp)
        h = tf.keras.layers.Flatten()(tf.nn.relu(layers[0](h, training=True)))
        h = tf.keras.layers.Dense(4, use_bias=False, kernel_initializer=init)(h)
        pred = tf.keras.layers.Dense(1, kernel_initializer=init)(tf.nn.relu(layers[1](h, training=True)))
        loss = tf.reduce_mean(tf.square(pred - yp))
        with tf.control_dependencies([u for layer in layers for u in layer.updates]):
            train = tf1.train.MomentumOptimizer(0.05 * lr_scale, 0.9).minimize(
                loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, y), (xp, yp)), float32=True)


def _features(seed, rows, width, target):
    """(features [rows, width] at random scales, targets [rows, 1] = target(features) summed, their float64
    placeholders x and y)."""
    rng = np.random.RandomState(seed)
    x = rng.randn(rows, width) * rng.uniform(0.5, 3.0, size=(rows, 1))
    y = target(x).sum(axis=1, keepdims=True)
    return x, y, tf1.placeholder(F64, [None, width], "x"), tf1.placeholder(F64, [None, 1], "y")


def layer_norm(n, b, steps, graph_batch, lr_scale=1.0):
    """Layer normalization (statistics over each example's features): nothing of the batch to combine."""
    g = tf.Graph()
    with g.as_default():
        x, y, xp, yp = _features(23, n * b * steps, 5, np.cos)
        h = _dense(xp, 6, "hidden", 42)
        mean, variance = tf.nn.moments(h, axes=[1], keepdims=True)
        h = tf.nn.relu((h - mean) * tf.math.rsqrt(variance + 1e-3))
        loss = tf.reduce_mean(tf.square(_dense(h, 1, "out", 43) - yp))
        train = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, y), (xp, yp)))


def root_mean_square_loss(n, b, steps, graph_batch, lr_scale=1.0):
    """The loss is the root of the batch's mean squared error, plus the batch's mean error squared: functions of
    means over the batch that are not themselves means over examples."""
    g = tf.Graph()
    with g.as_default():
        x, y, xp, yp = _features(24, n * b * steps, 4, np.sin)
        error = _dense(_dense(xp, 5, "hidden", 44, tf.tanh), 1, "out", 45) - yp
        loss = tf.sqrt(tf.reduce_mean(tf.square(error))) + tf.square(tf.reduce_mean(error))
        train = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, y), (xp, yp)))


def learning_rate_from_batch(n, b, steps, graph_batch, lr_scale=1.0):
    """The learning rate scales with the batch's total weight (a sum) and its largest input (a maximum): what the
    update reads is one device's value for the whole batch."""
    rng = np.random.RandomState(25)
    x = rng.randn(n * b * steps, 3) * rng.uniform(0.5, 3.0, size=(n * b * steps, 1))
    weights = rng.uniform(0.0, 1.0, size=(n * b * steps, 1))
    y = np.cos(x).sum(axis=1, keepdims=True)
    g = tf.Graph()
    with g.as_default():
        xp, wp = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None, 1], "weights")
        yp = tf1.placeholder(F64, [None, 1], "y")
        loss = tf.reduce_mean(wp * tf.square(_dense(xp, 1, "out", 46) - yp))
        rate = 0.01 * lr_scale * tf.reduce_sum(wp) / tf.reduce_max(tf.abs(xp))
        train = tf1.train.GradientDescentOptimizer(rate).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, weights, y), (xp, wp, yp)))


def counts_from_shapes(n, b, steps, graph_batch, lr_scale=1.0):
    """Statistics of the batch read from its shape: a learning rate scaled by the batch's size (tf.shape), a
    counter of examples seen and a streaming mean's total and count (tf.size), updated with the train op: what one
    device reads there is the whole batch's size."""
    g = tf.Graph()
    with g.as_default():
        x, y, xp, yp = _features(26, n * b * steps, 3, np.sin)
        error = _dense(xp, 1, "out", 47) - yp
        loss = tf.reduce_mean(tf.square(error))
        size = tf.cast(tf.shape(xp)[0], F64)
        counters = {name: tf1.get_variable(name, [], F64, initializer=tf1.zeros_initializer(), trainable=False)
                    for name in ("examples_seen", "error_total", "error_count")}
        updates = [counters["examples_seen"].assign_add(size),
                   counters["error_total"].assign_add(tf.reduce_sum(tf.abs(error))),
                   counters["error_count"].assign_add(tf.cast(tf.size(error), F64))]
        with tf.control_dependencies(updates):
            train = tf1.train.GradientDescentOptimizer(0.002 * lr_scale * size).minimize(
                loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, y), (xp, yp)))


def _masked_errors(seed, n, b, steps):
    """(features, targets, weights) whose weights are zero for about 40% of the examples, unevenly over the
    workers' batches, and their placeholders; and the squared errors of a small network on them."""
    rng = np.random.RandomState(seed)
    rows = n * b * steps
    x = rng.randn(rows, 3) * rng.uniform(0.5, 3.0, size=(rows, 1))
    weights = (rng.uniform(size=(rows, 1)) < np.linspace(0.2, 0.9, rows)[:, None]).astype(np.float64)
    y = np.cos(x).sum(axis=1, keepdims=True)
    xp, wp = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None, 1], "weights")
    yp = tf1.placeholder(F64, [None, 1], "y")
    error = tf.square(_dense(_dense(xp, 4, "hidden", 48, tf.tanh), 1, "out", 49) - yp)
    return (x, y, weights), (xp, yp, wp), error


def masked_mean_loss(n, b, steps, graph_batch, lr_scale=1.0):
    """The loss is the mean of the errors of the examples a boolean mask keeps: a mean over a number of elements
    the data sets, which differs between the workers' batches; a counter of the kept examples is updated with the
    train op."""
    g = tf.Graph()
    with g.as_default():
        data, places, error = _masked_errors(27, n, b, steps)
        kept = tf.boolean_mask(error, tf.reshape(places[2] > 0.5, [-1]))
        loss = tf.reduce_mean(kept)
        seen = tf1.get_variable("kept_seen", [], F64, initializer=tf1.zeros_initializer(), trainable=False)
        with tf.control_dependencies([seen.assign_add(tf.cast(tf.shape(kept)[0], F64))]):
            train = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(
                loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows(data, places))


def masked_sum_over_size(n, b, steps, graph_batch, lr_scale=1.0):
    """The hard examples' errors (those above a threshold, so the model's own predictions set their number) summed
    and divided by their number, read from their shape (tf.size)."""
    g = tf.Graph()
    with g.as_default():
        data, places, error = _masked_errors(28, n, b, steps)
        kept = tf.gather(error, tf.where(tf.reshape(error, [-1]) > 0.3)[:, 0])
        loss = tf.reduce_sum(kept) / tf.cast(tf.size(kept), F64)
        train = tf1.train.GradientDescentOptimizer(0.1 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows(data, places))


def summed_loss(n, b, steps, graph_batch, lr_scale=1.0):
    """The loss is a sum over the batch, not a mean: one device's gradient is the workers' sum, which parallax finds
    from the loss (Config's average_dense/average_sparse left at None). One optimizer is handed the per-example
    loss vector (tf.gradients sums it) for the embedding, the other its reduce_sum for the dense head."""
    rng = np.random.RandomState(30)
    rows = n * b * steps
    ids = rng.randint(0, 20, size=(rows, 2)).astype(np.int32)
    y = np.sin(ids).sum(axis=1, keepdims=True)
    g = tf.Graph()
    with g.as_default():
        idp, yp = tf1.placeholder(tf.int32, [None, 2], "ids"), tf1.placeholder(F64, [None, 1], "y")
        embedding = tf1.get_variable("embedding", [20, 3], F64, initializer=_init(51))
        head = _dense(tf.reduce_sum(tf.gather(embedding, idp), 1), 1, "head", 52)
        per_example = 0.02 * tf.square(head - yp)[:, 0]
        train = tf.group(
            tf1.train.GradientDescentOptimizer(0.1 * lr_scale).minimize(per_example, var_list=[embedding]),
            tf1.train.MomentumOptimizer(0.05 * lr_scale, 0.9).minimize(
                tf.reduce_sum(per_example), var_list=tf1.trainable_variables("head"),
                global_step=tf1.train.get_or_create_global_step()))
    return Case(g, train, _rows((ids, y), (idp, yp)))


def summed_dropout(n, b, steps, graph_batch, lr_scale=1.0):
    """A summed loss over a layer with dropout, default Config: the loss is found to be a sum with the draw split as
    the rewrite splits it (each part reads its examples' values of one device's draw), so gradients are summed."""
    rng = np.random.RandomState(76)
    x = rng.randn(n * b * steps, 5)
    y = rng.randn(n * b * steps, 1)
    g = tf.Graph()
    with g.as_default():
        xp, yp = tf1.placeholder(F64, [None, 5], "x"), tf1.placeholder(F64, [None, 1], "y")
        h = tf1.nn.dropout(_dense(xp, 6, "hidden", 77, tf.nn.relu), rate=0.4, seed=9)
        loss = tf.reduce_sum(tf.square(_dense(h, 1, "out", 78) - yp))
        train = tf1.train.GradientDescentOptimizer(0.01 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, y), (xp, yp)))


def summed_sampled_softmax(n, b, steps, graph_batch, lr_scale=1.0):
    """A language model's sampled softmax summed over the batch's words, default Config: every worker samples the
    classes one device samples (the same seeded sampler), so the loss is a sum of per-example terms, found with the
    sampler read as the rewrite makes it."""
    rng = np.random.RandomState(111)
    rows = n * b * steps
    x, labels = rng.randn(rows, 4).astype(np.float32), rng.randint(0, 30, size=(rows, 1)).astype(np.int64)
    g = tf.Graph()
    with g.as_default():
        xp, lp = tf1.placeholder(tf.float32, [None, 4], "x"), tf1.placeholder(tf.int64, [None, 1], "labels")
        weights = tf1.get_variable("softmax_w", [30, 3], tf.float32, initializer=_init(112, tf.float32))
        biases = tf1.get_variable("softmax_b", [30], tf.float32, initializer=_init(113, tf.float32))
        hidden = _dense(xp, 3, "hidden", 114, tf.tanh, tf.float32)
        per_word = tf.nn.sampled_softmax_loss(weights, biases, lp, hidden,  # float32: TF's sampler is
                                              num_sampled=6, num_classes=30, seed=7)
        train = tf1.train.AdagradOptimizer(0.1 * lr_scale).minimize(
            tf.reduce_sum(per_word), global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, labels), (xp, lp)), float32=True)


def summed_sampled_softmax_words(n, b, steps, graph_batch, lr_scale=1.0):
    """A language model's sampled softmax over the batch's words, the batch merged with the time steps (a reshape of
    [b, T] to [b*T]) as language models do, summed: the sampler's expected counts of the words' classes follow the
    merged axis, T rows per example, which the loss law reads as the rewrite makes each worker read them."""
    rng = np.random.RandomState(115)
    rows, steps_in_time = n * b * steps, 3
    x = rng.randn(rows, steps_in_time, 4).astype(np.float32)
    labels = rng.randint(0, 30, size=(rows, steps_in_time)).astype(np.int64)
    g = tf.Graph()
    with g.as_default():
        xp = tf1.placeholder(tf.float32, [None, steps_in_time, 4], "x")
        lp = tf1.placeholder(tf.int64, [None, steps_in_time], "labels")
        weights = tf1.get_variable("softmax_w", [30, 3], tf.float32, initializer=_init(116, tf.float32))
        biases = tf1.get_variable("softmax_b", [30], tf.float32, initializer=_init(117, tf.float32))
        hidden = _dense(tf.reshape(xp, [-1, 4]), 3, "hidden", 118, tf.tanh, tf.float32)
        per_word = tf.nn.sampled_softmax_loss(weights, biases, tf.reshape(lp, [-1, 1]), hidden,
                                              num_sampled=6, num_classes=30, seed=7)
        train = tf1.train.AdagradOptimizer(0.1 * lr_scale).minimize(
            tf.reduce_sum(per_word), global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, labels), (xp, lp)), float32=True)


def hashed_words(n, b, steps, graph_batch, lr_scale=1.0):
    """Words fed as strings, hashed into an embedding's rows (a recommendation model's categorical feature):
    dropout on the rows, and the loss centred by the batch's mean prediction. The batch is found through the
    string input too, so the dropout is split and the mean combined."""
    rng = np.random.RandomState(31)
    rows = n * b * steps
    words = np.array([f"w{k}" for k in rng.randint(0, 40, size=rows)], dtype=object)
    y = rng.randn(rows)
    g = tf.Graph()
    with g.as_default():
        wp, yp = tf1.placeholder(tf.string, [None], "words"), tf1.placeholder(F64, [None], "y")
        embedding = tf1.get_variable("embedding", [16, 3], F64, initializer=_init(53))
        hidden = tf1.nn.dropout(tf.gather(embedding, tf.strings.to_hash_bucket_fast(wp, 16)), rate=0.25, seed=7)
        out = _dense(hidden, 1, "out", 54)[:, 0]
        loss = tf.reduce_mean(tf.square(out - tf.reduce_mean(out) - yp))
        train = tf1.train.AdagradOptimizer(0.2 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((words, y), (wp, yp)))


USER_GRAPHS_STATISTICS = {
    "hashed_words": hashed_words,
    "summed_loss": summed_loss,
    "summed_dropout": summed_dropout,
    "summed_sampled_softmax": summed_sampled_softmax,
    "summed_sampled_softmax_words": summed_sampled_softmax_words,
    "masked_mean_loss": masked_mean_loss,
    "masked_sum_over_size": masked_sum_over_size,
    "learning_rate_from_batch": learning_rate_from_batch,
    "root_mean_square_loss": root_mean_square_loss,
    "batch_norm_moments": batch_norm_moments,
    "batch_norm_moments_tape": lambda n, b, steps, graph_batch, lr_scale=1.0: batch_norm_moments(
        n, b, steps, graph_batch, lr_scale, tape=True),
    "batch_norm_fused_conv": batch_norm_fused_conv,
    "layer_norm": layer_norm,
    "keras_batch_norm": keras_batch_norm,
    "counts_from_shapes": counts_from_shapes,
}
