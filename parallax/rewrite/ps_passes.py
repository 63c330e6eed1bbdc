"""PS mode: variables live on parameter servers; synchronous steps aggregate gradients in accumulators.

One synchronous step (N workers, worker 0 the chief):
  every worker   computes its gradients and applies them to the accumulators on the servers (apply_grad);
  the chief      takes each accumulator's SUM of N gradients (take_grad), divides by N when averaging, runs the
                 user's training op on those (clipping and other ops in between included), exactly once,
                 then puts one token into each other worker's token queue;
  other workers  wait for their token before their next step.
The rewritten graph is the same in every worker. The runner runs, for the user's training op `T`,
`parallax_sync/<T>/chief` on the chief and `parallax_sync/<T>/worker_<i>` on worker i.
"""
import tensorflow as tf

from parallax import graph_utils
from parallax.rewrite.local_aggregation import sparse_contributions
from parallax.rewrite.reroute import average_of, new_ops, reroute_consumers

tf1 = tf.compat.v1
TOKEN_SCOPE = "parallax_sync"
# Each take_grad advances an accumulator's step, and apply_grad silently drops a gradient whose local_step is
# older. The token barrier already makes stale gradients impossible, so gradients carry a step that is never old.
NEVER_STALE = 2 ** 62


def ps_device(task):
    return f"/job:ps/task:{task}"


def place_variables_on_servers(ctx):
    """Each PS variable (shard), its slots and everything colocated with it, and each update op, on its server."""
    device_of = {}
    for vp in ctx.plan.variables:
        if vp.method != "PS":
            continue
        for part, task in zip(ctx.analysis.variable(vp.name).parts, vp.ps_tasks):
            for name in (part.name, *(s for _, s in part.slots), *part.update_ops):
                device_of[name] = ps_device(task)
    records = {r.name: r for r in ctx.analysis.state}
    for sp in ctx.plan.state:
        if sp.ps_task is not None:
            device_of[sp.name] = ps_device(sp.ps_task)
            target = records[sp.name].colocated_with
            if target is not None and device_of.get(target) != device_of[sp.name]:
                device_of.update(_leave_colocation(ctx.graph, sp.name, target, device_of[sp.name]))
    placed = ctx.placements.setdefault("place_variables_on_servers", [])
    for op in ctx.graph.get_operations():
        device = device_of.get(op.name) or device_of.get(graph_utils.colocation_target(op) or "")
        if device is not None:
            op._set_device(device)
            placed.append((op.name, device))


def _leave_colocation(graph, name, target, device):
    """HYBRID: optimizer state made colocated with a replicated variable (Adam's beta powers) moves to a server.
    It, and the ops colocated with the same variable that use it (its initializer), leave that colocation group."""
    moved = {}
    for op in graph.get_operations():
        if graph_utils.colocation_target(op) == target and \
                (op.name == name or any(t.op.name == name for t in op.inputs)):
            op._clear_attr("_class")
            moved[op.name] = device
    return moved


def aggregate_in_accumulators(ctx):
    """Sync: raw gradients go to accumulators on the variable's server; updates read SUM / N from take_grad.
    Updates of averaged state (batch-norm statistics) get the same treatment, on their written value."""
    g, n = ctx.graph, ctx.plan.num_workers
    for vp in ctx.plan.variables:
        if vp.method != "PS":
            continue
        for part, task in zip(ctx.analysis.variable(vp.name).parts, vp.ps_tasks):
            _accumulate_gradient(ctx, part, ps_device(task), vp.average, vp.local_aggregation)
    for sp in ctx.plan.state:
        if not sp.aggregate:
            continue
        record = next(s for s in ctx.analysis.state if s.name == sp.name)
        for writer_name in record.written_by:
            writer = g.get_operation_by_name(writer_name)
            value = writer.inputs[1]
            device = ps_device(sp.ps_task) if sp.ps_task is not None else None
            with g.as_default(), tf.device(device), new_ops(g) as created, \
                    tf.name_scope(f"parallax_ps/{writer_name}"):
                acc = tf1.ConditionalAccumulator(value.dtype, shape=value.shape, reduction_type="SUM",
                                                 shared_name=f"parallax_acc/{writer_name}", name="accumulator")
                apply = acc.apply_grad(value, local_step=NEVER_STALE, name="apply")
                with tf.control_dependencies([apply]):
                    mean = average_of(acc.take_grad(n, name="take"), n)
            reroute_consumers(value, mean, keep=created)
            ctx.accumulators.append((_everyone(ctx, apply), mean.op.inputs[0].op))


