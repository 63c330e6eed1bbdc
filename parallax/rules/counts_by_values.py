"""Counts of the batch that its values set: the number of examples a boolean mask keeps (`tf.size(boolean_mask(..))`,
`tf.shape(tf.where(mask))[0]`), and the count a mean divides by when the data set the number of its elements (the
factor of `reduce_mean(boolean_mask(loss, mask))`'s gradient, which tf.gradients reads from the shape).

Such a value is computed from shapes alone, as batch_sizes.py's sizes of the batch are, but no marker probe knows it:
it stays unknown when every per-worker input's extents are known (batch_shapes.py's probe with `pin`). A worker's
value is its own examples' count, where one device's is the whole batch's. The rule is batch_statistics.py's for a
sum: where the gradients read it as floats, the workers' mean (with A_i a worker's masked sum and C the whole count,
mean_i(A_i / (C / N)) = sum_i(A_i) / C, so `reduce_mean(boolean_mask(..))`'s gradient is one device's); where an
update reads it, the workers' sum. Whether the whole batch's value is the sum of its parts' is found by running the
graph's own ops on random batches and on their halves and reversal, not from op types: a count of distinct ids
(`tf.unique`) or a padded length set by the longest example is no such sum, so it is listed as not combined (the job
warns and `parallax.explain` says so). A value the examples do not change (a count over a variable's values) is no
count of the batch and is left alone. Integer reads are extents (a reshape's, a tile's) and stay each worker's own.
"""
import numpy as np
import tensorflow as tf

from parallax.core import graph_utils
from parallax.analysis.batch_samples import TOO_LARGE as TOO_LARGE_TO_RUN, is_sum_of_parts, sampled
from parallax.analysis.batch_shapes import MARKERS, PIN, per_worker_inputs, probed_shapes, shape_subgraph
from parallax.analysis.batch_sizes import from_shapes
from parallax.core.listed import Listed

tf1 = tf.compat.v1
MEAN, SUM = "mean", "sum"
NOT_A_SUM = ("a count of the batch that its values set, whose value on the whole batch is not the sum of its values "
             "on the parts (distinct ids, a longest example's length)")
NOT_RUN = "a count of the batch that its values set, which parallax could not compute on a random batch to check"
TOO_LARGE = (f"a count of the batch that its values set, computed from variables {TOO_LARGE_TO_RUN} to check on a "
             f"random batch: divide by the mask's sum (reduce_sum(cast(mask))), which parallax combines")
_WHY_NOT = {"unrun": NOT_RUN, "too large": TOO_LARGE}


def counts_the_data_set(graph, ops, value_inputs, shape_only, read_points):
    """([(float tensor, MEAN | SUM, (the ops that read it))], ["tensor (why)"]): the counts among `ops` (the graph's
    training computation) that the data set and the gradients or updates read, combined as the module docstring
    says, and those that cannot be. `read_points(tensor)`: batch_statistics' [(float tensor, readers for
    gradients, readers for updates)]."""
    computed = from_shapes(ops, value_inputs, shape_only)
    read = {op: [p for out in op.outputs for p in read_points(out)] for op in computed}
    read = {op: points for op, points in read.items() if points}
    if not read:
        return [], []
    unknown = _shapes_the_data_set(graph, graph_utils.closure(
        set(read), lambda op: [] if op.type in shape_only else [t.op for t in value_inputs(op)]), shape_only)
    if not unknown:
        return [], []
    set_by_data, candidates = set(), []
    for op in graph_utils.topological(computed):
        if (op.type in shape_only and any(t.name in unknown for t in op.inputs)) or \
                any(t.op in set_by_data for t in value_inputs(op)):
            set_by_data.add(op)
    seen, downstream = set(), set()
    for op in graph_utils.topological(computed):
        if any(t.op in downstream for t in value_inputs(op)):
            downstream.add(op)  # computed from a combined count: already the whole batch's
            continue
        for t, for_gradients, for_updates in read.get(op, ()):
            # A count reduces the examples away: its shape is static (unlike zeros or ones shaped as the kept rows).
            if op in set_by_data and t not in seen and t.shape.is_fully_defined():
                seen.add(t)
                candidates.append((t, t if t.op is op else t.op.inputs[0], for_gradients, for_updates))
                downstream.add(t.op)
    if not candidates:
        return [], []
    samples = sampled(graph, [source for _, source, _, _ in candidates])
    combined, uncombinable = [], []
    for t, source, for_gradients, for_updates in candidates:
        law = "too large" if samples is None else _law(samples.get(source.name))
        if law in ("constant", "follows"):
            continue
        if law != SUM:
            uncombinable.append(Listed(t.name, _WHY_NOT.get(law, NOT_A_SUM)))
            continue
        combined += [(t.name, how, tuple(sorted(c.name for c in readers)))
                     for how, readers in ((MEAN, for_gradients), (SUM, for_updates)) if readers]
    return combined, uncombinable


def _shapes_the_data_set(graph, needed, shape_only):
    """The names of the tensors that shape ops among `needed` read whose shape stays unknown in a probe with every
    per-worker input's extents known."""
    read = sorted({t for op in needed if op.type in shape_only for t in op.inputs}, key=lambda t: t.name)
    if not read:
        return set()
    graph_def = graph.as_graph_def()
    subgraph = shape_subgraph(graph, graph_def, sorted({t.op for t in read}, key=lambda o: o.name))
    shapes = probed_shapes(subgraph, per_worker_inputs(graph), read, MARKERS[0], pin=PIN)
    return {t.name for t in read if t.name in shapes and (shapes[t.name] is None or None in shapes[t.name])}


def _law(samples):
    """SUM when in every trial the whole batch's value is its reversal's and the sum of each split's two parts',
    and the examples change it; "constant" when they never do; "follows" when its shape changes with them (no
    count: ones tiled over the kept examples); None otherwise."""
    if not samples:
        return "unrun"
    if any(part.shape != whole.shape for whole, *parts in samples for part in parts):
        return "follows"
    if all(np.array_equal(whole, part) for whole, *parts in samples for part in parts):
        return "constant"
    return SUM if all(is_sum_of_parts(parts) for parts in samples) else None
