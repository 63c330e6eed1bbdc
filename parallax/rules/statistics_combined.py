"""The rewrite of the statistics the plan combines (batch_statistics.py decides which, and how): every worker's
value gathered in worker order, so every worker computes the same bits, and combined by the statistic's law."""
import tensorflow as tf

from parallax.rules import batch_draws, statistic_laws
from parallax.analysis import keyed_writes
from parallax.core.graph_surgery import reroute_consumers
from parallax.rules.rule import Rule

SCOPE = "parallax_statistics"


def combine(graph, collective_ops, name, law, readers, layout=None):
    """Rewrite one statistic in `graph`: gather every worker's value (in worker order, so every worker computes the
    same bits) and combine them by `law`, for the ops `readers`; other readers keep the worker's own value. Rows
    (keyed_writes.ROWS) are put in one device's order, which `layout` (batch_draws.py) says."""
    own = graph.get_tensor_by_name(name)
    with graph.as_default(), graph.name_scope(None), graph.name_scope(f"{SCOPE}/{own.op.name}_{own.value_index}"):
        combined = over_workers(collective_ops, own, law, layout)
    readers = set(readers)
    reroute_consumers(own, combined, keep=[c for c in own.consumers() if c.name not in readers])


def over_workers(collective_ops, own, law, layout=None):
    """Every worker's value of `own` gathered in worker order and combined by `law` (in the current name scope);
    rows in one device's order: with an element-wise sharded input (INTERLEAVED) its example p is worker p mod N's
    example p div N, so the workers' blocks are interleaved (their sizes differ by one at most, at the end of the
    data)."""
    if law == keyed_writes.ROWS:
        rows = allgather_any(collective_ops, own, name="rows")
        if layout != batch_draws.INTERLEAVED:
            return rows
        sizes = collective_ops.allgather(tf.shape(own, out_type=tf.int64)[:1], name="sizes")
        return tf.gather(rows, batch_draws.gathered_order(sizes, layout), name="in_order")
    every = collective_ops.allgather(tf.expand_dims(own, 0), name="gather")
    reduce = {statistic_laws.MEAN: tf.reduce_mean, statistic_laws.MAX: tf.reduce_max,
              statistic_laws.MIN: tf.reduce_min, statistic_laws.SUM: tf.reduce_sum}[law]
    return reduce(every, axis=0, name="combined")


# what both backends gather (TF's CollectiveGatherV2 takes no bool, int8 or bfloat16): others travel cast
_CARRIED = (tf.float16, tf.float32, tf.float64, tf.int32, tf.int64)


def allgather_any(collective_ops, t, name):
    """Every worker's rows of `t`, in worker order, of any dtype: one the collectives do not carry travels cast."""
    carrier = t.dtype if t.dtype in _CARRIED else tf.float32 if t.dtype.is_floating else tf.int32
    every = collective_ops.allgather(t if carrier == t.dtype else tf.cast(t, carrier), name=name)
    return every if carrier == t.dtype else tf.cast(every, t.dtype)


def is_combined(graph, name, readers):
    """Whether every one of `readers` reads what the rewrite made of `name` (a statistic's combined value, rows of
    paired_rows.py), not the worker's own."""
    return all(name not in {t.name for t in graph.get_operation_by_name(r).inputs} for r in readers)


def apply(site):
    for name, law, readers in site.plan.batch_statistics:
        combine(site.graph, site.collective_ops, name, law, readers, site.plan.batch_layout)


def holds(graph, plan):
    return all(is_combined(graph, name, readers) for name, _, readers in plan.batch_statistics)


def find(site):
    """The statistics combined and the ones that cannot be, as the reading of the batch's statistics found them
    (batch_statistics.py); planning adds the state writes' and the gradient check's afterwards."""
    return {"batch_statistics": site.statistics.combined, "uncombinable_statistics": site.statistics.uncombinable}


RULE = Rule("combine_batch_statistics", ("batch_statistics",), "statistics_combined", apply, holds, find,
            records=("uncombinable_statistics",),
            uses_collectives=True,
            doc="each statistic of the batch that the gradients are computed from (a token count) is, for the ops "
                "that read it there, every worker's value combined as the plan says (batch_statistics.py finds them)")
