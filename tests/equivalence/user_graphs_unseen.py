"""More graphs written as users write them, without a rule in mind: a Cox partial likelihood (the batch sorted in
the graph: its gradient left the sort's region as IndexedSlices, and the step failed; then the guard on its event
count hid its law on random batches, and the job took twice one device's step), WGAN's weight clipping, class
counts kept by scatter_add, example weights from a py_func, EMAs of tensors, a calibration term summed per id, and
DP-SGD's per-example gradients in a tf.map_fn (their records named outer tensors and the planner failed), Barlow
Twins, a KL weight annealed by the step, stateless noise seeded by the step, MAML's step (its inner seed was scaled
like a loss's: 0.017 off, silently), hand-added weight decay on a summed loss's gradients, FixMatch's two batch
sizes; and functions of a summed statistic not proportional to it, which read the workers' mean of the sum were
silently off (0.02 to 0.07): a positive weight from the batch's counts, tf.norm of the errors as the loss, a per-id
mean guarded by max(count, 1), a root of the summed squares over tf.size, a Laplace-smoothed rate of positives,
class weights from the batch's smoothed counts, a prototypical network's prototypes over guarded counts (0.15 off
before); a token loss over a guarded count and targets scaled by the batch's maximum were exact already.
Same conventions as cases.py."""
import numpy as np
import tensorflow as tf

from tests.equivalence.cases import F64, Case, _dense, _init, _rows
from tests.equivalence.user_graphs_more import VOCAB
from tests.equivalence.user_graphs_pairs import _regression

tf1 = tf.compat.v1


def _regression_head(seed, inputs=None):
    """(x and y placeholders, the prediction of a tanh layer of 4 and a linear output of `inputs`, x by default)."""
    xp, yp = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None], "y")
    h = _dense(xp if inputs is None else inputs(xp), 4, "hidden", seed, tf.nn.tanh)
    return xp, yp, tf.squeeze(_dense(h, 1, "out", seed + 1), 1)


def _per_id_head(seed, rows, target, width):
    """(ids of VOCAB, their targets target(id) plus noise, placeholders of both, the prediction of an embedding of
    `width` and a linear output, each id's count in the batch), built in the current graph."""
    rng = np.random.RandomState(seed)
    ids = rng.randint(0, VOCAB, size=(rows,)).astype(np.int32)
    y = target(ids) + 0.1 * rng.randn(rows)
    idp, yp = tf1.placeholder(tf.int32, [None], "ids"), tf1.placeholder(F64, [None], "y")
    emb = tf1.get_variable("embedding", [VOCAB, width], F64, initializer=_init(seed + 1))
    pred = tf.squeeze(_dense(tf.nn.embedding_lookup(emb, idp), 1, "out", seed + 2), 1)
    return ids, y, idp, yp, pred, tf.math.unsorted_segment_sum(tf.ones_like(yp), idp, VOCAB)


def cox_partial_likelihood(n, b, steps, graph_batch, lr_scale=1.0):
    """A survival model's Cox partial likelihood: the batch sorted by time in the graph (argsort), each event's
    risk against the log of the summed exp risk of everyone still at risk (a reverse cumulative logsumexp); Adam."""
    x, _ = _regression(1011, n, b, steps)
    rng = np.random.RandomState(1012)
    times = rng.permutation(n * b * steps).astype(np.float64) + rng.rand(n * b * steps)
    events = (rng.rand(n * b * steps) < 0.7).astype(np.float64)
    g = tf.Graph()
    with g.as_default():
        xp, tp, ep = (tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None], "time"),
                      tf1.placeholder(F64, [None], "event"))
        hidden = _dense(xp, 4, "hidden", 1013, tf.nn.tanh)
        # no bias on the risk: the likelihood does not change with it (its gradient is rounding, which Adam scales)
        risk = tf.squeeze(tf1.layers.dense(hidden, 1, use_bias=False, name="risk", kernel_initializer=_init(1014)), 1)
        order = tf.argsort(tp, direction="DESCENDING")
        r, e = tf.gather(risk, order), tf.gather(ep, order)
        at_risk = tf.math.cumulative_logsumexp(r)
        loss = -tf.reduce_sum(e * (r - at_risk)) / tf.maximum(tf.reduce_sum(e), 1.0)
        train = tf1.train.AdamOptimizer(0.05).minimize(loss, tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, times, events), (xp, tp, ep)))


