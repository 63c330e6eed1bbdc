"""Values on the way to the loss that pair the batch's examples with each other: the logits of in-batch negatives
(`u @ v^T`, each user scored against every item of the batch, its own item the label at its position).

One device pairs the whole batch's examples, a worker only its own, so no aggregation of the workers' gradients
makes one device's. Which values do so is found by running the graph on random batches (batch_samples.py), not
from op types. The *region*: from each value with the batch on two of its axes (batch_statistics' shape probes),
forward through every op of the forward pass whose value has the batch on an axis and is not, row by row, its
values on the batch's parts (mixed_rows._own_rows); and back from those through every input computed from the
batch that is not its examples' own rows either (a label at each example's position, tf.range of the batch's
size) to the examples' own rows the region starts from (the towers' outputs: the *frontier*).

The rewrite (one device's for every worker, in the plan as `paired_rows`):
- GATHERED: the region's ops, and tf.gradients' ops for them, read every worker's rows of the frontier in one
  device's order (batch_draws' layout), so every worker computes one device's values for the whole batch;
- OWN: where the region ends (a per-example loss, read by its mean), everything else reads the rows of the
  worker's own examples;
- PADDED: the gradient of those own rows enters the region's gradient ops as one device's rows, zeros at the
  other workers' examples;
- SUMMED: the region's gradient of every worker's frontier rows leaves it as the workers' sum, of which each
  worker takes its own rows.
With L_w worker w's loss, its gradient then reaches its examples' rows from every worker's loss, sum_v dL_v/du_w:
the gradients the plan aggregates are one device's, as for any loss without pairs.

Listed, not rewritten (as in batch_statistics.PAIRWISE): a region that draws, holds state or runs in a v1 loop or
cond, that reads a value another rule rewrites, that ends in a value whose first axis is not the batch's alone,
or whose gradient's way in or out cannot be told.
"""
import tensorflow as tf

from parallax import backward_ops, batch_draws, graph_utils, mixed_rows
from parallax.batch_samples import WHOLE_AND_SPLITS, sampled
from parallax.batch_shapes import MARKERS
from parallax.row_keys import reads_input

GATHERED, OWN, PADDED, SUMMED = "gathered", "own", "padded", "summed"
SCOPE = "parallax_pairs"
SUMS = ("AddN", "Add", "AddV2")


def find(graph, pairing, forward, probes, gradient_ops, value_inputs, held=()):
    """(the plan's entries ((GATHERED|OWN|PADDED|SUMMED, tensor, readers), ...), {pairing tensor: why not} for the
    regions left alone, the names of the values the regions compute). `pairing`: tensors with the batch on two
    axes; `forward`: the forward pass's ops; `value_inputs(op)`: the inputs whose values it reads (not a shape's
    op's); `held`: the names of values another rule rewrites."""
    if not pairing:
        return (), {}, set()
    batch_ops = mixed_rows.from_batch(forward)
    fetched = sorted({t for op in batch_ops for t in op.outputs if mixed_rows._sampleable(t)}, key=lambda t: t.name)
    held_draws = batch_draws.held_as_rewritten(graph, pairing, ())
    samples = sampled(graph, fetched, WHOLE_AND_SPLITS, held=held_draws) if held_draws is not None else None
    if not samples:
        return (), {p.name: "the graph cannot be run on random batches to tell its examples' own rows"
                    for p in pairing}, set()
    # A value computed from the batch's shape alone (tf.eye of its size) is computed in the region, not gathered.
    valued = set()
    for op in graph_utils.topological(batch_ops):
        if reads_input(op) or any(i.op in valued for i in value_inputs(op)):
            valued.add(op)
    own = {name for name, trials in samples.items() if all(mixed_rows._own_rows(parts) for parts in trials) and
           graph.get_tensor_by_name(name).op in valued}
    entries, failed, covered = [], {}, set()
    done = set()
    rewritten = set(held) | set(held_draws)
    for p in sorted(pairing, key=lambda t: t.name):
        if p.op in done:
            continue
        found = _region(p, own, rewritten, batch_ops, forward, probes, gradient_ops)
        if isinstance(found, str):
            failed[p.name] = found
            continue
        region, region_entries = found
        done |= region
        entries += region_entries
        covered |= {out.name for op in region for out in op.outputs}
    return tuple(entries), failed, covered


