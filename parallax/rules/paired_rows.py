"""Values on the way to the loss whose rows mix the batch's examples: the logits of in-batch negatives (`u @ v^T`,
each user scored against every item of the batch, its own item the label at its position), a triplet loss's
hardest pairs, a softmax or a running total over the batch's axis, values divided by the batch's maximum.

One device mixes the whole batch's examples, a worker only its own, so no aggregation of the workers' gradients
makes one device's. Which values do so is found by running the graph on random batches (batch_samples.py), with
what the other rules rewrite (combined statistics, split draws, fused batch norms) read as they make it, not from
op types. A region *ends* at a value of the forward pass with the batch on its first axis alone that is not, row
by row, its values on the batch's parts (mixed_rows._own_rows), where an op reduces it over the batch (the loss's
mean); and at each value with the batch on two axes (batch_statistics' shape probes). The *region*: back from its
ends, every op whose value is computed from the batch and is not its examples' own rows (mixed_rows.py's walk: a
label at each example's position, tf.range of the batch's size), down to the examples' own rows it starts from
(the towers' outputs: the *frontier*). Regions that share ops are one. A value that mixes the examples and is
their own rows again further on (tf.unique's indices, gathered back into rows) ends none.

The rewrite (one device's for every worker, in the plan as `paired_rows`):
- GATHERED: the region's ops, and tf.gradients' ops for them, read every worker's rows of the frontier in one
  device's order (batch_draws' layout), so every worker computes one device's values for the whole batch;
- OWN: where the region ends (a per-example loss, read by its mean; a loss of every pair, by its mean over the
  pairs), the forward pass and the gradient ops outside the region read the rows of the worker's own examples
  on the first axis (a metric or a summary reads one device's);
- PADDED: the gradient of those own rows enters the region's gradient ops as one device's rows, zeros at the
  other workers' examples;
- SUMMED: the region's gradient of every worker's frontier rows leaves it as the workers' sum, of which each
  worker takes its own rows.
With L_w worker w's loss, its gradient then reaches its examples' rows from every worker's loss, sum_v dL_v/du_w:
the gradients the plan aggregates are one device's, as for a loss whose examples do not mix.
A region also ends at a *share of the batch*, a value whose first axis follows the batch but is not its examples'
(the hardest half's errors, top_k(e, k=n // 2); two views stacked along the batch, 2b rows): no OWN or PADDED
entry, so what reads it reads one device's value and its gradient enters whole. Every worker's loss then holds
one device's term T, the SUMMED gradient is N dT/du_w, and the workers' average makes it one device's. Only where
every loss reads the batch through shares alone: beside a sum over the examples, the averaging would not be the
loss's, so such a loss is left to the last check. A share whose rows are its parts' rows restacked (two views of
each example, none mixing another) ends nothing: nothing there needs every worker's rows.

Not rewritten: a region that draws, holds state, runs in a v1 loop or cond or a graph function, reads a value
another rule rewrites, whose frontier does not have the batch on its first axis alone or whose values read outside
it not on their first axis (a loss merged over time and batch, time-major), or whose gradient's way in or out
cannot be told. If it
holds a value with the batch on two axes, that value is listed (batch_statistics.PAIRWISE); otherwise the last
check (gradient_check.py) lists the variables whose gradients differ.
"""
import tensorflow as tf

from parallax.analysis import backward_ops
from parallax.rules import batch_draws, mixed_rows, statistics_combined
from parallax.capture import gradients as capture
from parallax.core import graph_utils
from parallax.analysis.batch_samples import WHOLE_AND_SPLITS, draw_as_split, same_in_every_part, sampled
from parallax.analysis.batch_shapes import MARKERS
from parallax.analysis.row_keys import reads_input
from parallax.core.graph_surgery import reroute_consumers
from parallax.rules.rule import Rule

GATHERED, OWN, PADDED, SUMMED = "gathered", "own", "padded", "summed"
SCOPE = "parallax_pairs"
SUMS = ("AddN", "Add", "AddV2")


