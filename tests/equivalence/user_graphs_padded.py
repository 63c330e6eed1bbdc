"""Sentences of different lengths read through `ds.padded_batch`, as language and translation models read them:
one device pads its batch to the longest of all its sentences, a worker to the longest of its own. Each case reads
the padded length: an RNN run over the padding (no sequence_length) whose final state is used, and a mean over
every padded position. parallax pads each worker's batch further to the longest over the workers
(padded_inputs.py). Also pipelines written around parallax.shard otherwise than `shard(ds).batch(b)`. Same
conventions as cases.py.
"""
import numpy as np
import tensorflow as tf

import parallax
from tests.equivalence.cases import F64, Case, _dense, _init

tf1 = tf.compat.v1
VOCAB = 12


def _sentences(seed, graph_batch, rows):
    """A dataset of sentences of 1 to 6 ids (0 is the padding), sharded element-wise, padded per batch; its tokens
    and each sentence's length."""
    rng = np.random.RandomState(seed)
    sentences = [rng.randint(1, VOCAB, size=k).astype(np.int64) for k in rng.randint(1, 7, size=rows)]
    ds = tf.data.Dataset.from_generator(lambda: iter(sentences), tf.int64, tf.TensorShape([None]))
    tokens = tf1.data.make_one_shot_iterator(parallax.shard(ds).padded_batch(graph_batch, [None])).get_next()
    return tokens, tf.reduce_sum(tf.cast(tokens > 0, tf.int32), 1)


def padded_final_state(n, b, steps, graph_batch, lr_scale=1.0):
    """An RNN encoder run over the padding too, its final state regressed on the sentence's length."""
    g = tf.Graph()
    with g.as_default():
        tokens, length = _sentences(101, graph_batch, n * b * steps)
        emb = tf1.get_variable("emb", [VOCAB, 4], F64, initializer=_init(102))
        with tf1.variable_scope("encoder", initializer=_init(103)):
            _, state = tf1.nn.dynamic_rnn(tf1.nn.rnn_cell.BasicRNNCell(5), tf.nn.embedding_lookup(emb, tokens),
                                          dtype=F64)
        loss = tf.reduce_mean(tf.square(_dense(state, 1, "out", 104)[:, 0] - tf.cast(length, F64)))
        train = tf1.train.AdagradOptimizer(0.3 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, None)


def padded_mean_all(n, b, steps, graph_batch, lr_scale=1.0):
    """A language model (RNN with sequence_length) whose loss is the mean over every position, padding included."""
    g = tf.Graph()
    with g.as_default():
        tokens, length = _sentences(105, graph_batch, n * b * steps)
        emb = tf1.get_variable("emb", [VOCAB, 4], F64, initializer=_init(106))
        with tf1.variable_scope("lm", initializer=_init(107)):
            out, _ = tf1.nn.dynamic_rnn(tf1.nn.rnn_cell.BasicRNNCell(5), tf.nn.embedding_lookup(emb, tokens),
                                        sequence_length=length, dtype=F64)
        logits = _dense(out[:, :-1], VOCAB, "softmax", 108)
        xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tokens[:, 1:], logits=logits)
        loss = tf.reduce_mean(xent * tf.cast(tokens[:, 1:] > 0, F64))
        train = tf1.train.AdagradOptimizer(0.3 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, None)


def padded_v1_loop_lookups(n, b, steps, graph_batch, lr_scale=1.0):
    """A TF1 script's hand-written recurrence: a v1 while loop over the padded positions whose body looks up each
    position's embedding (its rows live on a server in PS and HYBRID, so every iteration, the last one too, which
    the loop's exit does not wait for, runs ops there)."""
    tf1.disable_control_flow_v2()  # as tf.compat.v1.disable_v2_behavior() does (one case per process)
    g = tf.Graph()
    with g.as_default():
        tokens, length = _sentences(109, graph_batch, n * b * steps)
        emb = tf1.get_variable("emb", [VOCAB, 4], F64, initializer=_init(110))
        cell = tf1.get_variable("cell", [4, 4], F64, initializer=_init(111))

        def body(i, h):
            return i + 1, tf.tanh(tf.matmul(h, cell) + tf.nn.embedding_lookup(emb, tokens[:, i]))
        _, state = tf1.while_loop(lambda i, h: i < tf.shape(tokens)[1], body,
                                  [tf.constant(0), tf.zeros([tf.shape(tokens)[0], 4], F64)])
        loss = tf.reduce_mean(tf.square(_dense(state, 1, "out", 112)[:, 0] - tf.cast(length, F64)))
        train = tf1.train.AdagradOptimizer(0.3 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, None)


