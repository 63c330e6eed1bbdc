"""Local aggregation (LA) on the rewritten graph: a host's workers' rows gathered on its local chief, which sends
them to the server in one message per step."""
import pytest

import parallax
from parallax.core import graph_utils
from parallax.plan.planning import plan_job
from parallax.rewrite import rewrite
from parallax.rewrite.local_aggregation import local_chiefs
from tests.models_for_tests import embedding_mlp
from tests.models_for_tests.variants import runs, variants

TWO_HOSTS = parallax.ResourceSpec.parse("127.0.0.1: 0,1\n127.0.0.2: 0,1")  # workers 0,1 | 2,3


@pytest.fixture(scope="module", params=["PS", "HYBRID"])
def la(request):
    g, _ = embedding_mlp.build("Adam", clip=1.0)
    # local aggregation runs ops on another worker's task, which the tf backend does not allow (docs/modes.md)
    config = parallax.Config(run_option=request.param, collective_backend="horovod")
    analysis = parallax.analyze(g)
    plan = plan_job(g, analysis, TWO_HOSTS, config)
    return plan, rewrite(g, plan, config)


def test_local_chiefs():
    assert local_chiefs((0, 0, 1, 1)) == {0: 0, 1: 0, 2: 2, 3: 2}
    assert local_chiefs((0, 1, 1)) == {0: 0, 1: 1, 2: 1}


def test_host_queues_live_on_their_local_chief(la):
    plan, out = la
    g = out.graph
    assert plan.variable("model/embedding").local_aggregation
    server = g.get_operation_by_name("model/embedding").device
    for host, workers in ((0, (0, 1)), (1, (2, 3))):
        scope = f"parallax_ps/model/embedding/host_{host}"
        for w in workers:
            queue = g.get_operation_by_name(f"{scope}/rows_{w}")
            assert queue.device.startswith(f"/job:worker/task:{workers[0]}")
        push = g.get_operation_by_name(f"{scope}/push")
        assert push.device == server
        dequeued = {op.inputs[0].op.name for op in graph_utils.ancestors([push]) if op.type == "QueueDequeueV2"}
        assert dequeued == {f"{scope}/rows_{w}" for w in workers}  # it sends its host's rows, all of them
        # and takes its mates' only once its own are in (a step of its that fails first takes none of theirs)
        own_put = g.get_operation_by_name(f"{scope}/put_{workers[0]}")
        takes = [op for op in graph_utils.ancestors([push]) if op.type == "QueueDequeueV2"]
        assert takes and all(own_put in op.control_inputs for op in takes)


def test_server_takes_one_message_per_host(la):
    _, out = la
    (aggregation,) = [a for a in out.sync.aggregations if any("model/embedding" in o for o in a.outputs)]
    queues = [out.graph.get_operation_by_name(o).inputs[0].op.name for o in aggregation.outputs]
    assert queues == ["parallax_ps/model/embedding/host_0/rows", "parallax_ps/model/embedding/host_1/rows"]


def test_each_worker_contributes_through_its_host(la):
    plan, out = la
    chief, *others = variants(out, "Adam", plan.num_workers)  # the train op
    host = "parallax_ps/model/embedding/host_{}/{}"
    for worker, variant in enumerate(others, start=1):
        h = plan.worker_hosts[worker]
        ran = {op.name for op in runs(variant)}
        assert host.format(h, f"put_{worker}") in ran and not any(host.format(1 - h, "put") in n for n in ran)
        assert (host.format(h, "push") in ran) == (worker == 2)  # the local chief of host 1
    assert host.format(0, "push") in {op.name for op in runs(chief)}