def pairing_entries(graph, pairing, forward, probes, gradient_ops, valued, held=(), synchronized=()):
    """(the plan's entries ((GATHERED|OWN|PADDED|SUMMED, tensor, readers), ...), {pairing tensor: why not} for the
    pairs left alone, the names of the values the regions compute). `pairing`: tensors with the batch on two axes;
    `forward`: the forward pass's ops; `valued`: those whose values the batch's values change (not its shape alone);
    `held`: the names of values another rule rewrites (combined statistics); `synchronized`: ops another rule makes
    compute one device's rows (fused batch norms: fused_batch_norm.py)."""
    batch_ops = mixed_rows.from_batch(forward)
    # a v1 loop's inner values cannot be fetched (its outputs can); a region stops at them anyway
    fetched = sorted({t for op in batch_ops for t in op.outputs if mixed_rows._sampleable(t) and
                      op._control_flow_context is None}, key=lambda t: t.name)
    if not fetched:
        return (), {}, set()
    held_draws = batch_draws.held_as_rewritten(graph, fetched, ())
    if held_draws is not None:  # what the other rules make one device's, as they make it
        held_draws.update({name: same_in_every_part for name in held})
        held_draws.update({graph.get_operation_by_name(name).outputs[0].name: draw_as_split(0)
                           for name in synchronized})
    samples = sampled(graph, fetched, WHOLE_AND_SPLITS, held=held_draws) if held_draws is not None else None
    if not samples:
        return (), {p.name: "the graph cannot be run on random batches to tell its examples' own rows"
                    for p in pairing}, set()
    # A value computed from the batch's shape alone (tf.eye of its size) is computed in the region, not gathered.
    rows_own = {name for name, trials in samples.items() if all(mixed_rows._own_rows(parts) for parts in trials)}
    own = {name for name in rows_own if graph.get_tensor_by_name(name).op in valued}
    rewritten = set(held_draws)
    # ...but its own rows end no region (tf.ones_like of the labels, counted per id): nothing there mixes.
    ends = _ends(forward, batch_ops, samples, rows_own, rewritten, probes)
    shares = [t for t in ends.values() if _a_share_of_the_batch(t, probes)]
    if shares and not _only_through(capture.loss_ops(graph), shares, batch_ops):
        ends = {name: t for name, t in ends.items() if t not in shares}
    for p in pairing:  # a pair reduced away whole (a mean of the logits) ends its region itself
        ends.setdefault(p.name, p)
    entries, failed, covered = [], {}, set()
    for region, frontier in _regions(ends.values(), own, rewritten, batch_ops, failed):
        found = _entries(graph, region, frontier, rewritten, batch_ops, forward, probes, gradient_ops)
        if isinstance(found, str):
            failed.update({p.name: found for p in pairing if p.op in region})
            continue
        entries += found
        covered |= {out.name for op in region for out in op.outputs}
    # Pairs reached by no region, or by one that fails, are listed. A region without pairs that fails (a loss
    # merged over time and batch, time-major) is left to the last check (gradient_check.py), as before.
    return tuple(entries), {p.name: failed.get(p.name, "its region cannot be found") for p in pairing
                            if p.name not in covered}, covered


def _ends(forward, batch_ops, samples, own, rewritten, probes):
    """{name: tensor} of the values whose rows mix the examples (not their own rows, by the samples) and that an op
    of the forward pass reduces over the batch (its value does not follow it): a per-example loss of in-batch
    negatives, its mean's input. A value that mixes the examples and is their own again further on (tf.unique's
    indices, gathered back into rows) ends no region."""
    ends = {}
    for op in sorted(forward & batch_ops, key=lambda o: o.name):
        for t in op.outputs:
            if t.name in own or t.name not in samples or t.name in rewritten or not (
                    _rows(t, probes) or _a_share_of_the_batch(t, probes)):
                continue
            if not _rows(t, probes) and all(mixed_rows._own_rows(parts, any_order=True) for parts in samples[t.name]):
                continue  # a share that mixes nothing: the examples' own rows restacked (two views of each)
            if any(c in forward and c.outputs and all(_probed(o, probes) and not _on_batch(o, probes)
                                                      for o in c.outputs) for c in t.consumers()):
                ends[t.name] = t
    return ends


