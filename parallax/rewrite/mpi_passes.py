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


def _parts(ctx, method):
    for vp in ctx.plan.variables:
        if vp.method == method:
            for part in ctx.analysis.variable(vp.name).parts:
                yield vp, part


def allreduce_dense_gradients(ctx):
    """AR variables: gradient -> Horovod allreduce (Sum), then / N when averaging."""
    hvd, g = _hvd(), ctx.graph
    for vp, part in _parts(ctx, "AR"):
        grad = g.get_tensor_by_name(part.gradient.values)
        with g.as_default(), new_ops(g) as created, tf.name_scope(f"parallax_allreduce/{part.name}"):
            agg = hvd._allreduce(grad, op=hvd.Sum, name="allreduce")
            if vp.average:
                agg = average_of(agg, ctx.plan.num_workers)
        reroute_consumers(grad, agg, keep=created)
        ctx.aggregated[part.name] = agg


def allgather_sparse_gradients(ctx):
    """AG variables: IndexedSlices values and indices -> hvd.allgather; values / N when averaging."""
    hvd, g = _hvd(), ctx.graph
    n = ctx.plan.num_workers
    for vp, part in _parts(ctx, "AG"):
        values = g.get_tensor_by_name(part.gradient.values)
        indices = g.get_tensor_by_name(part.gradient.indices)
        with g.as_default(), new_ops(g) as created, tf.name_scope(f"parallax_allgather/{part.name}"):
            all_values = hvd.allgather(values, name="values")
            all_indices = hvd.allgather(indices, name="indices")
            if vp.average:
                all_values = average_of(all_values, n)
        reroute_consumers(values, all_values, keep=created)
        reroute_consumers(indices, all_indices, keep=created)
        ctx.aggregated[part.name] = (all_values, all_indices)


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
