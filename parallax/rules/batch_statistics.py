"""Statistics of the batch that the training computation reads: a token count, a sum of example weights, batch
norm's mean and variance, the mean a root-mean-square loss takes the root of.

A loss normalized by such a value (`sum(loss * mask) / sum(mask)`, tf.compat.v1.losses with `weights`) is not a
mean over examples: one device divides by the whole batch's count, and a worker by its own. Averaging the workers'
gradients then weights each worker's examples by 1/(its count), not 1/(the whole count), and the job differs from
one device by as much as the counts differ. The rule: a value computed from the examples that reduces them away
(its shape does not follow the batch while an input's does, by batch_shapes.py's markers), in the forward pass of
the losses `tf.gradients` was taken of (capture/gradients.py records them) or, if not computed from the gradients, on the
way to an update (a streaming total of the predictions; sizes of the batch read from its shape: batch_sizes.py),
is, wherever the gradients are computed from it, the *mean over workers* of the workers' values. Each worker's
loss is then its share of one device's loss, in the sense the gradient average needs: with A_i a worker's sum and
S the whole batch's count, mean_i(A_i / (S / N)) = sum_i(A_i) / S. That holds for a function proportional to the
sum; where the last check (gradient_check.py) finds the gradients differ (`positives + 1`, a guard, a root), the
plan reads the sums whole instead (BatchStatistics.read_whole, planning.py). An update that reads it reads one
device's value: the whole batch's mean, maximum or minimum, or the workers' sum of a sum. A statistic computed from
variables also carries gradient into every worker's examples: the gradient tf.gradients sends into the op that
computed it is, like the statistic, the mean over workers (with g_j worker j's, one device's gradient needs
mean_j(g_j) from every worker). Fused batch norm computes its statistics inside one op: fused_batch_norm.py.

How the workers' values combine into the whole batch's is a property of the reducing op, found by running it, not
from its type: on random inputs of two halves of a batch, is its value on the whole batch the sum of its values on
the halves (a sum: the workers' mean is S / N), their mean (a mean: the workers' mean is the batch's), their
maximum or their minimum? An integer statistic is combined where it is cast to floats
(S / N need not be an integer); one read as an integer is an extent (a padded length) and stays each worker's own.
A value of variables that follows none of these laws is a selection, not a reduction (a sampled softmax's sampled
rows), and is left alone. A statistic of the data that combines in none of these ways (a batch's first example,
its distinct ids) is computed from every worker's rows where it can be, and read whole (gathered_statistics.py).
*Uncombinable*, so listed in the plan, warned of by the planner and stated by `parallax.explain`: such a statistic
that cannot be, one whose shape is not static or that is computed in a while loop; a maximum or minimum of
variables that gradient flows into; the value of a mean of a variable's values over a number of elements the data
may set (a boolean mask's: the count its gradient divides by is counts_by_values.py's) where it is read; a fused batch
norm inside a graph function; and a value that pairs the batch's examples with each other (in-batch negatives)
where paired_rows.py cannot compute it on every worker's rows.
"""
import dataclasses
from typing import Tuple

import tensorflow as tf

from parallax.analysis import backward_ops, batch_samples, batch_sizes, keyed_writes
from parallax.rules import batch_draws, counts_by_values, fused_batch_norm, gathered_statistics, mixed_rows, paired_rows
from parallax.capture import gradients as capture
from parallax.core import graph_utils, v1_control_flow
from parallax.analysis.batch_shapes import MARKERS, per_worker_inputs, probed_shapes, shape_subgraph
from parallax.analysis.row_keys import reads_input
from parallax.rules.statistic_laws import combining_law, follows_the_batch
from parallax.core.listed import Listed
from parallax.rules.statistic_laws import (AVERAGE, COMBINED, DATA_SET_COUNT, EXTREME_WITH_GRADIENT, FOR_UPDATES,
                                           FUSED_IN_FUNCTION, MAX, MEAN, MIN, NO_LAW, PAIRWISE, SELECTION, SELECTS, SUM,
                                           UNKNOWN_GRADIENT, WHOLE)  # noqa: F401 (read as batch_statistics.X)

tf1 = tf.compat.v1
# Ops whose output is a function of their input's shape, not of its values: a path through them is not a use of
# the values.
SHAPE_ONLY = {"Shape", "ShapeN", "Size", "Rank", "ZerosLike", "OnesLike", "VariableShape"}