def _only_through(losses, shares, batch_ops):
    """Whether the losses read the batch only through the values of shares of it: then each worker's loss is one
    device's, whose gradient the workers' average makes one device's. A loss that also reads the batch another way
    (a sum of the errors beside the hardest half's mean) is left to the last check (gradient_check.py)."""
    stop = {t.op for t in shares}
    reached = graph_utils.closure(set(losses) - stop, lambda op: [i.op for i in op.inputs if i.op not in stop])
    return bool(losses) and not any(op in batch_ops and reads_input(op) for op in reached)


def _regions(ends, own, held, batch_ops, failed):
    """[(ops, {frontier tensor: readers})]: the mixing ops back from each end (mixed_rows.py's walk), those that
    share ops merged; `failed` gets why not for the others."""
    regions = []
    for end in sorted(ends, key=lambda t: t.name):
        walked, edge, why = mixed_rows._mixing_region(end, own, held, batch_ops)
        if why:
            failed[end.name] = why
            continue
        for other in [r for r in regions if r[0] & walked]:
            regions.remove(other)
            walked = walked | other[0]
            edge = {name: set(edge.get(name, ())) | set(other[1].get(name, ())) for name in set(edge) | set(other[1])}
        regions.append((walked, edge))
    return regions


def _entries(graph, region, frontier, held, batch_ops, forward, probes, gradient_ops):
    """The plan's entries for one region, or why it is left alone."""
    if any(batch_draws.calls_functions(op) for op in region):
        return "an op on its way runs a graph function"
    read = sorted({i.name for op in region for i in op.inputs if i.name in held})
    if read:
        return f"it reads {read[0]}, which another rule rewrites (a random draw, a statistic of the batch)"
    backward = _backward(region, gradient_ops, forward, batch_ops)
    entries = []
    for name in sorted(frontier):
        t = graph.get_tensor_by_name(name)
        if not _rows(t, probes):
            return f"{name}, the examples' rows it starts from, does not have the batch on its first axis alone"
        readers = {c for c in t.consumers() if c in region or c in backward}
        entries.append((GATHERED, name, tuple(sorted(c.name for c in readers))))
    trained = [graph.get_tensor_by_name(name) for name in frontier]
    trained = [t for t in trained if t.dtype.is_floating and any(
        a.type in graph_utils.VARIABLE_OP_TYPES for a in graph_utils.ancestors([t.op], False))]
    if trained and not any(getattr(op, "_original_op", None) in region for op in backward):
        return ("no gradient op records its forward op (an imported graph, a tape): where its gradients enter and "
                "leave it cannot be told")
    entries += [(SUMMED, g.name, readers) for g, readers in _leaving(backward, batch_ops)]
    for op in sorted(region, key=lambda o: o.name):
        for out in op.outputs:
            # What is neither on the way to the loss nor a gradient op (a metric, a summary) reads one device's
            # values of the whole batch.
            outside = [c for c in out.consumers() if c not in region and c not in backward and
                       (c in forward or getattr(c, "_original_op", None) is not None)]
            if not outside:
                continue
            # A value of a share of the batch's examples (its top half by loss) is no example's own: what reads
            # it reads one device's value whole, and its gradient enters whole. Every worker's loss then holds one
            # device's term, whose gradient leaves summed over the workers: N times the term's, which the
            # workers' average (a loss that is no sum over the examples is averaged: loss_law.py) makes one's.
            if _a_share_of_the_batch(out, probes):
                continue
            # a worker's own rows of one device's value: those of its examples on the first axis, whatever the
            # others are (a pair's loss: each worker the pairs of its examples with the whole batch's)
            if not all(p.get(out.name) and p[out.name][0] == m for p, m in zip(probes, MARKERS)):
                return (f"{outside[0].name} reads {out.name}, which the batch's other examples change and whose "
                        f"first axis is not the batch's")
            entries.append((OWN, out.name, tuple(sorted(c.name for c in outside))))
            upstream = _upstream(op, out, gradient_ops, backward)
            if upstream is None:
                return f"the gradient that {out.name} takes in cannot be told from its op's other outputs'"
            entries += [(PADDED, g.name, readers) for g, readers in upstream]
    return entries


