"""Graphs written as users write them, without a rule in mind, and run in every mode when added: batch
renormalization beside an embedding (its moving deviation, colocated with the moving variance, which is written from
the deviation as just updated: PS and HYBRID refused it before plan._place_state followed both), differences of
each example and its neighbour in the batch (tf.roll), examples pooled by a session id fed with them
(unsorted_segment_mean), a label-smoothed sequence loss weighted by a length mask under clipping and a decayed
rate (these three were exact in every mode when added), and a running loss, the batch's largest error and a
streaming metric (tf1.metrics.mean: local variables, each worker's its own batch's before batch_statistics counted
their writes as updates) kept in variables, a variational autoencoder with streaming accuracy and AUC, and a GAN
step whose generator gradients wait for the discriminator's update (exact in MPI and HYBRID; in PS, 0.047 off,
silently, before that step was refused). Same conventions as cases.py."""
import numpy as np
import tensorflow as tf

from tests.equivalence.cases import F64, Case, _dense, _init, _rows
from tests.equivalence.user_graphs_more import VOCAB, _ids_and_targets
from tests.equivalence.user_graphs_pairs import _regression

tf1 = tf.compat.v1


def neighbor_difference_roll(n, b, steps, graph_batch, lr_scale=1.0):
    """Each prediction minus its neighbour's in the batch (tf.roll by one) fitted to the targets' differences,
    plus a mean-squared term; Momentum."""
    x, y = _regression(911, n, b, steps)
    g = tf.Graph()
    with g.as_default():
        xp, yp = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None], "y")
        h = tf.squeeze(_dense(_dense(xp, 4, "hidden", 912, tf.nn.tanh), 1, "out", 913), 1)
        d = h - tf.roll(h, 1, axis=0)
        t = yp - tf.roll(yp, 1, axis=0)
        loss = tf.reduce_mean(tf.square(d - t)) + 0.1 * tf.reduce_mean(tf.square(h - yp))
        train = tf1.train.MomentumOptimizer(0.05, 0.9).minimize(loss, tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, y), (xp, yp)))


def batch_renorm(n, b, steps, graph_batch, lr_scale=1.0):
    """tf1.layers.batch_normalization with renorm=True (float32: Keras's renorm casts its epsilon to float32)
    after an embedding's lookups; its updates in UPDATE_OPS; Adam."""
    ids, y = _ids_and_targets(921, n * b * steps)
    y = y.astype(np.float32)
    g = tf.Graph()
    with g.as_default():
        idp, yp = tf1.placeholder(tf.int32, [None, 3], "ids"), tf1.placeholder(tf.float32, [None, 1], "y")
        emb = tf1.get_variable("embedding", [VOCAB, 4], tf.float32, initializer=_init(924, tf.float32))
        x = tf.reshape(tf.nn.embedding_lookup(emb, idp), [-1, 12])
        # no bias before the normalization: its gradient is zero up to rounding, which Adam's epsilon amplifies
        h = tf1.layers.dense(x, 4, use_bias=False, name="hidden", kernel_initializer=_init(922, tf.float32))
        h = tf1.layers.batch_normalization(h, training=True, renorm=True, renorm_momentum=0.9)
        pred = _dense(tf.nn.relu(h), 1, "out", 923, dtype=tf.float32)
        loss = tf.reduce_mean(tf.square(pred - yp))
        with tf.control_dependencies(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)):
            train = tf1.train.AdamOptimizer(0.05).minimize(loss, tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((ids, y), (idp, yp)), float32=True)