@dataclasses.dataclass(frozen=True)
class BatchStatistics:
    combined: Tuple[Tuple[str, str, Tuple[str, ...]], ...] = ()  # (tensor, MEAN|MAX|MIN|SUM|ROWS, its readers)
    uncombinable: Tuple[Listed, ...] = ()
    fused: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()  # (fused batch norm op, its gradient ops): fused_batch_norm.py
    # (tensor, SUM|AVERAGE|MAX|MIN): how the whole batch's value of each statistic the gradients read follows from
    # its parts' (what loss_law.py holds them at on the parts)
    laws: Tuple[Tuple[str, str], ...] = ()
    paired: Tuple[Tuple[str, str, Tuple[str, ...]], ...] = ()  # paired_rows.py's entries
    # (tensor, its readers for the gradients) of each sum that the gradients read (combined as the workers' mean
    # above), and of each size of the batch the forward pass reads for them (left each worker's own): what
    # read_whole makes one device's value
    whole_sums: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()
    # the gradients flowing into statistics computed from variables, combined above as the workers' mean; of those,
    # the ones flowing into sums
    upstream: Tuple[str, ...] = ()
    summed_upstream: Tuple[str, ...] = ()

    def read_whole(self):
        """These statistics with each of `whole_sums` read as one device's value, the workers' sum (WHOLE), by the
        ops that compute the gradients. A worker's loss is then its examples' part of one device's, whatever
        function of the sum it takes (`positives + 1`, a guard), and its law (loss_law.py) says how its gradients
        add up; with the workers' mean it is that only for a function proportional to the sum. A sum computed from
        variables takes in, from the ops that computed its gradient, the workers' sum of the gradients flowing into
        it: one device's gradient at the whole sum, of every worker's loss."""
        whole = dict(self.whole_sums)
        combined = [(name, SUM if law == MEAN and (whole.get(name) == readers or name in self.summed_upstream)
                     else law, readers) for name, law, readers in self.combined]
        combined += [(name, SUM, readers) for name, readers in self.whole_sums
                     if (name, SUM, readers) not in combined]
        laws = [(name, WHOLE if name in whole else law) for name, law in self.laws]
        laws += [(name, WHOLE) for name in whole if name not in dict(self.laws)]
        return dataclasses.replace(self, combined=tuple(combined), laws=tuple(laws), whole_sums=())


def value_inputs(op):
    return () if op.type in SHAPE_ONLY else tuple(op.inputs)


def _value_ancestors(ops):
    return graph_utils.closure(ops, lambda op: [t.op for t in value_inputs(op)])


def statistics_of_the_batch(graph, analysis):
    """The statistics of the batch that the graph's gradients and updates are computed from (module docstring)."""
    regions = _regions(graph, analysis)
    found = _sizes_and_counts(graph, regions)
    candidates, averaged = _candidates(regions)
    if not candidates and not averaged:
        return found.result()
    graph_def = graph.as_graph_def()
    probes = _probes(graph, graph_def, candidates | averaged)
    if not probes[0] or not probes[1]:  # cannot be probed (batch_draws says so of its draws)
        return found.result()
    # Its gradient divides by the count (counts_by_values.py): only a read of its value is each worker's own.
    extents = {op for op in averaged if _averages_a_data_extent(op, probes) and regions.read_points(op.outputs[0])}
    gradient_ops = backward_ops.by_forward_op(graph)
    in_functions = batch_draws.nodes_in_functions(graph_def, fused_batch_norm.in_training_node)
    in_loops = v1_control_flow.v1_loop_ops(graph)
    for op in sorted(candidates - extents, key=lambda o: o.name):
        if any(follows_the_batch(t, probes) for t in value_inputs(op)):
            _combine_op(op, regions, probes, gradient_ops, in_functions, in_loops, found)
    return _rows_and_pairs(graph, regions, candidates, extents, probes, gradient_ops, found)


