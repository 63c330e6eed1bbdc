"""Idioms of TF1 training scripts that no other table has: feature columns (a wide and deep recommender), NCE
loss, tf.map_fn over the batch, a custom gradient, accumulate_n aggregation with gradients colocated, tf.losses with
layer regularizers, and a warm-up learning rate chosen by tf.cond. Same conventions as cases.py."""
import numpy as np
import tensorflow as tf

from tests.equivalence.cases import F64, Case, _dense, _init, _rows

tf1 = tf.compat.v1
VOCAB = 24


def _ids(seed, rows, width=3):
    rng = np.random.RandomState(seed)
    ids = rng.randint(-1, VOCAB, size=(rows, width)).astype(np.int64)  # -1: no id, as feature columns read it
    ids[:, 0] = np.abs(ids[:, 0])
    return ids, rng.randn(rows, 2), (rng.rand(rows, 1) < 0.4).astype(np.float64)


def _id_regression(seed, rows):
    """(data: ids with no -1 and targets, a function that makes their placeholders and an embedding in a graph)."""
    ids, _, y = _ids(seed, rows)

    def inputs():
        idp, yp = tf1.placeholder(tf.int64, [None, 3], "ids"), tf1.placeholder(F64, [None, 1], "y")
        return idp, yp, tf1.get_variable("embedding", [VOCAB, 4], F64, initializer=_init(seed + 1))
    return (np.abs(ids), y), inputs


def wide_and_deep_feature_columns(n, b, steps, graph_batch, lr_scale=1.0):
    """tf.feature_column: an identity column embedded (sqrtn) for the deep part and one-hot for the wide part,
    a numeric column in both; Ftrl on the wide part, Adagrad on the deep part, a sigmoid cross entropy mean."""
    ids, num, y = _ids(80, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        idp, nump = tf1.placeholder(tf.int64, [None, 3], "ids"), tf1.placeholder(F64, [None, 2], "num")
        yp = tf1.placeholder(F64, [None, 1], "y")
        cat = tf1.feature_column.categorical_column_with_identity("item", VOCAB)
        numeric = tf1.feature_column.numeric_column("num", shape=(2,), dtype=F64)
        features = {"item": idp, "num": nump}
        with tf1.variable_scope("deep", initializer=_init(81)):
            emb = tf1.feature_column.embedding_column(cat, 4, combiner="sqrtn", initializer=_init(82))
            deep_in = tf1.feature_column.input_layer(features, [emb, numeric])
            deep_in = tf.cast(deep_in, F64)
            deep = _dense(_dense(deep_in, 5, "h", 83, tf.nn.relu), 1, "logit", 84)
        with tf1.variable_scope("wide"):
            wide = tf1.feature_column.linear_model(features, [cat, numeric])
            wide = tf.cast(wide, F64)
        loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=yp, logits=deep + wide))
        step = tf1.train.get_or_create_global_step()
        deep_vars = tf1.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES, "deep")
        wide_vars = tf1.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES, "wide")
        train = tf.group(tf1.train.FtrlOptimizer(0.1 * lr_scale).minimize(loss, var_list=wide_vars),
                         tf1.train.AdagradOptimizer(0.1 * lr_scale).minimize(loss, var_list=deep_vars),
                         step.assign_add(1), name="train")
    # linear_model's variables are float32
    return Case(g, train, _rows((ids, num, y), (idp, nump, yp)), float32=True)


def nce_word2vec(n, b, steps, graph_batch, lr_scale=1.0):
    """word2vec's skip-gram step: an embedding looked up by centre word, tf.nn.nce_loss over sampled negatives
    (the log-uniform sampler), its mean, plain SGD."""
    rng = np.random.RandomState(85)
    centre = rng.randint(0, VOCAB, size=(n * b * steps,)).astype(np.int32)
    context = ((centre + rng.randint(1, 3, size=centre.shape)) % VOCAB).astype(np.int64)[:, None]
    g = tf.Graph()
    with g.as_default():
        cp, xp = tf1.placeholder(tf.int32, [None], "centre"), tf1.placeholder(tf.int64, [None, 1], "context")
        f32 = tf.float32  # the sampler's expected counts are float32
        emb = tf1.get_variable("embeddings", [VOCAB, 6], f32, initializer=_init(86, f32, scale=1.0))
        nce_w = tf1.get_variable("nce_weights", [VOCAB, 6], f32, initializer=_init(87, f32))
        nce_b = tf1.get_variable("nce_biases", [VOCAB], f32, initializer=tf1.zeros_initializer())
        sampled = tf.random.log_uniform_candidate_sampler(xp, 1, 5, True, VOCAB, seed=88)
        loss = tf.reduce_mean(tf.nn.nce_loss(nce_w, nce_b, xp, tf.nn.embedding_lookup(emb, cp), num_sampled=5,
                                             num_classes=VOCAB, sampled_values=sampled))
        train = tf1.train.GradientDescentOptimizer(0.5 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((centre, context), (cp, xp)), float32=True)


