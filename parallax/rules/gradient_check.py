"""A last check that nothing in the graph mixes the batch's examples in a way parallax does not rewrite: on a random
batch, is each trained variable's gradient the workers' mean (or, for a summed loss, sum) of its gradients on the
batch's two halves, as the aggregation will make it?

The rules (batch_statistics.py, counts_by_values.py, batch_draws.py) each find one way a worker's gradient can differ
from its share of one device's, by what they can see in the graph. This one runs the graph's own gradient ops
(batch_samples.py) and compares, whatever ops computed them: a top k of a fraction of the batch (hard-example
mining), a cumulative sum or a softmax over the batch's axis. A variable whose gradients differ is listed as not
exact: the job warns and `parallax.explain` says so. Random draws are read as the rewrite makes them (a split
draw's examples' values of one device's draw, a sampler's draw the whole batch's), and so are the statistics the
rewrite combines (the gradients flowing into one computed from variables as the workers' mean or sum of the
parts'): a function of a sum that the workers' mean does not make one device's shows here, and planning.py then
reads the sums whole. It is not run where anything is listed or a fused batch norm or a region of paired rows is
rewritten (not simulated here), where a stateful op other than a variable's or a draw (a queue) makes two runs
differ, or where the graph cannot be run on random batches.
"""
import numpy as np

from parallax.rules import batch_draws, batch_statistics, loss_seeds, mixed_rows
from parallax.core import graph_utils
from parallax.analysis.batch_samples import FIRST_SHARES, HALF, WHOLE_AND_SPLITS, sampled
from parallax.core.listed import Listed

_TRIALS = 3
MIXES = ("its gradient on a random batch is not the workers' {} of its gradients on the batch's parts: the loss is "
         "neither a mean nor a sum over the examples (nor a sum plus means: terms the batch does not change, or means "
         "over the examples), or the graph mixes the examples in a way no rule rewrites (a top k of a fraction of the "
         "batch, a cumulative sum over it)")


def mismatched(graph, analysis, averaged, split_draws=(), seeds=(), edges=(), statistics=None):
    """["variable (why)"] for the trained variables whose gradient is not the halves' combination (their mean for
    the variables `averaged(name)` says, else their sum); [] when all are, or when the check cannot be run. The
    parts read the random draws as the rewrite makes them: those of `split_draws` ((op, axis), ...) their examples'
    values of one device's draw, any other the whole batch's (batch_draws.held_as_rewritten); a mean loss's seed
    among `seeds` (loss_seeds.py) at their share of the whole batch's, and so each of `edges` into a constant
    term's backward ops; each of the statistics the rewrite combines (`statistics`,
    batch_statistics.statistics_of_the_batch's) as the worker reads it (batch_statistics.held_as_combined), and the gradient flowing into one computed from
    variables as the workers' mean or sum of the parts' own. A sum read as the workers' mean, or a gradient
    combined, is each part's share only where the workers' batches are equal, as the rewrite assumes (the launcher
    warns where they are not): then the split into equal halves alone is compared."""
    gradients, tensors = gradient_tensors(graph, analysis)
    if not tensors:
        return []
    ancestors = graph_utils.ancestors([t.op for t in tensors], False)
    if any(op.op_def.is_stateful and op.type not in graph_utils.VARIABLE_OP_TYPES and
           op.type not in graph_utils.PURE_READS and not batch_draws.is_draw(op) and
           not graph_utils.runs_stateless_functions(op) for op in ancestors):
        return []
    held = batch_draws.held_as_rewritten(graph, tensors, split_draws)
    statistics = statistics or batch_statistics.BatchStatistics()
    if held is not None:
        held.update(batch_statistics.held_as_combined(statistics.laws))
    pooled = {name: _pooled(law) for name, law, _ in statistics.combined if name in statistics.upstream}
    splits_compared = 1 if pooled or any(law == batch_statistics.SUM for _, law in statistics.laws) else 2
    samples = sampled(graph, tensors, WHOLE_AND_SPLITS, trials=_TRIALS, held=held,
                      edit=loss_seeds.shares_as_held(seeds, edges, 2 * HALF), pooled=pooled) \
        if held is not None else {}
    if not samples:
        return []
    wrong = set()
    for name, g in gradients:
        for trial, parts in enumerate(samples[g.values]):
            if g.indices:
                parts = aligned([by_row(v, r) for v, r in zip(parts, samples[g.indices][trial])])
            whole, *splits = parts
            # Each split's parts hold (HALF, HALF) and (1, 2 * HALF - 1) examples: a mean's is their weighted mean.
            for (first, second), weight in list(zip((splits[:2], splits[2:]), FIRST_SHARES))[:splits_compared]:
                combined = weight * first + (1 - weight) * second if averaged(name) else first + second
                scale = float(np.max(np.abs(whole), initial=1.0))
                if whole.shape != first.shape or not np.allclose(whole, combined, rtol=1e-4, atol=1e-6 * scale):
                    wrong.add(name)
    summed = "sum (of gradients started at each part's share, for a mean loss)" if \
        any(law == loss_seeds.MEAN for _, law in seeds) else \
        "sum (of gradients with a mean term's started at each part's share)" if edges else "sum"
    hint = _in_function(ancestors) if wrong else ""
    return [Listed(name, f"{MIXES.format('mean' if averaged(name) else summed)}{hint}") for name in sorted(wrong)]


def _in_function(ancestors):
    """Where the batch passes through a graph function (a v2 tf.cond's If, a tf.function), which no rule looks
    inside (a statistic of the batch computed there stays each worker's own): the first such op, as advice."""
    from_batch = mixed_rows.from_batch(ancestors)
    called = [op for op in graph_utils.topological(from_batch) if batch_draws.calls_functions(op)]
    if not called:
        return ""
    return (f"; the batch passes through {called[0].name} ({called[0].type}), a graph function no rule looks inside: "
            f"build the graph with v1 control flow (tf.compat.v1.disable_control_flow_v2(), which "
            f"tf.compat.v1.disable_v2_behavior() includes) or choose the branch in Python")


def _pooled(law):
    """What each part of a split reads of a gradient the rewrite combines over the workers by `law`."""
    return (lambda a, b: a + b) if law == batch_statistics.SUM else (lambda a, b: (a + b) / 2)


def gradient_tensors(graph, analysis):
    """([(variable name, its GradientRecord)], the tensors of their values and indices) of the trained variables."""
    gradients = [(v.name, g) for v in analysis.trained_variables for p in v.parts for g in p.gradients]
    return gradients, [graph.get_tensor_by_name(name) for _, g in gradients for name in (g.values, g.indices) if name]


def by_row(values, indices):
    """{row: its values summed} of an IndexedSlices' values and indices."""
    out = {}
    for row, value in zip(indices.astype(np.int64).ravel(), values):
        out[row] = out.get(row, 0) + value
    return out


def aligned(maps):
    """Row maps as arrays over the union of their rows, in one order (a row one map lacks is zeros)."""
    rows = sorted(set().union(*maps))
    width = next((v.shape for m in maps for v in m.values()), (0,))
    return [np.stack([m.get(r, np.zeros(width)) for r in rows]) if rows else np.zeros((0,) + width) for m in maps]
