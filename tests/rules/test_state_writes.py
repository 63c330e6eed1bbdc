"""The last check on writes of state (parallax/rules/state_writes.py): a value the batch changes in a way no rule makes one
device's is computed from every worker's rows where the ops that mix them can be (a memory bank of the batch's
last keys), else listed, so the job warns (the batch's last example); values the rules make one device's (a
running mean of the inputs, a fused batch norm's moving averages) and values of gradients are left alone."""
import tensorflow as tf

import parallax
from parallax.rules import batch_statistics, state_writes
from parallax.analysis import keyed_writes
from parallax.plan.planning import plan_job
from tests.equivalence.run_case import case_builder

tf1 = tf.compat.v1
TWO_HOSTS = parallax.ResourceSpec.parse("127.0.0.1: 0\n127.0.0.2: 0")


def _plan(g, mode="MPI"):
    return plan_job(g, parallax.analyze(g), TWO_HOSTS, parallax.Config(run_option=mode))


def _memory_bank(size):
    """Scores against a bank of the last `size` item vectors, which the step then pushes its own items into."""
    g = tf.Graph()
    with g.as_default():
        users, items = tf1.placeholder(tf.int32, [None], "users"), tf1.placeholder(tf.int32, [None], "items")
        user_emb = tf1.get_variable("user_emb", [20, 4], tf.float64)
        item_emb = tf1.get_variable("item_emb", [20, 4], tf.float64)
        bank = tf1.get_variable("bank", [size, 4], tf.float64, trainable=False)
        u, v = tf.nn.embedding_lookup(user_emb, users), tf.nn.embedding_lookup(item_emb, items)
        logits = tf.concat([tf.reduce_sum(u * v, 1, keepdims=True), tf.matmul(u, bank, transpose_b=True)], 1)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.zeros_like(users),
                                                                             logits=logits))
        train = tf1.train.AdagradOptimizer(0.1).minimize(loss)
        with tf.control_dependencies([train]):
            bank.assign(tf.concat([tf.stop_gradient(v), bank], 0)[:size], name="push")
    return g


def test_a_memory_bank_of_the_batchs_keys_is_made_of_every_workers_keys_in_every_mode():
    for mode in ("MPI", "PS", "HYBRID"):
        plan = _plan(_memory_bank(16), mode)
        rows = [(name, readers) for name, law, readers in plan.batch_statistics if law == keyed_writes.ROWS]
        assert rows == [("StopGradient:0", ("concat_1",))], (mode, rows)
        assert not plan.uncombinable_statistics, mode


def test_a_bank_that_the_loss_reads_too_is_listed():
    """MoCo's negatives: the batch's keys and the bank, scored by the loss and pushed: the mixed value is read
    by the loss too, so it cannot be computed from every worker's rows for the write alone."""
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float64, [None, 3], "x")
        w = tf1.get_variable("w", [3, 2], tf.float64)
        bank = tf1.get_variable("bank", [8, 2], tf.float64, trainable=False)
        keys = tf.matmul(x, w)
        negatives = tf.concat([tf.stop_gradient(keys), bank], 0)
        loss = tf.reduce_mean(tf.reduce_logsumexp(tf.matmul(keys, negatives, transpose_b=True), 1))
        train = tf1.train.GradientDescentOptimizer(0.1).minimize(loss)
        with tf.control_dependencies([train]):
            bank.assign(negatives[:8], name="push")
    rows, listed, covered = state_writes.checked(g, parallax.analyze(g))
    assert rows == [] and not covered and [s.split(" ")[0] for s in listed] == ["bank"], listed


def test_the_batchs_last_example_kept_is_one_devices_last_example():
    """One device keeps its batch's last example, a worker its own last. No law combines the value; computed from
    every worker's rows (gathered_statistics.py, in batch_statistics.statistics_of_the_batch), the batch's size and the slice are one
    device's, and nothing is listed."""
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float64, [None, 3], "x")
        w = tf1.get_variable("w", [3, 1], tf.float64)
        last = tf1.get_variable("last", [3], tf.float64, trainable=False)
        train = tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.matmul(x, w)))
        with tf.control_dependencies([train]):
            last.assign(x[tf.shape(x)[0] - 1], name="keep")
    found = batch_statistics.statistics_of_the_batch(g, parallax.analyze(g))
    assert not found.uncombinable and found.laws == (("strided_slice_1:0", batch_statistics.WHOLE),), found
    plan = _plan(g)
    assert not plan.uncombinable_statistics
    assert [(name, readers) for name, law, readers in plan.batch_statistics if law == keyed_writes.ROWS] == \
        [("x:0", ("Shape", "strided_slice_1"))]


def test_a_local_variable_is_checked_as_state_is():
    """The same last example kept in a local variable (a script's own streaming state, held by every worker):
    before, no check read local variables, and each worker kept its own batch's last example, silently."""
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float64, [None, 3], "x")
        w = tf1.get_variable("w", [3, 1], tf.float64)
        last = tf1.Variable(tf.zeros([3], tf.float64), trainable=False, name="last",
                            collections=[tf1.GraphKeys.LOCAL_VARIABLES])
        train = tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.matmul(x, w)))
        with tf.control_dependencies([train]):
            last.assign(x[tf.shape(x)[0] - 1], name="keep")
    plan = _plan(g)
    assert not plan.uncombinable_statistics
    assert [(name, readers) for name, law, readers in plan.batch_statistics if law == keyed_writes.ROWS] == \
        [("x:0", ("Shape", "strided_slice_1"))]


def test_values_the_rules_make_one_devices_and_values_of_gradients_are_not_listed():
    for name in ("running_input_mean", "batch_norm_fused_conv", "keras_batch_norm", "hand_written_momentum",
                 "ema_with_num_updates", "frequency_scaled_rows", "center_loss", "target_network_copy",
                 "memory_bank_negatives", "memory_bank_sharded"):
        v2_control_flow = tf1.control_flow_v2_enabled()
        try:
            graph = case_builder(name)(2, 2, 6, 2).graph
        finally:
            if v2_control_flow:
                tf1.enable_control_flow_v2()
        assert not [s for s in _plan(graph).uncombinable_statistics if "no rule makes" in s], name


def test_two_writes_that_share_a_mixing_op_read_every_workers_rows_together():
    """The batch's hardest example and its error, kept in two variables: both gather at one argmax over the
    batch's errors, which each region alone would take for a value read elsewhere."""
    plan = _plan(case_builder("hardest_example_kept")(2, 2, 6, 2).graph)
    assert not plan.uncombinable_statistics
    assert [(name, readers) for name, law, readers in plan.batch_statistics if law == keyed_writes.ROWS] == \
        [("strided_slice:0", ("ArgMax", "GatherV2_1")), ("x:0", ("GatherV2",))]
