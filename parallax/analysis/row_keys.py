"""Which rows of an IndexedSlices gradient one device would hold as one row, when N workers each hold some.

A sparse gradient has one row per element of the index tensor its lookup gathered with. How that tensor relates
to the batch decides what one device's gradient of the whole batch looks like:
- ROWS: each element belongs to one example (ids read from the batch). One device holds every worker's rows,
  concatenated in worker order. Nothing to merge.
- SAME: the elements do not depend on the batch (constants, a seeded candidate sampler's draw, as in sampled
  softmax): every worker holds the same rows, and one device holds each once, summed over the whole batch.
- UNIQUE: the elements are ids deduplicated over the batch (`tf.unique`, as in `embedding_lookup_sparse`): one
  device holds one row per distinct id of the whole batch.
Rows that one device holds once must be merged across workers, or anything that is not linear in the rows (the
squared row norms of `clip_by_global_norm`) differs. The rule finds each element's class by following the index
tensor back through ops that only move elements (reshapes, stop-gradient), elementwise ops with scalar operands,
`DynamicPartition` (partitioned variables) and concatenation along rows, to the tensors that produced them; a
producer that depends on no per-worker input (a placeholder, an iterator, a queue) is SAME, a deduplication's
output is UNIQUE, anything else is ROWS. `row_keys` then builds, beside the index tensor, a key per element that
is equal for rows one device would hold as one: the worker merges nothing; whoever receives all workers' rows
does (`merge_rows`).
"""
import tensorflow as tf

from parallax.core import graph_utils

# The names of the ops whose outputs are fed alike in every worker (parallax.shared_input, shared_inputs.py)
SHARED_INPUTS = "parallax_shared_inputs"

MOVES = {"Reshape", "Identity", "StopGradient", "ExpandDims", "Squeeze", "Snapshot", "PreventGradient"}
# Element i of the output comes from element i of each input of the output's shape (others are scalars).
ELEMENTWISE = {"Cast", "FloorDiv", "FloorMod", "Add", "AddV2", "Sub", "Mul", "Neg", "Maximum", "Minimum", "Abs",
               "TruncateDiv", "TruncateMod", "Div", "RealDiv", "BitwiseAnd", "BitwiseOr", "RightShift", "LeftShift",
               "Select", "SelectV2", "Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual",
               "LogicalAnd", "LogicalOr", "LogicalNot"}
# (op type, output) that hold each id of their input once: tf.unique, and the gradients of sparse segment
# reductions (embedding_lookup_sparse's fused path), whose second output is the sorted distinct ids.
DEDUPLICATIONS = {("Unique", 0), ("UniqueV2", 0), ("UniqueWithCounts", 0), ("UniqueWithCountsV2", 0),
                  ("SparseSegmentSumGradV2", 1), ("SparseSegmentMeanGradV2", 1), ("SparseSegmentSqrtNGradV2", 1)}
# Outputs that do not depend on the values of the op's inputs: a candidate sampler's draw (output 0) takes the true
# classes only to report their expected counts.
_INPUT_FREE_OUTPUTS = {"CandidateSampler": (0,)}
ROWS, SAME, UNIQUE = 3, 1, 2  # key = value * 4 + class: keys of different classes never meet


def needs_merge(graph, indices_name):
    """Whether some rows of this gradient are one row on one device (SAME or UNIQUE elements)."""
    return _Tracer(graph).classes(graph.get_tensor_by_name(indices_name)) != {ROWS}


def row_keys(indices):
    """An int64 key per element of `indices` (in its graph): element class in the low two bits; UNIQUE elements
    keyed by id, SAME ones by position, ROWS ones marked to be numbered by whoever merges."""
    return tf.reshape(_Tracer(indices.graph).keys(indices), [-1])


def merge_rows(values, indices, keys):
    """All workers' rows (concatenated in worker order) with the rows one device holds once summed: ROWS keys are
    first made distinct by their position."""
    position = tf.range(tf.size(keys, out_type=tf.int64), dtype=tf.int64)
    keys = tf.where(tf.equal(keys % 4, ROWS), position * 4 + ROWS, keys)
    unique, slot = tf.unique(keys)
    count = tf.size(unique)
    return (tf.math.unsorted_segment_sum(values, slot, count),
            tf.math.unsorted_segment_max(indices, slot, count))


