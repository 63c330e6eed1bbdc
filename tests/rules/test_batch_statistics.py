"""Statistics of the batch that gradients are computed from (batch_statistics.py): which are found, how the workers'
values combine (found by running the op), and that a rewritten worker reads the combined value exactly where the
gradient is computed and its own value elsewhere."""

import numpy as np
import pytest
import tensorflow as tf

import parallax
from parallax.rules import batch_statistics, statistics_combined
from parallax.plan import plan_json
from parallax.explain import premise
from parallax.plan.records import Plan
from tests.planner_role import plan_in_planner_role
from tests.two_workers import TwoWorkers

tf1 = tf.compat.v1
F64 = tf.float64


def _find(build):
    """batch_statistics.statistics_of_the_batch of a graph where `build(x, lengths, prediction)` returns the loss;
    x: [batch, 3]."""
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(F64, [None, 3], name="x")
        lengths = tf1.placeholder(tf.int32, [None], name="lengths")
        w = tf1.get_variable("w", [3, 1], F64)
        loss = build(x, lengths, tf.matmul(x, w))
        tf1.train.GradientDescentOptimizer(0.1).minimize(loss)
    return batch_statistics.statistics_of_the_batch(g, parallax.analyze(g))


def _laws(found):
    return sorted(law for _, law, _ in found.combined)


@pytest.mark.parametrize("build, laws", [
    (lambda x, n, p: tf.reduce_sum(p) / tf.reduce_sum(tf.abs(x)), ["mean"]),  # a sum: the workers' mean is S/N
    (lambda x, n, p: tf.reduce_sum(p) / tf.reduce_mean(tf.abs(x)), ["mean"]),
    (lambda x, n, p: tf.reduce_mean(p / tf.reduce_max(tf.abs(x))), ["max"]),
    (lambda x, n, p: tf.reduce_mean(p) * tf.reduce_min(x), ["min"]),
    (lambda x, n, p: tf.reduce_mean(p) / tf.reduce_sum(tf.matmul(x, x, transpose_a=True)), ["mean"]),  # a sum
    (lambda x, n, p: tf.reduce_sum(p) / tf.cast(tf.reduce_sum(n), F64), ["mean"]),  # at the cast: S/N is no int
    (lambda x, n, p: tf1.losses.mean_squared_error(x[:, :1], p, weights=tf.cast(n[:, None] > 1, F64)), ["mean"]),
    (lambda x, n, p: tf.reduce_mean(p), []),  # a mean over examples needs nothing
    (lambda x, n, p: tf.reduce_sum(p) / tf.cast(tf.shape(x)[0], F64), []),  # the batch's size: the same everywhere
    (lambda x, n, p: tf.reduce_sum(p * tf.sequence_mask(n, dtype=F64)[:, :1]), []),  # an int extent: the padding
])
def test_statistics_that_gradients_read_are_combined_as_running_the_op_shows(build, laws):
    found = _find(build)
    assert _laws(found) == laws and not found.uncombinable


@pytest.mark.parametrize("build, statistic, reader", [
    (lambda x, n, p: tf.reduce_mean(p) * x[0, 0], "strided_slice:0", "strided_slice"),  # the batch's first example
    (lambda x, n, p: tf.reduce_mean(p) / tf.reduce_prod(x), "Prod:0", "Prod"),
])
def test_statistics_of_the_data_that_combine_in_no_known_way_are_computed_from_every_workers_rows(build, statistic,
                                                                                                reader):
    """No law combines them, but they are of the data alone: the op that mixes the examples reads every worker's
    rows (gathered_statistics.py) and the gradients read the statistic whole."""
    found = _find(build)
    assert found.combined == (("x:0", "rows", (reader,)),) and not found.uncombinable, found
    assert found.laws == ((statistic, batch_statistics.WHOLE),)


def _distinct_ids_whose_indices_are_read(x, n, p):
    ids = tf.unique(n)
    return tf.reduce_mean(p * tf.cast(ids.idx, F64)[:, None]) / tf.cast(tf.size(ids.y), F64)


@pytest.mark.parametrize("build, why", [
    # its region's tf.unique is read by the loss too (its indices): it cannot be computed from every worker's rows
    (_distinct_ids_whose_indices_are_read, "not the sum of its values on the parts"),
    # a mean over a count the data set, read by the gradients: the count is combined (tests/test_data_counts.py)
    (lambda x, n, p: tf.reduce_mean(tf.boolean_mask(p[:, 0], n > 1)) ** 2, "a mean over a number of elements that "
                                                                            "parallax could not tie"),
])
def test_statistics_that_combine_in_no_known_way_are_listed(build, why):
    found = _find(build)
    assert not [c for c in found.combined if "_grad/" not in c[0]], found.combined
    assert len(found.uncombinable) == 1 and why in found.uncombinable[0]