def _region(p, own, held, batch_ops, forward, probes, gradient_ops):
    """(the region's ops, its entries) from the pairing tensor `p`, or why it is left alone."""
    mixing = _forward_closure(p.op, own, forward, probes)
    region, frontier = set(), {}
    for op in sorted(mixing, key=lambda o: o.name):
        walked, edge, why = mixed_rows._mixing_region(op.outputs[0], own, held, batch_ops)
        if why:
            return why
        region |= walked
        for name, readers in edge.items():
            frontier.setdefault(name, set()).update(readers)
    if any(batch_draws.calls_functions(op) for op in region):
        return "an op on its way runs a graph function"
    read = sorted({i.name for op in region for i in op.inputs if i.name in held})
    if read:
        return f"it reads {read[0]}, which another rule rewrites (a random draw, a statistic of the batch)"
    backward = _backward(region, gradient_ops, forward)
    graph = p.graph
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
            if not _rows(out, probes):
                return (f"{outside[0].name} reads {out.name}, which the batch's other examples change and whose "
                        f"first axis is not the batch's alone")
            entries.append((OWN, out.name, tuple(sorted(c.name for c in outside))))
            upstream = _upstream(op, out, gradient_ops, backward)
            if upstream is None:
                return f"the gradient that {out.name} takes in cannot be told from its op's other outputs'"
            entries += [(PADDED, g.name, readers) for g, readers in upstream]
    return region, entries


def _forward_closure(start, own, forward, probes):
    """`start` and the ops of the forward pass it reaches through values that follow the batch and are not their
    examples' own rows."""
    found, stack = set(), [start]
    while stack:
        op = stack.pop()
        if op in found:
            continue
        found.add(op)
        stack += [c for t in op.outputs for c in t.consumers() if c in forward and c not in found and
                  any(_on_batch(o, probes) and o.name not in own for o in c.outputs)]
    return found


def _backward(region, gradient_ops, forward):
    """tf.gradients' ops for the region's ops, and the sums of gradients (no forward op recorded) that add up
    theirs alone."""
    backward = set().union(*(gradient_ops(op) for op in region))
    while True:
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


def _on_batch(t, probes):
    return all(p.get(t.name) is not None and m in p[t.name] for p, m in zip(probes, MARKERS))


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
                # An input fed alike to every worker (a pool of candidates) looks like the batch's examples to the
                # planner; of another size than the batch, it stops the job here instead of being gathered.
                # the raw op: tf.debugging's asserts build a v2 cond, whose ops a step cannot fetch
                rows, batch = tf.shape(t, out_type=tf.int64)[0], tf.shape(first, out_type=tf.int64)[0]
                same = tf.raw_ops.Assert(condition=tf.equal(rows, batch), summarize=2, data=[
                    f"parallax: {name} was taken for the batch's examples (paired with each other, as in-batch "
                    f"negatives), but its rows are not {first.name}'s; if every worker is fed it alike, mark its "
                    f"input with parallax.shared_input. Rows:", rows, batch])
                with tf.control_dependencies([same]):
                    new = tf.gather(collective_ops.allgather(t, name="rows"), order, name="in_order")
            elif kind == OWN:
                new = tf.gather(t, mine, name="own")
            elif kind == PADDED:
                new = tf.scatter_nd(mine[:, None], t, tf.concat([[total], tf.shape(t, out_type=tf.int64)[1:]], 0),
                                    name="padded")
            else:
                new = tf.gather(collective_ops.allreduce_sum(t, name="sum"), mine, name="own")
        readers = set(readers)
        for op in [c for c in t.consumers() if c.name in readers]:
            for index, x in enumerate(op.inputs):
                if x is t:
                    op._update_input(index, new)


def _positions(collective_ops, rows, worker, layout):
    """(for each of one device's examples, its row among the workers' rows gathered in worker order; the
    positions of this worker's examples among one device's; their number): with an element-wise sharded input
    (INTERLEAVED) example p is worker p mod N's example p div N."""
    sizes = collective_ops.allgather(tf.shape(rows, out_type=tf.int64)[:1], name="sizes")
    starts, total = tf.math.cumsum(sizes, exclusive=True), tf.reduce_sum(sizes)
    position = tf.range(total)
    order = position if layout != batch_draws.INTERLEAVED else \
        tf.gather(starts, position % tf.size(sizes, out_type=tf.int64)) + position // tf.size(sizes, out_type=tf.int64)
    with rows.graph.name_scope(None), rows.graph.name_scope("parallax_shard/pairs"):  # the same-graph check skips
        worker = tf.constant(worker, tf.int32, name="worker_id")
    start = starts[worker]
    mine = tf.where((order >= start) & (order < start + sizes[worker]))[:, 0]
    return order, mine, total


def is_rewritten(graph, entries):
    """Whether every reader of each entry reads what the rewrite made of it."""
    for _, name, readers in entries:
        if any(name in {t.name for t in graph.get_operation_by_name(r).inputs} for r in readers):
            return False
    return True


def summary(entries):
    gathered = sorted(name for kind, name, _ in entries if kind == GATHERED)
    ends = sorted(name for kind, name, _ in entries if kind == OWN)
    return (f"{', '.join(gathered)} gathered from every worker: what pairs the batch's examples is one device's, "
            f"and {', '.join(ends)} the worker's own examples' rows of it") if gathered else ""

