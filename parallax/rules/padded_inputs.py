"""Inputs padded to their batch's longest example: `ds.padded_batch(b)` of sentences, as a language or translation
model reads them.

One device pads its batch of N*b examples to the longest of all of them; a worker pads its b examples to the
longest of its own. Wherever the padded length reaches the computation (a mean over every position, an RNN run
over the padding without `sequence_length`, an encoder's final state), the workers compute something else than one
device. So each worker pads its batch further, with the dataset's own padding value, to the longest over all the
workers: every step, the extents of the padded dimensions are gathered (one collective for all such inputs) and
their maximum taken. Each worker's batch is then exactly its share of one device's.

Which inputs: the outputs of an iterator whose dimensions after the first are not all static, when the graph's
dataset pads (PaddedBatchDataset) with one padding value per output. What the padding value is comes from the
dataset's own constants, in the graph or in the function that builds the dataset. And only where the padding
reaches the gradients: the planner runs them on a random batch and on the same batch with more padding
(batch_samples.py); a model that masks its padding (sequence_length, a mask of the loss) computes the same, and
needs no collective. Where that cannot be run, the inputs are padded (exact either way).
"""
import numpy as np
import tensorflow as tf

# modules, not names: the rewrite package imports this one
from parallax.rules import batch_statistics, gradient_check, statistics_combined
from parallax.core import graph_utils
from parallax.analysis.batch_samples import PARTS, sampled
from parallax.core.graph_surgery import new_ops, reroute_consumers
from parallax.analysis.row_keys import reads_input
from parallax.rules.rule import Rule

tf1 = tf.compat.v1
SCOPE = "parallax_padding"
_PADDED_BATCH = ("PaddedBatchDataset", "PaddedBatchDatasetV2")


def inputs_padded_to_the_longest(graph, analysis):
    """((tensor name, its padded axes, the padding value), ...) of the graph's padded per-worker inputs whose
    padding reaches the gradients of `analysis`'s trained variables."""
    found = padded_by_datasets(graph)
    return found if found and _padding_matters(graph, analysis, found) else ()


def padded_by_datasets(graph):
    """((tensor name, its padded axes, the padding value), ...) of the iterator outputs the graph's dataset pads."""
    found, padding_values = [], _padding_values(graph)
    for op in graph.get_operations():
        if not reads_input(op) or op.type.startswith("Placeholder") or _reads_step_state(op):
            continue
        for t, value in zip(op.outputs, padding_values.get(len(op.outputs), ())):
            dims = t.shape.as_list() if t.shape.rank is not None else []
            axes = tuple(d for d in range(1, len(dims)) if dims[d] is None)
            if axes:
                found.append((t.name, axes, value))
    return tuple(found)


def _reads_step_state(op):
    """A read of a TensorArray or stack the step made (a v1 loop's outputs stacked): what it yields was computed
    in the step, not read from the dataset; taken for a padded input, the padding built a cycle through the loop."""
    return any(t.dtype == tf.resource or t.dtype._is_ref_dtype for t in op.inputs) and all(
        graph_utils.reference_origin(t).type in graph_utils.PER_STEP_RESOURCE_OPS
        for t in op.inputs if t.dtype == tf.resource or t.dtype._is_ref_dtype)


def _padding_matters(graph, analysis, padded):
    """Whether some gradient differs between a random batch and the same batch with more padding (True when that
    cannot be run)."""
    gradients, tensors = gradient_check.gradient_tensors(graph, analysis)
    if not tensors:
        return False
    runs = [sampled(graph, tensors, PARTS[:1], trials=2, widened=widened)
            for widened in (None, {name: (axes, value) for name, axes, value in padded})]
    if not all(runs):
        return True
    plain, wider = runs
    for _, g in gradients:
        for trial, (values,) in enumerate(plain[g.values]):
            (other,) = wider[g.values][trial]
            if g.indices:
                values, other = (gradient_check.by_row(v, run[g.indices][trial][0])
                                 for v, run in ((values, plain), (other, wider)))
                if values.keys() != other.keys():
                    return True
                values, other = gradient_check.aligned([values, other])
            if values.shape != other.shape or not np.allclose(values, other, rtol=1e-6, atol=1e-9):
                return True
    return False


def _padding_values(graph):
    """{number of components: the padding values (plain Python)} of the graph's padded-batch datasets, for each
    number of components whose datasets all agree."""
    graph_def = graph.as_graph_def()
    bodies = [list(graph_def.node)] + [list(f.node_def) for f in graph_def.library.function]
    found = {}
    for nodes in bodies:
        by_name = {n.name: n for n in nodes}
        for node in nodes:
            if node.op in _PADDED_BATCH:
                outputs = node.attr["N"].i
                names = [i.lstrip("^").split(":")[0] for i in node.input[2 + outputs:2 + 2 * outputs]]
                constants = [by_name.get(n) for n in names]
                if all(c is not None and c.op == "Const" for c in constants):
                    found.setdefault(outputs, set()).add(
                        tuple(_plain(tf.make_ndarray(c.attr["value"].tensor)) for c in constants))
    return {outputs: next(iter(values)) for outputs, values in found.items() if len(values) == 1}


def _plain(array):
    value = np.asarray(array).item()
    return value.decode() if isinstance(value, bytes) else value


def pad_to_the_longest(graph, collective_ops, padded):
    """Rewrite `graph`: each input of `padded` ((name, axes, value), ...), padded with its value to the longest
    extent over every worker along its axes, for every op that read it."""
    inputs = [(graph.get_tensor_by_name(name), axes, value) for name, axes, value in padded]
    with graph.as_default(), new_ops(graph) as created, graph.name_scope(None), graph.name_scope(SCOPE):
        own = tf.concat([tf.gather(tf.shape(t, out_type=tf.int64), list(axes)) for t, axes, _ in inputs], 0)
        longest = statistics_combined.over_workers(collective_ops, own, batch_statistics.MAX)
        results, k = [], 0
        for t, axes, value in inputs:
            shape = tf.shape(t, out_type=tf.int64)
            extra = {d: longest[k + j] - shape[d] for j, d in enumerate(axes)}
            k += len(axes)
            paddings = tf.stack([tf.stack([tf.constant(0, tf.int64), extra.get(d, tf.constant(0, tf.int64))])
                                 for d in range(t.shape.rank)])
            results.append((t, tf.pad(t, paddings, constant_values=tf.constant(value, t.dtype),
                                      name=t.op.name.replace("/", "_") + f"_{t.value_index}")))
    for t, padded_t in results:
        reroute_consumers(t, padded_t, keep=created)


def is_padded(graph, name):
    """Whether every op that reads the input `name` reads it padded (an op of the padding itself excepted)."""
    return all(c.name.startswith(SCOPE + "/") for c in graph.get_tensor_by_name(name).consumers())


def apply(site):
    pad_to_the_longest(site.graph, site.collective_ops, site.plan.padded_inputs)


def holds(graph, plan):
    return all(is_padded(graph, name) for name, _, _ in plan.padded_inputs)


def find(site):
    return {"padded_inputs": inputs_padded_to_the_longest(site.graph, site.analysis) if site.plan.sync else ()}


RULE = Rule("pad_inputs_to_the_longest", ("padded_inputs",), "inputs_padded", apply, holds, find,
            uses_collectives=True,
            doc="each input its dataset pads to the batch's longest example is padded further, with the same value, "
                "to the longest over every worker, as one device pads the whole batch")
