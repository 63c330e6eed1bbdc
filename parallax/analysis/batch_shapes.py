"""Which tensors follow the batch, by TF's own shape inference: the graph (the part the asked tensors' shapes follow
from) is imported with the first dimension of every per-worker input (placeholders, iterators, queues: their rows are
examples; strings too, as a recommendation model's categorical features) set to a marker size, once per marker. A
dimension that takes the marker each time is the batch; a shape that stays the same and fully known does not depend
on the batch. batch_draws.py and batch_statistics.py ask."""
import tensorflow as tf

from parallax.core import graph_utils
from parallax.analysis import sparse_inputs
from parallax.analysis.row_keys import reads_input

tf1 = tf.compat.v1
MARKERS = (1009, 1013)  # primes no model's other dimensions are likely to equal, and not each other's multiples
PIN = 5  # an input's unknown extent other than the batch's (a padded length), where a probe or a sample pins it


def per_worker_inputs(graph):
    """The tensors whose first dimension is each worker's own: the outputs of what reads input, and the indices and
    values of sparse inputs (each entry's example is its first index), not their dense shapes (sparse_inputs.py)."""
    sparse = sparse_inputs.sparse_inputs_of(graph)
    dense_shapes = {s.dense_shape.name for s in sparse}
    # Not the step's own state: a stack's pop (a v1 loop's gradient reads its forward values so) is no input.
    read = [t for op in graph.get_operations() if reads_input(op) and not graph_utils.carries_step_state(op)
            for t in op.outputs
            if t.dtype not in (tf.resource, tf.variant) and not t.dtype._is_ref_dtype and
            t.shape.rank is not None and t.shape.rank >= 1 and t.name not in dense_shapes]
    return read + [t for s in sparse for t in (s.indices, s.values) if t not in read]


def shape_subgraph(graph, graph_def, ops):
    """The part of the graph the ops' output shapes follow from: their inputs' data ancestors (and the ops), with
    control edges and colocations left out."""
    needed = {op.name for op in graph_utils.ancestors([i.op for op in ops for i in op.inputs], False) | set(ops)}
    return copy_nodes(graph_def, needed)


def copy_nodes(graph_def, names, control=False):
    """A GraphDef of the nodes named `names`, with their data inputs and (with `control`) those of their control
    inputs that are among them too; no colocations or devices."""
    sub = type(graph_def)()
    sub.library.CopyFrom(graph_def.library)
    sub.versions.CopyFrom(graph_def.versions)
    for node in graph_def.node:
        if node.name in names:
            kept = sub.node.add()
            kept.CopyFrom(node)
            del kept.input[:]
            kept.input.extend(i for i in node.input if not i.startswith("^") or (control and i[1:] in names))
            kept.attr.pop("_class", None)  # colocation with ops that may be left out
            kept.device = ""
    return sub


def probed_shapes(graph_def, inputs, tensors, marker, pin=None):
    """{tensor name: its static shape (a tuple, None where unknown)} when every per-worker input holds `marker`
    examples (and, with `pin`, that extent on each of its other unknown dimensions, a padded length: what is then
    still unknown is set by the data's values); {} when the graph cannot be imported so (an input whose first
    dimension is not examples)."""
    if not tensors:
        return {}
    probe = tf.Graph()
    names = {n.name for n in graph_def.node}
    try:
        with probe.as_default():
            input_map = {t.name: tf1.placeholder(t.dtype, [marker] + [pin if d is None else d
                                                                      for d in t.shape.as_list()[1:]])
                         for t in inputs if t.op.name in names}
            tf1.import_graph_def(graph_def, input_map=input_map, name="probe")
    except (ValueError, TypeError, tf.errors.OpError):
        return {}
    out = {}
    for t in tensors:
        # An input's readers read its placeholder; the input's own node, imported beside it, keeps its shape.
        shape = (input_map[t.name] if t.name in input_map else probe.get_tensor_by_name("probe/" + t.name)).shape
        out[t.name] = tuple(shape.as_list()) if shape.rank is not None else None
    return out


def batch_axis(first, second):
    """The one axis that holds the marker in both probes while every other axis is known and the same."""
    return _one_axis(first, second, lambda a, b: (a, b) == MARKERS)


def merged_axis(first, second):
    """The one axis that holds k > 1 times the marker in both probes (the batch merged with k steps of each
    example, as a reshape of [b, T] to [b*T] makes it) while every other axis is known and the same."""
    return _one_axis(first, second, lambda a, b: a is not None and b is not None and a % MARKERS[0] == 0 and
                     b % MARKERS[1] == 0 and a // MARKERS[0] == b // MARKERS[1] > 1)


def _one_axis(first, second, holds):
    if first is None or second is None or len(first) != len(second):
        return None
    axes = [d for d, (a, b) in enumerate(zip(first, second)) if holds(a, b)]
    others_fixed = all(a == b and a is not None for d, (a, b) in enumerate(zip(first, second)) if d not in axes)
    return axes[0] if len(axes) == 1 and others_fixed else None
