"""The laws of a statistic of the batch, and the reasons a statistic follows none, as batch_statistics.py finds them
and the plan records them: how the workers' values combine into one device's value (MEAN, MAX, MIN), what the value
on a whole batch is of the values on its parts (SUM, AVERAGE, MAX, MIN), and why a statistic stays each worker's own.
`combining_law` finds an op's law by running it alone on random batches and their halves (the probes' shapes come
from batch_shapes.MARKERS). Apart from batch_statistics.py, so that the rules that rewrite a statistic
(statistics_combined, fused_batch_norm, gathered_statistics) read the laws without the finding."""

import numpy as np
import tensorflow as tf

from parallax.analysis.random_examples import random_values
from parallax.analysis.batch_shapes import MARKERS

tf1 = tf.compat.v1
_HALF = 8  # examples in each half of the probe's batch (a top k of a constant k up to 8 runs on it)
_TRIALS = 3  # random batches every law must hold on

MEAN, MAX, MIN = "mean", "max", "min"  # how the workers' values combine into what each worker reads
SELECTION = "selection"  # a value the examples change that follows no law
SUM, AVERAGE = "sum", "average"  # what the value on a whole batch is of the values on its parts (and MAX, MIN)
WHOLE = "whole"  # a sum read whole for the gradients (BatchStatistics.read_whole): every part reads one device's
COMBINED = {SUM: MEAN, AVERAGE: MEAN, MAX: MAX, MIN: MIN}  # a sum's workers' mean is S / N; an average's is it
FOR_UPDATES = {SUM: SUM, AVERAGE: MEAN, MAX: MAX, MIN: MIN}  # an update reads one device's value: the whole sum
UNKNOWN_GRADIENT = "its gradient cannot be told from the gradients of its op's other outputs"
EXTREME_WITH_GRADIENT = ("a maximum or minimum of values computed from variables: its gradient belongs to the one "
                         "worker whose example holds it")
FUSED_IN_FUNCTION = ("a fused batch norm in training mode inside a graph function, as a tf.cond on a `training` "
                     "tensor builds: its statistics stay each worker's own; build the training graph with training="
                     "True (a Python bool)")
PAIRWISE = ("it pairs the batch's examples with each other (the batch is on two of its axes, as in the logits of "
            "in-batch negatives): each worker pairs only its own examples, where one device pairs the whole batch's")
NO_LAW = "its value on the whole batch is no sum, mean, maximum or minimum of its values on the parts"
SELECTS = ("a selection of the batch's examples computed from variables (its top k, its first example): gradient "
           "flows only into the examples it selects, each worker's from its own batch")
DATA_SET_COUNT = ("a mean over a number of elements that parallax could not tie to the batch's size (the data may "
                  "set it, as a boolean mask's count or a padded length does; or a v1 loop builds the rows): each "
                  "worker divides by its own count; divide a sum by a count instead")


def follows_the_batch(t, probes):
    """Whether `t`'s shape changes with the batch (or is not known, so may)."""
    first, second = (p.get(t.name) for p in probes)
    return first is None or first != second or None in first


def combining_law(op, out, probes):
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
            if not follows_the_batch(t, probes):
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
