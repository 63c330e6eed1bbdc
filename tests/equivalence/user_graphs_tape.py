"""Gradients taken with tf.GradientTape in a v1 graph (no tf.gradients call): a mean loss with an embedding and
Adam, a summed loss with a weight penalty, a gradient clipped elementwise by a custom gradient on its way (a
backward pass that is not linear in where it starts), learned uncertainty weights, WGAN-GP with nested tapes; and
Keras's OptimizerV2 in a v1 graph (minimize of a loss callable takes a tape). Same conventions as cases.py."""
import numpy as np
import tensorflow as tf

from tests.equivalence.cases import F64, Case, _dense, _init, _rows
from tests.equivalence.user_graphs_idioms import (_clip_gradient, _two_task_inputs, _two_task_losses,
                                                  _two_tasks, _wgan_critic, _wgan_data, _wgan_inputs)

tf1 = tf.compat.v1
VOCAB = 16


def _data(seed, rows):
    rng = np.random.RandomState(seed)
    ids = rng.randint(0, VOCAB, size=(rows, 2)).astype(np.int32)
    return ids, np.cos(ids).sum(axis=1, keepdims=True) + 0.1 * rng.randn(rows, 1)


def _model(seed):
    idp, yp = tf1.placeholder(tf.int32, [None, 2], "ids"), tf1.placeholder(F64, [None, 1], "y")
    emb = tf1.get_variable("embedding", [VOCAB, 3], F64, initializer=_init(seed))
    return idp, yp, emb


def _squared_errors(idp, yp, emb, seed):
    """Each example's squared error of a dense head over the sum of its ids' embedding rows."""
    h = tf.reduce_sum(tf.nn.embedding_lookup(emb, idp), axis=1)
    return tf.square(_dense(h, 1, "head", seed) - yp)


def tape_mean_adam(n, b, steps, graph_batch, lr_scale=1.0):
    """tf.GradientTape over an embedding and a dense head, a mean squared loss; Adam's apply_gradients."""
    ids, y = _data(120, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        idp, yp, emb = _model(121)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(_squared_errors(idp, yp, emb, 122))
        variables = tf1.trainable_variables()
        grads = tape.gradient(loss, variables)
        train = tf1.train.AdamOptimizer(0.05 * lr_scale).apply_gradients(
            zip(grads, variables), global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((ids, y), (idp, yp)))


def tape_summed_penalty(n, b, steps, graph_batch, lr_scale=1.0):
    """tf.GradientTape: a summed squared error plus an L2 penalty on the whole embedding; Adagrad."""
    ids, y = _data(123, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        idp, yp, emb = _model(124)
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(_squared_errors(idp, yp, emb, 125)) + 0.05 * tf.nn.l2_loss(emb)
        variables = tf1.trainable_variables()
        grads = tape.gradient(loss, variables)
        train = tf1.train.AdagradOptimizer(0.02 * lr_scale).apply_gradients(
            zip(grads, variables), global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((ids, y), (idp, yp)))


def tape_custom_gradient_clip(n, b, steps, graph_batch, lr_scale=1.0):
    """tf.GradientTape through a custom gradient that clips elementwise; a mean loss, SGD."""
    x = np.random.RandomState(126).randn(n * b * steps, 4)
    y = np.tanh(x[:, :1] * 2 - x[:, 1:2])
    g = tf.Graph()
    with g.as_default():
        xp, yp = tf1.placeholder(F64, [None, 4], "x"), tf1.placeholder(F64, [None, 1], "y")
        with tf.GradientTape() as tape:
            h = _clip_gradient(_dense(xp, 6, "hidden", 127, tf.tanh))
            loss = tf.reduce_mean(tf.square(_dense(h, 1, "out", 128) - yp))
        variables = tf1.trainable_variables()
        grads = tape.gradient(loss, variables)
        train = tf1.train.GradientDescentOptimizer(0.3 * lr_scale).apply_gradients(
            zip(grads, variables), global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, y), (xp, yp)))


