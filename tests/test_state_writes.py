"""The last check on writes of state (parallax/state_writes.py): a value the batch changes in a way no rule makes one
device's (a memory bank of the batch's last keys) is listed, so the job warns; values the rules make one device's
(a running mean of the inputs, a fused batch norm's moving averages), values of gradients and graphs without
batch-dependent state are not."""
import tensorflow as tf

import parallax
from parallax.planning import plan_job
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


def test_a_memory_bank_of_the_batchs_keys_is_listed_in_every_mode():
    for mode in ("MPI", "PS", "HYBRID"):
        listed = _plan(_memory_bank(16), mode).uncombinable_statistics
        assert [s.split(" ")[0] for s in listed] == ["bank"], (mode, listed)
        assert "each worker writes the value of its own examples" in listed[0]


def test_values_the_rules_make_one_devices_and_values_of_gradients_are_not_listed():
    for name in ("running_input_mean", "batch_norm_fused_conv", "keras_batch_norm", "hand_written_momentum",
                 "ema_with_num_updates", "frequency_scaled_rows", "center_loss", "target_network_copy"):
        v2_control_flow = tf1.control_flow_v2_enabled()
        try:
            graph = case_builder(name)(2, 2, 6, 2).graph
        finally:
            if v2_control_flow:
                tf1.enable_control_flow_v2()
        assert not [s for s in _plan(graph).uncombinable_statistics if "no rule makes" in s], name
