"""Rows of the batch written into state by key: a count of each id seen (`scatter_add(counts, ids, ones)`), a
table of the last value per key (`scatter_update`, a hash table's insert), rows addressed by the examples' ids.

One device writes every example's row; a worker writes only its own examples'. For state held by every worker
(MPI) the replicas then differ, and for state on a server, written by the chief alone (rule 3), the other workers'
rows are lost. So a write whose addresses come from the examples (an integer or string input whose shape follows
the batch, beside at least one other value it writes with) reads, for each of its inputs that follow the batch,
every worker's rows in one device's order (the workers' blocks in worker order for fed rows, interleaved for an
input sharded element-wise: statistics_combined.py), so a scatter's sums and its last writes are one device's.

Left alone: a write by position (`assign(state, per_example)` of a stateful RNN's state, whose rows are each
worker's own examples), a write of gradients (rule 1 made them one device's already), and rows on an axis other
than the first, which are listed as not combined.
"""
import tensorflow as tf

from parallax.core.listed import Listed

ROWS = "rows"  # batch_statistics' law for these: every worker's rows, concatenated in worker order
NOT_FIRST_AXIS = ("rows of the batch written into state by key, along an axis other than the first: each worker "
                  "writes its own examples' rows where one device writes every example's")


def rows_written(writes, follows, batch_axis, from_gradients):
    """([(tensor, ROWS, (the write's name,))], [uncombinable Listed]) for the keyed writes among `writes`.
    `follows(t)`: whether t's shape follows the batch; `batch_axis(t)`: its batch axis, or None;
    `from_gradients(t)`: whether t is a gradient or computed from one."""
    combined, uncombinable = [], []
    for op in sorted(writes, key=lambda o: o.name):
        values = [t for t in op.inputs if t.dtype != tf.resource and not t.dtype._is_ref_dtype]
        rows = [t for t in values if follows(t)]
        keyed = any(t.dtype.is_integer or t.dtype == tf.string for t in rows) and len(values) >= 2
        if not keyed or any(from_gradients(t) for t in rows):
            continue
        off_axis = [t for t in rows if batch_axis(t) != 0]
        if off_axis:
            uncombinable += [Listed(t.name, NOT_FIRST_AXIS) for t in off_axis]
            continue
        combined += [(t.name, ROWS, (op.name,)) for t in rows]
    return combined, uncombinable


def batch_axis(t, probes):
    """The one axis of `t` whose extent the batch sets (differs between the probes; else the first, unknown in
    them), or None."""
    first, second = (p.get(t.name) for p in probes)
    if first is None or second is None or len(first) != len(second):
        return None
    pairs = list(zip(first, second))
    varying = [d for d, (a, b) in enumerate(pairs) if a is not None and b is not None and a != b]
    if varying:
        return varying[0] if len(varying) == 1 else None
    return 0 if pairs and None in pairs[0] else None
