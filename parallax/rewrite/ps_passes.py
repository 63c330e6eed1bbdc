"""PS mode: variables live on parameter servers; synchronous steps aggregate gradients there.

Every raw gradient of a server variable is aggregated where the variable lives: a dense one in a
ConditionalAccumulator (SUM of N gradients), an IndexedSlices one as every worker's rows concatenated
(local_aggregation.py). Each aggregation is recorded as its outputs (what the chief takes) and, per worker, the ops
that worker runs to contribute; sync_passes.py and sync_step.py turn any fetch into a synchronized step from them.
"""
import dataclasses
from typing import Dict, Tuple

import tensorflow as tf

from parallax.core import graph_utils
from parallax.plan.placement import server_devices
from parallax.plan.records import WORKER_DEVICE, Aggregation
from parallax.analysis.row_keys import merge_rows, row_keys
from parallax.rewrite.local_aggregation import gather_rows
from parallax.rewrite.collective_passes import backward_pass, gradients_of, reroute_gradient
from parallax.core.graph_surgery import average_of, new_ops

tf1 = tf.compat.v1
# Each take_grad advances an accumulator's step, and apply_grad silently drops a gradient whose local_step is
# older. The step barrier already makes stale gradients impossible, so gradients carry a step that is never old.
NEVER_STALE = 2 ** 62


@dataclasses.dataclass(frozen=True)
class AggregationRecord:
    """One aggregated value: the ops whose outputs the chief reads, and the ops each worker runs to contribute."""
    outputs: Tuple[str, ...]
    contributions: Dict[int, Tuple[str, ...]]


def place_variables_on_servers(ctx):
    """Each server part, its slots and everything colocated with it, each update op, and state on a server, on the
    plan's device (placement.server_devices)."""
    devices, leaving = server_devices(ctx.graph, ctx.plan)
    ctx.devices.update(devices)
    for _, placed in ctx.plan.placements:  # where the placement passes will put ops, for the passes in between
        ctx.devices.update(placed)
    placed = ctx.placements.setdefault("place_variables_on_servers", [])
    for op in ctx.graph.get_operations():
        device = devices.get(op.name)
        if op.name in leaving:
            op._clear_attr("_class")
        if device is not None:
            op._set_device(device)
            placed.append((op.name, device))
            if op.type in graph_utils.VARIABLE_OP_TYPES:
                ctx.server_variables[op.name] = device


def pin_ref_reads(ctx):
    """On one device, a read of a ref variable (the ref, or its `read` snapshot) aliases the variable's buffer, so
    an op that waits for a write of the variable sees the written value. Across devices TF copies the value when it
    is sent, at the start of the step. So an op on another device that waits for a write of a server ref variable
    it reads (an EMA's `shadow - var` after the update) reads it through an Identity on the variable's device,
    made after those writes."""
    g = ctx.graph
    ref_variables = {name: g.get_operation_by_name(name) for name in ctx.server_variables
                     if g.get_operation_by_name(name).outputs[0].dtype._is_ref_dtype}
    writers = {}
    for op in g.get_operations():
        for name in graph_utils.written_variables(op):
            if name in ref_variables and op.name not in _initializers(g) and not graph_utils.is_restore(op):
                writers.setdefault(name, []).append(op)
    for name, ops in sorted(writers.items()):
        variable = ref_variables[name]
        after = graph_utils.descendants(ops)
        reads = [variable.outputs[0]] + [c.outputs[0] for c in variable.outputs[0].consumers()
                                          if graph_utils.snapshot_source(c) is variable]
        for t in reads:
            for consumer in list(t.consumers()):
                if consumer not in after or graph_utils.is_writer(consumer) or \
                        ctx.devices.get(consumer.name, WORKER_DEVICE) == ctx.server_variables[name]:
                    continue
                waits = sorted((w for w in ops if w in graph_utils.ancestors([consumer])), key=lambda o: o.name)
                with g.as_default(), tf.device(ctx.server_variables[name]), tf.control_dependencies(waits):
                    read = tf.identity(variable.outputs[0], name=f"parallax_ref_read/{consumer.name}")
                for index, i in enumerate(consumer.inputs):
                    if i is t:
                        consumer._update_input(index, read)


def _initializers(g):
    return {v.initializer.name for v in graph_utils.variables_by_op_name(g).values()
            if getattr(v, "initializer", None) is not None}


def aggregate_on_servers(ctx):
    """Sync: every raw gradient of a server variable is aggregated on that variable's server, and each of its
    consumers reads the aggregate (/ N when averaging). Updates of averaged state (batch-norm statistics) get the
    same treatment, on their written value."""
    g, n = ctx.graph, ctx.plan.num_workers
    backward = backward_pass(ctx)
    for vp, part, grad in gradients_of(ctx, Aggregation.ACCUMULATOR):
        values = g.get_tensor_by_name(grad.values)
        ctx.aggregated[grad.scope] = _accumulate(ctx, values, part.device, f"parallax_ps/{grad.scope}", vp.average,
                                                 backward)
    for vp, part, grad in gradients_of(ctx, Aggregation.ROW_QUEUES):
        device, scope = part.device, grad.scope
        values, indices = g.get_tensor_by_name(grad.values), g.get_tensor_by_name(grad.indices)
        with g.as_default(), new_ops(g) as created, tf.name_scope(f"parallax_ps/{scope}"):
            keys = row_keys(indices) if grad.merge_rows else None  # in the worker, from its own tensors
            with tf.device(device):
                contributions, (rows, outputs) = gather_rows(ctx.plan, scope, values, indices, device,
                                                             vp.local_aggregation, keys)
                all_values, all_indices = rows[:2]
                if keys is not None:
                    all_values, all_indices = merge_rows(all_values, all_indices, rows[2])
                if vp.average:
                    all_values = average_of(all_values, n)
                all_indices = tf.cast(all_indices, indices.dtype)
        reroute_gradient(values, all_values, created, backward)
        reroute_gradient(indices, all_indices, created, backward)
        _record(ctx, outputs, contributions)
        ctx.aggregated[scope] = (all_values, all_indices)
    for sp in ctx.plan.state:
        if sp.aggregate:
            for writer_name in sp.written_by:  # under the writer's name, which the plan's sync cut may name
                value = g.get_operation_by_name(writer_name).inputs[1]
                ctx.aggregated[writer_name] = _accumulate(ctx, value, sp.device, f"parallax_ps/{writer_name}", True)


def _accumulate(ctx, value, device, scope, average, backward=()):
    """A dense value summed over the workers in a ConditionalAccumulator on `device`; its consumers read the sum
    (/ N when averaging), but those in `backward` (a raw gradient's readers in the backward pass: backward_pass)."""
    g, n = ctx.graph, ctx.plan.num_workers
    with g.as_default(), tf.device(device), new_ops(g) as created, tf.name_scope(scope):
        acc = tf1.ConditionalAccumulator(value.dtype, shape=value.shape, reduction_type="SUM",
                                         shared_name=f"parallax_acc/{scope[len('parallax_ps/'):]}",
                                         name="accumulator")
        apply = acc.apply_grad(value, local_step=NEVER_STALE, name="apply")
        total = acc.take_grad(n, name="take")
        aggregated = average_of(total, n) if average else total
    reroute_gradient(value, aggregated, created, backward)
    _record(ctx, (total.op,), {w: (apply,) for w in range(n)})
    return aggregated


def _record(ctx, outputs, contributions):
    ctx.aggregations.append(AggregationRecord(tuple(op.name for op in outputs),
                                              {w: tuple(op.name for op in ops) for w, ops in contributions.items()}))
