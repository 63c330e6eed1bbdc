"""TF's collectives run every worker's step under one shared step id, and when one worker's step ends TF cleans
that id up on every task its step touched. So with the `tf` backend (parallax/step_fence.py, collectives
step_fence_for and allows_local_aggregation): a step that runs collectives and ops on a named task ends with a
fence after all its work, and no worker's step runs ops on another worker's task (no local aggregation). Checked
on rewritten graphs, without running them: the race they prevent shows only under load."""
import pytest
import tensorflow as tf

import parallax
from parallax import collectives, graph_utils, step_fence
from parallax.planning import plan_job
from parallax.rewrite.pipeline import rewrite
from parallax.sync_step import SyncSteps
from tests.equivalence.run_case import case_builder

tf1 = tf.compat.v1
FOUR_ON_TWO_HOSTS = parallax.ResourceSpec.parse("127.0.0.1: 0,1\n127.0.0.2: 0,1")


def _rewritten(name, mode, backend):
    case = case_builder(name)(4, 2, 6, 2)
    config = parallax.Config(run_option=mode, methods=case.methods or {}, collective_backend=backend)
    plan = plan_job(case.graph, parallax.analyze(case.graph), FOUR_ON_TWO_HOSTS, config)
    return case, plan, rewrite(case.graph, plan, config)


def _fetches(case, graph):
    return [graph.get_operation_by_name(x.name) if isinstance(x, tf.Operation) else graph.get_tensor_by_name(x.name)
            for x in tf.nest.flatten(case.fetch(0))]


@pytest.mark.parametrize("worker", [0, 1, 3])
@pytest.mark.parametrize("name", ["random:103", "mixed_methods", "embedding_clip_adam"])
def test_a_tf_collectives_step_that_touches_servers_ends_with_a_fence_after_all_its_work(name, worker):
    case, plan, rewritten = _rewritten(name, "HYBRID", "tf")
    assert plan.backend == "tf" and plan.uses_servers
    assert not plan.uses_local_aggregation, "local aggregation would run ops on another worker's task"
    g = rewritten.graph
    assert not [op.name for op in g.get_operations() if "/job:worker" in op.device]
    sync = SyncSteps(g, rewritten.sync, worker, 4, collectives.step_fence_for(plan))
    leaves = _fetches(case, g)
    variant = sync.variant(tuple(x.name for x in leaves), leaves)
    fences = [op for op in variant.targets if op.name.startswith(step_fence.FENCE_SCOPE)]
    assert len(fences) == 1 and fences[0].type == "CollectiveGatherV2"
    before = graph_utils.ancestors([fences[0]])
    ran = [x for x in variant.targets if x is not fences[0]]
    ran += [x for x in variant.leaves if isinstance(x, tf.Operation)]
    assert ran and set(ran) <= before, "the fence must wait for everything the step runs"
    for x in variant.leaves + (variant.released or []):
        if isinstance(x, tf.Tensor):  # what the client receives is copied on the worker's own task after it,
            assert x.op.type == "Identity" and x.op.device == "" and fences[0] in x.op.control_inputs
            received = x.op.inputs[0].op  # from a copy received there before it (a value still to be received
            assert received.type == "Identity" and received.device == "" and received in before  # after it could
            # be cleaned up with the step id on the task that made it)


def test_every_worker_gives_a_fetch_set_the_same_fence_key():
    case, plan, rewritten = _rewritten("mixed_methods", "HYBRID", "tf")
    keys = set()
    for worker in range(4):
        leaves = _fetches(case, rewritten.graph)
        variant = SyncSteps(rewritten.graph, rewritten.sync, worker, 4, collectives.step_fence_for(plan)) \
            .variant(tuple(x.name for x in leaves), leaves)
        fence = next(op for op in variant.targets if op.name.startswith(step_fence.FENCE_SCOPE))
        keys.add(tf.get_static_value(fence.inputs[3]).item())
    assert len(keys) == 1


def test_horovod_steps_need_no_fence_and_keep_local_aggregation():
    if collectives.horovod_problem():
        pytest.skip(f"Horovod is not usable here ({collectives.horovod_problem()}); the tf backend is the one "
                    "this environment runs, and the tests above check it")
    case, plan, rewritten = _rewritten("random:103", "HYBRID", "horovod")
    assert collectives.step_fence_for(plan) is None
    assert plan.uses_local_aggregation
