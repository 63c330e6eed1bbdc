"""Replicated variables (AR, AG): every worker holds a replica; the plan's collective backend (parallax/collectives)
aggregates their gradients and broadcasts initial values.

Each pass rewires every consumer of a raw gradient on the update's side (the update, and any clipping or scaling the
user put between) to the aggregated one, so clipping sees aggregated gradients, exactly as on one device. A consumer
in the backward pass keeps the raw gradient (`backward_pass`).
"""
import contextlib

import tensorflow as tf

from parallax.plan.records import Aggregation
from parallax.analysis.row_keys import merge_rows, row_keys
from parallax.analysis.fusion import packed_width
from parallax.core import graph_utils
from parallax.core.graph_surgery import average_of, new_ops, reroute_consumers
from parallax.errors import PipelineError

tf1 = tf.compat.v1


def gradients_of(ctx, aggregation):
    """(variable plan, part plan, gradient plan) for every gradient the plan aggregates by `aggregation`. A variable
    may have several gradients (several optimizers or losses): each is aggregated on its own, under its scope."""
    for vp in ctx.plan.variables:
        for part in vp.parts:
            for grad in part.gradients:
                if grad.aggregation == aggregation:
                    yield vp, part, grad


def backward_pass(ctx):
    """The ops some raw gradient of the plan is computed from, through data edges (the forward and backward
    passes). A reader of a raw gradient among them computes another gradient from it, and must keep reading its
    worker's own: TF 2's tape passes a gradient on as it is where it can (the gradient of `beta - m` is (g, -g), so
    beta's raw gradient is also what the Neg towards m, and the layers before it, read). Read aggregated, the
    backward pass would mix the workers' gradients, or wait on its own aggregate: a cycle. An update that another
    gradient only waits for (a GAN's discriminator update before the generator's gradients: a control edge)
    computes no gradient, and reads the aggregate."""
    g = ctx.graph
    raw = [g.get_tensor_by_name(name).op for vp in ctx.plan.variables for part in vp.parts
           for grad in part.gradients for name in (grad.values, grad.indices) if name]
    return {op for op in graph_utils.ancestors(raw, include_control=False) if not graph_utils.is_writer(op)}


def reroute_gradient(raw, aggregated, created, backward):
    """The update's side of `raw` reads `aggregated`: every consumer but the ops that compute it (`created`) and
    those of the backward pass (`backward`)."""
    reroute_consumers(raw, aggregated, keep=[*created, *(c for c in raw.consumers() if c in backward)])


def planned_groups(plan, aggregation, items):
    """`items` (gradients_of's) in the plan's fusion groups of `aggregation`, in the plan's order; a gradient no
    group names has a group of its own, after them (a plan made without planning.plan_job names none)."""
    by_scope = {item[2].scope: item for item in items}
    named = [group.gradients for group in plan.fusion_groups if group.aggregation == aggregation]
    in_groups = {s for scopes in named for s in scopes}
    unknown = sorted(in_groups - set(by_scope))
    if unknown:
        raise PipelineError(f"the plan's {aggregation} fusion groups name {unknown}, which the plan aggregates by no "
                            f"{aggregation}; make the plan again with planning.plan_job")
    alone = [[item] for item in items if item[2].scope not in in_groups]
    return [[by_scope[s] for s in scopes] for scopes in named] + alone


def allreduce_dense_gradients(ctx):
    """Dense gradients of replicated variables: allreduce (Sum), then / N when averaging. Gradients that may share
    a collective (the plan's fusion groups: same dtype, static shape, same effects behind them) go in one buffer,
    one collective per group: the LM's dense gradients in one, ResNet's 25 in one."""
    g = ctx.graph
    items = list(gradients_of(ctx, Aggregation.ALLREDUCE))
    backward = backward_pass(ctx)
    for k, group in enumerate(planned_groups(ctx.plan, Aggregation.ALLREDUCE, items)):
        if len(group) == 1:
            _, _, gradient = group[0]
            scope = f"parallax_allreduce/{gradient.scope}"
        else:
            scope = f"parallax_allreduce/fused_{k}"
        grads = [g.get_tensor_by_name(gradient.values) for _, _, gradient in group]
        with g.as_default(), new_ops(g) as created, tf.name_scope(scope):
            totals = _allreduce_together(ctx.collective_ops, grads)
            ctx.collectives += ctx.collective_ops.created()
            aggregated = []
            for (vp, _, gradient), total in zip(group, totals):
                with tf.name_scope(gradient.scope) if len(group) > 1 else contextlib.nullcontext():
                    aggregated.append(average_of(total, ctx.plan.num_workers) if vp.average else total)
        for (_, _, gradient), grad, agg in zip(group, grads, aggregated):
            reroute_gradient(grad, agg, created, backward)
            ctx.aggregated[gradient.scope] = agg


def _allreduce_together(ops, grads):
    """The sums over workers of `grads` (one dtype, static shapes): one collective of their concatenation."""
    if len(grads) == 1:
        return [ops.allreduce_sum(grads[0], name="allreduce")]
    flat = tf.concat([tf.reshape(t, [-1]) for t in grads], axis=0, name="buffer")
    total = ops.allreduce_sum(flat, name="allreduce")
    sizes = [t.shape.num_elements() for t in grads]
    return [tf.reshape(piece, t.shape) for piece, t in zip(tf.split(total, sizes, name="pieces"), grads)]