def map_fn_per_example(n, b, steps, graph_batch, lr_scale=1.0):
    """tf.map_fn over the batch (a functional while loop): each example's rows scored against a shared query
    and softmax-pooled, then a dense head; Momentum."""
    (ids, y), inputs = _id_regression(89, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        idp, yp, emb = inputs()
        query = tf1.get_variable("query", [4], F64, initializer=_init(91))

        def pool(rows):
            weights = tf.nn.softmax(tf.linalg.matvec(rows, query))
            return tf.linalg.matvec(rows, weights, transpose_a=True)
        pooled = tf.map_fn(pool, tf.nn.embedding_lookup(emb, idp))
        loss = tf.reduce_mean(tf.square(_dense(pooled, 1, "head", 92) - yp))
        train = tf1.train.MomentumOptimizer(0.2 * lr_scale, 0.9, use_nesterov=True).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((ids, y), (idp, yp)))


@tf.custom_gradient
def _clip_gradient(x):
    def grad(dy):
        return tf.clip_by_value(dy, -0.05, 0.05)
    return tf.identity(x), grad


def custom_gradient_clip(n, b, steps, graph_batch, lr_scale=1.0):
    """A tf.custom_gradient that clips the gradient flowing into the hidden layer, elementwise; Adam."""
    x = np.random.RandomState(93).randn(n * b * steps, 4)
    y = np.tanh(x[:, :1] * 2 - x[:, 1:2])
    g = tf.Graph()
    with g.as_default():
        xp, yp = tf1.placeholder(F64, [None, 4], "x"), tf1.placeholder(F64, [None, 1], "y")
        h = _clip_gradient(_dense(xp, 6, "hidden", 94, tf.tanh))
        loss = tf.reduce_mean(tf.square(_dense(h, 1, "out", 95) - yp))
        train = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, y), (xp, yp)))


