"""Statistics of the batch that no law combines, computed from every worker's rows instead: a count of the distinct
ids in the batch (`tf.size(tf.unique(ids).y)`), the median of the targets, a threshold at the batch's k-th largest
target.

batch_statistics.py combines a statistic from the workers' values when its value on the whole batch is a sum, mean,
maximum or minimum of its values on the parts. Any other function of the batch has no such law, and a worker's
value is its own examples'. But the batch's values are the workers' rows: back from the statistic, the ops that
mix the examples (mixed_rows.py's walk, down to values that are each example's own rows: the ids) can read every
worker's rows of those, gathered in one device's order, so every worker computes one device's value. The plan then
reads the statistic whole (statistic_laws.WHOLE): loss_law.py finds how the gradients add up with it held there,
and the last check (gradient_check.py) confirms it.

Done only where nothing but the statistic's value leaves its region (mixed_rows' rule: an op of the region that
something else reads, as a lookup of tf.unique's ids, keeps the statistic each worker's own), where no gradient
flows through the region (gathered rows would reach a backward pass computed for the worker's own), and where
every gathered value can travel in a collective (not strings).
"""
import tensorflow as tf

from parallax.rules import counts_by_values, mixed_rows, statistic_laws
from parallax.analysis.keyed_writes import ROWS


def gathered(graph, uncombinable, gradient_ops, combined_names):
    """(ROWS entries (tensor, ROWS, readers) to add to the combined statistics, the names of the statistics they make
    one device's, the entries of `uncombinable` (Listed) left). `gradient_ops(op)`: the ops tf.gradients
    built for `op`; `combined_names`: the values other rules already make one device's."""
    candidates = {entry.what for entry in uncombinable if _no_law(entry)}
    while candidates:  # regions may share ops: found together, again without those that fail
        frontier, failed = _regions(graph, candidates, gradient_ops, combined_names)
        if failed is None:  # a region carries gradient or strings: drop the statistics that do so alone
            failed = {name for name in candidates
                      if _regions(graph, {name}, gradient_ops, combined_names)[1] != set()} or set(candidates)
        if not failed:
            left = [entry for entry in uncombinable if entry.what not in candidates]
            return [(name, ROWS, readers) for name, readers in frontier], sorted(candidates), left
        candidates -= failed
    return [], [], list(uncombinable)


def _regions(graph, names, gradient_ops, combined_names):
    """(the frontier [(tensor, readers)] that computes the statistics `names` from every worker's rows, the names
    mixed_rows cannot so compute), or (None, None) where a region carries gradient or gathers strings."""
    statistics = [graph.get_tensor_by_name(name) for name in sorted(names)]
    rows, listed, covered = mixed_rows.gathered_where_mixed(
        graph, [(t.name, ROWS, tuple(sorted(c.name for c in t.consumers()))) for t in statistics], combined_names)
    computed = {name.rsplit(":", 1)[0] for name in covered}
    failed = {entry.what for entry in listed} | {t.name for t in statistics if t.op.name not in computed}
    frontier = [(name, readers) for name, _, readers in rows if name not in names]
    if any(gradient_ops(graph.get_tensor_by_name(name).op) for name in covered) or \
            any(graph.get_tensor_by_name(name).dtype == tf.string for name, _ in frontier):
        return None, None
    return frontier, failed


def _no_law(entry):
    """Whether `entry` lists a statistic for having no law: statistic_laws.NO_LAW or counts_by_values.NOT_A_SUM, the
    reasons gathering rows can remove."""
    return entry.why in (statistic_laws.NO_LAW, counts_by_values.NOT_A_SUM)