def wgan_weight_clipping(n, b, steps, graph_batch, lr_scale=1.0):
    """The original WGAN critic step: RMSProp on the critic's loss over real and (fed) fake examples, then every
    critic weight clipped to [-0.05, 0.05] by assign, after the update."""
    x, _ = _regression(1021, n, b, steps)
    fake = np.random.RandomState(1022).randn(n * b * steps, 3)
    g = tf.Graph()
    with g.as_default():
        xp, fp = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None, 3], "fake")

        def critic(v):
            with tf1.variable_scope("critic", reuse=tf1.AUTO_REUSE):
                return _dense(_dense(v, 4, "h", 1023, tf.nn.relu), 1, "out", 1024)
        loss = tf.reduce_mean(critic(fp)) - tf.reduce_mean(critic(xp))
        step = tf1.train.get_or_create_global_step()
        update = tf1.train.RMSPropOptimizer(0.01).minimize(loss, step)
        with tf.control_dependencies([update]):
            train = tf.group(*[v.assign(tf.clip_by_value(v, -0.05, 0.05)) for v in tf1.trainable_variables("critic")],
                             name="train")
    return Case(g, train, _rows((x, fake), (xp, fp)))


def online_class_balance(n, b, steps, graph_batch, lr_scale=1.0):
    """Class counts kept in a variable (scatter_add of the batch's labels) before the loss, which weighs each
    example by the inverse of its class's count so far; Adagrad."""
    x, y = _regression(1031, n, b, steps)
    labels = np.digitize(y, [-1.0, 0.0, 1.0]).astype(np.int32)
    g = tf.Graph()
    with g.as_default():
        xp, lp = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(tf.int32, [None], "labels")
        counts = tf1.get_variable("class_counts", [4], F64, initializer=tf1.ones_initializer(), trainable=False)
        counted = tf1.scatter_add(counts, lp, tf.ones_like(lp, F64))
        logits = _dense(_dense(xp, 5, "hidden", 1032, tf.nn.tanh), 4, "logits", 1033)
        weights = 1.0 / tf.gather(counted, lp)
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=lp, logits=logits)
        loss = tf.reduce_sum(weights * ce) / tf.reduce_sum(weights)
        train = tf1.train.AdagradOptimizer(0.3).minimize(loss, tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, labels), (xp, lp)))


def py_func_example_weights(n, b, steps, graph_batch, lr_scale=1.0):
    """Each example's weight computed in Python (tf1.py_func, numpy) from its target; Momentum."""
    x, y = _regression(1041, n, b, steps)
    g = tf.Graph()
    with g.as_default():
        xp, yp, pred = _regression_head(1042)
        w = tf1.py_func(lambda t: (1.0 + np.abs(t)).astype(np.float64), [yp], F64, stateful=False)
        w.set_shape([None])
        loss = tf.reduce_sum(w * tf.square(pred - yp)) / tf.reduce_sum(w)
        train = tf1.train.MomentumOptimizer(0.05, 0.9).minimize(loss, tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, y), (xp, yp)))


def ema_of_loss_and_prediction(n, b, steps, graph_batch, lr_scale=1.0):
    """ExponentialMovingAverage.apply of tensors, not variables (the loss and the batch's mean prediction), after
    the update, and of the weights; SGD."""
    x, y = _regression(1051, n, b, steps)
    g = tf.Graph()
    with g.as_default():
        xp, yp, pred = _regression_head(1052)
        loss = tf.reduce_mean(tf.square(pred - yp))
        update = tf1.train.GradientDescentOptimizer(0.1).minimize(loss, tf1.train.get_or_create_global_step())
        ema = tf1.train.ExponentialMovingAverage(0.9)
        with tf.control_dependencies([update]):
            train = ema.apply([loss, tf.reduce_mean(pred)] + tf1.trainable_variables())
    return Case(g, train, _rows((x, y), (xp, yp)))


