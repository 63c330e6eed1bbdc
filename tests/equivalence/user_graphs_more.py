"""More training graphs as users write them, none of which the rewrite names: hand-written updates without an
optimizer, the less common tf1 optimizers (their own update op types), Keras layers in a v1 graph, a loss-scaled
step applied under a finiteness check, a decayed learning rate with per-gradient value clipping, and random draws over
the batch (dropout, noise) on fed rows and on a sharded dataset. Same
conventions as cases.py (float64, seeded initializers, rows [first, first+rows) of a global batch).
"""
import numpy as np
import tensorflow as tf

import parallax

from tests.equivalence.cases import F64, Case, _dense, _init, _rows

tf1 = tf.compat.v1
VOCAB = 20


def _ids_and_targets(seed, rows, width=3):
    rng = np.random.RandomState(seed)
    ids = rng.randint(0, VOCAB, size=(rows, width)).astype(np.int32)
    return ids, np.sin(ids).sum(axis=1, keepdims=True) + 0.1 * rng.randn(rows, 1)


def _embedding_regression(seed, use_resource=True):
    """(ids placeholder, y placeholder, embedding, dense head, loss): a mean-squared loss over the batch."""
    idp, yp = tf1.placeholder(tf.int32, [None, 3], "ids"), tf1.placeholder(F64, [None, 1], "y")
    emb = tf1.get_variable("embedding", [VOCAB, 4], F64, initializer=_init(seed), use_resource=use_resource)
    head = tf1.get_variable("head", [4, 1], F64, initializer=_init(seed + 1), use_resource=use_resource)
    h = tf.tanh(tf.reduce_sum(tf.nn.embedding_lookup(emb, idp), axis=1))
    loss = tf.reduce_mean(tf.square(tf.matmul(h, head) - yp))
    return idp, yp, emb, head, loss


