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
may set (a boolean mask's: the count its gradient divides by is data_counts.py's) where it is read; a fused batch
norm inside a graph function; and a value that pairs the batch's examples with each other (in-batch negatives)
where paired_rows.py cannot compute it on every worker's rows.
"""
import dataclasses
from typing import Tuple

import numpy as np
import tensorflow as tf

from parallax.analysis import backward_ops, batch_samples, batch_sizes, keyed_writes
from parallax.rules import batch_draws, data_counts, fused_batch_norm, gathered_statistics, mixed_rows, paired_rows
from parallax.capture import gradients as capture
from parallax.core import graph_utils
from parallax.analysis.batch_samples import random_values
from parallax.analysis.batch_shapes import MARKERS, per_worker_inputs, probed_shapes, shape_subgraph
from parallax.analysis.row_keys import reads_input
from parallax.rules.statistic_laws import (AVERAGE, COMBINED, DATA_SET_COUNT, EXTREME_WITH_GRADIENT, FOR_UPDATES,
                                           FUSED_IN_FUNCTION, MAX, MEAN, MIN, NO_LAW, PAIRWISE, SELECTION, SELECTS, SUM,
                                           UNKNOWN_GRADIENT, WHOLE)  # noqa: F401 (read as batch_statistics.X)

tf1 = tf.compat.v1
# Ops whose output is a function of their input's shape, not of its values: a path through them is not a use of
# the values.
SHAPE_ONLY = {"Shape", "ShapeN", "Size", "Rank", "ZerosLike", "OnesLike", "VariableShape"}
_HALF = 8  # examples in each half of the probe's batch (a top k of a constant k up to 8 runs on it)
_TRIALS = 3  # random batches every law must hold on


@dataclasses.dataclass(frozen=True)
class BatchStatistics:
    combined: Tuple[Tuple[str, str, Tuple[str, ...]], ...] = ()  # (tensor, MEAN|MAX|MIN|SUM|ROWS, its readers)
    uncombinable: Tuple[str, ...] = ()  # "tensor (why)"
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


def find(graph, analysis):
    """The statistics of the batch that the graph's gradients and updates are computed from (module docstring)."""
    gradients = [graph.get_tensor_by_name(name).op for v in analysis.trained_variables for p in v.parts
                 for g in p.gradients for name in (g.values, g.indices) if name]
    writers = [graph.get_operation_by_name(name) for v in analysis.trained_variables for p in v.parts
               for name in p.update_ops] + [graph.get_operation_by_name(name) for s in analysis.state
                                            for name in s.written_by] + graph_utils.local_variable_writes(graph)
    losses = capture.loss_ops(graph)
    before = _value_ancestors(gradients)
    after = _value_ancestors(writers) - before
    # The forward pass: a gradient is itself a sum over the batch (a linear model's, of data alone).
    forward = _value_ancestors(losses)
    data, variable = _origins(before | after | forward)
    # Sizes an update reads, and sizes the forward pass reads for the gradients (`n - positives`): each worker's
    # own, or read whole.
    for_updates, for_gradients = batch_sizes.sizes_read(
        graph, before | after | forward, value_inputs, SHAPE_ONLY,
        lambda out: [(t, updates) for t, _, updates in _read_points(out, before, after)],
        lambda out: [(t, grads) for t, grads, _ in _read_points(out, before, after) if forward.intersection(grads)])
    sizes = [(t.name, FOR_UPDATES[SUM], readers) for t, readers in for_updates]
    whole = [(t.name, readers) for t, readers in for_gradients]
    counts, uncounted = data_counts.find(graph, before | after | forward, value_inputs, SHAPE_ONLY,
                                         lambda out: _read_points(out, before, after))
    sizes += counts
    laws = [(name, SUM) for name, how, _ in counts if how == MEAN]  # counts are sums
    # Values of the examples: in the forward pass, or on the way to an update if not computed from the gradients
    # (a function of gradients, as a global norm, is of what the plan aggregates): a streaming metric's total.
    gradient_sources = set(gradients)
    of_gradients = _computed_from(after, gradient_sources)
    candidates = {op for op in forward | after if data.get(op) and not reads_input(op) and
                  (op in forward or not variable.get(op) or op not in of_gradients)}
    # A variable's values averaged over elements whose number the data may set (unknown before the step).
    averaged = {op for op in forward if not (data.get(op) and not variable.get(op)) and op.outputs and
                op.outputs[0].shape.is_fully_defined() and not op.op_def.is_stateful and
                any(not t.shape.is_fully_defined() for t in value_inputs(op))}
    if not candidates and not averaged:
        return BatchStatistics(tuple(sizes), tuple(uncounted), laws=tuple(laws), whole_sums=tuple(whole))
    probed = candidates | averaged
    tensors = {t for op in probed for t in op.outputs} | {t for op in probed for t in value_inputs(op)}
    tensors = sorted((t for t in tensors if t.dtype not in (tf.resource, tf.variant) and not t.dtype._is_ref_dtype),
                     key=lambda t: t.name)
    graph_def = graph.as_graph_def()
    subgraph = shape_subgraph(graph, graph_def, sorted(probed, key=lambda o: o.name))
    inputs = per_worker_inputs(graph)
    probes = batch_samples.with_extents_from_runs(
        graph, tensors, [probed_shapes(subgraph, inputs, tensors, m) for m in MARKERS], MARKERS)
    if not probes[0] or not probes[1]:  # cannot be probed (batch_draws says so of its draws)
        return BatchStatistics(tuple(sizes), tuple(uncounted), laws=tuple(laws), whole_sums=tuple(whole))
    in_loops = graph_utils.v1_loop_ops(graph)
    # Its gradient divides by the count (data_counts.py): only a read of its value is each worker's own.
    extents = {op for op in averaged
               if _averages_a_data_extent(op, probes) and _read_points(op.outputs[0], before, after)}
    combined, uncombinable, fused, through, summed_upstream = list(sizes), list(uncounted), [], [], []
    in_functions = batch_draws.nodes_in_functions(graph_def, fused_batch_norm.in_training_node)
    gradient_ops = backward_ops.by_forward_op(graph)
    for op in sorted(candidates - extents, key=lambda o: o.name):
        if not any(_follows(t, probes) for t in value_inputs(op)):
            continue
        if batch_draws.calls_functions(op):  # a v2 cond or loop: its body cannot be rewritten from outside
            uncombinable += [f"{op.name}: {node} ({FUSED_IN_FUNCTION})" for node in
                             sorted({n for f in batch_draws.functions_run_by(op) for n in in_functions(f)})]
            continue
        if op.op_def.is_stateful:
            continue  # a stateful op's value is no function of the batch (a sampler's draw: batch_draws.py)
        if fused_batch_norm.in_training(op):
            if op in in_loops:
                uncombinable.append(f"{op.name} (a fused batch normalization computed in a while loop)")
            else:
                fused.append((op.name, tuple(sorted(g.name for g in fused_batch_norm.gradient_ops(op)))))
            continue
        for out in op.outputs:
            if out.name not in probes[0] or _follows(out, probes):
                continue
            points = _read_points(out, before, after)
            # Gradient flowing through a value of variables reaches the examples its law picks, read or not.
            flows = variable[op] and out.dtype.is_floating and bool(gradient_ops(op))
            if not points and not flows:
                continue
            law = _combining_law(op, out, probes)
            if law is None and variable[op]:
                continue  # not of the examples' values (a sampled softmax's sampled rows), or not run alone
            if not points:
                if law in (MAX, MIN, SELECTION):
                    uncombinable.append(f"{out.name} ({EXTREME_WITH_GRADIENT if law != SELECTION else SELECTS})")
                continue
            why = NO_LAW if law in (None, SELECTION) else _why_not(op, out, in_loops)
            upstream = backward_ops.upstream(op, out, gradient_ops) if variable[op] else []
            if not why and upstream is None:
                why = UNKNOWN_GRADIENT
            elif not why and upstream and law in (MAX, MIN):
                why = EXTREME_WITH_GRADIENT
            if why:
                uncombinable.append(f"{out.name} ({why})")
                continue
            laws += [(t.name, law) for t, for_gradients, _ in points if for_gradients]
            if law == SUM:
                whole += [(t.name, tuple(sorted(c.name for c in readers))) for t, readers, _ in points if readers]
                summed_upstream += [g.name for g, _ in upstream]
            for t, for_gradients, for_updates in points:
                combined += [(t.name, law_for, tuple(sorted(c.name for c in readers)))
                             for law_for, readers in ((COMBINED[law], for_gradients), (FOR_UPDATES[law], for_updates))
                             if readers]
            combined += [(g.name, MEAN, tuple(sorted(c.name for c in readers))) for g, readers in upstream]
            through += [g.name for g, _ in upstream]
    rows, unkeyed = keyed_writes.rows_written(
        candidates & set(writers), lambda t: _follows(t, probes), lambda t: keyed_writes.batch_axis(t, probes),
        lambda t: t.op in gradient_sources or t.op in of_gradients)
    rows, mixed, covered = mixed_rows.gathered_where_mixed(graph, rows, [name for name, _, _ in combined])
    combined = combined + rows
    uncombinable = [s for s in uncombinable + unkeyed if s.split(" ")[0] not in covered] + mixed
    uncombinable += [f"{op.outputs[0].name} ({DATA_SET_COUNT})" for op in sorted(extents, key=lambda o: o.name)]
    held = [name for name, _, _ in combined]
    rows, read_whole, uncombinable = gathered_statistics.gathered(graph, uncombinable, gradient_ops, held)
    combined, laws = combined + rows, laws + [(name, WHOLE) for name in read_whole]
    pairing = _pairing_the_examples(candidates, probes)
    paired, unpaired, in_pairs = paired_rows.find(graph, pairing, forward, probes, gradient_ops,
                                                  {op for op, from_data in data.items() if from_data},
                                                  held + read_whole, [name for name, _ in fused])
    uncombinable = [s for s in uncombinable if s.split(" ")[0] not in in_pairs]
    uncombinable += [f"{t.name} ({PAIRWISE}; {unpaired[t.name]})" for t in pairing if t.name in unpaired]
    laws += [(name, keyed_writes.ROWS) for kind, name, _ in paired if kind == paired_rows.OWN]
    return BatchStatistics(tuple(combined), tuple(uncombinable), tuple(fused), tuple(laws), paired, tuple(whole),
                           tuple(through), tuple(summed_upstream))


