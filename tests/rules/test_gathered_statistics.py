"""Statistics of the data that no law combines (gathered_statistics.py): computed from every worker's rows, gathered
for the ops that mix the examples, and read whole; left listed where the region is read elsewhere, carries
gradient, or would gather strings. The equivalence suite runs the distinct-id losses in every mode
(user_graphs_batchwise.py)."""
import tensorflow as tf

import parallax
from parallax.core.listed import Listed
from parallax.rules import batch_statistics, gathered_statistics
from parallax.analysis import keyed_writes
from parallax.plan.planning import plan_job
from parallax.rewrite.pipeline import RewriteContext, passes_for

tf1 = tf.compat.v1
F64 = tf.float64
TWO_HOSTS = parallax.ResourceSpec.parse("127.0.0.1: 0\n127.0.0.2: 0")


def _distinct_ids_graph(ids_dtype=tf.int32):
    """A summed error over the number of distinct ids in the batch."""
    g = tf.Graph()
    with g.as_default():
        ids, y = tf1.placeholder(ids_dtype, [None], "ids"), tf1.placeholder(F64, [None], "y")
        keys = ids if ids_dtype == tf.int32 else tf.strings.to_hash_bucket_fast(ids, 8)
        w = tf1.get_variable("w", [8], F64)
        distinct = tf.cast(tf.size(tf.unique(ids).y), F64, name="distinct")
        loss = tf.reduce_sum(tf.square(tf.gather(w, keys) - y)) / distinct
        tf1.train.GradientDescentOptimizer(0.1).minimize(loss)
    return g


def test_distinct_ids_are_counted_over_every_workers_ids_and_read_whole():
    g = _distinct_ids_graph()
    found = batch_statistics.statistics_of_the_batch(g, parallax.analyze(g))
    assert not found.uncombinable, found.uncombinable
    assert found.combined == (("ids:0", keyed_writes.ROWS, ("Unique",)),)
    assert found.laws == (("distinct:0", batch_statistics.WHOLE),)
    plan = plan_job(g, parallax.analyze(g), TWO_HOSTS, parallax.Config(run_option="MPI"))
    # a sum over the whole batch's count: the workers' gradients are summed, not averaged
    assert not plan.uncombinable_statistics and not any(v.average for v in plan.variables), plan


def test_the_rewrite_gives_the_mixing_op_every_workers_rows():
    g = _distinct_ids_graph()
    config = parallax.Config(run_option="PS")
    plan = plan_job(g, parallax.analyze(g), TWO_HOSTS, config)
    ctx = RewriteContext(g, plan, config)
    for p in passes_for(plan):
        p.run(ctx)
        if p.name == "combine_batch_statistics":
            break
    unique = ctx.graph.get_operation_by_name("Unique")
    assert unique.inputs[0].name != "ids:0" and "parallax_statistics" in unique.inputs[0].name
    # TF's gather of rows whose count may differ: the counts, then the rows padded to the longest
    assert ctx.collectives and all(c.startswith("parallax_statistics/ids_0/rows/") for c in ctx.collectives)
    assert {ctx.graph.get_operation_by_name(c).type for c in ctx.collectives} == {"CollectiveGatherV2"}


def test_a_region_that_carries_gradient_is_left_listed():
    """Gathered rows would reach a backward pass computed for the worker's own: nothing is gathered."""
    g = _distinct_ids_graph()
    entry = Listed("distinct:0", batch_statistics.NO_LAW)
    assert gathered_statistics.gathered(g, [entry], lambda op: set(), ())[1] == ["distinct:0"]
    assert gathered_statistics.gathered(g, [entry], lambda op: {op}, ()) == ([], [], [entry])


def test_strings_are_not_gathered():
    """Distinct words of a string input: the collectives carry no strings, so the count stays listed."""
    g = _distinct_ids_graph(tf.string)
    entry = Listed("distinct:0", batch_statistics.NO_LAW)
    assert gathered_statistics.gathered(g, [entry], lambda op: set(), ()) == ([], [], [entry])


def test_other_reasons_to_list_are_kept():
    g = _distinct_ids_graph()
    entry = Listed("distinct:0", batch_statistics.DATA_SET_COUNT)
    assert gathered_statistics.gathered(g, [entry], lambda op: set(), ()) == ([], [], [entry])