def hand_written_sgd(n, b, steps, graph_batch, lr_scale=1.0):
    """No optimizer: tf.gradients, then assign_sub for the dense head and scatter_sub of the embedding's rows, and
    the global step counted by hand."""
    ids, y = _ids_and_targets(50, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        idp, yp, emb, head, loss = _embedding_regression(50)
        g_emb, g_head = tf.gradients(loss, [emb, head])
        step = tf1.train.get_or_create_global_step()
        train = tf.group(head.assign_sub(0.2 * g_head),
                         emb.scatter_sub(tf.IndexedSlices(0.2 * g_emb.values, g_emb.indices, g_emb.dense_shape)),
                         step.assign_add(1), name="train")
    return Case(g, train, _rows((ids, y), (idp, yp)))


def _hand_written_momentum(n, b, steps, use_resource):
    """A hand-written momentum buffer per variable, the embedding's gradient densified by the user
    (tf.convert_to_tensor of the IndexedSlices)."""
    if not use_resource:
        tf1.disable_control_flow_v2()
    ids, y = _ids_and_targets(51, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        idp, yp, emb, head, loss = _embedding_regression(51, use_resource)
        updates = []
        # tf.tuple gates the gradients, as TF1 scripts with ref variables do: without it the head's update races
        # with the backward pass's read of the head, on one device too (docs/modes.md, known limits)
        for grad, var in zip(tf.tuple(tf.gradients(loss, [emb, head])), [emb, head]):
            grad = tf.convert_to_tensor(grad)
            buf = tf1.get_variable(f"{var.op.name}/buffer", var.shape, F64, initializer=tf1.zeros_initializer(),
                                   trainable=False, use_resource=use_resource)
            new_buf = tf1.assign(buf, 0.9 * buf + grad)
            updates.append(tf1.assign_sub(var, 0.1 * new_buf))
        step = tf1.train.get_or_create_global_step()
        train = tf.group(*updates, tf1.assign_add(step, 1), name="train")
    return Case(g, train, _rows((ids, y), (idp, yp)))


def hand_written_momentum(n, b, steps, graph_batch, lr_scale=1.0):
    return _hand_written_momentum(n, b, steps, use_resource=True)


def hand_written_momentum_ref(n, b, steps, graph_batch, lr_scale=1.0):
    return _hand_written_momentum(n, b, steps, use_resource=False)


_RARE_OPTIMIZERS = {
    "adadelta": lambda: tf1.train.AdadeltaOptimizer(1.0, rho=0.9),
    "ftrl_shrinkage": lambda: tf1.train.FtrlOptimizer(0.2, l2_shrinkage_regularization_strength=0.01),
    # float64 hyperparameters: the proximal optimizers do not cast theirs to the variable's dtype
    "proximal_adagrad": lambda: tf1.train.ProximalAdagradOptimizer(
        tf.constant(0.2, F64), l1_regularization_strength=tf.constant(0.001, F64),
        l2_regularization_strength=tf.constant(0.01, F64)),
    "proximal_sgd": lambda: tf1.train.ProximalGradientDescentOptimizer(
        tf.constant(0.2, F64), l1_regularization_strength=tf.constant(0.001, F64),
        l2_regularization_strength=tf.constant(0.0, F64)),
    "nesterov": lambda: tf1.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True),
}


def _rare_optimizers(n, b, steps, use_resource):
    if not use_resource:
        tf1.disable_control_flow_v2()
    ids, y = _ids_and_targets(52, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        step = tf1.train.get_or_create_global_step()
        trains = []
        for name, make in sorted(_RARE_OPTIMIZERS.items()):
            with tf1.variable_scope(name):
                _, _, _, _, loss = _embedding_regression(53, use_resource)
            trains.append(make().minimize(loss))
        # AdagradDA needs the global step: it is the step's own counter here
        with tf1.variable_scope("adagrad_da"):
            _, _, _, _, loss = _embedding_regression(54, use_resource)
        trains.append(tf1.train.AdagradDAOptimizer(0.2, step, l2_regularization_strength=0.01).minimize(loss))
        with tf.control_dependencies(trains):
            train = tf1.assign_add(step, 1, name="train").op
        placeholders = [g.get_tensor_by_name(f"{s}/{p}:0") for s in [*sorted(_RARE_OPTIMIZERS), "adagrad_da"]
                        for p in ("ids", "y")]
    arrays = [ids, y] * (len(_RARE_OPTIMIZERS) + 1)
    return Case(g, train, _rows(arrays, placeholders))


def rare_optimizers(n, b, steps, graph_batch, lr_scale=1.0):
    return _rare_optimizers(n, b, steps, use_resource=True)


def rare_optimizers_ref(n, b, steps, graph_batch, lr_scale=1.0):
    return _rare_optimizers(n, b, steps, use_resource=False)


def keras_layers(n, b, steps, graph_batch, lr_scale=1.0):
    """tf.keras layers (Embedding, Dense) in a v1 graph, tf1.losses' mean cross-entropy, L2 regularization
    collected by tf1.losses, Adam."""
    ids = np.random.RandomState(55).randint(0, VOCAB, size=(n * b * steps, 4)).astype(np.int32)
    labels = (ids.sum(axis=1) % 3).astype(np.int32)
    g = tf.Graph()
    with g.as_default():
        idp, lp = tf1.placeholder(tf.int32, [None, 4], "ids"), tf1.placeholder(tf.int32, [None], "labels")
        init = tf.keras.initializers.RandomUniform(-0.3, 0.3, seed=55)
        x = tf.keras.layers.Embedding(VOCAB, 5, embeddings_initializer=init, dtype=F64)(idp)
        x = tf.keras.layers.GlobalAveragePooling1D(dtype=F64)(x)
        x = tf.keras.layers.Dense(6, activation="relu", dtype=F64,
                                  kernel_initializer=tf.keras.initializers.GlorotUniform(seed=56))(x)
        logits = tf.keras.layers.Dense(3, dtype=F64, kernel_initializer=tf.keras.initializers.GlorotUniform(seed=57),
                                       kernel_regularizer=tf.keras.regularizers.l2(0.01))(x)
        loss = tf1.losses.sparse_softmax_cross_entropy(lp, logits)
        for penalty in tf1.get_collection(tf1.GraphKeys.REGULARIZATION_LOSSES) or \
                [tf.add_n([0.01 * tf.reduce_sum(tf.square(w)) for w in tf1.trainable_variables()
                           if "kernel" in w.name])]:
            loss += penalty
        train = tf1.train.AdamOptimizer(0.05).minimize(loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((ids, labels), (idp, lp)))


def _loss_scaled_finite_check(n, b, steps, v1_cond):
    """Mixed-precision style: the loss is scaled by 64, gradients unscaled, and the update runs under tf.cond only
    when every gradient is finite; a decayed learning rate; per-gradient clip by value. With v2 control flow the
    cond is one op (If) that updates every variable; with v1's, its predicate is one more value that every
    worker's update needs."""
    if v1_cond:
        tf1.disable_control_flow_v2()
    ids, y = _ids_and_targets(58, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        idp, yp, emb, head, loss = _embedding_regression(58)
        hidden = _dense(tf.cast(idp, F64), 3, "side", 59, tf.tanh)
        loss += 0.1 * tf.reduce_mean(tf.square(hidden))
        step = tf1.train.get_or_create_global_step()
        lr = tf1.train.exponential_decay(0.3, step, 2, 0.7, staircase=True)
        opt = tf1.train.MomentumOptimizer(lr, 0.5)
        scaled = opt.compute_gradients(loss * 64.0)
        unscaled = []
        for grad, var in scaled:
            if isinstance(grad, tf.IndexedSlices):
                grad = tf.IndexedSlices(tf.clip_by_value(grad.values / 64.0, -0.05, 0.05), grad.indices,
                                        grad.dense_shape)
            else:
                grad = tf.clip_by_value(grad / 64.0, -0.05, 0.05)
            unscaled.append((grad, var))
        finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(gv[0].values if isinstance(gv[0], tf.IndexedSlices)
                                                                else gv[0])) for gv in unscaled])
        train = tf.cond(finite, lambda: tf.group(opt.apply_gradients(unscaled, global_step=step)),
                        lambda: tf.group(step.assign_add(1)), name="train")
    return Case(g, train, _rows((ids, y), (idp, yp)))