def grouped_calibration_loss(n, b, steps, graph_batch, lr_scale=1.0):
    """A calibration term per item id: predictions and targets summed per id over the batch (unsorted_segment_sum
    into the vocabulary), squared difference of the sums over each id's count (divide_no_nan: ids the batch lacks
    add 0); plus a mean-squared term; Adam."""
    g = tf.Graph()
    with g.as_default():
        ids, y, idp, yp, pred, count = _per_id_head(1061, n * b * steps, np.sin, 4)
        gap = tf.math.unsorted_segment_sum(pred - yp, idp, VOCAB)
        calibration = tf.reduce_sum(tf.math.divide_no_nan(tf.square(gap), count)) / tf.cast(tf.size(yp), F64)
        loss = tf.reduce_mean(tf.square(pred - yp)) + 0.5 * calibration
        train = tf1.train.AdamOptimizer(0.05).minimize(loss, tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((ids, y), (idp, yp)))


def dp_sgd_clipped_examples(n, b, steps, graph_batch, lr_scale=1.0, noise=0.3):
    """DP-SGD as scripts write it without TF Privacy: each example's gradient (tf.gradients in a tf.map_fn over
    the batch) clipped to a global norm of 1, their sum plus seeded Gaussian noise, over the batch's size, applied
    with apply_gradients; SGD."""
    x, y = _regression(1071, n, b, steps)
    g = tf.Graph()
    with g.as_default():
        xp, yp = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None], "y")

        def model(v):
            with tf1.variable_scope("model", reuse=tf1.AUTO_REUSE):
                return tf.squeeze(_dense(_dense(v, 4, "hidden", 1072, tf.nn.tanh), 1, "out", 1073), 1)
        model(xp)
        params = tf1.trainable_variables("model")

        def clipped(example):
            xi, yi = example
            grads = tf.gradients(tf.reduce_sum(tf.square(model(xi[None]) - yi)), params)
            return [gi * tf.minimum(tf.constant(1.0, F64), 1.0 / tf.linalg.global_norm(grads)) for gi in grads]
        per_example = tf.map_fn(clipped, (xp, yp), fn_output_signature=[F64] * len(params))
        size = tf.cast(tf.shape(xp)[0], F64)
        grads = [(tf.reduce_sum(c, 0) + tf.random.normal(tf.shape(v), stddev=noise, dtype=F64, seed=1074 + k)) / size
                 for k, (c, v) in enumerate(zip(per_example, params))]
        train = tf1.train.GradientDescentOptimizer(0.2).apply_gradients(
            zip(grads, params), tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, y), (xp, yp)))


def dp_sgd_without_noise(n, b, steps, graph_batch, lr_scale=1.0):
    """dp_sgd_clipped_examples with no noise: each example's clipped gradient, summed, over the batch's size."""
    return dp_sgd_clipped_examples(n, b, steps, graph_batch, lr_scale, noise=0.0)


def positive_weight_from_the_batch(n, b, steps, graph_batch, lr_scale=1.0):
    """Multi-label logistic loss weighting positives by the batch's ratio of negatives to positives
    (weighted_cross_entropy_with_logits), averaged; Adam."""
    x, y = _regression(1081, n, b, steps)
    labels = (np.stack([y, -y, x[:, 0]], axis=1) > 0.5).astype(np.float64)
    g = tf.Graph()
    with g.as_default():
        xp, lp = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None, 3], "labels")
        logits = _dense(_dense(xp, 5, "hidden", 1082, tf.nn.relu), 3, "logits", 1083)
        positives = tf.reduce_sum(lp, 0)
        ratio = (tf.cast(tf.shape(lp)[0], F64) - positives) / (positives + 1.0)
        loss = tf.reduce_mean(tf.nn.weighted_cross_entropy_with_logits(lp, logits, pos_weight=ratio))
        train = tf1.train.AdamOptimizer(0.05).minimize(loss, tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, labels), (xp, lp)))


