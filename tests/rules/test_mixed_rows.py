"""Rows written by key that mix the batch's examples (parallax/rules/mixed_rows.py): the mixing ops run on every worker's
rows, gathered where they are the examples' own (a shape they read too); where the mixed value is read by anything
but the write, or the mixing runs in a v1 loop or cond, the rows are listed. The equivalence suite runs the center
loss in every mode (user_graphs_stateful.py)."""
import tensorflow as tf

import parallax
from parallax.analysis import keyed_writes
from parallax.plan.planning import plan_job
from tests.equivalence.run_case import case_builder

tf1 = tf.compat.v1
TWO_HOSTS = parallax.ResourceSpec.parse("127.0.0.1: 0\n127.0.0.2: 0")


def _plan(g, mode="MPI"):
    return plan_job(g, parallax.analyze(g), TWO_HOSTS, parallax.Config(run_option=mode))


def _rows(plan):
    return sorted((name, readers) for name, law, readers in plan.batch_statistics if law == keyed_writes.ROWS)


def _centers(per_example_step):
    """A center loss's write: each example's step toward its features, from per_example_step(features, labels)."""
    g = tf.Graph()
    with g.as_default():
        x, labels = tf1.placeholder(tf.float64, [None, 3], "x"), tf1.placeholder(tf.int32, [None], "labels")
        features = tf1.layers.dense(x, 2, name="features")
        centers = tf1.get_variable("centers", [3, 2], tf.float64, initializer=tf1.zeros_initializer(),
                                   trainable=False)
        own = tf.gather(centers, labels, name="own")
        step, loss = per_example_step(own - features, labels)
        move = tf1.scatter_sub(centers, labels, step, name="move")
        with tf.control_dependencies([move]):
            tf1.train.GradientDescentOptimizer(0.1).minimize(loss)
    return g


def _divided_by_count(difference, labels):
    _, index, counts = tf.unique_with_counts(labels)
    step = tf.math.divide(difference, tf.cast(1 + tf.gather(counts, index), tf.float64)[:, None], name="step")
    return step, tf.reduce_mean(tf.square(difference))


def test_a_step_divided_by_its_keys_count_in_the_batch_is_computed_from_every_workers_rows():
    for mode in ("MPI", "PS", "HYBRID"):
        plan = _plan(_centers(_divided_by_count), mode)
        (labels, label_readers), (difference, difference_readers) = _rows(plan)
        assert labels == "labels:0" and set(label_readers) == {"move", "UniqueWithCounts"}, mode
        assert difference == "sub:0" and difference_readers == ("step",), mode
        assert not plan.uncombinable_statistics, mode


def test_own_rows_are_gathered_where_the_write_reads_them():
    plan = _plan(_centers(lambda difference, labels: (0.5 * difference, tf.reduce_mean(tf.square(difference)))))
    assert _rows(plan) == [("labels:0", ("move",)), ("mul:0", ("move",))]
    assert not plan.uncombinable_statistics


def test_a_mixed_value_the_loss_reads_too_is_listed_and_the_rows_gathered_as_computed():
    def read_by_the_loss(difference, labels):
        step, _ = _divided_by_count(difference, labels)
        return step, tf.reduce_mean(tf.square(step))
    plan = _plan(_centers(read_by_the_loss))
    assert _rows(plan) == [("labels:0", ("move",)), ("step:0", ("move",))]
    assert [s.split(" ")[0] for s in plan.uncombinable_statistics] == ["step:0"]
    assert "which the batch's other examples change" in plan.uncombinable_statistics[0]


def test_a_step_scaled_by_its_position_in_the_batch_reads_one_devices_positions():
    """The position comes from the batch's size, which the mixing ops read of every worker's rows."""
    def by_position(difference, labels):
        position = tf.cast(tf.range(tf.shape(labels)[0]), tf.float64)
        return tf.math.multiply(difference, position[:, None], name="step"), tf.reduce_mean(tf.square(difference))
    plan = _plan(_centers(by_position))
    assert _rows(plan) == [("labels:0", ("Shape", "move")), ("sub:0", ("step",))]
    assert not plan.uncombinable_statistics


def test_a_mixing_op_in_a_v1_cond_is_refused():
    """Its frame's other ops cannot read gathered rows from outside it. (The samples do not run such a graph, so
    the rows are gathered as computed: the region is checked alone.)"""
    from parallax.core import graph_utils
    from parallax.rules import mixed_rows
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float64, [None, 2], "x")
        tf1.disable_control_flow_v2()
        try:
            tf1.cond(tf.constant(True), lambda: tf.cumsum(x), lambda: x)
        finally:
            tf1.enable_control_flow_v2()
    cumsum = g.get_operation_by_name("cond/Cumsum")
    batch_ops = mixed_rows.from_batch(graph_utils.ancestors([cumsum]))
    region, frontier, why = mixed_rows._mixing_region(cumsum.outputs[0], {"x:0"}, set(), batch_ops)
    assert not region and not frontier and "in a v1 while loop or cond" in why


def test_the_equivalence_case_gathers_the_labels_and_the_differences():
    plan = _plan(case_builder("center_loss")(2, 2, 6, 2).graph, "HYBRID")
    assert [name for name, _ in _rows(plan)] == ["labels:0", "sub:0"]
