"""MPI mode: every worker holds a replica; Horovod aggregates gradients and broadcasts initial values.

Collectives are named from variable names, so every rank's collectives match whatever order they are submitted in.
Each pass rewires *every* consumer of a raw gradient (the update, and any clipping or scaling the user put between)
to the aggregated one, so clipping sees aggregated gradients, exactly as on one device.
"""
import tensorflow as tf

from parallax.rewrite.reroute import new_ops, reroute_consumers

tf1 = tf.compat.v1


def _hvd():
    import horovod.tensorflow as hvd  # imported only by jobs that use MPI collectives
    return hvd


def _parts(ctx, method):
    for vp in ctx.plan.variables:
        if vp.method == method:
            for part in ctx.analysis.variable(vp.name).parts:
                yield vp, part


def allreduce_dense_gradients(ctx):
    """AR variables: gradient -> hvd.allreduce (Average when averaging, else Sum)."""
    hvd, g = _hvd(), ctx.graph
    for vp, part in _parts(ctx, "AR"):
        grad = g.get_tensor_by_name(part.gradient.values)
        with g.as_default(), new_ops(g) as created, tf.name_scope("parallax_allreduce"):
            agg = hvd.allreduce(grad, op=hvd.Average if vp.average else hvd.Sum, name=f"allreduce/{part.name}")
        reroute_consumers(grad, agg, keep=created)
        ctx.aggregated[part.name] = agg


def allgather_sparse_gradients(ctx):
    """AG variables: IndexedSlices values and indices -> hvd.allgather; values / N when averaging."""
    hvd, g = _hvd(), ctx.graph
    n = ctx.plan.num_workers
    for vp, part in _parts(ctx, "AG"):
        values = g.get_tensor_by_name(part.gradient.values)
        indices = g.get_tensor_by_name(part.gradient.indices)
        with g.as_default(), new_ops(g) as created, tf.name_scope("parallax_allgather"):
            all_values = hvd.allgather(values, name=f"values/{part.name}")
            all_indices = hvd.allgather(indices, name=f"indices/{part.name}")
            if vp.average:
                # N is a power of two in most jobs, and then this division is exact.
                all_values = tf.math.truediv(all_values, tf.constant(n, values.dtype))
        reroute_consumers(values, all_values, keep=created)
        reroute_consumers(indices, all_indices, keep=created)
        ctx.aggregated[part.name] = (all_values, all_indices)


def broadcast_initial_values(ctx):
    """One op that overwrites every global variable with rank 0's value, one variable after another in name order."""
    hvd, g = _hvd(), ctx.graph
    with g.as_default(), tf.name_scope("parallax_broadcast"):
        variables = sorted(tf1.global_variables(), key=lambda v: v.op.name)
        previous = []
        for v in variables:
            with tf.control_dependencies(previous):
                value = hvd.broadcast(v.read_value(), root_rank=0, name=f"bcast/{v.op.name}")
                previous = [tf1.assign(v, value)]
        ctx.broadcast_op = tf.group(*previous, name="all")