def session_pooled_segments(n, b, steps, graph_batch, lr_scale=1.0):
    """Each example's embedding beside the mean of its session's (unsorted_segment_mean by a session id fed with
    the examples, offset by the batch's smallest id); Adagrad."""
    rng = np.random.RandomState(931)
    rows = n * b * steps
    ids = rng.randint(0, VOCAB, size=(rows,)).astype(np.int32)
    sessions = (np.arange(rows) // 2).astype(np.int32)  # two examples per session, sessions never cross workers
    y = rng.randn(rows)
    g = tf.Graph()
    with g.as_default():
        idp, sp, yp = (tf1.placeholder(tf.int32, [None], "ids"), tf1.placeholder(tf.int32, [None], "sessions"),
                       tf1.placeholder(F64, [None], "y"))
        emb = tf1.get_variable("embedding", [VOCAB, 4], F64, initializer=_init(932))
        e = tf.nn.embedding_lookup(emb, idp)
        local = sp - tf.reduce_min(sp)
        pooled = tf.math.unsorted_segment_mean(e, local, tf.reduce_max(local) + 1)
        back = tf.gather(pooled, local)
        pred = tf.squeeze(_dense(tf.concat([e, back], 1), 1, "out", 933), 1)
        loss = tf.reduce_mean(tf.square(pred - yp))
        train = tf1.train.AdagradOptimizer(0.2).minimize(loss, tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((ids, sessions, y), (idp, sp, yp)))


def label_smoothed_nmt_loss(n, b, steps, graph_batch, lr_scale=1.0):
    """A GRU over embedded tokens of fed lengths, a softmax cross-entropy with label smoothing weighted by the
    length mask (tf1.losses: a sum over the nonzero weights' count), Adam at an exponentially decayed rate, the
    gradients clipped by their global norm."""
    rng = np.random.RandomState(941)
    rows = n * b * steps
    src = rng.randint(1, VOCAB, size=(rows, 5)).astype(np.int32)
    lengths = rng.randint(1, 6, size=(rows,)).astype(np.int32)
    tgt = rng.randint(0, 6, size=(rows, 5)).astype(np.int32)
    g = tf.Graph()
    with g.as_default():
        sp, lp, tp = (tf1.placeholder(tf.int32, [None, 5], "src"), tf1.placeholder(tf.int32, [None], "len"),
                      tf1.placeholder(tf.int32, [None, 5], "tgt"))
        emb = tf1.get_variable("embedding", [VOCAB, 4], F64, initializer=_init(942))
        cell = tf1.nn.rnn_cell.GRUCell(4, kernel_initializer=_init(943), dtype=F64)
        out, _ = tf1.nn.dynamic_rnn(cell, tf.nn.embedding_lookup(emb, sp), sequence_length=lp, dtype=F64)
        logits = _dense(out, 6, "proj", 944)
        mask = tf.sequence_mask(lp, 5, dtype=F64)
        ce = tf1.losses.softmax_cross_entropy(tf.one_hot(tp, 6, dtype=F64), logits, weights=mask,
                                              label_smoothing=0.1)
        lr = tf1.train.exponential_decay(0.05, tf1.train.get_or_create_global_step(), 2, 0.9, staircase=True)
        opt = tf1.train.AdamOptimizer(lr)
        grads, tvars = zip(*opt.compute_gradients(ce))
        clipped, _ = tf.clip_by_global_norm(grads, 0.5)
        train = opt.apply_gradients(zip(clipped, tvars), tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((src, lengths, tgt), (sp, lp, tp)))


def loss_tracked_in_variables(n, b, steps, graph_batch, lr_scale=1.0):
    """The script keeps a running average of its loss and the last batch's largest error in variables (assigned
    in the train op's group), a streaming accuracy-like mean of a thresholded prediction (tf1.metrics.mean, whose
    total and count are local variables) and the batch's last target in a local variable of its own, both copied
    into global ones each step."""
    x, y = _regression(951, n, b, steps)
    g = tf.Graph()
    with g.as_default():
        xp, yp = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None], "y")
        pred = tf.squeeze(_dense(_dense(xp, 4, "hidden", 952, tf.nn.tanh), 1, "out", 953), 1)
        err = tf.square(pred - yp)
        loss = tf.reduce_mean(err)
        avg = tf1.get_variable("avg_loss", [], F64, initializer=tf1.zeros_initializer(), trainable=False)
        worst = tf1.get_variable("worst_error", [], F64, initializer=tf1.zeros_initializer(), trainable=False)
        seen = tf1.get_variable("seen_accuracy", [], F64, initializer=tf1.zeros_initializer(), trainable=False)
        acc, acc_update = tf1.metrics.mean(tf.cast(tf.abs(pred - yp) < 0.5, F64))
        last = tf1.Variable(tf.zeros([], F64), trainable=False, name="last_target",
                            collections=[tf1.GraphKeys.LOCAL_VARIABLES])
        last_seen = tf1.get_variable("last_target_seen", [], F64, initializer=tf1.zeros_initializer(),
                                     trainable=False)
        with tf.control_dependencies([acc_update, last.assign(yp[tf.shape(yp)[0] - 1])]):
            keep = tf.group(seen.assign(tf.cast(acc_update, F64)), last_seen.assign(last.read_value()))
        opt = tf1.train.GradientDescentOptimizer(0.1)
        train = tf.group(opt.minimize(loss, tf1.train.get_or_create_global_step()),
                         avg.assign(0.9 * avg + 0.1 * loss), worst.assign(tf.reduce_max(err)), keep, name="train")
    return Case(g, train, _rows((x, y), (xp, yp)))