def accumulate_n_colocated(n, b, steps, graph_batch, lr_scale=1.0):
    """One embedding read twice (its gradients added by accumulate_n), gradients colocated with their ops,
    a summed loss; RMSProp."""
    (ids, y), inputs = _id_regression(96, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        idp, yp, emb = inputs()
        first = tf.nn.embedding_lookup(emb, idp[:, 0])
        rest = tf.reduce_sum(tf.nn.embedding_lookup(emb, idp[:, 1:]), axis=1)
        loss = tf.reduce_sum(tf.square(_dense(first * rest, 1, "head", 98) - yp))
        train = tf1.train.RMSPropOptimizer(0.01 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step(), colocate_gradients_with_ops=True,
            aggregation_method=tf.AggregationMethod.EXPERIMENTAL_ACCUMULATE_N)
    return Case(g, train, _rows((ids, y), (idp, yp)))


def losses_with_regularizers(n, b, steps, graph_batch, lr_scale=1.0):
    """tf1.losses: softmax cross entropy with label smoothing (a mean), layer L2 regularizers collected by
    get_total_loss; a learning rate warmed up by tf.cond on the global step; Momentum."""
    rng = np.random.RandomState(99)
    x = rng.randn(n * b * steps, 5)
    labels = np.eye(3)[rng.randint(0, 3, size=n * b * steps)]
    g = tf.Graph()
    with g.as_default():
        xp, lp = tf1.placeholder(F64, [None, 5], "x"), tf1.placeholder(F64, [None, 3], "labels")
        reg = tf.keras.regularizers.l2(0.01)
        h = tf1.layers.dense(xp, 6, tf.nn.relu, kernel_initializer=_init(100), kernel_regularizer=reg, name="h")
        logits = tf1.layers.dense(h, 3, kernel_initializer=_init(101), kernel_regularizer=reg, name="logits")
        tf1.losses.softmax_cross_entropy(lp, logits, label_smoothing=0.1)
        loss = tf1.losses.get_total_loss()
        step = tf1.train.get_or_create_global_step()
        lr = tf.cond(step < 2, lambda: tf.constant(0.05, F64), lambda: tf.constant(0.2, F64)) * lr_scale
        train = tf1.train.MomentumOptimizer(lr, 0.9).minimize(loss, global_step=step)
    return Case(g, train, _rows((x, labels), (xp, lp)))


USER_GRAPHS_IDIOMS = {"wide_and_deep_feature_columns": wide_and_deep_feature_columns, "nce_word2vec": nce_word2vec,
                      "map_fn_per_example": map_fn_per_example, "custom_gradient_clip": custom_gradient_clip,
                      "accumulate_n_colocated": accumulate_n_colocated,
                      "losses_with_regularizers": losses_with_regularizers}


def _scale_l2(x, norm_length):
    """adversarial_text's per-example scaling: its epsilon (1e-6 under the root) makes it not scale-invariant."""
    alpha = tf.reduce_max(tf.abs(x), (1, 2), keepdims=True) + 1e-12
    l2_norm = alpha * tf.sqrt(tf.reduce_sum(tf.pow(x / alpha, 2), (1, 2), keepdims=True) + 1e-6)
    return norm_length * x / l2_norm


def adversarial_embedding(n, b, steps, graph_batch, lr_scale=1.0):
    """Adversarial training on the looked-up embeddings (adversarial_text): the clean loss's gradient with respect
    to them, scaled per example, perturbs them; the step trains on the clean and the perturbed loss; Adam."""
    (ids, y), inputs = _id_regression(102, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        idp, yp, emb = inputs()
        head = tf1.get_variable("head", [4, 1], F64, initializer=_init(104))

        def loss_of(embedded):
            return tf.reduce_mean(tf.square(tf.matmul(tf.tanh(tf.reduce_sum(embedded, 1)), head) - yp))
        embedded = tf.nn.embedding_lookup(emb, idp)
        clean = loss_of(embedded)
        grad, = tf.gradients(clean, embedded)
        perturbed = loss_of(embedded + _scale_l2(tf.stop_gradient(grad), 0.5))
        train = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(
            clean + perturbed, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((ids, y), (idp, yp)))


def mean_and_summed_losses(n, b, steps, graph_batch, lr_scale=1.0):
    """Two heads on one embedding: a regression head trained on a mean loss, a classifier on a summed one, by
    two optimizers in one step."""
    (ids, y), inputs = _id_regression(105, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        idp, yp, emb = inputs()
        h = tf.tanh(tf.reduce_mean(tf.nn.embedding_lookup(emb, idp), 1))
        regression = tf.reduce_mean(tf.square(_dense(h, 1, "regression", 107) - yp))
        summed = tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(labels=yp, logits=_dense(h, 1, "cls", 108)))
        step = tf1.train.get_or_create_global_step()
        train = tf.group(tf1.train.GradientDescentOptimizer(0.3 * lr_scale).minimize(regression),
                         tf1.train.AdagradOptimizer(0.05 * lr_scale).minimize(summed), step.assign_add(1),
                         name="train")
    return Case(g, train, _rows((ids, y), (idp, yp)))


USER_GRAPHS_IDIOMS.update({"adversarial_embedding": adversarial_embedding,
                           "mean_and_summed_losses": mean_and_summed_losses})


def summed_loss_weight_penalty(n, b, steps, graph_batch, lr_scale=1.0):
    """Matrix factorization as recommenders write it: the summed squared error of the batch's ratings plus an L2
    penalty on both whole tables (a term the batch does not change), and a bias; Adagrad."""
    rng = np.random.RandomState(109)
    users, items = rng.randint(0, VOCAB, size=(2, n * b * steps)).astype(np.int32)
    ratings = np.cos(users - items)[:, None] + 0.1 * rng.randn(n * b * steps, 1)
    g = tf.Graph()
    with g.as_default():
        up, ip = tf1.placeholder(tf.int32, [None], "users"), tf1.placeholder(tf.int32, [None], "items")
        rp = tf1.placeholder(F64, [None, 1], "ratings")
        user_emb = tf1.get_variable("users", [VOCAB, 4], F64, initializer=_init(110))
        item_emb = tf1.get_variable("items", [VOCAB, 4], F64, initializer=_init(111))
        bias = tf1.get_variable("bias", [], F64, initializer=tf1.zeros_initializer())
        predicted = tf.reduce_sum(tf.nn.embedding_lookup(user_emb, up) * tf.nn.embedding_lookup(item_emb, ip), 1,
                                  keepdims=True) + bias
        loss = tf.reduce_sum(tf.square(predicted - rp)) + 0.05 * (tf.nn.l2_loss(user_emb) + tf.nn.l2_loss(item_emb))
        train = tf1.train.AdagradOptimizer(0.1 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((users, items, ratings), (up, ip, rp)))


USER_GRAPHS_IDIOMS["summed_loss_weight_penalty"] = summed_loss_weight_penalty


def _two_tasks(seed, rows):
    """(x, y1, y2): features, their sum, and their first two's product with noise."""
    rng = np.random.RandomState(seed)
    x = rng.randn(rows, 3)
    return x, x.sum(1, keepdims=True), (x[:, :1] * x[:, 1:2]) + 0.1 * rng.randn(rows, 1)


def _two_task_inputs():
    return tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None, 1], "y1"), \
        tf1.placeholder(F64, [None, 1], "y2")


