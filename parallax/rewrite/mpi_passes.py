"""MPI mode: every worker holds a replica; Horovod aggregates gradients and broadcasts initial values.

Collectives are named from variable names, so every rank's collectives match whatever order they are submitted in.
Each pass rewires *every* consumer of a raw gradient (the update, and any clipping or scaling the user put between)
to the aggregated one, so clipping sees aggregated gradients, exactly as on one device.
"""
import tensorflow as tf

from parallax.rewrite.reroute import average_of, new_ops, reroute_consumers

tf1 = tf.compat.v1


def _hvd():
    # The raw collectives, not hvd.allreduce: that one asks hvd.size() while building the graph, so a rewrite could
    # not be built (or tested) before hvd.init(). Averaging is a division by the plan's N, done here.
    from horovod.tensorflow import mpi_ops  # imported only by jobs that use MPI collectives
    return mpi_ops


REPLICATED = ("AR", "AG")


def gradients_of(ctx, methods, sparse):
    """(variable plan, part, gradient, scope) for every gradient of the given kind of every part of the variables
    planned with one of `methods`. A variable may have several gradients (several optimizers or losses): each is
    aggregated on its own, under `<part>` for the first and `<part>/g<k>` for the k-th."""
    for vp in ctx.plan.variables:
        if vp.method in methods:
            for part in ctx.analysis.variable(vp.name).parts:
                for k, grad in enumerate(part.gradients):
                    if grad.is_sparse == sparse:
                        yield vp, part, grad, part.name if k == 0 else f"{part.name}/g{k}"


def allreduce_dense_gradients(ctx):
    """Dense gradients of replicated variables: Horovod allreduce (Sum), then / N when averaging."""
    hvd, g = _hvd(), ctx.graph
    for vp, part, gradient, scope in gradients_of(ctx, REPLICATED, sparse=False):
        grad = g.get_tensor_by_name(gradient.values)
        with g.as_default(), new_ops(g) as created, tf.name_scope(f"parallax_allreduce/{scope}"):
            agg = hvd._allreduce(grad, op=hvd.Sum, name="allreduce")
            if vp.average:
                agg = average_of(agg, ctx.plan.num_workers)
        reroute_consumers(grad, agg, keep=created)
        ctx.aggregated[scope] = agg


def allgather_sparse_gradients(ctx):
    """IndexedSlices gradients of replicated variables: values and indices allgathered (rank order, so the rows
    are what one device's batch gives, up to their order); values / N when averaging."""
    hvd, g = _hvd(), ctx.graph
    n = ctx.plan.num_workers
    for vp, part, gradient, scope in gradients_of(ctx, REPLICATED, sparse=True):
        values = g.get_tensor_by_name(gradient.values)
        indices = g.get_tensor_by_name(gradient.indices)
        with g.as_default(), new_ops(g) as created, tf.name_scope(f"parallax_allgather/{scope}"):
            all_values = hvd.allgather(values, name="values")
            all_indices = hvd.allgather(indices, name="indices")
            if vp.average:
                all_values = average_of(all_values, n)
        reroute_consumers(values, all_values, keep=created)
        reroute_consumers(indices, all_indices, keep=created)
        ctx.aggregated[scope] = (all_values, all_indices)


def broadcast_initial_values(ctx):
    """One op that overwrites every replicated global variable with rank 0's value, one variable after another in
    name order. (Variables on parameter servers, in HYBRID, have one copy already.)"""
    hvd, g = _hvd(), ctx.graph
    with g.as_default(), tf.name_scope("parallax_broadcast"):
        variables = sorted((v for v in tf1.global_variables() if not v.op.device.startswith("/job:ps")),
                           key=lambda v: v.op.name)
        previous = []
        for v in variables:
            with tf.control_dependencies(previous):
                value = hvd.broadcast(v.read_value(), root_rank=0, name=f"{v.op.name}/broadcast")
                previous = [tf1.assign(v, value)]
        ctx.broadcast_op = tf.group(*previous, name="all")
