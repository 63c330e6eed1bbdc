"""How many examples each worker's step reads, so the launcher can tell when the workers' batches differ.

`parallax.shard` splits the data element-wise, so the workers' k-th batches together are one device's k-th batch
of N*b only while every shard still has b examples. Where the data's size is not a multiple of N*b, the last batch
of each pass over the data is short, and the shards' last batches can differ: by one example, or by a whole batch
when one shard ends a step before the others. One device weighs each example of its short batch alike; averaging
the workers' gradients weighs each *worker* alike. This cannot be known when the plan is made (a dataset's size is
often known only by reading it), so each synchronized step reports its own count (runner.py) and the launcher
compares them (launcher/input_ledger.py).

A worker's first synchronized step fed by feed_dict also reports a digest of its fed batch (`fed_digest`): every
worker fed the same rows trains on copies of one batch, which the launcher warns of.

Each count also adds to a local counter of the examples the input has yielded: after a step failed, the counter
tells whether this worker's input had yielded its batch in it (runner.py), which the error does not (TF passes one
worker's OutOfRangeError on to the workers that wait for its tensors).

The count of an input is its first dimension (the examples, as batch_shapes.per_worker_inputs defines inputs), and
for a sparse input its dense shape's first entry (its indices and values count entries, not examples).
"""
import hashlib

import numpy as np
import tensorflow as tf

from parallax.analysis import sparse_inputs
from parallax.analysis.batch_shapes import per_worker_inputs

tf1 = tf.compat.v1
SCOPE = "parallax_examples"


def counted_inputs(source_graph):
    """What planning records (Plan.counted_inputs): ((input op, the tensor its count of examples is read from,
    whether that is a sparse input's dense shape), ...) for each op of the user's that reads input (an iterator, a
    queue, a placeholder), in the graph's order of the inputs. The inputs are the source graph's: the rewrite's
    own queues and accumulators read like inputs, and counting one would take from it."""
    sparse = sparse_inputs.sparse_inputs_of(source_graph)
    parts = {t.name: s for s in sparse for t in (s.indices, s.values)}
    first = {}  # input op -> the tensor its count is read from, and whether that is a dense shape
    for t in source_inputs(source_graph):
        if t.name in parts:
            shape = parts[t.name].dense_shape
            first.setdefault(shape.op.name, (shape.name, True))
        else:
            first.setdefault(t.op.name, (t.name, False))
    return tuple((op_name, tensor_name, dense_shape) for op_name, (tensor_name, dense_shape) in first.items())


def add_counts(graph, counted):
    """Add to `graph` one int64 scalar per input of `counted` (counted_inputs'): how many examples it yields in a
    run. Returns ((input op name, count tensor name, total tensor name), ...), in the order of `counted`: the total
    is the sum of the counts the runs have computed."""
    counts = []
    with graph.as_default(), graph.name_scope(None), graph.name_scope(SCOPE):
        for op_name, tensor_name, is_dense_shape in counted:
            op, tensor = graph.get_operation_by_name(op_name), graph.get_tensor_by_name(tensor_name)
            name = op_name.replace("/", "_")
            with tf.device(op.device):  # beside the input: this worker's, wherever the graph's defaults would put it
                extent = tf.cast(tf.shape(tensor, out_type=tf.int64)[0] if not is_dense_shape else tensor[0],
                                 tf.int64)
                total = tf1.Variable(tf.constant(0, tf.int64), trainable=False, name=f"{name}_total",
                                     collections=[tf1.GraphKeys.LOCAL_VARIABLES], use_resource=True)
                with tf.control_dependencies([total.assign_add(extent)]):
                    count = tf.identity(extent, name=name)
                counts.append((op_name, count.name, total.read_value().name))
    return tuple(counts)


def source_inputs(graph):
    """The per-worker input tensors a step reads its examples from, of ops that are sources (`_is_source`): what
    is counted, and what can end (an iterator's get_next, a queue's dequeue; or a fed placeholder)."""
    return [t for t in per_worker_inputs(graph) if _is_source(t.op)]


def _is_source(op):
    """An input a step reads its examples from: none of its inputs is computed (only handles of what it reads, and
    constants), and it runs once per step (not inside a v1 loop or cond). What else reads like an input, a
    TensorArray's read in an RNN's loop or its stack after it, is computed from the step's own tensors."""
    return op._control_flow_context is None and all(
        i.dtype == tf.resource or i.dtype._is_ref_dtype or tf.get_static_value(i) is not None for i in op.inputs)


def read_in(counts, ancestors):
    """(count, total) tensor names of the inputs among `ancestors` (the ops a step runs), in `counts`' order."""
    names = {op.name for op in ancestors}
    return [(count, total) for op_name, count, total in counts if op_name in names]


def is_counted(graph, counts):
    return all(graph.get_tensor_by_name(t).dtype == tf.int64 for _, count, total in counts for t in (count, total))


def fed_digest(feeds, inputs):
    """A digest of the values fed to the inputs among `feeds` ({tensor: value}; `inputs`, their op names), or None
    when none is fed: the launcher compares the workers' (input_ledger.py)."""
    fed = sorted((t.name, np.asarray(v)) for t, v in feeds.items() if getattr(t, "op", None) is not None and
                 t.op.name in inputs)
    if not fed:
        return None
    digest = hashlib.sha1()
    for name, value in fed:
        data = str(value.tolist()).encode() if value.dtype == object else np.ascontiguousarray(value).tobytes()
        digest.update(f"{name} {value.dtype.str} {value.shape} ".encode() + data)
    return digest.hexdigest()[:16]