def vae_with_streaming_accuracy(n, b, steps, graph_batch, lr_scale=1.0):
    """A variational autoencoder: the reparameterized sample draws noise per example under an op seed, a KL term
    summed over latents and averaged over the batch; a classifier head on the mean code with tf1.metrics.accuracy
    and tf1.metrics.auc updated with the train op and copied into global variables; Momentum (Nesterov) at a
    piecewise-constant rate."""
    x, y = _regression(961, n, b, steps)
    labels = (y > 0).astype(np.int64)
    g = tf.Graph()
    with g.as_default():
        xp, lp = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(tf.int64, [None], "labels")
        h = _dense(xp, 6, "encoder", 962, tf.nn.tanh)
        mu, log_var = _dense(h, 2, "mu", 963), _dense(h, 2, "log_var", 964)
        z = mu + tf.exp(0.5 * log_var) * tf.random.normal(tf.shape(mu), dtype=F64, seed=965)
        recon = _dense(_dense(z, 6, "decoder", 966, tf.nn.tanh), 3, "recon", 967)
        kl = -0.5 * tf.reduce_sum(1 + log_var - tf.square(mu) - tf.exp(log_var), axis=1)
        logits = _dense(mu, 2, "classifier", 968)
        loss = tf.reduce_mean(tf.reduce_sum(tf.square(recon - xp), axis=1) + 0.1 * kl) + tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=lp, logits=logits))
        _, accuracy = tf1.metrics.accuracy(lp, tf.argmax(logits, 1))
        _, auc = tf1.metrics.auc(lp, tf.nn.softmax(logits)[:, 1], num_thresholds=20)
        kept = [tf1.get_variable(name, [], F64, initializer=tf1.zeros_initializer(), trainable=False)
                for name in ("accuracy_seen", "auc_seen")]
        step = tf1.train.get_or_create_global_step()
        rate = tf1.train.piecewise_constant(step, [2, 4], [0.05, 0.02, 0.01])
        train = tf.group(tf1.train.MomentumOptimizer(tf.cast(rate, F64), 0.9, use_nesterov=True).minimize(loss, step),
                         kept[0].assign(tf.cast(accuracy, F64)), kept[1].assign(tf.cast(auc, F64)), name="train")
    return Case(g, train, _rows((x, labels), (xp, lp)))


def gan_discriminator_then_generator(n, b, steps, graph_batch, lr_scale=1.0):
    """A GAN step as scripts write it: the discriminator's update, then the generator's, whose gradients are
    taken after the discriminator's update (a control dependency) in one fetch; Adam for both, var_list split."""
    x, _ = _regression(971, n, b, steps)
    noise = np.random.RandomState(972).randn(n * b * steps, 2)
    g = tf.Graph()
    with g.as_default():
        xp, zp = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None, 2], "z")
        with tf1.variable_scope("generator"):
            fake = _dense(_dense(zp, 4, "h", 973, tf.nn.tanh), 3, "out", 974)

        def critic(v):
            with tf1.variable_scope("discriminator", reuse=tf1.AUTO_REUSE):
                return _dense(_dense(v, 4, "h", 975, tf.nn.tanh), 1, "out", 976)
        real_logits, fake_logits = critic(xp), critic(fake)
        bce = tf.nn.sigmoid_cross_entropy_with_logits
        d_loss = tf.reduce_mean(bce(labels=tf.ones_like(real_logits), logits=real_logits)) + \
            tf.reduce_mean(bce(labels=tf.zeros_like(fake_logits), logits=fake_logits))
        d_vars = tf1.trainable_variables("discriminator")
        g_vars = tf1.trainable_variables("generator")
        d_train = tf1.train.AdamOptimizer(0.05).minimize(d_loss, var_list=d_vars)
        with tf.control_dependencies([d_train]):
            g_logits = critic(fake)
            g_loss = tf.reduce_mean(bce(labels=tf.ones_like(g_logits), logits=g_logits))
            g_train = tf1.train.AdamOptimizer(0.05).minimize(g_loss, var_list=g_vars,
                                                              global_step=tf1.train.get_or_create_global_step())
    return Case(g, g_train, _rows((x, noise), (xp, zp)))


USER_GRAPHS_UNPLANNED = {f.__name__: f for f in (batch_renorm, neighbor_difference_roll, session_pooled_segments,
                                                 label_smoothed_nmt_loss, loss_tracked_in_variables,
                                                 vae_with_streaming_accuracy, gan_discriminator_then_generator)}