@pytest.mark.parametrize("build, why", [
    (lambda x, n, p: tf.reduce_mean(tf.math.top_k(p[:, 0], k=4).values), batch_statistics.SELECTS),  # hard examples
    (lambda x, n, p: tf.reduce_mean(p) + tf.sort(p[:, 0])[0], batch_statistics.SELECTS),  # the op alone: a first one
    (lambda x, n, p: tf.reduce_mean(p) + tf.reduce_max(p), batch_statistics.EXTREME_WITH_GRADIENT),
])
def test_gradient_through_a_selection_of_the_batch_is_listed_though_no_gradient_reads_it(build, why):
    """Its value is read by no gradient, but gradient flows through it only into the examples it picks: one device
    picks them from the whole batch, a worker from its own."""
    found = _find(build)
    assert not found.combined and len(found.uncombinable) == 1 and why in found.uncombinable[0], found


@pytest.mark.parametrize("reduce, law", [(tf.reduce_mean, "mean"), (tf.reduce_sum, "sum"), (tf.reduce_max, "max")])
def test_a_statistic_an_update_reads_is_combined_into_the_whole_batchs_value(reduce, law):
    """An update reads one device's value: the whole batch's mean, maximum, or sum (not the workers' mean of sums,
    which the gradients read)."""
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(F64, [None, 3], name="x")
        w = tf1.get_variable("w", [3, 1], F64)
        loss = tf.reduce_mean(tf.matmul(x, w))
        tf1.train.GradientDescentOptimizer(0.1 * reduce(tf.abs(x))).minimize(loss)
    found = batch_statistics.statistics_of_the_batch(g, parallax.analyze(g))
    assert [(law_, readers) for _, law_, readers in found.combined] == [(law, ("mul",))] and not found.uncombinable


def _update_reads(size_of):
    """batch_statistics.statistics_of_the_batch of a graph whose learning rate and a counter are
    `size_of(x, prediction)`."""
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(F64, [None, 3], name="x")
        w = tf1.get_variable("w", [3, 1], F64)
        prediction = tf.matmul(x, w)
        size = size_of(x, prediction)
        seen = tf1.get_variable("seen", [], F64, initializer=tf1.zeros_initializer(), trainable=False)
        with tf.control_dependencies([seen.assign_add(size, name="count")]):
            tf1.train.GradientDescentOptimizer(tf.multiply(size, 0.01, name="rate")).minimize(
                tf.reduce_mean(prediction))
    return batch_statistics.statistics_of_the_batch(g, parallax.analyze(g))


@pytest.mark.parametrize("size_of, readers", [
    (lambda x, p: tf.cast(tf.shape(x)[0], F64), ("count", "rate")),
    (lambda x, p: tf.cast(tf.size(p), F64) * 0.5, ("mul",)),  # where it is first read as floats, not again after
    (lambda x, p: tf.cast(tf.shape(tf.concat([x, x], 1))[0] * 2, F64), ("count", "rate")),
])
def test_a_size_of_the_batch_an_update_reads_is_the_whole_batchs(size_of, readers):
    """A value computed from the batch's shape alone that is proportional to its size: an update reads the sum over
    workers (one device's count of examples), found by the marker probes, whatever ops computed it."""
    found = _update_reads(size_of)
    assert [(law, readers) for _, law, readers in found.combined] == [("sum", readers)], found.combined
    assert not found.uncombinable


@pytest.mark.parametrize("size_of", [
    lambda x, p: tf.cast(tf.shape(x)[1], F64),  # the features' count: no size of the batch
    lambda x, p: tf.cast(tf.shape(x)[0] + 1, F64),  # not proportional to it: no law says what one device reads
    lambda x, p: tf.constant(4.0, F64),
])
def test_a_value_of_shapes_that_is_no_size_of_the_batch_is_left_alone(size_of):
    assert not _update_reads(size_of).combined


def test_a_streaming_total_of_the_predictions_is_the_whole_batchs():
    """A sum over the batch of values computed from variables that only an update reads (a streaming metric's
    total): not a function of the gradients, so one device's sum."""
    found = _update_reads(lambda x, p: tf.reduce_sum(tf.abs(p)))
    assert [(law, readers) for _, law, readers in found.combined] == [("sum", ("count", "rate"))], found.combined


def test_a_metrics_total_and_count_in_local_variables_are_the_whole_batchs():
    """tf1.metrics.mean keeps its total and count in local variables, updated with the train op: every worker
    holds its own, which must add the whole batch's sum and size, as one device's does."""
    g = tf.Graph()
    with g.as_default():
        x, y = tf1.placeholder(F64, [None, 2], name="x"), tf1.placeholder(F64, [None, 1], name="y")
        w = tf1.get_variable("w", [2, 1], F64)
        error = tf.abs(tf.matmul(x, w) - y)
        _, update = tf1.metrics.mean(error, name="mean_error")
        with tf.control_dependencies([update]):
            tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.square(error)))
    found = batch_statistics.statistics_of_the_batch(g, parallax.analyze(g))
    # the total's sum of the errors, and the count's size of the batch
    assert sorted((law, readers) for _, law, readers in found.combined) == [
        ("sum", ("mean_error/AssignAddVariableOp",)), ("sum", ("mean_error/AssignAddVariableOp_1",))], found.combined