def barlow_twins(n, b, steps, graph_batch, lr_scale=1.0):
    """Barlow Twins: two noisy views (fed) through one encoder, each standardized by the batch's mean and standard
    deviation per feature, their cross-correlation over the batch (z_a^T z_b / batch size) pushed to the identity
    (diagonal to 1, off-diagonal to 0, weighted 0.05); Adam."""
    x, _ = _regression(1091, n, b, steps)
    rng = np.random.RandomState(1092)
    view_a, view_b = x + 0.1 * rng.randn(*x.shape), x + 0.1 * rng.randn(*x.shape)
    g = tf.Graph()
    with g.as_default():
        ap, bp = tf1.placeholder(F64, [None, 3], "view_a"), tf1.placeholder(F64, [None, 3], "view_b")

        def encode(v):
            with tf1.variable_scope("encoder", reuse=tf1.AUTO_REUSE):
                z = _dense(_dense(v, 5, "h", 1093, tf.nn.tanh), 4, "z", 1094)
            mean, var = tf.nn.moments(z, [0])
            return (z - mean) / tf.sqrt(var + 1e-5)
        za, zb = encode(ap), encode(bp)
        c = tf.matmul(za, zb, transpose_a=True) / tf.cast(tf.shape(za)[0], F64)
        on = tf.reduce_sum(tf.square(1.0 - tf.linalg.diag_part(c)))
        off = tf.reduce_sum(tf.square(c)) - tf.reduce_sum(tf.square(tf.linalg.diag_part(c)))
        train = tf1.train.AdamOptimizer(0.02).minimize(on + 0.05 * off, tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((view_a, view_b), (ap, bp)))


def kl_annealed_by_step(n, b, steps, graph_batch, lr_scale=1.0):
    """A variational autoencoder whose KL weight grows with the global step (min(1, step / 4)), read in the graph
    before the step's increment; the noise of its sample from tf.random.normal under an op seed; RMSProp."""
    x, _ = _regression(1101, n, b, steps)
    g = tf.Graph()
    with g.as_default():
        xp = tf1.placeholder(F64, [None, 3], "x")
        step = tf1.train.get_or_create_global_step()
        beta = tf.minimum(tf.cast(step, F64) / 4.0, 1.0)
        h = _dense(xp, 5, "encoder", 1102, tf.nn.tanh)
        mu, log_var = _dense(h, 2, "mu", 1103), _dense(h, 2, "log_var", 1104)
        z = mu + tf.exp(0.5 * log_var) * tf.random.normal(tf.shape(mu), dtype=F64, seed=1105)
        recon = _dense(_dense(z, 5, "decoder", 1106, tf.nn.tanh), 3, "recon", 1107)
        kl = -0.5 * tf.reduce_sum(1 + log_var - tf.square(mu) - tf.exp(log_var), axis=1)
        loss = tf.reduce_mean(tf.reduce_sum(tf.square(recon - xp), axis=1) + beta * kl)
        train = tf1.train.RMSPropOptimizer(0.01).minimize(loss, step)
    return Case(g, train, _rows((x,), (xp,)))


def stateless_noise_augmentation(n, b, steps, graph_batch, lr_scale=1.0):
    """Inputs jittered with tf.random.stateless_normal seeded by the global step (reproducible noise, as TF2 code
    writes it), then a regression head; Momentum."""
    x, y = _regression(1111, n, b, steps)
    g = tf.Graph()
    with g.as_default():
        step = tf1.train.get_or_create_global_step()
        xp, yp, pred = _regression_head(1112, lambda v: v + 0.1 * tf.random.stateless_normal(
            tf.shape(v), seed=tf.stack([step, 7]), dtype=F64))
        loss = tf.reduce_mean(tf.square(pred - yp))
        train = tf1.train.MomentumOptimizer(0.05, 0.9).minimize(loss, step)
    return Case(g, train, _rows((x, y), (xp, yp)))