def held_as_combined(laws):
    """{tensor: what a part of a random batch reads of it} for the statistics `laws` (BatchStatistics.laws): what the
    rewrite makes a worker read (batch_samples.sampled's `held`): rows of one device's, each part its own; a
    statistic one device's value, but for a sum combined as the workers' mean, half of it."""
    return {name: batch_samples.draw_as_split(0) if law == keyed_writes.ROWS else
            batch_samples.statistic_as_combined(law == SUM) for name, law in laws}


def _averages_a_data_extent(op, probes):
    """Whether `op` reduces away an input dimension that neither probe knows (the data sets it), as a mean does."""
    out = op.outputs[0]
    if out.name not in probes[0] or _follows(out, probes):
        return False
    unknown = [t for t in value_inputs(op) if probes[0].get(t.name) is not None and None in probes[0][t.name]]
    return bool(unknown) and _combining_law(op, out, probes) == AVERAGE


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


def _follows(t, probes):
    """Whether `t`'s shape changes with the batch (or is not known, so may)."""
    first, second = (p.get(t.name) for p in probes)
    return first is None or first != second or None in first


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


def _combining_law(op, out, probes):
    """SUM, AVERAGE, MAX or MIN when the op's value on a whole batch is the sum, mean, maximum or minimum of its
    values on two halves on every trial; SELECTION when the examples change it but no one law holds, or their order
    does (a batch's first example, its top k); None when they never change it (a sampled softmax's sampled rows) or
    the op cannot be run alone (an input of unknown value that is not the batch's, a function it calls)."""
    try:
        graph_def, sources, result_name = _op_alone(op, out, probes)
        if graph_def is None:
            return None
        laws = None
        with tf.Graph().as_default() as run, tf1.Session(graph=run) as sess:
            tf1.import_graph_def(graph_def, name="")
            result = run.get_tensor_by_name(result_name)
            for trial in range(_TRIALS):
                rng = np.random.RandomState(trial)
                batch = [(name, value if axis is None else random_values(rng, dtype, value), axis)
                         for name, dtype, value, axis in sources]
                whole, reversed_, first, second = (
                    np.asarray(sess.run(result, {name: _part(v, axis, part) for name, v, axis in batch}), np.float64)
                    for part in ("whole", "reversed", 0, 1))
                if whole.shape != reversed_.shape or not np.allclose(whole, reversed_, rtol=1e-5, atol=1e-6):
                    return SELECTION
                holds = {law for law, combined in ((SUM, first + second), (AVERAGE, (first + second) / 2),
                                                   (MAX, np.maximum(first, second)), (MIN, np.minimum(first, second)))
                         if whole.shape == combined.shape and np.allclose(whole, combined, rtol=1e-5, atol=1e-6)}
                laws = holds if laws is None else laws & holds
    except (ValueError, TypeError, KeyError, tf.errors.OpError):
        return None
    if not laws:
        return SELECTION
    return min(laws) if len(laws) == 1 else None