def test_a_worker_reads_the_combined_count_where_gradients_are_computed_and_its_own_elsewhere():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(F64, [None, 2], name="x")
        mask = tf1.placeholder(F64, [None], name="mask")
        w = tf1.get_variable("w", [2, 1], F64, initializer=tf1.ones_initializer())
        loss = tf.reduce_sum(tf.squeeze(tf.matmul(x, w), 1) * mask) / tf.reduce_sum(mask)
        gradient = tf.gradients(loss, w)[0]
        tf1.train.GradientDescentOptimizer(0.1).apply_gradients([(gradient, w)])
    found = batch_statistics.statistics_of_the_batch(g, parallax.analyze(g))
    assert [(name, law) for name, law, _ in found.combined] == [("Sum_1:0", "mean")]
    for name, law, readers in found.combined:
        statistics_combined.combine(g, TwoWorkers(5.0), name, law, readers)
        assert statistics_combined.is_combined(g, name, readers)
    xs, ms = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), np.array([1.0, 1.0, 0.0])
    with tf1.Session(graph=g) as sess:
        sess.run(tf1.global_variables_initializer())
        got_loss, got_gradient = sess.run([loss, gradient], {x: xs, mask: ms})
    assert got_loss == pytest.approx((3 + 7) / 2)  # the loss the script logs: this worker's own
    # the gradient: this worker's share of one device's, its masked rows over the mean count (2 + 5) / 2
    np.testing.assert_allclose(got_gradient, (xs * ms[:, None]).sum(axis=0)[:, None] / 3.5)


def test_the_plan_carries_the_statistics_through_json_and_explain_states_them():
    plan = Plan("MPI", 2, 1, (), batch_statistics=(("Sum_1:0", "mean", ("gradients/truediv_grad/RealDiv",)),),
                uncombinable_statistics=("strided_slice:0 (why)",))
    assert plan.uses_collectives
    assert plan_json.loads(plan_json.dumps(plan)) == plan
    g = tf.Graph()
    with g.as_default():
        w = tf1.get_variable("w", [2], F64)
        tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(w * w))
    text = premise(plan, parallax.analyze(g))
    assert "1 statistic(s) of the batch that the step computes with" in text
    assert "cannot make one device's: strided_slice:0 (why); each worker computes them" in text
    assert "statistics of the batch: Sum_1:0 (mean over workers), strided_slice:0 (why): each worker's own" in str(plan)


def test_the_planner_warns_of_a_statistic_it_cannot_combine(tmp_path):
    plan, stderr = plan_in_planner_role(tmp_path, [
        "x = tf1.placeholder(tf.float32, [None, 4])",
        "w = tf1.get_variable('w', [4, 1])",
        "ids = tf.unique(tf1.placeholder(tf.int32, [None]))",
        "tf1.train.GradientDescentOptimizer(0.1).minimize(",
        "    tf.reduce_mean(tf.matmul(x, w) * tf.cast(ids.idx, tf.float32)[:, None]) / tf.cast(tf.size(ids.y), "
        "tf.float32))"])
    assert "parallax: warning: value(s) of the batch that parallax cannot make one device's: Cast_1:0" in stderr
    assert plan.uncombinable_statistics and not plan.batch_statistics


def _token_weighted_graph():
    g = tf.Graph()
    with g.as_default():
        x, mask = tf1.placeholder(F64, [None, 2], name="x"), tf1.placeholder(F64, [None], name="mask")
        w = tf1.get_variable("w", [2, 1], F64)
        loss = tf.reduce_sum(tf.squeeze(tf.matmul(x, w), 1) * mask) / tf.reduce_sum(mask)
        tf1.train.AdamOptimizer(0.1).minimize(loss)
    return g


@pytest.mark.parametrize("run_option, backend, gather", [("PS", "auto", "CollectiveGatherV2"),
                                                         ("MPI", "horovod", "HorovodAllgather")])
def test_the_pass_gathers_each_statistic_with_the_plans_collectives(run_option, backend, gather):
    from parallax.plan.planning import plan_job
    from parallax.rewrite.pipeline import RewriteContext, passes_for
    g = _token_weighted_graph()
    config = parallax.Config(run_option=run_option, collective_backend=backend)
    plan = plan_job(g, parallax.analyze(g), parallax.ResourceSpec.parse("127.0.0.1: 0,1\n127.0.0.2: 0,1"), config)
    assert plan.uses_collectives and [law for _, law, _ in plan.batch_statistics] == ["mean"]
    ctx = RewriteContext(g, plan, config)
    for p in passes_for(plan):
        p.run(ctx)
        if p.name == "combine_batch_statistics":
            break
    assert [ctx.graph.get_operation_by_name(c).type for c in ctx.collectives] == [gather]
    name, _, readers = plan.batch_statistics[0]
    assert statistics_combined.is_combined(ctx.graph, name, readers)