def _everyone(ctx, apply):
    """Every worker contributes by running `apply` itself."""
    return {w: (apply,) for w in range(ctx.plan.num_workers)}


def _accumulate_gradient(ctx, part, device, average, local_aggregation):
    g, n = ctx.graph, ctx.plan.num_workers
    grad = part.gradient
    values = g.get_tensor_by_name(grad.values)
    var_shape = tf.TensorShape(part.shape)
    with g.as_default(), tf.device(device), new_ops(g) as created, tf.name_scope(f"parallax_ps/{part.name}"):
        if grad.is_sparse:
            indices = g.get_tensor_by_name(grad.indices)
            acc = tf1.SparseConditionalAccumulator(values.dtype, shape=var_shape, reduction_type="SUM",
                                                   shared_name=f"parallax_acc/{part.name}", name="accumulator")
            slices = tf.IndexedSlices(values, tf.cast(indices, tf.int64))
            contributions, required = sparse_contributions(ctx.plan, part.name, slices, var_shape, acc, device,
                                                           local_aggregation, NEVER_STALE)
            with tf.control_dependencies(contributions[0]):  # the chief contributes before it takes
                taken = acc.take_indexed_slices_grad(required, name="take")
            new_values = taken.values
            if average:
                new_values = average_of(new_values, n)
            new_indices = tf.cast(taken.indices, indices.dtype)
        else:
            acc = tf1.ConditionalAccumulator(values.dtype, shape=var_shape, reduction_type="SUM",
                                             shared_name=f"parallax_acc/{part.name}", name="accumulator")
            apply = acc.apply_grad(values, local_step=NEVER_STALE, name="apply")
            contributions = _everyone(ctx, apply)
            with tf.control_dependencies([apply]):
                new_values = acc.take_grad(n, name="take")
            if average:
                new_values = average_of(new_values, n)
    reroute_consumers(values, new_values, keep=created)
    take = g.get_operation_by_name(f"parallax_ps/{part.name}/take")
    if grad.is_sparse:
        reroute_consumers(indices, new_indices, keep=created)
        _aggregate_row_norms(ctx, values, new_values, device, average, part.name)
    ctx.accumulators.append((contributions, take))


def _aggregate_row_norms(ctx, raw_values, aggregated_values, device, average, name):
    """TF's global_norm of IndexedSlices squares every row, duplicates included, and the sparse accumulator
    merges rows of equal index, which changes that sum of squares. So each L2Loss of aggregated rows is replaced by
    the sum over workers of the L2Loss of their raw rows (/ N^2 when averaging): exactly L2Loss(all rows / N).
    In PS mode the sum goes through an accumulator, for the chief. In HYBRID every worker needs it (the global norm
    also clips its replicated dense gradients), so it is an allreduce."""
    g, n = ctx.graph, ctx.plan.num_workers
    for i, l2 in enumerate(op for op in list(aggregated_values.consumers()) if op.type == "L2Loss"):
        with g.as_default(), new_ops(g) as created, tf.name_scope(f"parallax_ps/{name}/row_norm_{i}"):
            local = tf.nn.l2_loss(raw_values, name="local")
            if ctx.plan.uses_collectives:
                from horovod.tensorflow import mpi_ops
                total = mpi_ops._allreduce(local, op=mpi_ops.Sum, name="allreduce")
            else:
                with tf.device(device):
                    acc = tf1.ConditionalAccumulator(raw_values.dtype, shape=[], reduction_type="SUM",
                                                     shared_name=f"parallax_acc/{name}/row_norm_{i}",
                                                     name="accumulator")
                    apply = acc.apply_grad(local, local_step=NEVER_STALE, name="apply")
                    with tf.control_dependencies([apply]):
                        total = acc.take_grad(n, name="take")
                    ctx.accumulators.append((_everyone(ctx, apply), total.op))
            if average:
                total = average_of(total, n * n)
        reroute_consumers(l2.outputs[0], total, keep=created)


