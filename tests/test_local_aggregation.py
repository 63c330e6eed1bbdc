"""Local aggregation (LA) on the rewritten graph: sparse gradients summed per host, pushed once per host."""
import pytest

import parallax
from parallax import graph_utils
from parallax.plan import make_plan
from parallax.rewrite import rewrite
from parallax.rewrite.local_aggregation import local_chiefs
from tests.models_for_tests import embedding_mlp

TWO_HOSTS = parallax.ResourceSpec.parse("127.0.0.1: 0,1\n127.0.0.2: 0,1")  # workers 0,1 | 2,3


@pytest.fixture(scope="module", params=["PS", "HYBRID"])
def la(request):
    g, _ = embedding_mlp.build("Adam", clip=1.0)
    config = parallax.Config(run_option=request.param)
    analysis = parallax.analyze(g)
    plan = make_plan(analysis, TWO_HOSTS, config)
    return plan, rewrite(g, analysis, plan, config)


def test_local_chiefs():
    assert local_chiefs((0, 0, 1, 1)) == {0: 0, 1: 0, 2: 2, 3: 2}
    assert local_chiefs((0, 1, 1)) == {0: 0, 1: 1, 2: 1}


def test_host_accumulators_live_on_their_local_chief(la):
    plan, out = la
    g = out.graph
    assert plan.variable("model/embedding").local_aggregation
    for host, chief in ((0, 0), (1, 2)):
        scope = f"parallax_ps/model/embedding/host_{host}"
        acc = g.get_operation_by_name(f"{scope}/accumulator")
        assert acc.type == "SparseConditionalAccumulator" and acc.device == f"/job:worker/task:{chief}"
        assert acc.get_attr("reduction_type") == b"SUM"
        push = g.get_operation_by_name(f"{scope}/push")
        assert push.device == g.get_operation_by_name("parallax_ps/model/embedding/accumulator").device
        assert g.get_operation_by_name(f"{scope}/take") in graph_utils.ancestors([push])  # it pushes the host's sum


def test_server_waits_for_one_push_per_host(la):
    _, out = la
    take = out.graph.get_operation_by_name("parallax_ps/model/embedding/take")
    assert take.inputs[1].op.get_attr("value").int_val == [2]  # two hosts, not four workers


def test_each_worker_contributes_through_its_host(la):
    _, out = la
    g = out.graph
    (variants,) = out.train_op_variants.values()
    names = lambda w: {op.name for op in graph_utils.ancestors([g.get_operation_by_name(variants[w])])}  # noqa
    host = "parallax_ps/model/embedding/host_{}/{}"
    for worker, h, pushes in ((1, 0, False), (2, 1, True), (3, 1, False)):
        deps = names(worker)
        assert host.format(h, "apply") in deps and host.format(1 - h, "apply") not in deps
        assert (host.format(h, "push") in deps) == pushes
        assert "parallax_ps/model/embedding/take" not in deps
    chief = names(0)
    assert host.format(0, "push") in chief and "parallax_ps/model/embedding/take" in chief