def maml_one_inner_step(n, b, steps, graph_batch, lr_scale=1.0):
    """A MAML-style step: the weights after one inner step of SGD on the batch's support loss (tf.gradients, second
    order kept) score the batch's query examples; the outer loss's gradient flows back through the inner step;
    Adam."""
    x, y = _regression(1121, n, b, steps)
    xq, yq = _regression(1122, n, b, steps)
    g = tf.Graph()
    with g.as_default():
        xp, yp = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None], "y")
        qp, qy = tf1.placeholder(F64, [None, 3], "query_x"), tf1.placeholder(F64, [None], "query_y")
        w = tf1.get_variable("w", [3, 4], F64, initializer=_init(1123))
        v = tf1.get_variable("v", [4, 1], F64, initializer=_init(1124))

        def predict(inputs, weights):
            return tf.squeeze(tf.matmul(tf.tanh(tf.matmul(inputs, weights[0])), weights[1]), 1)
        support = tf.reduce_mean(tf.square(predict(xp, (w, v)) - yp))
        adapted = [p - 0.1 * gp for p, gp in zip((w, v), tf.gradients(support, [w, v]))]
        query = tf.reduce_mean(tf.square(predict(qp, adapted) - qy))
        train = tf1.train.AdamOptimizer(0.02).minimize(query, tf1.train.get_or_create_global_step(), var_list=[w, v])
    return Case(g, train, _rows((x, y, xq, yq), (xp, yp, qp, qy)))


def summed_loss_with_decay_added_to_gradients(n, b, steps, graph_batch, lr_scale=1.0):
    """A summed loss whose gradients get weight decay added by hand (g + 0.01 * w) before apply_gradients;
    Momentum."""
    x, y = _regression(1131, n, b, steps)
    g = tf.Graph()
    with g.as_default():
        xp, yp, pred = _regression_head(1132)
        loss = tf.reduce_sum(tf.square(pred - yp))
        opt = tf1.train.MomentumOptimizer(0.01, 0.9)
        decayed = [(gv + 0.01 * v, v) for gv, v in opt.compute_gradients(loss)]
        train = opt.apply_gradients(decayed, tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, y), (xp, yp)))


def fixmatch_two_batch_sizes(n, b, steps, graph_batch, lr_scale=1.0):
    """FixMatch: a labeled batch and an unlabeled one twice its size, both per worker; pseudo-labels from the weak
    view (argmax, held), kept where the model is confident, a cross-entropy of the strong view against them
    averaged over the whole unlabeled batch, beside the labeled cross-entropy; Momentum."""
    x, y = _regression(1141, n, b, steps)
    labels = np.digitize(y, [-0.5, 0.5]).astype(np.int32)
    rng = np.random.RandomState(1142)
    u = rng.randn(2 * n * b * steps, 3)
    weak, strong = u + 0.05 * rng.randn(*u.shape), u + 0.3 * rng.randn(*u.shape)
    g = tf.Graph()
    with g.as_default():
        xp, lp = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(tf.int32, [None], "labels")
        wp, sp = tf1.placeholder(F64, [None, 3], "weak"), tf1.placeholder(F64, [None, 3], "strong")

        def logits(v):
            with tf1.variable_scope("classifier", reuse=tf1.AUTO_REUSE):
                return _dense(_dense(v, 6, "h", 1143, tf.nn.relu), 3, "out", 1144)
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits
        supervised = tf.reduce_mean(ce(labels=lp, logits=logits(xp)))
        probs = tf.stop_gradient(tf.nn.softmax(logits(wp)))
        confident = tf.cast(tf.reduce_max(probs, 1) > 0.4, F64)
        pseudo = tf.cast(tf.argmax(probs, 1), tf.int32)
        unsupervised = tf.reduce_mean(confident * ce(labels=pseudo, logits=logits(sp)))
        train = tf1.train.MomentumOptimizer(0.05, 0.9).minimize(supervised + unsupervised,
                                                                 tf1.train.get_or_create_global_step())

    def feeds(step, first, rows):
        return {xp: x[first:first + rows], lp: labels[first:first + rows],
                wp: weak[2 * first:2 * (first + rows)], sp: strong[2 * first:2 * (first + rows)]}
    return Case(g, train, feeds)