def _backward(region, gradient_ops, forward, batch_ops):
    """tf.gradients' ops for the region's ops, the sums of gradients (no forward op recorded) that add up theirs
    alone, and the gradient ops of what computed the frontier that read an integer they make: a gradient that
    leaves as IndexedSlices (a gather's by a permutation of the batch) is rows in the gather's order, which its
    indices and dense shape make the frontier's rows where they meet (a segment sum), and leaves there."""
    backward = set().union(*(gradient_ops(op) for op in region))
    while True:
        more = {c for g in backward for t in g.outputs if not t.dtype.is_floating for c in t.consumers()
                if c not in backward and c not in forward and getattr(c, "_original_op", None) in batch_ops}
        if more:
            backward |= more
            continue
        more = {c for g in backward for t in g.outputs for c in t.consumers()
                if c not in backward and c not in forward and c.type in SUMS and
                getattr(c, "_original_op", None) is None and all(i.op in backward for i in c.inputs)}
        # tf.gradients' zeros for an output no gradient reaches, read by the region's gradient ops alone
        more |= {c for op in region for t in op.outputs for c in t.consumers()
                 if c not in backward and c not in forward and c not in region and not c.op_def.is_stateful and
                 getattr(c, "_original_op", None) is None and c.outputs and
                 all(d in backward for x in c.outputs for d in x.consumers())}
        if not more:
            return backward
        backward |= more


def _leaving(backward, batch_ops):
    """[(gradient, the ops that read it)]: where the region's gradients of every worker's frontier rows leave its
    backward ops, for the gradient ops of what computed the frontier from the batch (directly, or through a sum of
    gradients). Those of values of variables alone (a temperature) leave as they are: each worker's own loss's."""
    def towards_batch(op):
        return getattr(op, "_original_op", None) in batch_ops
    out = {}
    for g in backward:
        for t in g.outputs:
            for c in t.consumers():
                if c in backward:
                    continue
                if towards_batch(c) or (c.type in SUMS and getattr(c, "_original_op", None) is None and
                                        any(towards_batch(d) for x in c.outputs for d in x.consumers())):
                    out.setdefault(t, set()).add(c.name)
    return [(t, tuple(sorted(readers))) for t, readers in sorted(out.items(), key=lambda item: item[0].name)]


def _upstream(op, out, gradient_ops, backward):
    """[(gradient, the region's gradient ops that read it)]: the gradient of `out`'s own rows, from outside the
    region, that `op`'s gradient ops take in (where a sum adds it to the region's own gradient of `out`, the
    sum's outside inputs); None when it cannot be told."""
    found = backward_ops.upstream(op, out, gradient_ops)
    if found is None:
        return None
    entering = []
    for t, readers in found:
        if t.op not in backward:
            entering.append((t, tuple(sorted(c.name for c in readers))))
        elif t.op.type in SUMS:  # a sum of the region's gradients and of those from outside it
            entering += [(i, (t.op.name,)) for i in t.op.inputs if i.op not in backward]
        else:
            return None
    return entering


def _probed(t, probes):
    return all(p.get(t.name) is not None for p in probes)


def _on_batch(t, probes):
    return all(p.get(t.name) is not None and m in p[t.name] for p, m in zip(probes, MARKERS))


def _a_share_of_the_batch(t, probes):
    """Whether `t`'s first axis follows the batch but is not it (k = the batch's size // 2), and no other does."""
    shapes = [p.get(t.name) for p in probes]
    if not all(shapes) or None in shapes[0] or None in shapes[1] or len(shapes[0]) != len(shapes[1]):
        return False
    (first, *rest), (second, *rest_too) = shapes
    return first != second and first not in MARKERS and second not in MARKERS and rest == rest_too


def _rows(t, probes):
    """Whether `t`'s first axis is the batch and no other is."""
    return all(p.get(t.name) and p[t.name][0] == m and list(p[t.name]).count(m) == 1
               for p, m in zip(probes, MARKERS))


