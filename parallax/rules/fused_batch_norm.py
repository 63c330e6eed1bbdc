"""Batch normalization in TF's fused kernels, in training mode (tf1.layers.batch_normalization and Keras on 4-D
input run them): the batch's per-channel mean and variance are computed inside one op, and its gradient op
computes with them inside another. No rewrite of the ops' outputs can make those statistics the whole batch's, so
each such op is replaced by the same computation in primitive ops, its statistics the whole batch's, combined from
the workers' means and variances in one gather, and its gradient op by batch normalization's gradient in closed
form, whose two batch means of the upstream gradient are likewise the means over workers (one gather). With equal
per-worker batches (what every combined mean assumes), that is what one device computes on the whole batch: the
normalized values, the gradients, and the moving statistics, whose variance is corrected by the whole batch's
count n / (n - 1), as the kernel corrects it by its own."""
import tensorflow as tf

from parallax.rules import statistic_laws, statistics_combined
from parallax.core.graph_surgery import reroute_consumers
from parallax.rules.rule import Rule

tf1 = tf.compat.v1
TYPES = ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
GRADIENT_TYPES = ("FusedBatchNormGrad", "FusedBatchNormGradV2", "FusedBatchNormGradV3")
SCOPE = "parallax_batch_norm"


def in_training(op):
    return op.type in TYPES and op.get_attr("is_training")


def in_training_node(node_def):
    """The same for a NodeDef (in a graph function's body)."""
    return node_def.op in TYPES and node_def.attr["is_training"].b


def gradient_ops(op):
    """The fused gradient ops of `op`: those that take its saved statistics (outputs 3 and 4)."""
    return sorted({c for t in op.outputs[3:5] for c in t.consumers() if c.type in GRADIENT_TYPES},
                  key=lambda c: c.name)


def _attr(op, name, default):
    try:
        return op.get_attr(name)
    except ValueError:
        return default


def _mean_over_workers(collective_ops, local):
    return statistics_combined.over_workers(collective_ops, local, statistic_laws.MEAN)


def _whole_batch_moments(collective_ops, values, axes, channels):
    """The whole batch's per-channel mean and variance from one gather of each worker's own (of equal counts):
    the mean of the means, and the mean of the variances plus the variance of the means (Chan et al.'s parallel
    variance). One gather, not two (the mean, then the variance around it): the forward pass of a network waits for
    each one, at every batch-norm layer."""
    mean = tf.reduce_mean(values, axes)
    variance = tf.reduce_mean(tf.square(values - tf.reshape(mean, channels)), axes)
    every = collective_ops.allgather(tf.expand_dims(tf.stack([mean, variance]), 0), name="gather")
    means, variances = every[:, 0], every[:, 1]
    whole_mean = tf.reduce_mean(means, 0)
    return whole_mean, tf.reduce_mean(variances + tf.square(means - whole_mean), 0)


def synchronize(graph, collective_ops, name, gradient_names, num_workers):
    """Replace the fused op `name` and its gradient ops in `graph` by the whole batch's computation (module
    docstring). The fused ops stay in the graph with no reader of their values."""
    op = graph.get_operation_by_name(name)
    x, scale, offset, running_mean, running_variance = op.inputs[:5]
    layout = op.get_attr("data_format").decode()
    axes = [d for d, c in enumerate(layout) if c != "C"]
    channels = [1 if c != "C" else -1 for c in layout]  # the statistics' shape, broadcast over x
    factor = _attr(op, "exponential_avg_factor", 1.0)
    with graph.as_default(), graph.name_scope(None), graph.name_scope(f"{SCOPE}/{op.name}"), tf.device(op.device):
        values = tf.cast(x, scale.dtype)
        mean, variance = _whole_batch_moments(collective_ops, values, axes, channels)
        centered = values - tf.reshape(mean, channels)
        inverse = tf.math.rsqrt(variance + op.get_attr("epsilon"))
        normalized = centered * tf.reshape(inverse, channels)
        y = tf.cast(normalized * tf.reshape(scale, channels) + tf.reshape(offset, channels), x.dtype)
        count = tf.cast(tf.size(values) // tf.size(mean) * num_workers, scale.dtype)  # the whole batch's
        unbiased = variance * count / tf.maximum(count - 1, 1)
        moving = [(1 - factor) * running + factor * batch if factor != 1 else batch
                  for running, batch in ((running_mean, mean), (running_variance, unbiased))]
    for old, new in zip(op.outputs[:3], [y] + moving):
        reroute_consumers(old, new)
    for gradient_name in gradient_names:
        _gradient(graph, collective_ops, graph.get_operation_by_name(gradient_name), scale, normalized, inverse,
                  axes, channels, x.dtype)


def _gradient(graph, collective_ops, op, scale, normalized, inverse, axes, channels, dtype):
    """dx = scale / sigma * (dy - mean(dy) - x_hat * mean(dy * x_hat)), the means over the whole batch; the scale's
    and offset's gradients are each worker's own sums, which the plan's gradient aggregation combines."""
    with graph.as_default(), graph.name_scope(None), graph.name_scope(f"{SCOPE}/{op.name}"), tf.device(op.device):
        upstream = tf.cast(op.inputs[0], scale.dtype)
        d_offset = tf.reduce_sum(upstream, axes)
        d_scale = tf.reduce_sum(upstream * normalized, axes)
        # both means in one gather: they are ready together, and each gather is a round of the workers
        mean_upstream, mean_projection = tf.unstack(_mean_over_workers(collective_ops, tf.stack(
            [tf.reduce_mean(upstream, axes), tf.reduce_mean(upstream * normalized, axes)])))
        d_x = tf.reshape(scale * inverse, channels) * (
            upstream - tf.reshape(mean_upstream, channels) - normalized * tf.reshape(mean_projection, channels))
        d_x = tf.cast(d_x, dtype)
    for old, new in zip(op.outputs[:3], (d_x, d_scale, d_offset)):
        reroute_consumers(old, new)


def is_synchronized(graph, name, gradient_names):
    """Whether nothing reads the values of the fused op `name` or of its gradient ops any more."""
    ops = [graph.get_operation_by_name(n) for n in (name, *gradient_names)]
    return not any(c for op in ops for t in op.outputs[:3] for c in t.consumers())


def apply(site):
    for name, gradients in site.plan.fused_batch_norms:
        synchronize(site.graph, site.collective_ops, name, gradients, site.plan.num_workers)


def holds(graph, plan):
    return all(is_synchronized(graph, name, gradients) for name, gradients in plan.fused_batch_norms)


def find(site):
    """The fused batch norms in training mode and their gradients, as the reading of the batch's statistics found
    them (batch_statistics.py)."""
    return {"fused_batch_norms": site.statistics.fused}


RULE = Rule("synchronize_fused_batch_norms", ("fused_batch_norms",), "batch_norms_synchronized", apply, holds, find,
            uses_collectives=True,
            doc="each fused batch normalization in training mode (and its gradient) computes with the whole batch's "
                "statistics, the mean over workers of the workers' own")
