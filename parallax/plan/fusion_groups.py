"""Which replicated gradients share one collective, decided on the user's graph by analysis/fusion.py's rule (the
same dtype and the same effectful ops behind them), so that `explain` shows every collective of a step and every
worker's rewrite makes the same ones. Plain records: the rewrite reads them and decides nothing."""
from parallax.analysis import fusion
from parallax.plan.records import Aggregation, FusionGroup


def decide_fusion_groups(graph, plan):
    """The plan's FusionGroups: the dense replicated gradients in buffers (a static shape each), then the sparse
    ones whose rows can travel packed (fusion.packed_width); each group in the order of its first gradient."""
    tensor = graph.get_tensor_by_name
    dense = _gradients(plan, Aggregation.ALLREDUCE)
    sparse = [g for g in _gradients(plan, Aggregation.ALLGATHER) if fusion.packed_width(tensor(g.values))]
    groups = fusion.fusion_groups(dense, lambda g: [tensor(g.values)],
                                  fusable=lambda g: tensor(g.values).shape.is_fully_defined())
    records = [FusionGroup(Aggregation.ALLREDUCE, tuple(g.scope for g in group)) for group in groups]
    groups = fusion.fusion_groups(sparse, lambda g: [tensor(g.values), tensor(g.indices)], fusable=lambda g: True)
    return tuple(records + [FusionGroup(Aggregation.ALLGATHER, tuple(g.scope for g in group)) for group in groups])


def _gradients(plan, aggregation):
    return [g for v in plan.variables for g in v.gradients if g.aggregation == aggregation]
