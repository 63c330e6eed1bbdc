"""The batch merged with another axis (issue 57, item 2): a run on random batches finds an extent of k rows an
example (batch_samples._extent), a statistic taken over it is found and combined (activity_mean_over_merged_batch
in the equivalence suite), and a v1 loop's stack pops are no per-worker input (batch_shapes.per_worker_inputs)."""
import tensorflow as tf

from parallax.analysis import batch_samples
from parallax.analysis.batch_shapes import MARKERS, per_worker_inputs

tf1 = tf.compat.v1


def test_an_extent_of_k_rows_an_example_is_k_times_the_marker():
    examples = [8, 8, 4, 4, 1, 7]
    assert batch_samples._extent(examples, examples, MARKERS[0]) == MARKERS[0]
    assert batch_samples._extent([3 * e for e in examples], examples, MARKERS[0]) == 3 * MARKERS[0]
    assert batch_samples._extent([5] * 6, examples, MARKERS[0]) == 5  # the same in every part
    assert batch_samples._extent([e + 1 for e in examples], examples, MARKERS[0]) is None


def test_a_v1_loops_stack_pops_are_no_input():
    tf1.disable_control_flow_v2()
    try:
        g = tf.Graph()
        with g.as_default():
            x = tf1.placeholder(tf.float64, [None, 3], "x")
            w = tf1.get_variable("w", [3, 3], tf.float64, use_resource=False)
            _, out = tf1.while_loop(lambda i, h: i < 2, lambda i, h: (i + 1, tf.tanh(tf.matmul(h, w))), [0, x])
            tf1.gradients(tf.reduce_sum(out), [w])
        found = per_worker_inputs(g)
        assert [t.name for t in found] == ["x:0"], [t.name for t in found]
        assert any(op.type == "StackPopV2" for op in g.get_operations())
    finally:
        tf1.enable_control_flow_v2()


def test_a_mean_over_rows_a_v1_loop_builds_is_warned_by_name():
    """Item 2 as reported: the states come from tf.map_fn over examples around a dynamic LSTM, in v1 control flow
    (a TF1 script), and the mean over the merged batch cannot be tied to the batch by a run of random batches. It
    stays each worker's own (the check measured 3.1e-4 off after 3 steps), and the plan names it, with the reason,
    before any step runs."""
    import parallax
    from parallax.rules import batch_statistics
    tf1.disable_control_flow_v2()
    try:
        g = tf.Graph()
        with g.as_default():
            x, y = tf1.placeholder(tf.float64, [None, 2, 3], "x"), tf1.placeholder(tf.float64, [None, 1], "y")
            cell = tf1.nn.rnn_cell.LSTMCell(5, initializer=tf1.random_uniform_initializer(-0.3, 0.3, seed=1),
                                            dtype=tf.float64)
            states = tf.map_fn(lambda ex: tf1.nn.dynamic_rnn(cell, ex[None], dtype=tf.float64)[0][0], x)
            mean = tf.reduce_mean(tf.reshape(states, [-1, 5]), 0)
            w = tf1.get_variable("w", [5, 1], tf.float64)
            loss = tf.reduce_mean(tf.square(tf.matmul(tf.reduce_mean(states, 1), w) - y)) + \
                tf.reduce_sum(tf.square(mean))
            tf1.train.GradientDescentOptimizer(0.1).minimize(loss)
        plan = parallax.explain(g, "localhost:2", parallax.Config(collective_backend="tf"), print_table=False).plan
    finally:
        tf1.enable_control_flow_v2()
    assert f"{mean.name} ({batch_statistics.DATA_SET_COUNT})" in plan.uncombinable_statistics, \
        plan.uncombinable_statistics
    assert "or a v1 loop builds the rows" in batch_statistics.uncombinable_note(plan)