def norm_of_errors_loss(n, b, steps, graph_batch, lr_scale=1.0):
    """The loss as tf.norm of the batch's errors (the root of their summed squares); SGD."""
    x, y = _regression(1151, n, b, steps)
    g = tf.Graph()
    with g.as_default():
        xp, yp, pred = _regression_head(1152)
        train = tf1.train.GradientDescentOptimizer(0.05).minimize(tf.norm(pred - yp),
                                                                  tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, y), (xp, yp)))


def per_id_mean_error_guarded(n, b, steps, graph_batch, lr_scale=1.0):
    """Each id's mean squared error over its examples in the batch, its count guarded by max(count, 1), averaged
    over the vocabulary; Adagrad. Most ids come once or not at all in a batch of a few examples."""
    g = tf.Graph()
    with g.as_default():
        ids, y, idp, yp, pred, count = _per_id_head(1161, n * b * steps, np.cos, 3)
        summed = tf.math.unsorted_segment_sum(tf.square(pred - yp), idp, VOCAB)
        loss = tf.reduce_mean(summed / tf.maximum(count, 1.0))
        train = tf1.train.AdagradOptimizer(0.3).minimize(loss, tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((ids, y), (idp, yp)))


def rmse_written_out(n, b, steps, graph_batch, lr_scale=1.0):
    """The root of the summed squared errors over the batch's size (tf.size), by hand; Adam."""
    x, y = _regression(1171, n, b, steps)
    g = tf.Graph()
    with g.as_default():
        xp, yp, pred = _regression_head(1172)
        loss = tf.sqrt(tf.reduce_sum(tf.square(pred - yp)) / tf.cast(tf.size(yp), F64))
        train = tf1.train.AdamOptimizer(0.05).minimize(loss, tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, y), (xp, yp)))


def smoothed_positive_rate_weights(n, b, steps, graph_batch, lr_scale=1.0):
    """Logistic loss whose examples are weighted by the batch's Laplace-smoothed rate of positives,
    (positives + 1) / (examples + 2): the rarer class weighs more; averaged; SGD with momentum."""
    x, y = _regression(1181, n, b, steps)
    labels = (y > 0.8).astype(np.float64)
    g = tf.Graph()
    with g.as_default():
        xp, lp = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None], "labels")
        logits = tf.squeeze(_dense(_dense(xp, 4, "hidden", 1182, tf.nn.tanh), 1, "out", 1183), 1)
        rate = (tf.reduce_sum(lp) + 1.0) / (tf.cast(tf.shape(lp)[0], F64) + 2.0)
        weights = lp * (1.0 - rate) + (1.0 - lp) * rate
        loss = tf.reduce_mean(weights * tf.nn.sigmoid_cross_entropy_with_logits(labels=lp, logits=logits))
        train = tf1.train.MomentumOptimizer(0.1, 0.9).minimize(loss, tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, labels), (xp, lp)))


def token_loss_over_guarded_count(n, b, steps, graph_batch, lr_scale=1.0):
    """Per-token squared errors of sequences of 0 to 5 tokens, masked by tf.sequence_mask, summed over the batch's
    count of tokens guarded by max(count, 1); Adam."""
    rng = np.random.RandomState(1191)
    rows = n * b * steps
    x, lengths = rng.randn(rows, 5, 3), rng.randint(0, 6, size=(rows,)).astype(np.int32)
    y = np.sin(x).sum(axis=2)
    g = tf.Graph()
    with g.as_default():
        xp, lp = tf1.placeholder(F64, [None, 5, 3], "x"), tf1.placeholder(tf.int32, [None], "lengths")
        yp = tf1.placeholder(F64, [None, 5], "y")
        pred = tf.squeeze(_dense(_dense(xp, 4, "hidden", 1192, tf.nn.tanh), 1, "out", 1193), 2)
        mask = tf.sequence_mask(lp, 5, dtype=F64)
        loss = tf.reduce_sum(tf.square(pred - yp) * mask) / tf.maximum(tf.reduce_sum(mask), 1.0)
        train = tf1.train.AdamOptimizer(0.05).minimize(loss, tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, lengths, y), (xp, lp, yp)))