def tape_wgan_gradient_penalty(n, b, steps, graph_batch, lr_scale=1.0):
    """WGAN-GP written with tapes: an inner tape's gradient of the critic at random interpolates (a per-example
    output), recorded by an outer persistent tape that then differentiates the critic's loss and the generator's
    (second-order gradients); two Adams in one step."""
    x, z = _wgan_data(130, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        xp, zp = _wgan_inputs()
        critic = _wgan_critic(131)
        with tf.GradientTape(persistent=True) as tape:
            with tf1.variable_scope("generator"):
                fake = _dense(zp, 3, "g", 133)
            mix = tf1.random_uniform([tf.shape(xp)[0], 1], dtype=F64, seed=134)
            interpolates = mix * xp + (1 - mix) * fake
            with tf.GradientTape() as inner:
                inner.watch(interpolates)
                score = critic(interpolates)
            grad = inner.gradient(score, interpolates)
            penalty = tf.reduce_mean(tf.square(tf.sqrt(tf.reduce_sum(tf.square(grad), 1) + 1e-12) - 1.0))
            critic_loss = tf.reduce_mean(critic(fake)) - tf.reduce_mean(critic(xp)) + 10.0 * penalty
            generator_loss = -tf.reduce_mean(critic(fake))
        critic_vars = tf1.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES, "critic")
        generator_vars = tf1.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES, "generator")
        critic_grads = tape.gradient(critic_loss, critic_vars)
        generator_grads = tape.gradient(generator_loss, generator_vars)
        step = tf1.train.get_or_create_global_step()
        train = tf.group(tf1.train.AdamOptimizer(0.01 * lr_scale).apply_gradients(zip(critic_grads, critic_vars)),
                         tf1.train.AdamOptimizer(0.01 * lr_scale).apply_gradients(
                             zip(generator_grads, generator_vars)),
                         step.assign_add(1), name="train")
    return Case(g, train, _rows((x, z), (xp, zp)))


def tape_uncertainty_weighted_losses(n, b, steps, graph_batch, lr_scale=1.0):
    """Learned uncertainty weights on two summed task losses (a bare read of each weight's log variance added to
    the loss, a term the batch does not change), differentiated by a tape; SGD."""
    x, y1, y2 = _two_tasks(135, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        xp, y1p, y2p = _two_task_inputs()
        s1 = tf1.get_variable("log_var_1", [], F64, initializer=tf1.constant_initializer(0.3))
        s2 = tf1.get_variable("log_var_2", [], F64, initializer=tf1.constant_initializer(-0.2))
        with tf.GradientTape() as tape:
            task1, task2 = _two_task_losses(xp, y1p, y2p, 136)
            loss = task1 * tf.exp(-s1) + s1 + task2 * tf.exp(-s2) + s2
        variables = tf1.trainable_variables()
        train = tf1.train.GradientDescentOptimizer(0.01 * lr_scale).apply_gradients(
            zip(tape.gradient(loss, variables), variables), global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, y1, y2), (xp, y1p, y2p)))


def _keras_regression(seed, optimizer, minimize):
    g = tf.Graph()
    with g.as_default():
        idp, yp, emb = _model(seed + 1)

        def loss_fn():
            with tf1.variable_scope("model", reuse=tf1.AUTO_REUSE):
                return tf.reduce_mean(_squared_errors(idp, yp, emb, seed + 2))
        opt = optimizer()
        if minimize:
            loss_fn()  # the head's variables exist before minimize's var_list is read
            train = opt.minimize(loss_fn, var_list=tf1.trainable_variables())
        else:
            loss = loss_fn()
            variables = tf1.trainable_variables()
            train = opt.apply_gradients(zip(tf.gradients(loss, variables), variables))
        train = tf.group(train, tf1.train.get_or_create_global_step().assign_add(1), name="train")
    return g, train, (idp, yp)


def keras_adam_minimize(n, b, steps, graph_batch, lr_scale=1.0):
    """A Keras (OptimizerV2) Adam in a v1 graph: minimize of a loss callable (it takes a tape inside)."""
    g, train, (idp, yp) = _keras_regression(140, lambda: tf.keras.optimizers.legacy.Adam(0.05 * lr_scale), True)
    return Case(g, train, _rows(_data(140, n * b * steps), (idp, yp)))


def keras_momentum_apply(n, b, steps, graph_batch, lr_scale=1.0):
    """A Keras (OptimizerV2) SGD with momentum applying tf.gradients' gradients in a v1 graph."""
    g, train, (idp, yp) = _keras_regression(
        143, lambda: tf.keras.optimizers.legacy.SGD(0.05 * lr_scale, momentum=0.9), False)
    return Case(g, train, _rows(_data(143, n * b * steps), (idp, yp)))


