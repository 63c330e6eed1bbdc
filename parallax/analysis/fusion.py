"""Which gradients may share one collective (dense ones one allreduce, sparse ones' rows one allgather).

One allreduce of a concatenated buffer costs one negotiation and one round of messages instead of one per
variable. But the fused collective needs every gradient in its buffer, so a step that fetches one of them computes
them all. That is only harmless when computing the others adds no effect: no extra batch taken from an iterator or
queue, no random op advanced, no placeholder that the step does not feed. So gradients are fused only when the same
effectful ops lie behind each of them (`effect_signatures`): then any step that computes one of them runs exactly
the effects it would run for all of them, and the rest is pure computation.
"""
import collections

from parallax.core import graph_utils

EMPTY = frozenset()


def effectful(op):
    """Ops whose running is observable beyond their outputs, or that need a feed: stateful ops (iterators, queues,
    random ops, writes) other than pure reads and the ops that create resources, and placeholders."""
    if op.type in ("Placeholder", "PlaceholderV2"):
        return True
    if not op.op_def.is_stateful or op.type in graph_utils.PURE_READS or not op.inputs:
        return False
    return not all(t.dtype.name == "resource" for t in op.outputs) or not op.outputs


def effect_signatures(tensors):
    """{tensor: frozenset of the effectful ops among its ancestors (data and control edges)}."""
    region = graph_utils.ancestors([t.op for t in tensors])
    order = graph_utils.topological(region, include_control=True)
    signature = {}
    changed = True
    while changed:  # a second pass settles what v1 while loops' back edges carry
        changed = False
        for op in order:
            before = [t.op for t in op.inputs] + list(op.control_inputs)
            s = frozenset().union(*(signature.get(b, EMPTY) for b in before))
            if effectful(op):
                s = s | {op}
            if s != signature.get(op, EMPTY):
                signature[op], changed = s, True
    return {t: signature.get(t.op, EMPTY) for t in tensors}


def fusion_groups(items, tensors_of, fusable):
    """`items` in groups that may share one collective, in the order of each group's first item: `fusable` (a
    static shape, for a buffer of dense gradients), the same dtype (of the first tensor) and the same effectful
    ancestors. Other items are groups of their own. `tensors_of(item)` gives the tensors its collective carries."""
    tensors = [tensors_of(i) for i in items]
    signatures = effect_signatures([t for ts in tensors for t in ts])
    groups = collections.OrderedDict()
    for k, (item, ts) in enumerate(zip(items, tensors)):
        key = (ts[0].dtype, frozenset().union(*(signatures[t] for t in ts))) if fusable(item) else ("alone", k)
        groups.setdefault(key, []).append(item)
    return list(groups.values())


def packed_width(values):
    """The row width of a sparse gradient's values when its rows can travel packed in one tensor of their dtype,
    with their row ids as extra columns (rewrite/collective_passes.py's `_packed_rows`): a known, non-zero row
    width and a floating dtype whose elements tile an int64. None when they cannot."""
    shape = values.shape
    width = shape[1:].num_elements() if shape.rank is not None and shape.rank >= 1 else None
    return width if width and values.dtype.is_floating and not 8 % values.dtype.size else None
