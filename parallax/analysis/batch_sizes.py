"""Sizes of the batch that an update reads: a learning rate scaled by `tf.shape(x)[0]`, a counter of examples seen,
a streaming mean's count (`tf.size(values)`).

Such a value comes from the batch's shape, not from its values, so batch_statistics.py's rule (values of the
examples that reduce them away) does not see it: a worker reads its own batch's size where one device reads the
whole batch's. Which values are sizes of the batch is found by the same marker probes (batch_shapes.py), not from
op types: a value computed from shapes alone (no variable, no example's value) that is proportional to the marker
batch size in both probes is linear in the batch, so the whole batch's value is the sum of the workers'. Such a value
is combined so where update-side ops read it as floats, unless it is computed from one combined already.
Where the gradients read it (a loss divided by the batch's size), each worker's own value is what the gradient
average needs, as for a mean, and it is left alone, unless the plan reads the batch's sums whole
(batch_statistics.BatchStatistics.read_whole): then a size the forward pass reads is read whole too, the workers'
sum (`n - positives`). An integer read is an extent (a reshape's), left alone.
"""
import numpy as np
import tensorflow as tf

from parallax.core import graph_utils
from parallax.analysis.batch_shapes import MARKERS, per_worker_inputs, probed_shapes, shape_subgraph

tf1 = tf.compat.v1


def sizes_read(graph, ops, value_inputs, shape_only, *readers_of):
    """For each function of `readers_of`, [(float tensor, (the ops that read it))] for every size of the batch among
    `ops` (the graph's training computation) that `readers_of(tensor)` finds readers of: [(float tensor, readers)],
    the size itself or its casts to floats (batch_statistics' read points, for updates, or for the forward pass's
    gradients); the probes run once for all of them. `value_inputs(op)`: the inputs whose values `op` reads;
    `shape_only`: the op types whose value is their inputs' shape."""
    computed = from_shapes(ops, value_inputs, shape_only)
    reads = [{op: [(t, readers) for out in op.outputs for t, readers in find(out) if readers] for op in computed}
             for find in readers_of]
    reads = [{op: points for op, points in read.items() if points} for read in reads]
    if not any(reads):
        return tuple([] for _ in reads)
    try:
        values = _probe_values(graph, value_inputs, shape_only,
                               {o for read in reads for op in read for o in op.outputs})
    except (tf.errors.OpError, ValueError, TypeError, KeyError):
        return tuple([] for _ in reads)  # sizes that cannot be computed from the probes' shapes are left alone
    return tuple(_linear_reads(computed, read, values, value_inputs) for read in reads)


def _linear_reads(computed, read, values, value_inputs):
    out, combined, downstream = [], set(), set()
    for op in graph_utils.topological(computed):
        if any(i in combined or i.op in downstream for i in value_inputs(op)):
            downstream.add(op)  # computed from a combined size: already the whole batch's
            continue
        for t, readers in read.get(op, ()):
            source = t if t.op is op else t.op.inputs[0]  # the value itself, or what the float cast reads
            if t not in combined and _linear(values.get(source.name)):
                out.append((t, tuple(sorted(c.name for c in readers))))
                combined.add(t)
    return out


def from_shapes(ops, value_inputs, shape_only):
    """The ops among `ops` whose value is computed from shapes (and constants) alone, with a shape on the way."""
    found, clean = set(), {}
    for op in graph_utils.topological(ops):
        sources = [t.op for t in value_inputs(op)]
        if op.type in shape_only:
            clean[op] = True
            if any(o.dtype.is_integer for o in op.outputs):
                found.add(op)
        elif op.type in graph_utils.VARIABLE_OP_TYPES or op.op_def.is_stateful or not sources:
            clean[op] = op.type == "Const"
        else:
            clean[op] = all(clean.get(s, False) for s in sources)
            if clean[op] and any(s in found for s in sources):
                found.add(op)
    return found


def _probe_values(graph, value_inputs, shape_only, tensors):
    """{tensor name: (its value with MARKERS[0] examples per input, with MARKERS[1])} for the tensors that can be
    computed from the probes' static shapes: each shape op is replaced by a constant of what it reads there."""
    needed = graph_utils.closure({t.op for t in tensors}, lambda op: [] if op.type in shape_only else
                                 [t.op for t in value_inputs(op)])
    read_shapes = sorted({t for op in needed if op.type in shape_only for t in op.inputs}, key=lambda t: t.name)
    graph_def = graph.as_graph_def()
    subgraph = shape_subgraph(graph, graph_def, sorted({t.op for t in read_shapes}, key=lambda o: o.name))
    inputs = per_worker_inputs(graph)
    per_marker = []
    for marker in MARKERS:
        shapes = probed_shapes(subgraph, inputs, read_shapes, marker)
        per_marker.append(_evaluate(graph_def, needed, shape_only, shapes, [t for t in tensors if t.op in needed]))
    return {name: (per_marker[0][name], per_marker[1][name]) for name in per_marker[0] if name in per_marker[1]}


def _evaluate(graph_def, needed, shape_only, shapes, tensors):
    """{tensor name: value} of `tensors`, computed by `needed` with each shape op's value taken from `shapes`."""
    nodes = {n.name: n for n in graph_def.node}
    sub = type(graph_def)()
    sub.versions.CopyFrom(graph_def.versions)
    added = set()
    for op in graph_utils.topological(needed):
        if op.type in shape_only:
            value = _shape_value(op.type, shapes.get(op.inputs[0].name) if op.inputs else None)
            if value is None:
                continue  # a shape the probe does not know: what depends on it is not evaluated
            node = sub.node.add(name=op.name, op="Const")
            node.attr["dtype"].type = op.outputs[0].dtype.as_datatype_enum
            node.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(value, op.outputs[0].dtype))
        else:
            data_inputs = [i for i in nodes[op.name].input if not i.startswith("^")]
            if any(i.split(":")[0] not in added for i in data_inputs):
                continue
            node = sub.node.add()
            node.CopyFrom(nodes[op.name])
            del node.input[:]
            node.input.extend(data_inputs)
            node.attr.pop("_class", None)
            node.device = ""
        added.add(op.name)
    wanted = [t for t in tensors if t.op.name in added]
    if not wanted:
        return {}
    with tf.Graph().as_default() as run, tf1.Session(graph=run) as session:
        tf1.import_graph_def(sub, name="")
        got = session.run([run.get_tensor_by_name(t.name) for t in wanted])
    return {t.name: np.asarray(v, np.float64) for t, v in zip(wanted, got)}


def _shape_value(op_type, shape):
    if shape is None or None in shape:
        return None
    return {"Shape": list(shape), "Size": int(np.prod(shape, dtype=np.int64)), "Rank": len(shape)}.get(op_type)


def _linear(pair):
    """Whether a value is proportional to the probes' batch size, and not zero: the size of the batch, times a
    constant."""
    if pair is None:
        return False
    first, second = pair
    if first.shape != second.shape or not first.size or not np.all(first != 0):
        return False
    return np.allclose(first / MARKERS[0], second / MARKERS[1], rtol=1e-9, atol=0)