def _op_alone(op, out, probes):
    """(a GraphDef of `op` fed by placeholders, [(placeholder tensor, dtype, static value or probe shape, batch axis
    or None)], the name of `out` there); (None, ...) when an input is neither the batch's nor of static value."""
    graph, sources = tf.Graph(), []
    with graph.as_default():
        for i, t in enumerate(op.inputs):
            if not _follows(t, probes):
                value = tf.get_static_value(t)
                if value is None:
                    return None, None, None
                sources.append((f"in{i}:0", t.dtype, value, None))
            else:
                shape, axis = _probe_shape(t, probes)
                if shape is None or not (t.dtype.is_floating or t.dtype.is_integer or t.dtype == tf.bool):
                    return None, None, None
                sources.append((f"in{i}:0", t.dtype, shape, axis))
            tf1.placeholder(t.dtype, name=f"in{i}")
        node = tf1.NodeDef()
        node.CopyFrom(op.node_def)
        del node.input[:]
        node.input.extend(f"in{i}" for i in range(len(op.inputs)))
        node.attr.pop("_class", None)
        graph_def = graph.as_graph_def()
        graph_def.node.extend([node])
    return graph_def, sources, f"{node.name}:{out.value_index}"


def _probe_shape(t, probes):
    """(A concrete shape for `t` with 2*_HALF examples on its batch axis (the one that took the markers, else an
    unknown first dimension) and 2 on its other unknown ones, that axis); (None, None) without a batch axis."""
    first, second = (p.get(t.name) for p in probes)
    if first is None or second is None or len(first) != len(second):
        return None, None
    rows = {d: 1 for d, (a, b) in enumerate(zip(first, second)) if (a, b) == MARKERS}
    if not rows:  # the batch merged with another axis, k rows an example (a reshape of [b, k] to [b*k])
        rows = {d: a // MARKERS[0] for d, (a, b) in enumerate(zip(first, second)) if a is not None and b is not None
                and a % MARKERS[0] == 0 and b % MARKERS[1] == 0 and a // MARKERS[0] == b // MARKERS[1] > 1}
    if not rows and first and first[0] is None:
        rows = {0: 1}
    if len(rows) != 1:
        return None, None
    [(axis, k)] = rows.items()
    return [2 * _HALF * k if d == axis else (2 if a is None else a) for d, a in enumerate(first)], axis


def _part(value, axis, part):
    """The whole batch, its rows in reverse order, or its first or second half (of examples: of rows, k of each)."""
    if axis is None or part == "whole":
        return value
    if part == "reversed":
        return np.flip(value, axis=axis)
    half = value.shape[axis] // 2
    return np.take(value, range(part * half, (part + 1) * half), axis=axis)


def uncombinable_note(plan):
    """One sentence naming the plan's uncombinable statistics (and rule 8's variables, gradient_check.py): for the
    planner's warning and explain."""
    return (f"value(s) of the batch that parallax cannot make one device's: {', '.join(plan.uncombinable_statistics)}; "
            f"each worker computes them from its own batch where one device computes them from the whole batch, so "
            f"the job is not exact there")