def targets_scaled_by_batch_max(n, b, steps, graph_batch, lr_scale=1.0):
    """Targets divided by the batch's largest absolute target before a mean squared error; SGD."""
    x, y = _regression(1201, n, b, steps)
    g = tf.Graph()
    with g.as_default():
        xp, yp, pred = _regression_head(1202)
        loss = tf.reduce_mean(tf.square(pred - yp / tf.reduce_max(tf.abs(yp))))
        train = tf1.train.GradientDescentOptimizer(0.1).minimize(loss, tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, y), (xp, yp)))


def class_weights_from_batch_counts(n, b, steps, graph_batch, lr_scale=1.0):
    """Each example weighted by n / (3 * its class's count in the batch + 1), a smoothed inverse frequency;
    averaged cross entropy; RMSProp."""
    x, y = _regression(1211, n, b, steps)
    labels = np.digitize(y, [-0.5, 1.0]).astype(np.int32)
    g = tf.Graph()
    with g.as_default():
        xp, lp = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(tf.int32, [None], "labels")
        logits = _dense(_dense(xp, 4, "hidden", 1212, tf.nn.tanh), 3, "logits", 1213)
        counts = tf.math.unsorted_segment_sum(tf.ones_like(lp, F64), lp, 3)
        weights = tf.cast(tf.size(lp), F64) / (3.0 * counts + 1.0)
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=lp, logits=logits)
        loss = tf.reduce_mean(tf.gather(weights, lp) * ce)
        train = tf1.train.RMSPropOptimizer(0.02).minimize(loss, tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, labels), (xp, lp)))


def prototype_distances(n, b, steps, graph_batch, lr_scale=1.0):
    """A prototypical network's loss: each class's prototype the mean embedding of its examples in the batch
    (segment sum over a count guarded by max(count, 1)), logits the negative squared distances to them; Adam."""
    x, y = _regression(1221, n, b, steps)
    labels = np.digitize(y, [-0.5, 1.0]).astype(np.int32)
    g = tf.Graph()
    with g.as_default():
        xp, lp = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(tf.int32, [None], "labels")
        emb = _dense(_dense(xp, 4, "hidden", 1222, tf.nn.tanh), 2, "embed", 1223)
        counts = tf.math.unsorted_segment_sum(tf.ones_like(lp, F64), lp, 3)
        prototypes = tf.math.unsorted_segment_sum(emb, lp, 3) / tf.maximum(counts, 1.0)[:, None]
        logits = -tf.reduce_sum(tf.square(emb[:, None, :] - prototypes[None, :, :]), 2)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=lp, logits=logits))
        train = tf1.train.AdamOptimizer(0.05).minimize(loss, tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, labels), (xp, lp)))


# Not registered: dp_sgd_clipped_examples (seeded noise added to each worker's sum: the last check lists its
# variables and the job warns; tests/rules/test_gradient_check.py).
USER_GRAPHS_UNSEEN = {f.__name__: f for f in (cox_partial_likelihood, wgan_weight_clipping, online_class_balance,
                                              py_func_example_weights, ema_of_loss_and_prediction,
                                              grouped_calibration_loss, dp_sgd_without_noise, barlow_twins,
                                              kl_annealed_by_step, stateless_noise_augmentation, maml_one_inner_step,
                                              summed_loss_with_decay_added_to_gradients, fixmatch_two_batch_sizes,
                                              positive_weight_from_the_batch, norm_of_errors_loss,
                                              per_id_mean_error_guarded, rmse_written_out,
                                              smoothed_positive_rate_weights, token_loss_over_guarded_count,
                                              targets_scaled_by_batch_max, class_weights_from_batch_counts,
                                              prototype_distances)}
