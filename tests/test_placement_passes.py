"""OPAU (place_post_aggregation_ops): where the ops between aggregated gradients and updates land."""
import pytest

import parallax
from parallax.plan import make_plan
from parallax.rewrite import rewrite
from tests.models_for_tests import embedding_mlp

TWO_HOSTS = parallax.ResourceSpec.parse("127.0.0.1: 0,1\n127.0.0.2: 0,1")


def _rewrite(run_option, opau=True):
    g, _ = embedding_mlp.build("Adam", clip=1.0, partitions=2)
    config = parallax.Config(run_option=run_option, place_post_aggregation_ops=opau)
    analysis = parallax.analyze(g)
    plan = make_plan(analysis, TWO_HOSTS, config)
    return analysis, plan, rewrite(g, analysis, plan, config)


def _user_ops(graph, op_type):
    return [op for op in graph.get_operations() if op.type == op_type and not op.name.startswith("parallax_")]


def test_ps_mode_global_norm_on_server_0_and_each_l2_norm_with_its_gradient():
    analysis, plan, out = _rewrite("PS")
    g = out.graph
    assert g.get_operation_by_name("global_norm/global_norm").device == "/job:ps/task:0"
    dense_l2 = [op for op in _user_ops(g, "L2Loss") if op.outputs[0].consumers()]  # sparse ones are replaced
    assert len(dense_l2) == 4
    for l2 in dense_l2:
        assert l2.device == l2.inputs[0].op.device and l2.device.startswith("/job:ps/task:"), l2.name
    # each clip multiply runs with its gradient, on that variable's server; the scale is shared (server 0)
    for vp in plan.variables:
        for part, task in zip(analysis.variable(vp.name).parts, vp.ps_tasks):
            average = g.get_operation_by_name(f"parallax_ps/{part.name}/average")
            (clip,) = [c for c in average.outputs[0].consumers() if c.type == "Mul"]
            assert clip.device == f"/job:ps/task:{task}", clip.name
    assert out.placements["place_post_aggregation_ops"]


def test_hybrid_keeps_the_norm_of_replicated_gradients_in_the_workers():
    analysis, plan, out = _rewrite("HYBRID")
    g = out.graph
    assert g.get_operation_by_name("global_norm/global_norm").device == ""
    for l2 in _user_ops(g, "L2Loss"):
        if l2.outputs[0].consumers():
            assert l2.device == "", l2.name  # dense gradients are allreduced: they are in every worker


@pytest.mark.parametrize("run_option", ["PS", "HYBRID"])
def test_switch_off_places_nothing(run_option):
    _, plan, out = _rewrite(run_option, opau=False)
    assert not plan.place_post_aggregation_ops and "place_post_aggregation_ops" not in out.placements
    assert out.graph.get_operation_by_name("global_norm/global_norm").device == ""