def rewrite(graph, collective_ops, entries, worker, layout):
    """Apply the plan's entries (module docstring) in `graph`, for worker `worker`."""
    if not entries:
        return
    first = graph.get_tensor_by_name(next(name for kind, name, _ in entries if kind == GATHERED))
    with graph.as_default(), graph.name_scope(None), graph.name_scope(SCOPE):
        order, mine, total = _positions(collective_ops, first, worker, layout)
    for kind, name, readers in entries:
        t = graph.get_tensor_by_name(name)
        with graph.as_default(), graph.name_scope(None), \
                graph.name_scope(f"{SCOPE}/{t.op.name}_{t.value_index}_{kind}"):
            if kind == GATHERED:
                new = _gathered(collective_ops, t, first, order)
            elif kind == OWN:
                new = tf.gather(t, mine, name="own")
            elif kind == PADDED:
                new = tf.scatter_nd(mine[:, None], t, tf.concat([[total], tf.shape(t, out_type=tf.int64)[1:]], 0),
                                    name="padded")
            else:
                new = tf.gather(collective_ops.allreduce_sum(t, name="sum"), mine, name="own")
        reroute_consumers(t, new, keep=[c for c in t.consumers() if c.name not in readers])


def _gathered(collective_ops, t, first, order):
    """Every worker's rows of `t` in one device's order. An input fed alike to every worker (a pool of candidates)
    looks like the batch's examples to the planner; of another size than the batch, it stops the job here, instead
    of being gathered (the raw Assert op: tf.debugging's build a v2 cond, whose ops a step cannot fetch)."""
    rows, batch = tf.shape(t, out_type=tf.int64)[0], tf.shape(first, out_type=tf.int64)[0]
    same = tf.raw_ops.Assert(condition=tf.equal(rows, batch), summarize=2, data=[
        f"parallax: {t.name} was taken for the batch's examples (its rows mixed with each other, as in-batch "
        f"negatives), but its rows are not {first.name}'s; if every worker is fed it alike, mark its input with "
        f"parallax.shared_input; if it is a second per-worker input, paired with this one, it needs as many rows "
        f"per worker (a region of two per-worker batch sizes is not split). Rows:", rows, batch])
    with tf.control_dependencies([same]):
        every = statistics_combined.allgather_any(collective_ops, t, name="rows")
    return tf.gather(every, order, name="in_order")


def _positions(collective_ops, rows, worker, layout):
    """(for each of one device's examples, its row among the workers' rows gathered in worker order; the
    positions of this worker's examples among one device's; their number): with an element-wise sharded input
    (INTERLEAVED) example p is worker p mod N's example p div N."""
    sizes = collective_ops.allgather(tf.shape(rows, out_type=tf.int64)[:1], name="sizes")
    order = batch_draws.gathered_order(sizes, layout)
    with rows.graph.name_scope(None), rows.graph.name_scope("parallax_shard/pairs"):  # the same-graph check skips
        worker = tf.constant(worker, tf.int32, name="worker_id")
    start = tf.math.cumsum(sizes, exclusive=True)[worker]
    mine = tf.where((order >= start) & (order < start + sizes[worker]))[:, 0]
    return order, mine, tf.reduce_sum(sizes)


def apply(site):
    rewrite(site.graph, site.collective_ops, site.plan.paired_rows, site.worker_id, site.plan.batch_layout)


def holds(graph, plan):
    return all(statistics_combined.is_combined(graph, name, readers) for _, name, readers in plan.paired_rows)


def find(site):
    """The rows that pair the batch's examples, as the reading of the batch's statistics found them."""
    return {"paired_rows": site.statistics.paired}


RULE = Rule("gather_paired_rows", ("paired_rows",), "rows_paired", apply, holds, find, uses_collectives=True,
            doc="what pairs the batch's examples (in-batch negatives' logits) reads every worker's rows and is one "
                "device's; the rest reads the worker's own rows of it, and the gradients cross between the two as "
                "the plan says")
