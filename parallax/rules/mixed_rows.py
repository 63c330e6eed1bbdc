"""Rows written into state by key (keyed_writes.py) that mix the batch's examples: a center loss's step of each
example divided by its class's count in the batch (tf.unique_with_counts), a row scaled by its rank in the batch.

keyed_writes.py gathers every worker's written rows, in worker order. That is one device's write only where each
row is its example's own: one device computes a row that mixes examples from the whole batch, a worker from its
own examples. Which rows are their examples' own is found by running the graph on random batches
(batch_samples.py), not from op types: a tensor's value on a batch is, row by row, its values on the batch's parts
(on both splits, every trial). Back from a written tensor that is not, through every input computed from the
batch that is not either, the ops that mix examples run on every worker's rows instead: the examples' own rows
they read are gathered for them (in worker order), so each worker computes one device's rows and the write reads
them. Values the rewrite makes one device's (combined statistics) and random draws are read as it makes them.
Listed, not gathered (the write's rows are gathered as computed): a mixing op whose value something else reads
(the loss), that draws or holds state, that runs in a v1 while loop or cond, or that starts from an input whose
rows are not examples (a sparse input's indices). A mixing op may read the batch's size or an example's
position (`tf.shape`): of every worker's rows, it is one device's. Rows that cannot be run on random batches
(strings, a graph the samples cannot run) are gathered as computed. state_writes.py uses the same regions for a
value of state no other rule makes one device's.
"""
import numpy as np
import tensorflow as tf

from parallax.rules import batch_draws
from parallax.core import graph_utils
from parallax.analysis.batch_samples import WHOLE_AND_SPLITS, same_in_every_part, sampled
from parallax.analysis.keyed_writes import ROWS
from parallax.analysis.row_keys import reads_input
from parallax.core.listed import Listed

MIXED = ("each example's row written by key is computed from the batch's other examples too (a count of its key "
         "in the batch), and {}: a worker writes rows computed from its own examples only")


def gathered_where_mixed(graph, rows, statistics=()):
    """(the ROWS entries (tensor, ROWS, readers) to gather, [Listed] listed, the names of the values the
    mixing ops compute, one device's once those are gathered). `rows`: keyed_writes' entries; `statistics`: the
    names of the values the rewrite combines, read as one device's."""
    written = {}
    for name, _, readers in rows:
        written.setdefault(name, set()).update(readers)
    if not written:
        return list(rows), [], set()
    tensors = [graph.get_tensor_by_name(name) for name in sorted(written)]
    batch_ops = from_batch(graph_utils.ancestors([t.op for t in tensors], False))
    fetched = sorted({t for op in batch_ops for t in op.outputs if _sampleable(t)} - set(statistics),
                     key=lambda t: t.name)
    held = batch_draws.held_as_rewritten(graph, tensors, ())
    if held is None:
        return list(rows), [], set()
    held.update({name: same_in_every_part for name in statistics})
    samples = sampled(graph, fetched, WHOLE_AND_SPLITS, held=held)
    if not samples:
        return list(rows), [], set()
    # A value that cannot be run (strings) is taken for its examples' own, as keyed_writes.py takes every row.
    own = {name for name, trials in samples.items() if all(_own_rows(parts) for parts in trials)} | \
        {t.name for op in batch_ops for t in op.outputs if t.name not in samples}
    one_devices = set(statistics) | set(held)
    walks = {t.name: _mixing_region(t, own, one_devices, batch_ops) for t in tensors if t.name not in own}
    # Regions may share ops (an argmax that two writes gather at): what each computes is read only in the
    # regions or by its write; one whose value is read elsewhere is listed, until none is left to list.
    while True:
        regions = set().union(*(region for region, _, why in walks.values() if not why))
        failed = {name: _read_elsewhere(region, regions, written) for name, (region, _, why) in walks.items()
                  if not why}
        failed = {name: why for name, why in failed.items() if why}
        if not failed:
            break
        walks.update({name: (set(), {}, why) for name, why in failed.items()})
    gathered, listed, covered = {}, [], set()
    for t in tensors:
        region, frontier, why = walks.get(t.name, (set(), {t.name: written[t.name]}, None))
        if why:
            listed.append(Listed(t.name, MIXED.format(why)))
            region, frontier = set(), {t.name: written[t.name]}
        covered |= {out.name for op in region for out in op.outputs}
        for name, readers in frontier.items():
            gathered.setdefault(name, set()).update(readers)
    return [(name, ROWS, tuple(sorted(readers))) for name, readers in sorted(gathered.items())], listed, covered


def _mixing_region(t, own, held, batch_ops):
    """(the mixing ops back from `t`, {tensor to gather: the mixing ops that read it}, None), or (set(), {}, why
    not)."""
    region, frontier, stack = set(), {}, [t.op]
    while stack:
        op = stack.pop()
        if op in region:
            continue
        if (op.op_def.is_stateful and op.type not in graph_utils.PURE_READS) or not op.inputs:
            return set(), {}, f"{op.name} ({op.type}) on its way is {'stateful' if op.inputs else 'an input'}"
        if op._get_control_flow_context() is not None:
            return set(), {}, f"{op.name} on its way is in a v1 while loop or cond"
        region.add(op)  # a shape it reads is of every worker's rows too: the batch's size is one device's
        for i in op.inputs:
            if i.name in held or i.op not in batch_ops:
                continue
            if i.name in own:
                frontier.setdefault(i.name, set()).add(op.name)
            else:
                stack.append(i.op)
    return region, frontier, None


def _read_elsewhere(region, regions, written):
    """Why a value `region` computes is read by an op outside `regions` but its write, or None."""
    for op in sorted(region, key=lambda o: o.name):
        for out in op.outputs:
            other = [c for c in out.consumers() if c not in regions and c.name not in written.get(out.name, ())]
            if other:
                return f"{other[0].name} reads {out.name}, which the batch's other examples change"
    return None


def from_batch(ops):
    """The ops among `ops` whose value the batch changes, through any input (its shape too)."""
    found = set()
    for op in graph_utils.topological(ops):
        if reads_input(op) or any(i.op in found for i in op.inputs):
            found.add(op)
    return found


def _sampleable(t):
    return t.dtype not in (tf.resource, tf.variant, tf.string) and not t.dtype._is_ref_dtype


def _own_rows(parts, any_order=False):
    """Whether a value on the whole batch is, row by row, its values on each split's two parts (with `any_order`,
    their rows in some order: each column's values the same)."""
    whole, *splits = parts
    if whole.ndim == 0:
        return False
    for first, second in zip(splits[::2], splits[1::2]):
        if first.ndim != whole.ndim or second.ndim != whole.ndim or \
                first.shape[1:] != whole.shape[1:] or second.shape[1:] != whole.shape[1:]:
            return False
        joined = np.concatenate([first, second])
        if joined.shape != whole.shape:
            return False
        if any_order:
            joined, whole_rows = (np.sort(v.reshape(len(v), -1), axis=0) for v in (joined, whole))
        else:
            whole_rows = whole
        if not np.allclose(joined, whole_rows, equal_nan=True):
            return False
    return True