def loss_scaled_finite_check(n, b, steps, graph_batch, lr_scale=1.0):
    return _loss_scaled_finite_check(n, b, steps, v1_cond=False)


def loss_scaled_finite_check_v1_cond(n, b, steps, graph_batch, lr_scale=1.0):
    return _loss_scaled_finite_check(n, b, steps, v1_cond=True)


def ema_with_num_updates(n, b, steps, graph_batch, lr_scale=1.0):
    """The moving averages' decay follows the global step (num_updates) that the train op they wait for has just
    incremented: in HYBRID the step lives on a server, the replicated variables' averages in every worker, and
    each worker's average must read the incremented step as one device does."""
    ids, y = _ids_and_targets(60, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        idp, yp, emb, head, loss = _embedding_regression(60)
        step = tf1.train.get_or_create_global_step()
        opt_op = tf1.train.AdamOptimizer(0.05).minimize(loss, global_step=step)
        with tf.control_dependencies([opt_op]):
            train = tf1.train.ExponentialMovingAverage(0.9, num_updates=step).apply(tf1.trainable_variables())
    return Case(g, train, _rows((ids, y), (idp, yp)))


def keras_gru(n, b, steps, graph_batch, lr_scale=1.0):
    """A tf.keras GRU (a v2 while loop, its weights read inside the loop's function) over embedded ids, in a v1
    graph, trained by RMSProp."""
    ids = np.random.RandomState(61).randint(0, VOCAB, size=(n * b * steps, 5)).astype(np.int32)
    y = np.cos(ids).mean(axis=1, keepdims=True)
    g = tf.Graph()
    with g.as_default():
        idp, yp = tf1.placeholder(tf.int32, [None, 5], "ids"), tf1.placeholder(F64, [None, 1], "y")
        uniform = lambda seed: tf.keras.initializers.RandomUniform(-0.3, 0.3, seed=seed)  # noqa: E731
        x = tf.keras.layers.Embedding(VOCAB, 4, embeddings_initializer=uniform(61), dtype=F64)(idp)
        x = tf.keras.layers.GRU(3, kernel_initializer=uniform(62), recurrent_initializer=uniform(63), dtype=F64)(x)
        pred = tf.keras.layers.Dense(1, kernel_initializer=uniform(64), dtype=F64)(x)
        loss = tf.reduce_mean(tf.square(pred - yp))
        train = tf1.train.RMSPropOptimizer(0.05).minimize(loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((ids, y), (idp, yp)))


def map_fn_over_dynamic_lstm(n, b, steps, graph_batch, lr_scale=1.0):
    """tf.map_fn over the examples around a dynamic LSTM (a TF1 script: v1 loops nested three deep with their
    gradient loops), each example's last state regressed; an embedding looked up inside (on a server in PS and
    HYBRID). The graph walks over v1 control flow grew without bound on such a graph (issue 57, item 10)."""
    tf1.disable_control_flow_v2()
    ids = np.random.RandomState(71).randint(0, VOCAB, size=(n * b * steps, 2, 3)).astype(np.int32)
    y = np.sin(ids).sum(axis=(1, 2))[:, None]
    g = tf.Graph()
    with g.as_default():
        idp, yp = tf1.placeholder(tf.int32, [None, 2, 3], "ids"), tf1.placeholder(F64, [None, 1], "y")
        emb = tf1.get_variable("embedding", [VOCAB, 3], F64, initializer=_init(72))

        def per_example(rows):
            cell = tf1.nn.rnn_cell.LSTMCell(4, initializer=_init(73), name="lstm")
            out, _ = tf1.nn.dynamic_rnn(cell, tf.nn.embedding_lookup(emb, rows), dtype=F64)
            return tf.reduce_mean(out[:, -1], 0)
        states = tf.map_fn(per_example, idp, dtype=F64)
        loss = tf.reduce_mean(tf.square(_dense(states, 1, "out", 74) - yp))
        train = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(loss, tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((ids, y), (idp, yp)))


def plateau_lr_and_summaries(n, b, steps, graph_batch, lr_scale=1.0):
    """The learning rate is a variable the script halves by a fetch of its own between train steps (a decay on
    plateau); the train steps also fetch the loss and a merged summary; the embedding's rows are clipped by
    norm per variable, and the gradients are colocated with their ops."""
    ids, y = _ids_and_targets(65, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        idp, yp, emb, head, loss = _embedding_regression(65)
        lr = tf1.get_variable("learning_rate", [], F64, initializer=tf1.constant_initializer(0.3), trainable=False,
                              use_resource=True)
        halve = lr.assign(lr * 0.5).op
        opt = tf1.train.GradientDescentOptimizer(lr)
        grads = opt.compute_gradients(loss, colocate_gradients_with_ops=True)
        clipped = [(tf.IndexedSlices(tf.clip_by_norm(gr.values, 0.05, axes=[1]), gr.indices, gr.dense_shape)
                    if isinstance(gr, tf.IndexedSlices) else tf.clip_by_norm(gr, 0.1), v) for gr, v in grads]
        train = opt.apply_gradients(clipped, global_step=tf1.train.get_or_create_global_step())
        tf1.summary.scalar("loss", loss)
        tf1.summary.histogram("head", head)
        summaries = tf1.summary.merge_all()
    return Case(g, train, _rows((ids, y), (idp, yp)),
                step_fetch=lambda k: halve if k == 3 else [train, loss, summaries])


def shard_list_debiased_average(n, b, steps, graph_batch, lr_scale=1.0):
    """An embedding the script splits by hand into a list of two variables (embedding_lookup's `mod` partition
    strategy), Adagrad, and moving averages with zero debiasing (their own biased value and step count, written and
    read back in the same step)."""
    ids, y = _ids_and_targets(66, n * b * steps)
    g = tf.Graph()
    with g.as_default():
        idp, yp = tf1.placeholder(tf.int32, [None, 3], "ids"), tf1.placeholder(F64, [None, 1], "y")
        shards = [tf1.get_variable(f"shard_{i}", [VOCAB // 2, 4], F64, initializer=_init(66 + i), use_resource=True)
                  for i in range(2)]
        x = tf.reduce_sum(tf1.nn.embedding_lookup(shards, idp, partition_strategy="mod"), axis=1)
        loss = tf.reduce_mean(tf.square(_dense(x, 1, "out", 68) - yp))
        opt_op = tf1.train.AdagradOptimizer(0.2).minimize(loss, global_step=tf1.train.get_or_create_global_step())
        with tf.control_dependencies([opt_op]):
            train = tf1.train.ExponentialMovingAverage(0.8, zero_debias=True).apply(tf1.trainable_variables())
    return Case(g, train, _rows((ids, y), (idp, yp)))


def dropout_fed(n, b, steps, graph_batch, lr_scale=1.0):
    """Dropout after each hidden layer (its mask drawn from a graph seed and the op's position, and a noise_shape
    that shares one draw per example), and a time-major dropout whose batch is axis 1, on fed rows: each worker
    keeps its block of the whole batch's draw."""
    rng = np.random.RandomState(7)
    x, y = rng.randn(n * b * steps, 6), rng.randn(n * b * steps, 1)
    g = tf.Graph()
    with g.as_default():
        tf1.set_random_seed(11)
        xp, yp = tf1.placeholder(F64, [None, 6], "x"), tf1.placeholder(F64, [None, 1], "y")
        h = tf.nn.dropout(_dense(xp, 8, "hidden", 3, tf.nn.relu), rate=0.5)
        h = tf1.nn.dropout(h, keep_prob=0.7, noise_shape=[tf.shape(h)[0], 1])
        time_major = tf.nn.dropout(tf.transpose(tf.reshape(h, [-1, 2, 4]), [1, 0, 2]), rate=0.3)
        h = tf.reshape(tf.transpose(time_major, [1, 0, 2]), [-1, 8])
        loss = tf.reduce_mean(tf.square(_dense(h, 1, "out", 4) - yp))
        train = tf1.train.MomentumOptimizer(0.1 * lr_scale, 0.9).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, y), (xp, yp)))


def dropout_sharded(n, b, steps, graph_batch, lr_scale=1.0):
    """Dropout with an op seed and Gaussian noise on activations, on a dataset sharded element-wise by
    parallax.shard: each worker keeps every N-th example of the whole batch's draw."""
    rng = np.random.RandomState(8)
    x, y = rng.randn(n * b * steps, 6), rng.randn(n * b * steps, 1)
    g = tf.Graph()
    with g.as_default():
        ds = parallax.shard(tf.data.Dataset.from_tensor_slices((x, y))).batch(graph_batch)
        xb, yb = tf1.data.make_one_shot_iterator(ds).get_next()
        h = tf.nn.dropout(_dense(xb, 8, "hidden", 3, tf.nn.relu), rate=0.3, seed=5)
        h = h + tf.random.normal(tf.shape(h), stddev=0.1, dtype=F64, seed=6)
        loss = tf.reduce_mean(tf.square(_dense(h, 1, "out", 4) - yb))
        train = tf1.train.AdamOptimizer(0.01 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, None)


def token_weighted_mean(n, b, steps, graph_batch, lr_scale=1.0):
    """A loss normalized by statistics of the batch, on fed rows: squared errors summed over unmasked positions and
    divided by the batch's count of them (a float mask's sum), plus a second term divided by the batch's total
    length (an int sum, cast), with features scaled by the batch's largest absolute value: what one device divides
    by is the whole batch's count and maximum."""
    rng = np.random.RandomState(9)
    rows = n * b * steps
    ids = rng.randint(0, VOCAB, size=(rows, 5)).astype(np.int32)
    lengths = rng.randint(1, 6, size=(rows,)).astype(np.int32)
    x, y = rng.randn(rows, 3) * rng.randint(1, 4, size=(rows, 1)), np.sin(ids) + 0.1 * rng.randn(rows, 5)
    g = tf.Graph()
    with g.as_default():
        idp, lp = tf1.placeholder(tf.int32, [None, 5], "ids"), tf1.placeholder(tf.int32, [None], "lengths")
        xp, yp = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None, 5], "y")
        emb = tf1.get_variable("embedding", [VOCAB, 3], F64, initializer=_init(9))
        scaled = xp / tf.reduce_max(tf.abs(xp))
        hidden = tf.nn.embedding_lookup(emb, idp) + _dense(scaled, 3, "features", 5)[:, None, :]
        pred = tf.squeeze(_dense(hidden, 1, "out", 4), -1)
        mask = tf.sequence_mask(lp, 5, dtype=F64)
        errors = tf.square(pred - yp) * mask
        loss = tf.reduce_sum(errors) / tf.reduce_sum(mask) + \
            tf.reduce_sum(tf.abs(pred - yp) * mask) / tf.cast(tf.reduce_sum(lp), F64)
        train = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((ids, lengths, x, y), (idp, lp, xp, yp)))