def keras_init_checks_in_process_order(n, b, steps, graph_batch, lr_scale=1.0):
    """keras_adam_minimize, plus a check per variable of whether it is initialized, made in an order that changes
    from process to process, as a Keras functional model makes its VarIsInitializedOp ops: here rotated by the
    worker's rank, so `VarIsInitializedOp_1` reads another variable in each worker. No step runs them."""
    from parallax.process.protocol import this_process
    g, train, (idp, yp) = _keras_regression(146, lambda: tf.keras.optimizers.legacy.Adam(0.05 * lr_scale), True)
    with g.as_default():
        variables = tf1.global_variables()
        rank = this_process().role.worker_id or 0
        for v in variables[rank % len(variables):] + variables[:rank % len(variables)]:
            tf1.is_variable_initialized(v)
    return Case(g, train, _rows(_data(146, n * b * steps), (idp, yp)))


def asserts_and_prints(n, b, steps, graph_batch, lr_scale=1.0):
    """Checks and prints in the step: the ids asserted in range, the targets finite, the loss printed, the
    loss's gradient checked for NaN; a summed loss plus a penalty on the table; Adagrad."""
    ids, y = _data(146, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        idp, yp, emb = _model(147)
        checks = [tf.debugging.assert_non_negative(idp), tf.debugging.assert_less(idp, VOCAB),
                  tf.debugging.assert_all_finite(yp, "targets")]
        with tf.control_dependencies(checks):
            h = tf.reduce_sum(tf.nn.embedding_lookup(emb, tf.identity(idp)), axis=1)
        errors = tf.reduce_sum(tf.square(_dense(h, 1, "head", 148) - yp))
        loss = tf.debugging.check_numerics(errors, "loss") + 0.05 * tf.nn.l2_loss(emb)
        with tf.control_dependencies([tf.print("loss", loss, output_stream="file:///dev/null")]):
            train = tf1.train.AdagradOptimizer(0.02 * lr_scale).minimize(
                loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((ids, y), (idp, yp)))


def tape_keras_lstm_summed(n, b, steps, graph_batch, lr_scale=1.0):
    """A tape through Keras layers with an LSTM (a v2 while loop) over embedded ids, a summed loss plus an L2
    penalty on the embedding; Adam."""
    rng = np.random.RandomState(160)
    ids = rng.randint(0, VOCAB, size=(n * b * steps, 4)).astype(np.int32)
    y = np.cos(ids).mean(axis=1, keepdims=True)
    g = tf.Graph()
    with g.as_default():
        idp, yp = tf1.placeholder(tf.int32, [None, 4], "ids"), tf1.placeholder(F64, [None, 1], "y")
        uniform = lambda seed: tf.keras.initializers.RandomUniform(-0.3, 0.3, seed=seed)  # noqa: E731
        embedding = tf.keras.layers.Embedding(VOCAB, 3, embeddings_initializer=uniform(161), dtype=F64)
        lstm = tf.keras.layers.LSTM(3, kernel_initializer=uniform(162), recurrent_initializer=uniform(163), dtype=F64)
        head = tf.keras.layers.Dense(1, kernel_initializer=uniform(164), dtype=F64)
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(head(lstm(embedding(idp))) - yp)) + \
                0.01 * tf.nn.l2_loss(embedding.embeddings)
        variables = tf1.trainable_variables()
        train = tf1.train.AdamOptimizer(0.02 * lr_scale).apply_gradients(
            zip(tape.gradient(loss, variables), variables), global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((ids, y), (idp, yp)))


USER_GRAPHS_TAPE = {"tape_mean_adam": tape_mean_adam, "tape_summed_penalty": tape_summed_penalty,
                    "tape_custom_gradient_clip": tape_custom_gradient_clip,
                    "tape_wgan_gradient_penalty": tape_wgan_gradient_penalty,
                    "tape_uncertainty_weighted_losses": tape_uncertainty_weighted_losses,
                    "keras_adam_minimize": keras_adam_minimize, "keras_momentum_apply": keras_momentum_apply,
                    "keras_init_checks_in_process_order": keras_init_checks_in_process_order,
                    "asserts_and_prints": asserts_and_prints, "tape_keras_lstm_summed": tape_keras_lstm_summed}
