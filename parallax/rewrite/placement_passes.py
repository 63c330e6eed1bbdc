"""The placement optimizations, applied: OPAU (place_post_aggregation_ops) and OPSW (place_boundary_ops) set the
devices the plan decided (parallax/plan/placement.py decides them, from the user's graph, before any rewrite)."""
from parallax.core import graph_utils
from parallax.plan.placement import OPAU, OPSW, WORKER


def place_post_aggregation_ops(ctx):
    """Ops between aggregated gradients and their updates run where the plan put them."""
    _apply(ctx, OPAU)


def place_boundary_ops(ctx):
    """Light ops at a worker/server boundary run on the side the plan chose."""
    _apply(ctx, OPSW)


def _apply(ctx, name):
    placed = ctx.placements.setdefault(name, [])
    for op_name, device in ctx.plan.placed(name):
        _move(ctx.graph.get_operation_by_name(op_name), device)
        placed.append((op_name, device or WORKER))


def _move(op, device):
    """Set the device. A colocation hint with another op goes: TF would otherwise drag that op along (global_norm
    colocates each L2Loss with its raw gradient, whose input the rewrite has replaced)."""
    if graph_utils.colocation_target(op) is not None:
        op._clear_attr("_class")
    op._set_device(device)