def weighted_losses_padded(n, b, steps, graph_batch, lr_scale=1.0):
    """Sequences of different lengths from a parallax.shard dataset, padded per batch (each worker to its own
    longest), and tf.compat.v1.losses' cross entropy with the padding's weights 0: its default reduction divides
    by the batch's count of nonzero weights."""
    rng = np.random.RandomState(10)
    rows = n * b * steps
    lengths = rng.randint(1, 7, size=(rows,)).astype(np.int32)
    tokens = rng.randint(0, VOCAB, size=(rows, 6)).astype(np.int32)
    g = tf.Graph()
    with g.as_default():
        ds = parallax.shard(tf.data.Dataset.from_tensor_slices((tokens, lengths)))
        ds = ds.map(lambda t, n_: (t[:n_], n_)).padded_batch(graph_batch, padded_shapes=([None], []))
        seq, seq_len = tf1.data.make_one_shot_iterator(ds).get_next()
        emb = tf1.get_variable("embedding", [VOCAB, 4], F64, initializer=_init(10))
        logits = _dense(tf.tanh(tf.nn.embedding_lookup(emb, seq)), VOCAB, "softmax", 6)
        targets = tf.math.floormod(seq * 7 + 3, VOCAB)
        weights = tf.sequence_mask(seq_len, tf.shape(seq)[1], dtype=F64)
        loss = tf1.losses.sparse_softmax_cross_entropy(targets, logits, weights=weights)
        train = tf1.train.AdagradOptimizer(0.3 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, None)


USER_GRAPHS_MORE = {
    "hand_written_sgd": hand_written_sgd,
    "hand_written_momentum": hand_written_momentum,
    "hand_written_momentum_ref": hand_written_momentum_ref,
    "rare_optimizers": rare_optimizers,
    "rare_optimizers_ref": rare_optimizers_ref,
    "keras_layers": keras_layers,
    "ema_with_num_updates": ema_with_num_updates,
    "keras_gru": keras_gru,
    "map_fn_over_dynamic_lstm": map_fn_over_dynamic_lstm,
    "shard_list_debiased_average": shard_list_debiased_average,
    "plateau_lr_and_summaries": plateau_lr_and_summaries,
    "loss_scaled_finite_check": loss_scaled_finite_check,
    "loss_scaled_finite_check_v1_cond": loss_scaled_finite_check_v1_cond,
    "dropout_fed": dropout_fed,
    "dropout_sharded": dropout_sharded,
    "token_weighted_mean": token_weighted_mean,
    "weighted_losses_padded": weighted_losses_padded,
}

