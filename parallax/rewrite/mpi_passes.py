"""Replicated variables (AR, AG): every worker holds a replica; the plan's collective backend (parallax/collectives)
aggregates their gradients and broadcasts initial values.

Each pass rewires *every* consumer of a raw gradient (the update, and any clipping or scaling the user put between)
to the aggregated one, so clipping sees aggregated gradients, exactly as on one device.
"""
import tensorflow as tf

from parallax.plan import Aggregation
from parallax.row_keys import merge_rows, row_keys
from parallax.rewrite.reroute import average_of, new_ops, reroute_consumers

tf1 = tf.compat.v1


def gradients_of(ctx, aggregation):
    """(variable plan, part plan, gradient plan) for every gradient the plan aggregates by `aggregation`. A variable
    may have several gradients (several optimizers or losses): each is aggregated on its own, under its scope."""
    for vp in ctx.plan.variables:
        for part in vp.parts:
            for grad in part.gradients:
                if grad.aggregation == aggregation:
                    yield vp, part, grad


def allreduce_dense_gradients(ctx):
    """Dense gradients of replicated variables: allreduce (Sum), then / N when averaging."""
    ops, g = ctx.collective_ops, ctx.graph
    for vp, part, gradient in gradients_of(ctx, Aggregation.ALLREDUCE):
        grad = g.get_tensor_by_name(gradient.values)
        with g.as_default(), new_ops(g) as created, tf.name_scope(f"parallax_allreduce/{gradient.scope}"):
            agg = ops.allreduce_sum(grad, name="allreduce")
            ctx.collectives += ops.created()
            if vp.average:
                agg = average_of(agg, ctx.plan.num_workers)
        reroute_consumers(grad, agg, keep=created)
        ctx.aggregated[gradient.scope] = agg


def allgather_sparse_gradients(ctx):
    """IndexedSlices gradients of replicated variables: values and indices allgathered (rank order, so the rows
    are what one device's batch gives, up to their order; rows one device holds once are merged, row_keys.py);
    values / N when averaging."""
    ops, g = ctx.collective_ops, ctx.graph
    n = ctx.plan.num_workers
    for vp, part, gradient in gradients_of(ctx, Aggregation.ALLGATHER):
        values = g.get_tensor_by_name(gradient.values)
        indices = g.get_tensor_by_name(gradient.indices)
        with g.as_default(), new_ops(g) as created, tf.name_scope(f"parallax_allgather/{gradient.scope}"):
            all_values = ops.allgather(values, name="values")
            all_indices = ops.allgather(indices, name="indices")
            if gradient.merge_rows:
                all_keys = ops.allgather(row_keys(indices), name="keys")
                all_values, all_indices = merge_rows(all_values, all_indices, all_keys)
            ctx.collectives += ops.created()
            if vp.average:
                all_values = average_of(all_values, n)
        reroute_consumers(values, all_values, keep=created)
        reroute_consumers(indices, all_indices, keep=created)
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