def allgather_sparse_gradients(ctx):
    """IndexedSlices gradients of replicated variables: values and indices allgathered (rank order, so the rows
    are what one device's batch gives, up to their order; rows one device holds once are merged, row_keys.py);
    values / N when averaging. Each gradient's rows travel packed in one tensor (`_packed_rows`), and the packed
    rows of gradients that may share a collective (the plan's fusion groups: same dtype, row shape known, same
    effects behind them) go in one allgather of the group: the LM's three sparse gradients in one, NMT's two in one."""
    ops, g = ctx.collective_ops, ctx.graph
    n = ctx.plan.num_workers
    items = list(gradients_of(ctx, Aggregation.ALLGATHER))
    backward = backward_pass(ctx)
    done = []  # (gradient, values, indices, aggregated values, aggregated indices)
    with g.as_default(), new_ops(g) as created:
        packs = {}
        for vp, part, gradient in items:
            values = g.get_tensor_by_name(gradient.values)
            indices = g.get_tensor_by_name(gradient.indices)
            with tf.name_scope(f"parallax_allgather/{gradient.scope}/"):
                row_ids = [indices] + ([row_keys(indices)] if gradient.merge_rows else [])
                packs[gradient.scope] = (values, row_ids, _packed_rows(values, row_ids))
        def packed_of(item):
            return packs[item[2].scope][2]
        gathered = {}
        packed = [item for item in items if packed_of(item) is not None]
        groups = planned_groups(ctx.plan, Aggregation.ALLGATHER, packed)
        for k, group in enumerate(groups):
            scope = f"parallax_allgather/{group[0][2].scope}/" if len(group) == 1 else f"parallax_allgather/fused_{k}/"
            with tf.name_scope(scope):
                rows = ops.allgather_group([packed_of(item) for item in group], name="rows")
            for (_, _, gradient), packed_rows in zip(group, rows):
                values, row_ids, _ = packs[gradient.scope]
                with tf.name_scope(f"parallax_allgather/{gradient.scope}/"):
                    gathered[gradient.scope] = _unpacked_rows(packed_rows, values, row_ids)
        for vp, part, gradient in items:
            values, row_ids, packed = packs[gradient.scope]
            with tf.name_scope(f"parallax_allgather/{gradient.scope}/"):
                if packed is None:  # no columns to pack into: each tensor gathered on its own
                    gathered[gradient.scope] = [ops.allgather(t, name=f"rows_{i}")
                                                for i, t in enumerate([values] + row_ids)]
                all_values, all_indices = gathered[gradient.scope][:2]
                if gradient.merge_rows:
                    all_values, all_indices = merge_rows(all_values, all_indices, gathered[gradient.scope][2])
                if vp.average:
                    all_values = average_of(all_values, n)
            done.append((gradient, values, row_ids[0], all_values, all_indices))
        ctx.collectives += ops.created()
    for gradient, values, indices, all_values, all_indices in done:
        reroute_gradient(values, all_values, created, backward)
        reroute_gradient(indices, all_indices, created, backward)
        ctx.aggregated[gradient.scope] = (all_values, all_indices)


def broadcast_initial_values(ctx):
    """One op that overwrites every replicated global variable with rank 0's value, one variable after another in
    name order. (Variables on parameter servers have one copy already.)"""
    ops, g = ctx.collective_ops, ctx.graph
    with g.as_default(), tf.name_scope("parallax_broadcast"):
        variables = sorted((v for v in tf1.global_variables() if v.op.name not in ctx.server_variables),
                           key=lambda v: v.op.name)
        previous = []
        for v in variables:
            with tf.control_dependencies(previous):
                value = ops.broadcast(v.read_value(), name=f"{v.op.name}/broadcast")
                previous = [tf1.assign(v, value)]
        ops.created()  # run once, by the initialization, not in the steps
        ctx.broadcast_op = tf.group(*previous, name="all")


def _packed_rows(values, row_ids):
    """`values` and the integer tensors `row_ids` (one element per row each) as one tensor of rows: the ids ride
    along as extra columns of the values' dtype, bit for bit (tf.bitcast; a gather only copies them), so one
    collective carries them all (each costs a negotiation cycle). None when the values' row shape is unknown, or
    their dtype cannot carry the bits."""
    width = packed_width(values)
    if width is None:  # unknown, or no columns to reshape into
        return None
    per_id = 8 // values.dtype.size  # columns of the values' dtype that hold one int64
    columns = [tf.reshape(values, [-1, width])]
    for ids in row_ids:
        columns.append(tf.reshape(tf.bitcast(tf.cast(ids, tf.int64), values.dtype), [-1, per_id]))
    return tf.concat(columns, axis=1, name="packed")


def _unpacked_rows(packed, values, row_ids):
    """[every worker's values, then each of `row_ids`], from the gathered `packed` rows (`_packed_rows`)."""
    width = values.shape[1:].num_elements()
    per_id = 8 // values.dtype.size
    gathered = [tf.reshape(packed[:, :width], tf.concat([[-1], tf.shape(values)[1:]], 0))]
    for k, ids in enumerate(row_ids):
        bits = packed[:, width + k * per_id:width + (k + 1) * per_id]
        back = tf.bitcast(bits if per_id > 1 else tf.reshape(bits, [-1]), tf.int64)
        gathered.append(tf.cast(back, ids.dtype))
    return gathered