@dataclasses.dataclass
class _Regions:
    """The ops a step runs, by what they feed: `before` the gradients, `after` them (on the way to an update only),
    the `forward` pass (the losses' ancestors); and, per op, whether its value comes from the data or a variable."""
    gradients: list
    writers: list
    before: set
    after: set
    forward: set
    data: dict
    variable: dict
    of_gradients: set  # computed from the gradients on the way to an update (a global norm)

    @property
    def values(self):
        return self.before | self.after | self.forward

    def read_points(self, out):
        return _read_points(out, self.before, self.after)


@dataclasses.dataclass
class _Found:
    """What find has found so far, as BatchStatistics's fields (lists while they grow)."""
    combined: list
    uncombinable: list
    laws: list
    whole: list
    fused: list = dataclasses.field(default_factory=list)
    through: list = dataclasses.field(default_factory=list)
    summed_upstream: list = dataclasses.field(default_factory=list)

    def result(self, paired=()):
        return BatchStatistics(tuple(self.combined), tuple(self.uncombinable), tuple(self.fused), tuple(self.laws),
                               paired, tuple(self.whole), tuple(self.through), tuple(self.summed_upstream))


def _regions(graph, analysis):
    gradients = [graph.get_tensor_by_name(name).op for v in analysis.trained_variables for p in v.parts
                 for g in p.gradients for name in (g.values, g.indices) if name]
    writers = [graph.get_operation_by_name(name) for v in analysis.trained_variables for p in v.parts
               for name in p.update_ops] + [graph.get_operation_by_name(name) for s in analysis.state
                                            for name in s.written_by] + graph_utils.local_variable_writes(graph)
    before = _value_ancestors(gradients)
    after = _value_ancestors(writers) - before
    # The forward pass: a gradient is itself a sum over the batch (a linear model's, of data alone).
    forward = _value_ancestors(capture.loss_ops(graph))
    data, variable = _origins(before | after | forward)
    of_gradients = _computed_from(after, set(gradients))
    return _Regions(gradients, writers, before, after, forward, data, variable, of_gradients)


def _sizes_and_counts(graph, regions):
    """Sizes an update reads, and sizes the forward pass reads for the gradients (`n - positives`): each worker's
    own, or read whole; and the counts of elements the data sets (counts_by_values.py), which are sums."""
    read_points = regions.read_points
    for_updates, for_gradients = batch_sizes.sizes_read(
        graph, regions.values, value_inputs, SHAPE_ONLY,
        lambda out: [(t, updates) for t, _, updates in read_points(out)],
        lambda out: [(t, grads) for t, grads, _ in read_points(out) if regions.forward.intersection(grads)])
    sizes = [(t.name, FOR_UPDATES[SUM], readers) for t, readers in for_updates]
    whole = [(t.name, readers) for t, readers in for_gradients]
    counts, uncounted = counts_by_values.counts_the_data_set(graph, regions.values, value_inputs, SHAPE_ONLY,
                                                             read_points)
    laws = [(name, SUM) for name, how, _ in counts if how == MEAN]
    return _Found(sizes + counts, list(uncounted), laws, whole)


def _candidates(regions):
    """(values of the examples, values of variables averaged over elements whose number the data may set).
    A value of the examples is in the forward pass, or on the way to an update if not computed from the gradients
    (a function of gradients, as a global norm, is of what the plan aggregates): a streaming metric's total."""
    data, variable = regions.data, regions.variable
    candidates = {op for op in regions.forward | regions.after if data.get(op) and not reads_input(op) and
                  (op in regions.forward or not variable.get(op) or op not in regions.of_gradients)}
    averaged = {op for op in regions.forward if not (data.get(op) and not variable.get(op)) and op.outputs and
                op.outputs[0].shape.is_fully_defined() and not op.op_def.is_stateful and
                any(not t.shape.is_fully_defined() for t in value_inputs(op))}
    return candidates, averaged


def _probes(graph, graph_def, probed):
    """Each probed op's outputs and value inputs, run on each probe's batch (batch_shapes.MARKERS)."""
    tensors = {t for op in probed for t in op.outputs} | {t for op in probed for t in value_inputs(op)}
    tensors = sorted((t for t in tensors if t.dtype not in (tf.resource, tf.variant) and not t.dtype._is_ref_dtype),
                     key=lambda t: t.name)
    subgraph = shape_subgraph(graph, graph_def, sorted(probed, key=lambda o: o.name))
    inputs = per_worker_inputs(graph)
    return batch_samples.with_extents_from_runs(
        graph, tensors, [probed_shapes(subgraph, inputs, tensors, m) for m in MARKERS], MARKERS)


