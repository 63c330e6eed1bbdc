"""A last check that every write of state reads one device's value: on a random batch, is the value a write of
non-trainable state reads the same on every part of the batch as on the whole, as the rewrite makes the workers
read it?

The rules make a written value one device's where they can see how: a statistic of the batch combined over the
workers (a running mean of the inputs, batch norm's moving moments), a count of the batch, rows written by key
(keyed_writes.py, mixed_rows.py), gradients aggregated before an update reads them. A value the batch changes in
another way is each worker's own, and with it the state: a memory bank of the batch's last keys
(`bank.assign(tf.concat([keys, bank], 0)[:K])`) holds one device's N*b newest keys, but each worker's holds its
own b, so their replicas differ. This check runs the written values (batch_samples.py), with the combined
statistics and random draws read as the rewrite makes them. Where a value differs, the ops that mix the examples
into it read every worker's rows (mixed_rows.py's regions, found for all such values together), so the bank holds
one device's keys; a state whose value cannot be made so (the loss reads the mixed value too) is listed. Left out:
values computed from gradients (rule 1 aggregates those, which the samples do not simulate), values whose shape
follows the batch (rows written by key, or by position, as a stateful RNN's state of the worker's own examples),
and writes the samples cannot run.
"""
import numpy as np
import tensorflow as tf

from parallax.rules import batch_draws, mixed_rows
from parallax.core import graph_utils
from parallax.analysis.batch_samples import WHOLE_AND_SPLITS, same_in_every_part, sampled
from parallax.analysis.keyed_writes import ROWS
from parallax.core.listed import Listed

OWN_VALUE = ("it is written with {}, which the batch's examples change in a way no rule makes one device's: each "
             "worker writes the value of its own examples")


def checked(graph, analysis, statistics=(), split_draws=(), fused_batch_norms=(), listed_already=()):
    """(ROWS entries (tensor, ROWS, readers) to gather, [Listed] listed, the names of the values those make
    one device's) for the non-trainable state whose written value is not one device's (module docstring).
    `statistics`: the names of the values the rewrite combines, read as one device's, as are the statistics of
    the fused batch norms named (fused_batch_norm.py); `split_draws`: (op, axis) of the draws it splits;
    `listed_already`: values another rule lists (a batch's first example: no law combines it), not listed again
    where they cannot be made one device's either."""
    gradients = {graph.get_tensor_by_name(name).op for v in analysis.trained_variables for p in v.parts
                 for g in p.gradients for name in (g.values, g.indices) if name}
    of_gradients = graph_utils.closure(gradients, lambda op: [c for t in op.outputs for c in t.consumers()])
    writes = {name: s.name for s in analysis.state for name in s.written_by}
    # The script's local variables too (a metric's total): every worker holds its own, as one device's.
    writes.update({op.name: sorted(graph_utils.written_variables(op))[0]
                   for op in graph_utils.local_variable_writes(graph)})
    values = [(t, name) for name in sorted(writes) for t in graph.get_operation_by_name(name).inputs
              if t.dtype not in (tf.resource, tf.variant, tf.string) and not t.dtype._is_ref_dtype
              and t.op not in of_gradients]
    batch = mixed_rows.from_batch(graph_utils.ancestors([t.op for t, _ in values]))
    written = {}  # value -> the writes that read it
    for t, name in values:
        if t.op in batch:
            written.setdefault(t, set()).add(name)
    if not written:
        return [], [], set()
    tensors = sorted(written, key=lambda t: t.name)
    held = batch_draws.held_as_rewritten(graph, tensors, split_draws)
    if held is None:
        return [], [], set()
    statistics = list(statistics) + [t.name for name in fused_batch_norms
                                     for t in graph.get_operation_by_name(name).outputs[1:]]
    held.update({name: same_in_every_part for name in statistics})
    samples = sampled(graph, tensors, WHOLE_AND_SPLITS, held=held)
    if not samples:
        return [], [], set()
    differing = [t for t in tensors if any(_differs(parts) for parts in samples[t.name])]
    # Together: the ops that mix the examples into them read every worker's rows, also where two share them.
    rows, mixed, covered = mixed_rows.gathered_where_mixed(
        graph, [(t.name, ROWS, tuple(sorted(written[t]))) for t in differing], statistics)
    unmixed = {entry.what for entry in mixed} | {t.name for t in differing if t.name not in covered}
    listed = {}
    for t in differing:
        if t.name in unmixed and t.name not in listed_already:
            for name in sorted(written[t]):
                listed.setdefault(writes[name], Listed(writes[name], OWN_VALUE.format(t.name)))
    gathered = [(name, law, readers) for name, law, readers in rows if name not in unmixed]
    return gathered, [listed[name] for name in sorted(listed)], covered


def _differs(parts):
    """Whether a part of the batch reads another value than the whole batch; not for a value whose shape follows
    the batch."""
    whole, *others = parts
    if any(p.shape != whole.shape for p in others):
        return False
    return not all(np.allclose(p, whole, equal_nan=True) for p in others)
