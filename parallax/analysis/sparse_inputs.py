"""Per-worker inputs that are tf.SparseTensors: a recommendation model's multi-valued categorical features (ids fed
to embedding_lookup_sparse, a sparse matrix multiplied into a layer).

A SparseTensor is three tensors whose first dimensions are not the batch's: indices [nnz, rank] (each entry's
example is its first index), values [nnz] and dense_shape [rank] (whose first value is the number of examples). So
the checks that run the graph on random batches and on parts of them (batch_samples.py) feed the three together, as
one valid sparse batch: each example holds one to three entries, in row-major order, and a part of the batch is
the entries of its examples, their first index renumbered. And dense_shape is no per-worker input whose rows are
examples (batch_shapes.per_worker_inputs leaves it out).

Where the three come from is read off the graph, not off op types: outputs of one op that reads input (a
dataset's sparse element, a parse of serialized examples: k sparse parts lie as k indices, k values and k dense
shapes in a row) or three placeholders made one after another (tf.compat.v1.sparse_placeholder), shaped as a
SparseTensor's parts are: int64 [n, r], [n] and int64 [r].
"""
import dataclasses

import numpy as np
import tensorflow as tf

from parallax.core import graph_utils
from parallax.analysis.row_keys import reads_input

tf1 = tf.compat.v1
WIDTH = 5  # the extent of each dimension of the sparse batch other than the examples', where the graph leaves it open
MOST_ENTRIES = 3  # per example


@dataclasses.dataclass(frozen=True)
class SparseInput:
    indices: tf.Tensor
    values: tf.Tensor
    dense_shape: tf.Tensor

    @property
    def tensors(self):
        return (self.indices, self.values, self.dense_shape)

    def rank(self):
        for d in (self.indices.shape.as_list()[1], self.dense_shape.shape.as_list()[0]):
            if d is not None:
                return d
        return 2

    def extents(self):
        """The dense shape's dimensions after the examples': the default a placeholder was given where known
        (> 0), else WIDTH."""
        default = None
        if self.dense_shape.op.type == "PlaceholderWithDefault":
            default = tf.get_static_value(self.dense_shape.op.inputs[0])
        return [int(default[k]) if default is not None and default[k] > 0 else WIDTH
                for k in range(1, self.rank())]


def sparse_inputs_of(graph):
    """The graph's sparse per-worker inputs."""
    found, placeholders = [], []
    for op in graph.get_operations():
        if op.type.startswith("Placeholder"):
            placeholders.append(op.outputs[0])
        elif len(op.outputs) >= 3 and _from_inputs(op):
            found += _output_blocks(op.outputs)
    # tf.compat.v1.sparse_placeholder makes dense_shape's, then the values', then the indices' placeholder
    k = 0
    while k + 3 <= len(placeholders):
        shape, values, indices = placeholders[k:k + 3]
        if _sparse_parts(indices, values, shape):
            found.append(SparseInput(indices, values, shape))
            k += 3
        else:
            k += 1
    return found


def _output_blocks(outputs):
    """The SparseTensors among one op's outputs: k of them lie as k indices, then k values, then k dense shapes
    (three outputs in a row for one; a parse of k sparse features and some dense ones, or a dataset's element of
    sparse and dense parts, holds such a block among its other outputs)."""
    found, j = [], 0
    while j + 3 <= len(outputs):
        k = next((k for k in range(1, (len(outputs) - j) // 3 + 1)
                  if all(_sparse_parts(outputs[j + m], outputs[j + k + m], outputs[j + 2 * k + m]) for m in range(k))),
                 None)
        if k is None:
            j += 1
            continue
        found += [SparseInput(outputs[j + m], outputs[j + k + m], outputs[j + 2 * k + m]) for m in range(k)]
        j += 3 * k
    return found


def _from_inputs(op):
    return any(reads_input(a) for a in graph_utils.ancestors([op]))


def _sparse_parts(indices, values, shape):
    i, v, s = indices.shape, values.shape, shape.shape
    if indices.dtype != tf.int64 or shape.dtype != tf.int64 or i.rank != 2 or v.rank != 1 or s.rank != 1:
        return False
    rank = {d for d in (i.as_list()[1], s.as_list()[0]) if d is not None}
    return len(rank) <= 1 and tf.compat.dimension_value(i[0]) is None and tf.compat.dimension_value(v[0]) is None


def random_batch(rng, sparse, examples, random_values):
    """(indices, values, dense_shape) of `examples` random examples; `random_values(rng, dtype, shape)` makes the
    values (random_examples.random_values: valid ids of any table)."""
    extents = sparse.extents()
    rows = []
    for e in range(examples):
        count = rng.randint(1, MOST_ENTRIES + 1)
        # distinct positions, in row-major order, within the extents
        flat = np.sort(rng.choice(int(np.prod(extents)), size=min(count, int(np.prod(extents))), replace=False))
        rows += [(e,) + tuple(np.unravel_index(f, extents)) for f in flat]
    indices = np.array(rows, np.int64).reshape(-1, len(extents) + 1)
    values = random_values(rng, sparse.values.dtype, [len(indices)])
    return indices, values, np.array([examples] + extents, np.int64)


def part(batch, order):
    """The sparse batch of the examples `order` (their positions in `batch`), renumbered 0, 1, ... in that order."""
    indices, values, dense_shape = batch
    kept = [np.flatnonzero(indices[:, 0] == e) for e in order]
    taken = np.concatenate(kept) if kept else np.zeros(0, np.int64)
    renumbered = indices[taken].copy()
    renumbered[:, 0] = np.repeat(np.arange(len(order)), [len(k) for k in kept])
    return renumbered, values[taken], np.array([len(order)] + list(dense_shape[1:]), np.int64)
