"""TF's collectives run every worker's step under one shared step id, and when one worker's step ends TF cleans
that id up on every task its step touched. So with the `tf` backend (parallax/runtime/step_fence.py, collectives
step_fence_for and rows_held_on_servers): a step that runs collectives and ops on a named task ends with a
fence after all its work, and no worker's step runs ops on another worker's task (local aggregation holds a host's
rows on the host's server). Checked on rewritten graphs, without running them: the race they prevent shows only
under load."""
import pytest
import tensorflow as tf

import parallax
from parallax import collectives
from parallax.core import graph_utils, v1_control_flow
from parallax.runtime import step_fence
from parallax.plan.planning import plan_job
from parallax.rewrite.pipeline import rewrite
from parallax.runtime.sync_step import SyncSteps
from tests.equivalence.cases import Case
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
    assert plan.uses_local_aggregation and plan.rows_held_on_servers and plan.holders == (0, 0, 2, 2)
    g = rewritten.graph
    assert not [op.name for op in g.get_operations() if "/job:worker" in op.device]
    held = {op.name.split("/host_")[1][0]: op.device for op in g.get_operations() if "/host_" in op.name and "/rows_" in op.name}
    assert set(held) == {"0", "1"} and {h: d.split("/device")[0] for h, d in held.items()} == \
        {"0": "/job:ps/task:0", "1": "/job:ps/task:1"}, held  # each host's rows on its own server
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


@pytest.mark.parametrize("name", ["random:103", "mixed_methods", "embedding_clip_adam"])
def test_no_op_that_two_workers_run_on_a_server_sends_its_value_to_another_server(name):
    """Under one step id, two workers' sends of one op's value between the same two tasks share a rendezvous key:
    one worker would take the other's value (a host's indices cast on the variable's server for the host's queues
    on another server gave rows of the wrong worker from step 2 on). A worker's own values start on its own task."""
    case, plan, rewritten = _rewritten(name, "HYBRID", "tf")
    g = rewritten.graph
    senders = {}
    for worker in range(4):
        leaves = _fetches(case, g)
        variant = SyncSteps(g, rewritten.sync, worker, 4, collectives.step_fence_for(plan)) \
            .variant(tuple(x.name for x in leaves), leaves)
        ran = graph_utils.ancestors([x if isinstance(x, tf.Operation) else x.op for x in
                                     variant.leaves + variant.targets + (variant.released or []) if x is not None])
        for op in ran:
            for consumer in (c for t in op.outputs for c in t.consumers() if c in ran):
                source, destination = _task(op), _task(consumer)
                if source and destination and source != destination:
                    senders.setdefault((op.name, destination), set()).add(worker)
    assert senders, "the case sends nothing between servers: the check would hold vacuously"
    assert {edge: workers for edge, workers in senders.items() if len(workers) > 1} == {}


def _task(op):
    """The named task an op runs on ("" for the worker's own)."""
    return op.device.split("/device")[0] if "/job:" in op.device else ""


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


def _v1_rewritten(build_case, mode, workers=2):
    """(case, plan, rewritten) of a v1 control flow case over two hosts on TF's collectives, v2 left as it was."""
    v2 = tf1.control_flow_v2_enabled()
    try:
        case = build_case()
    finally:
        if v2:
            tf1.enable_control_flow_v2()
    config = parallax.Config(run_option=mode, methods=case.methods or {}, collective_backend="tf")
    spec = parallax.ResourceSpec.parse("\n".join(f"127.0.0.{h + 1}: {','.join(map(str, range(workers // 2)))}"
                                                 for h in range(2)))
    plan = plan_job(case.graph, parallax.analyze(case.graph), spec, config)
    return case, plan, rewrite(case.graph, plan, config)


def _fenced(case, plan, rewritten, worker=1):
    leaves = _fetches(case, rewritten.graph)
    variant = SyncSteps(rewritten.graph, rewritten.sync, worker, plan.num_workers,
                        collectives.step_fence_for(plan)).variant(tuple(x.name for x in leaves), leaves)
    fences = [op for op in variant.targets if op.name.startswith(step_fence.FENCE_SCOPE)]
    assert len(fences) == 1
    return fences[0]


_FRAME_EDGES = ("Enter", "RefEnter", "NextIteration", "RefNextIteration")


@pytest.mark.parametrize("name, mode", [("padded_v1_loop_lookups", "PS"), ("padded_v1_loop_lookups", "HYBRID"),
                                        ("padded_v1_loop_tensor_array", "HYBRID"), ("nested_v1_loops_lookups", "PS")])