def add_sync_barrier(ctx):
    """Token queues (one per non-chief worker, on server 0) and the per-role versions of each training op."""
    g, n = ctx.graph, ctx.plan.num_workers
    takes = {take for _, take in ctx.accumulators}
    contributions_of = {take: contributions for contributions, take in ctx.accumulators}
    moved = _move_chief_work_out_of_worker_steps(g, takes)
    with g.as_default(), tf.device(ps_device(0)), tf.name_scope(TOKEN_SCOPE):
        queues = [tf1.FIFOQueue(2, [tf.int64], shapes=[[]], shared_name=f"{TOKEN_SCOPE}/tokens_{i}",
                                name=f"tokens_{i}") for i in range(1, n)]
    replica_updates = _replica_update_ops(ctx)
    for op in _training_ops(g, takes, exclude=set(moved)):
        # Sorted by name here and below: the order of control inputs is part of the GraphDef, and every worker must
        # build the same graph (set order follows object ids, which differ between processes).
        op._add_control_inputs(sorted((m for m, users in moved.items() if op in users), key=lambda m: m.name))
        deps = graph_utils.ancestors([op])
        mine = {w: [c for t in sorted(takes & deps, key=lambda t: t.name) for c in contributions_of[t][w]]
                for w in range(n)}
        # HYBRID: a worker also updates its replicas (their collectives must match the chief's), and applies its
        # sparse gradients only after that, so that everything its updates read (Adam's beta powers, the global
        # step, on the servers) is read before the chief, which waits for every apply, moves it on.
        local = [u for u in replica_updates if u in deps]
        local += sorted((c for c in deps if c.type.startswith("Horovod") and c not in local), key=lambda c: c.name)
        for apply in {c for ops in mine.values() for c in ops}:
            apply._add_control_inputs([u for u in local if u not in apply.control_inputs])
        scope = f"{TOKEN_SCOPE}/{op.name}"
        with g.as_default(), tf.name_scope(scope + "/"):
            with tf.control_dependencies([op]):
                chief = tf.group(*[q.enqueue(tf.constant(0, tf.int64)) for q in queues], name="chief")
            workers = [chief]
            for i, q in enumerate(queues, start=1):
                with tf.control_dependencies(mine[i] + local):
                    workers.append(tf.group(q.dequeue(), name=f"worker_{i}"))
        ctx.train_op_variants[op.name] = tuple(w.name for w in workers)
    ctx.sync_takes = tuple(sorted(t.name for t in takes))


def _replica_update_ops(ctx):
    """Update ops of the variables every worker holds a replica of (AR in HYBRID), in graph order."""
    names = {n for vp in ctx.plan.variables if vp.method == "AR" for n in ctx.analysis.variable(vp.name).update_ops}
    return [op for op in ctx.graph.get_operations() if op.name in names]


def _move_chief_work_out_of_worker_steps(graph, takes):
    """`with control_dependencies(UPDATE_OPS): minimize(loss)` makes the gradient ops wait for the batch-norm
    writes, which now consume averaged statistics and run on the chief only. Such control edges, from work
    downstream of an accumulator to work every worker does, move to the training ops that depended on them.
    (Numerically nothing changes: training-mode batch norm reads batch statistics, not the moving ones.)
    Returns {moved op: every op that depended on it before the edges were cut}."""
    downstream = graph_utils.descendants(takes)
    # Ops that feed an accumulator but are downstream of another one only through such edges are worker work.
    late = {op: [c for c in op.control_inputs if c in downstream] for op in graph_utils.ancestors(takes)}
    late = {op: cs for op, cs in late.items() if cs}
    moved = {c: graph_utils.descendants([c]) for cs in late.values() for c in cs}
    for op, cs in late.items():
        keep = [c for c in op.control_inputs if c not in cs]
        op._remove_all_control_inputs()
        op._add_control_inputs(keep)
    return moved


def _training_ops(graph, takes, exclude=()):
    """The user's training ops: the sinks among the ops that depend on aggregated gradients, e.g. the result of
    `minimize`, or a group that also applies an EMA. A training op is a group (NoOp) or has an effect (stateful);
    dead pure computations are not. An unused read that TF hangs after an assignment (`assign_add(...)` returns
    one) does not stop an op from being a sink."""
    upstream, downstream = graph_utils.ancestors(takes), graph_utils.descendants(takes)
    return [op for op in graph.get_operations() if op in downstream and op not in upstream
            and (op.type == "NoOp" or op.op_def.is_stateful)
            and not op.name.startswith("parallax_") and not _is_unused_read(op) and op not in exclude
            and all(_is_unused_read(c) for c in graph_utils.consumers(op))]


def _is_unused_read(op):
    return op.type in ("ReadVariableOp", "Identity") and not graph_utils.consumers(op)