def nested_v1_loops_lookups(n, b, steps, graph_batch, lr_scale=1.0):
    """v1 while loops two deep: two passes over the padded positions, the inner body looking each position's
    embedding up (server rows in PS and HYBRID). Each loop's last, dead iteration still runs ops on a server after
    its exit has fired, and a step fence must wait for them through both frames (step_fence._loops_settled)."""
    tf1.disable_control_flow_v2()
    g = tf.Graph()
    with g.as_default():
        tokens, length = _sentences(137, graph_batch, n * b * steps)
        emb = tf1.get_variable("emb", [VOCAB, 4], F64, initializer=_init(138))
        cell = tf1.get_variable("cell", [4, 4], F64, initializer=_init(139))
        width = tf.shape(tokens)[1]

        def position(i, h):
            return i + 1, tf.tanh(tf.matmul(h, cell) + tf.nn.embedding_lookup(emb, tokens[:, i]))

        def sweep(r, h):
            return r + 1, tf1.while_loop(lambda i, h: i < width, position, [tf.constant(0), h])[1]

        start = tf.zeros([tf.shape(tokens)[0], 4], F64)
        state = tf1.while_loop(lambda r, h: r < 2, sweep, [tf.constant(0), start])[1]
        loss = tf.reduce_mean(tf.square(_dense(state, 1, "out", 140)[:, 0] - tf.cast(length, F64)))
        train = tf1.train.AdagradOptimizer(0.3 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, None)


def v1_loop_in_cond_lookups(n, b, steps, graph_batch, lr_scale=1.0):
    """A v1 while loop inside a v1 cond's branch (taken), its body multiplying by a dense matrix and looking each
    position's embedding up. Its gradient's stacks save the matrix's read (on a server in PS) and reach their
    pushes and pops through the cond's Switch and an Enter, which TF had colocated with that read: the stacks went
    to the server, where the workers' steps, under one step id with TF's collectives, shared one step container,
    and the first step to end took the other's stacks with it (graph_utils.carries_step_state). And the fence
    waited for the branch's last ops outside the loop only (step_fence._branches_settled)."""
    tf1.disable_control_flow_v2()
    g = tf.Graph()
    with g.as_default():
        tokens, length = _sentences(141, graph_batch, n * b * steps)
        emb = tf1.get_variable("emb", [VOCAB, 4], F64, initializer=_init(142))
        cell = tf1.get_variable("cell", [4, 4], F64, initializer=_init(143))

        def position(i, h):
            return i + 1, tf.tanh(tf.matmul(h, cell) + tf.nn.embedding_lookup(emb, tokens[:, i]))
        start = tf.zeros([tf.shape(tokens)[0], 4], F64)
        state = tf1.cond(tf.reduce_max(length) > 0,
                         lambda: tf1.while_loop(lambda i, h: i < tf.shape(tokens)[1], position,
                                                [tf.constant(0), start])[1],
                         lambda: start)
        loss = tf.reduce_mean(tf.square(_dense(state, 1, "out", 144)[:, 0] - tf.cast(length, F64)))
        train = tf1.train.AdagradOptimizer(0.3 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, None)