def test_a_fence_waits_for_every_op_of_a_v1_loops_last_iteration_when_the_loop_runs_ops_on_a_server(name, mode):
    """A v1 loop's exit fires in the iteration whose condition is false, while that iteration's body, dead, still
    passes its deadness between the worker and the server (padded_v1_loop_lookups in PS: `Aborted: Cleanup` at a
    Recv in the loop, 3 runs in 450 under load). For every loop that runs ops on a server, or holds one that does,
    the fence waits for an exit of that loop that waits, within the iteration it leaves in, for every op of it."""
    case, plan, rewritten = _v1_rewritten(lambda: case_builder(name)(2, 2, 6, 2), mode)
    g = rewritten.graph
    fence = _fenced(case, plan, rewritten)
    frame_of, parent = v1_control_flow.v1_frames(g)
    spanning = set()
    for op in g.get_operations():
        frame = frame_of[op]
        while frame and "/job:ps" in op.device:
            spanning.add(frame)
            frame = parent[frame]
    assert spanning, "the case's loops run ops on a server"
    waited = graph_utils.ancestors([fence])
    for frame in spanning:
        members = {op for op in g.get_operations() if v1_control_flow.output_frame(op, frame_of, parent) == frame
                   and op.type not in _FRAME_EDGES and not op.name.startswith(step_fence.FENCE_SCOPE)}
        exits = [op for op in waited if op.type == "Exit" and frame_of[op] == frame]
        within = [graph_utils.closure([e], lambda op: [] if op.type in _FRAME_EDGES else
                                      [t.op for t in op.inputs] + list(op.control_inputs)) for e in exits]
        assert any(members <= w for w in within), (frame, sorted(op.name for op in members - max(within, key=len))[:5])
    _fenced(case, plan, rewritten, worker=0)  # another fence of the graph waits for the same gates
    gates = [op for op in g.get_operations() if op.type == "Exit" and op.name.startswith(step_fence.FENCE_SCOPE)]
    assert len(gates) == len(spanning)


def _v1_loop_in_a_cond():
    """A v1 while loop inside a v1 cond's branch, its body looking rows of an embedding up; a dense layer after."""
    tf1.disable_control_flow_v2()
    g = tf.Graph()
    with g.as_default():
        ids = tf1.placeholder(tf.int64, [None, 3], name="ids")
        emb = tf1.get_variable("emb", [10, 4], initializer=tf1.ones_initializer(), use_resource=True)
        cell = tf1.get_variable("cell", [4, 4], initializer=tf1.ones_initializer(), use_resource=True)
        start = tf.zeros([tf.shape(ids)[0], 4])

        def looped():
            return tf1.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, tf.tanh(h @ cell + tf.nn.embedding_lookup(
                emb, ids[:, i]))), [tf.constant(0), start])[1]
        state = tf1.cond(tf.reduce_max(ids) >= 0, looped, lambda: start)
        dense = tf1.get_variable("dense", [4, 1], initializer=tf1.ones_initializer(), use_resource=True)
        train = tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.square(state @ dense)),
                                                                 tf1.train.get_or_create_global_step())
    return Case(g, train, None)  # built, not run


def test_a_fence_waits_in_one_frame_for_a_branch_that_holds_a_v1_loop():
    """The branch's last ops the fence waits for through a ControlTrigger outside every loop are those outside
    every loop: an Enter of a loop in the branch runs in the loop's own frame, and TF refused the step ("has
    inputs from different frames"); the loop's own gate waits for its ops."""
    case, plan, rewritten = _v1_rewritten(_v1_loop_in_a_cond, "HYBRID")
    g = rewritten.graph
    fence = _fenced(case, plan, rewritten)
    frame_of, parent = v1_control_flow.v1_frames(g)
    triggers = [op for op in graph_utils.ancestors([fence]) if op.type == "ControlTrigger"]
    assert any(op.name.endswith("branches_settled") for op in triggers)
    assert any(op.name.endswith("loops_settled") for op in triggers)
    for op in triggers:
        frames = {v1_control_flow.output_frame(i, frame_of, parent) for i in list(op.control_inputs) +
                  [t.op for t in op.inputs]}
        assert frames == {frame_of[op]}, (op.name, frames)


def test_sessions_on_tf_collectives_keep_every_control_edge_the_fence_waits_on():
    """Grappler's dependency optimizer prunes a control edge it finds implied through another path. A fence that
    waited for the release (after the server's update) then no longer waited for the update's own message to the
    chief; another worker ended the step and cleaned its id up on the server before that message left (Aborted:
    Cleanup at the update's _Send; 6 of 176 calibration jobs in PS with TF's collectives, 0 of 180 without it).
    Every worker's server and session take this config (runtime/cluster.py)."""
    from tensorflow.core.protobuf import rewriter_config_pb2
    from parallax.collectives import tf_ops
    config = tf_ops.server_config()
    assert config.graph_options.rewrite_options.dependency_optimization == rewriter_config_pb2.RewriterConfig.OFF
    assert config.experimental.collective_group_leader == tf_ops.GROUP_LEADER