class _Tracer:
    def __init__(self, graph):
        self._graph = graph
        self._batch_free = {}
        self._memo = {}

    def _source(self, t):
        """The element-moving op that `t` comes from, as (kind, inputs to follow), or None for a producer."""
        op = t.op
        if op.type in MOVES:
            return "move", op.inputs[0]
        if op.type in ELEMENTWISE and t.shape.rank is not None:
            follow = [i for i in op.inputs if i.shape.rank != 0]
            # Several inputs of the output's shape (a select between two index computations): one element each,
            # so they must agree on what kind of element it is.
            if follow and all(i.shape.is_compatible_with(t.shape) for i in follow) and \
                    all(self.classes(i) == self.classes(follow[0]) for i in follow[1:]):
                return "move", follow[0]
        if op.type == "DynamicPartition" and t.value_index < len(op.outputs):
            return "partition", op.inputs[0]
        if op.type == "ConcatV2" and _constant(op.inputs[-1]) == 0:
            return "concat", list(op.inputs[:-1])
        return None

    def classes(self, t):
        if t in self._memo:
            return self._memo[t]
        source = self._source(t)
        if source is None:
            found = {UNIQUE if (t.op.type, t.value_index) in DEDUPLICATIONS else
                     SAME if self._free(t) else ROWS}
        elif source[0] == "concat":
            found = set().union(*(self.classes(i) for i in source[1]))
        else:
            found = self.classes(source[1])
        self._memo[t] = found
        return found

    def keys(self, t):
        source = self._source(t)
        if source is None:
            kind = next(iter(self.classes(t)))
            if kind == UNIQUE:
                return tf.cast(t, tf.int64) * 4 + UNIQUE
            place = tf.reshape(tf.range(tf.size(t, out_type=tf.int64), dtype=tf.int64), tf.shape(t))
            return place * 4 + kind
        kind, follow = source
        if kind == "concat":
            return tf.concat([self.keys(i) for i in follow], 0)
        if kind == "partition":
            op = t.op
            parts = tf.dynamic_partition(self.keys(follow), op.inputs[1], op.get_attr("num_partitions"))
            return parts[t.value_index]
        return tf.reshape(self.keys(follow), tf.shape(t))

    def _free(self, t):
        """No per-worker input among its ancestors: the same value in every worker and on one device."""
        if t in self._batch_free:
            return self._batch_free[t]
        seen, stack, free = set(), [t], True
        while stack and free:
            x = stack.pop()
            op = x.op
            if x in seen:
                continue
            seen.add(x)
            if reads_input(op):
                free = False
                break
            if any(op.type.endswith(k) and x.value_index in outs for k, outs in _INPUT_FREE_OUTPUTS.items()):
                continue
            stack.extend(i for i in op.inputs if i not in seen)
            stack.extend(c.outputs[0] for c in op.control_inputs if c.outputs and c.outputs[0] not in seen)
        self._batch_free[t] = free
        return free


def reads_input(op):
    """A placeholder, or a stateful op that takes a resource or reference other than a variable's (an iterator,
    a queue, a reader): it yields each worker's own data. Not one the script marked as fed alike in every worker
    (shared_inputs.py)."""
    if op.name in op.graph.get_collection(SHARED_INPUTS):
        return False
    if op.type.startswith("Placeholder"):
        return True
    if not op.op_def.is_stateful:
        return False
    # A variable's handle reaches ops inside a v1 loop or cond through Enter and Switch: still a variable's.
    return any((i.dtype == tf.resource or i.dtype._is_ref_dtype) and
               graph_utils.reference_origin(i).type not in graph_utils.VARIABLE_OP_TYPES for i in op.inputs)


def _constant(t):
    try:
        return int(tf.get_static_value(t))
    except (TypeError, ValueError):
        return None