def _combine_op(op, regions, probes, gradient_ops, in_functions, in_loops, found):
    """What combines `op`'s outputs over the workers, or why nothing can."""
    if batch_draws.calls_functions(op):  # a v2 cond or loop: its body cannot be rewritten from outside
        found.uncombinable += [Listed(f"{op.name}: {node}", FUSED_IN_FUNCTION) for node in
                               sorted({n for f in batch_draws.functions_run_by(op) for n in in_functions(f)})]
    elif op.op_def.is_stateful:
        pass  # a stateful op's value is no function of the batch (a sampler's draw: batch_draws.py)
    elif fused_batch_norm.in_training(op):
        if op in in_loops:
            found.uncombinable.append(Listed(op.name, "a fused batch normalization computed in a while loop"))
        else:
            found.fused.append((op.name, tuple(sorted(g.name for g in fused_batch_norm.gradient_ops(op)))))
    else:
        for out in op.outputs:
            if out.name in probes[0] and not follows_the_batch(out, probes):
                _combine_output(op, out, regions, probes, gradient_ops, in_loops, found)


def _combine_output(op, out, regions, probes, gradient_ops, in_loops, found):
    points = regions.read_points(out)
    variable = regions.variable[op]
    # Gradient flowing through a value of variables reaches the examples its law picks, read or not.
    flows = variable and out.dtype.is_floating and bool(gradient_ops(op))
    if not points and not flows:
        return
    law = combining_law(op, out, probes)
    if law is None and variable:
        return  # not of the examples' values (a sampled softmax's sampled rows), or not run alone
    if not points:
        if law in (MAX, MIN, SELECTION):
            found.uncombinable.append(Listed(out.name, EXTREME_WITH_GRADIENT if law != SELECTION else SELECTS))
        return
    why = NO_LAW if law in (None, SELECTION) else _why_not(op, out, in_loops)
    upstream = backward_ops.upstream(op, out, gradient_ops) if variable else []
    if not why and upstream is None:
        why = UNKNOWN_GRADIENT
    elif not why and upstream and law in (MAX, MIN):
        why = EXTREME_WITH_GRADIENT
    if why:
        found.uncombinable.append(Listed(out.name, why))
        return
    found.laws += [(t.name, law) for t, for_gradients, _ in points if for_gradients]
    if law == SUM:
        found.whole += [(t.name, tuple(sorted(c.name for c in readers))) for t, readers, _ in points if readers]
        found.summed_upstream += [g.name for g, _ in upstream]
    for t, for_gradients, for_updates in points:
        found.combined += [(t.name, law_for, tuple(sorted(c.name for c in readers)))
                           for law_for, readers in ((COMBINED[law], for_gradients), (FOR_UPDATES[law], for_updates))
                           if readers]
    found.combined += [(g.name, MEAN, tuple(sorted(c.name for c in readers))) for g, readers in upstream]
    found.through += [g.name for g, _ in upstream]


def _rows_and_pairs(graph, regions, candidates, extents, probes, gradient_ops, found):
    """The rows the step writes by key, the statistics gathered whole, and the values that pair examples, over
    what the ops' laws left: the whole BatchStatistics."""
    sources = set(regions.gradients) | regions.of_gradients
    rows, unkeyed = keyed_writes.rows_written(
        candidates & set(regions.writers), lambda t: follows_the_batch(t, probes), lambda t: keyed_writes.batch_axis(t, probes),
        lambda t: t.op in sources)
    rows, mixed, covered = mixed_rows.gathered_where_mixed(graph, rows, [name for name, _, _ in found.combined])
    combined = found.combined + rows
    uncombinable = [s for s in found.uncombinable + unkeyed if s.what not in covered] + mixed
    uncombinable += [Listed(op.outputs[0].name, DATA_SET_COUNT) for op in sorted(extents, key=lambda o: o.name)]
    held = [name for name, _, _ in combined]
    rows, read_whole, uncombinable = gathered_statistics.gathered(graph, uncombinable, gradient_ops, held)
    found.combined, found.laws = combined + rows, found.laws + [(name, WHOLE) for name in read_whole]
    pairing = _pairing_the_examples(candidates, probes)
    paired, unpaired, in_pairs = paired_rows.pairing_entries(graph, pairing, regions.forward, probes, gradient_ops,
                                                  {op for op, from_data in regions.data.items() if from_data},
                                                  held + read_whole, [name for name, _ in found.fused])
    found.uncombinable = [s for s in uncombinable if s.what not in in_pairs]
    found.uncombinable += [Listed(t.name, f"{PAIRWISE}; {unpaired[t.name]}") for t in pairing if t.name in unpaired]
    found.laws += [(name, keyed_writes.ROWS) for kind, name, _ in paired if kind == paired_rows.OWN]
    return found.result(paired)