def padded_v1_loop_tensor_array(n, b, steps, graph_batch, lr_scale=1.0):
    """A v1 while loop that writes each position's step into a TensorArray, stacked and pooled after the loop: the
    TensorArray lives in the step's container, colocated with its first write, a product of a server variable's read
    (graph_utils.PER_STEP_RESOURCE_OPS); its gradient loop keeps that read on a stack too."""
    tf1.disable_control_flow_v2()
    g = tf.Graph()
    with g.as_default():
        tokens, length = _sentences(131, graph_batch, n * b * steps)
        emb = tf1.get_variable("emb", [VOCAB, 4], F64, initializer=_init(132))
        cell = tf1.get_variable("cell", [4, 4], F64, initializer=_init(133))
        outputs = tf.TensorArray(F64, size=tf.shape(tokens)[1])

        def body(i, h, ta):
            h = tf.tanh(tf.matmul(tf.nn.embedding_lookup(emb, tokens[:, i]), cell) + h)
            return i + 1, h, ta.write(i, h)
        _, _, outputs = tf1.while_loop(lambda i, h, ta: i < tf.shape(tokens)[1], body,
                                       [tf.constant(0), tf.zeros([tf.shape(tokens)[0], 4], F64), outputs])
        pooled = tf.reduce_mean(outputs.stack(), 0)
        loss = tf.reduce_mean(tf.square(_dense(pooled, 1, "out", 134)[:, 0] - tf.cast(length, F64)))
        train = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, None)


def shuffled_and_filtered_after_the_shard(n, b, steps, graph_batch, lr_scale=1.0):
    """A pipeline written around parallax.shard as a script has it: shuffle (op seed), filter, map, repeat, then
    batch, all after the shard. parallax cuts the stream right before the batch (shard_placement.py); cut where
    written, each worker shuffled and filtered its own share, and the batches were not one device's."""
    rng = np.random.RandomState(121)
    rows = 2 * n * b * steps
    ids = rng.randint(0, VOCAB, size=(rows, 3)).astype(np.int64)
    keep, y = rng.rand(rows) < 0.7, rng.randn(rows)
    g = tf.Graph()
    with g.as_default():
        ds = parallax.shard(tf.data.Dataset.from_tensor_slices((ids, keep, y))).shuffle(16, seed=122)
        ds = ds.filter(lambda i, k, t: k).map(lambda i, k, t: (i, t * 2.0)).repeat().batch(graph_batch)
        idp, yp = tf1.data.make_one_shot_iterator(ds).get_next()
        emb = tf1.get_variable("emb", [VOCAB, 4], F64, initializer=_init(123), use_resource=True)
        pred = _dense(tf.reduce_mean(tf.nn.embedding_lookup(emb, idp), 1), 1, "out", 124)[:, 0]
        loss = tf.reduce_mean(tf.square(pred - yp))
        train = tf1.train.AdamOptimizer(0.05 * lr_scale).minimize(loss, tf1.train.get_or_create_global_step())
    return Case(g, train, None)


def dropout_over_sharded_batches(n, b, steps, graph_batch, lr_scale=1.0):
    """parallax.shard over batches (`shard(ds.batch(b))`): worker i's k-th batch is one device's batch kN+i of b,
    a block of one device's k-th batch of N*b, so each worker keeps a block of the whole batch's dropout draw, not
    every N-th row (batch_draws._layout; taken for every N-th row, 1.07 off, relative, silently)."""
    rng = np.random.RandomState(125)
    x, y = rng.randn(n * b * steps, 6), rng.randn(n * b * steps, 1)
    g = tf.Graph()
    with g.as_default():
        ds = parallax.shard(tf.data.Dataset.from_tensor_slices((x, y)).batch(graph_batch))
        xb, yb = tf1.data.make_one_shot_iterator(ds).get_next()
        h = tf.nn.dropout(_dense(xb, 8, "hidden", 126, tf.nn.relu), rate=0.3, seed=127)
        loss = tf.reduce_mean(tf.square(_dense(h, 1, "out", 128) - yb))
        train = tf1.train.AdamOptimizer(0.01 * lr_scale).minimize(loss, tf1.train.get_or_create_global_step())
    return Case(g, train, None)


USER_GRAPHS_PADDED = {"dropout_over_sharded_batches": dropout_over_sharded_batches,
                      "padded_final_state": padded_final_state, "padded_mean_all": padded_mean_all,
                      "nested_v1_loops_lookups": nested_v1_loops_lookups,
                      "padded_v1_loop_lookups": padded_v1_loop_lookups,
                      "padded_v1_loop_tensor_array": padded_v1_loop_tensor_array,
                      "shuffled_and_filtered_after_the_shard": shuffled_and_filtered_after_the_shard,
                      "v1_loop_in_cond_lookups": v1_loop_in_cond_lookups}