def _two_task_losses(xp, y1p, y2p, seed):
    """Each task's summed squared error, its head over one shared tanh layer."""
    h = _dense(xp, 4, "shared", seed, tf.tanh)
    return tf.reduce_sum(tf.square(_dense(h, 1, "head1", seed + 1) - y1p)), \
        tf.reduce_sum(tf.square(_dense(h, 1, "head2", seed + 2) - y2p))


def uncertainty_weighted_summed_losses(n, b, steps, graph_batch, lr_scale=1.0):
    """Multi-task loss weighting by learned uncertainty (Kendall et al.): each task's summed loss scaled by
    exp(-s) plus s itself, a bare read of a learned scalar (a term the batch does not change, whose gradient makes
    no op of its own); SGD."""
    x, y1, y2 = _two_tasks(117, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        xp, y1p, y2p = _two_task_inputs()
        s1 = tf1.get_variable("log_var_1", [], F64, initializer=tf1.constant_initializer(0.3))
        s2 = tf1.get_variable("log_var_2", [], F64, initializer=tf1.constant_initializer(-0.2))
        task1, task2 = _two_task_losses(xp, y1p, y2p, 118)
        loss = task1 * tf.exp(-s1) + s1 + task2 * tf.exp(-s2) + s2
        train = tf1.train.GradientDescentOptimizer(0.01 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, y1, y2), (xp, y1p, y2p)))


USER_GRAPHS_IDIOMS["uncertainty_weighted_summed_losses"] = uncertainty_weighted_summed_losses


def _wgan_data(seed, rows):
    """(real examples, generator noise)."""
    rng = np.random.RandomState(seed)
    return rng.randn(rows, 3), rng.randn(rows, 2)


def _wgan_inputs():
    return tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None, 2], "z")


def _wgan_critic(seed):
    """The critic: one tanh layer and a score, its variables shared by every call."""
    def critic(v):
        with tf1.variable_scope("critic", reuse=tf1.AUTO_REUSE):
            return _dense(_dense(v, 4, "h", seed, tf.tanh), 1, "o", seed + 1)
    return critic


def wgan_gradient_penalty(n, b, steps, graph_batch, lr_scale=1.0):
    """WGAN-GP: the critic's gradient with respect to random interpolates of real and generated examples (a
    per-example output's gradient, tf.gradients' sum of it), its norm's squared distance from 1 as a penalty of
    the critic's mean loss (second-order gradients); the critic and the generator trained by two Adams in one step."""
    x, z = _wgan_data(112, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        xp, zp = _wgan_inputs()
        critic = _wgan_critic(113)
        with tf1.variable_scope("generator"):
            fake = _dense(zp, 3, "g", 115)
        mix = tf1.random_uniform([tf.shape(xp)[0], 1], dtype=F64, seed=116)
        interpolates = mix * xp + (1 - mix) * fake
        grad, = tf.gradients(critic(interpolates), interpolates)
        penalty = tf.reduce_mean(tf.square(tf.sqrt(tf.reduce_sum(tf.square(grad), 1) + 1e-12) - 1.0))
        critic_loss = tf.reduce_mean(critic(fake)) - tf.reduce_mean(critic(xp)) + 10.0 * penalty
        step = tf1.train.get_or_create_global_step()
        train = tf.group(
            tf1.train.AdamOptimizer(0.01 * lr_scale).minimize(
                critic_loss, var_list=tf1.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES, "critic")),
            tf1.train.AdamOptimizer(0.01 * lr_scale).minimize(
                -tf.reduce_mean(critic(fake)), var_list=tf1.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES,
                                                                           "generator")),
            step.assign_add(1), name="train")
    return Case(g, train, _rows((x, z), (xp, zp)))


USER_GRAPHS_IDIOMS["wgan_gradient_penalty"] = wgan_gradient_penalty


def dropout_under_a_training_flag(n, b, steps, graph_batch, lr_scale=1.0):
    """`tf1.layers.dropout(h, training=flag)` with the flag left at its default (False) in every step, as a script
    that trains without dropout does: the draw, in a v2 cond's branch that parallax cannot split, never runs, so
    the job is exact and no warning is due (issue 57, item 8)."""
    regression, inputs = _id_regression(490, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        idp, yp, emb = inputs()
        training = tf1.placeholder_with_default(False, [], "training")
        h = tf1.layers.dense(tf.reduce_sum(tf.nn.embedding_lookup(emb, idp), 1), 6, tf.nn.tanh,
                             kernel_initializer=_init(491))
        h = tf1.layers.dropout(h, 0.5, training=training, seed=492)
        loss = tf.reduce_mean(tf.square(tf1.layers.dense(h, 1, kernel_initializer=_init(493)) - yp))
        train = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(loss, tf1.train.get_or_create_global_step())
    return Case(g, train, _rows(regression, (idp, yp)))


USER_GRAPHS_IDIOMS["dropout_under_a_training_flag"] = dropout_under_a_training_flag