def held_as_combined(laws):
    """{tensor: what a part of a random batch reads of it} for the statistics `laws` (BatchStatistics.laws): what the
    rewrite makes a worker read (batch_samples.sampled's `held`): rows of one device's, each part its own; a
    statistic one device's value, but for a sum combined as the workers' mean, half of it."""
    return {name: batch_samples.draw_as_split(0) if law == keyed_writes.ROWS else
            batch_samples.statistic_as_combined(law == SUM) for name, law in laws}


def _averages_a_data_extent(op, probes):
    """Whether `op` reduces away an input dimension that neither probe knows (the data sets it), as a mean does."""
    out = op.outputs[0]
    if out.name not in probes[0] or follows_the_batch(out, probes):
        return False
    unknown = [t for t in value_inputs(op) if probes[0].get(t.name) is not None and None in probes[0][t.name]]
    return bool(unknown) and combining_law(op, out, probes) == AVERAGE


def _pairing_the_examples(ops, probes):
    """The first tensors (none of their op's inputs is one) whose shape has the batch on two axes or more in both
    probes: values of pairs of examples, as the logits of in-batch negatives (q @ k^T) are."""
    def pairs(t):
        return all(p.get(t.name) is not None and sum(d == m for d in p[t.name]) >= 2 for p, m in zip(probes, MARKERS))
    return sorted((t for op in ops for t in op.outputs if pairs(t) and not any(pairs(i) for i in op.inputs)),
                  key=lambda t: t.name)


def _origins(ops):
    """({op: whether its value comes from a per-worker input}, {op: whether from a variable}) over `ops`."""
    variable, data = {}, {}
    for op in graph_utils.topological(ops):
        sources = [t.op for t in value_inputs(op)]
        variable[op] = op.type in graph_utils.VARIABLE_OP_TYPES or any(variable.get(s, False) for s in sources)
        data[op] = reads_input(op) or any(data.get(s, False) for s in sources)
    return data, variable


def _computed_from(ops, sources):
    """The ops among `ops` whose value is computed from an op of `sources`."""
    found = set()
    for op in graph_utils.topological(ops):
        if any(t.op in sources or t.op in found for t in value_inputs(op)):
            found.add(op)
    return found


def _read_points(out, before, after):
    """[(tensor, the ops that read it as floats to compute gradients, those that read it for an update or other
    state the step writes)] where the statistic `out` is read as floating-point values: itself, or its casts to
    floats. Only a value read so can be the workers' combined one; an integer read is an extent or an index (a
    padded length, which a worker's own batch sets), left alone."""
    points = []
    for t in [out] if out.dtype.is_floating else [c.outputs[0] for c in out.consumers()
                                                  if c.type == "Cast" and c.outputs[0].dtype.is_floating]:
        readers = [c for c in t.consumers() if c.type not in SHAPE_ONLY]  # a shape op reads no value
        for_gradients = [c for c in readers if c in before]
        for_updates = [c for c in readers if c in after]
        if for_gradients or for_updates:
            points.append((t, for_gradients, for_updates))
    return points


def _why_not(op, out, in_loops):
    if not out.shape.is_fully_defined():
        return "its shape is not static"
    if op in in_loops:
        return "it is computed in a while loop"
    return None


def uncombinable_note(plan):
    """One sentence naming the plan's uncombinable statistics (and rule 8's variables, gradient_check.py): for the
    planner's warning and explain."""
    return (f"value(s) of the batch that parallax cannot make one device's: {', '.join(plan.uncombinable_statistics)}; "
            f"each worker computes them from its own batch where one device computes them from the whole batch, so "
            f"the job is not exact there")
