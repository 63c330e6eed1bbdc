"""v1 tf.cond branches in a synchronized step: a branch not taken is dead, and so is whatever waits for an op in
it. The step may run a branch's ops, but its arrival, release and fence never wait for them (a release that did
would never be sent, and every worker would wait for it). tests/equivalence runs such a graph in every mode
(loss_scaled_finite_check_v1_cond)."""
import tensorflow as tf

import parallax
from parallax import collectives
from parallax.core import graph_utils, v1_control_flow
from parallax.runtime import step_fence
from parallax.plan.planning import plan_job
from parallax.rewrite.pipeline import rewrite
from parallax.runtime.sync_step import SyncSteps
from tests.equivalence.run_case import case_builder

tf1 = tf.compat.v1


def _v1(build):
    v2 = tf1.control_flow_v2_enabled()
    tf1.disable_control_flow_v2()
    try:
        return build()
    finally:
        if v2:
            tf1.enable_control_flow_v2()


def _rewritten_v1_cond():
    """(plan, rewritten graph, its train op) of loss_scaled_finite_check_v1_cond in HYBRID over 2 hosts, TF's
    collectives."""
    case = _v1(lambda: case_builder("loss_scaled_finite_check_v1_cond")(2, 2, 6, 2))
    config = parallax.Config(run_option="HYBRID", collective_backend="tf")
    plan = plan_job(case.graph, parallax.analyze(case.graph), parallax.ResourceSpec.parse(
        "127.0.0.1: 0\n127.0.0.2: 0"), config)
    rewritten = rewrite(case.graph, plan, config)
    return plan, rewritten, rewritten.graph.as_graph_element(case.train_op.name)


def test_ops_inside_v1_branches_are_found_through_nesting_and_loops():
    def build():
        g = tf.Graph()
        with g.as_default():
            p, q = tf1.placeholder(tf.bool, name="p"), tf1.placeholder(tf.bool, name="q")
            x = tf1.placeholder(tf.float32, name="x")

            def outer():
                inner = tf.cond(q, lambda: tf.identity(x * 2, name="inner_then"), lambda: tf.identity(x, name="e"))
                looped = tf1.while_loop(lambda i: i < 3.0, lambda i: i + 1.0, [inner])
                return tf.identity(looped, name="after_loop")
            out = tf.cond(p, outer, lambda: tf.identity(x, name="outer_else"))
            tf.identity(out, name="after_cond")
        return g
    g = _v1(build)
    inside = {op.name for op in v1_control_flow.v1_cond_ops(g)}
    assert any(n.endswith("inner_then") for n in inside) and any(n.endswith("outer_else") for n in inside)
    assert any(n.endswith("after_loop") for n in inside)  # inside the outer branch, after a loop in it
    assert "after_cond" not in inside and "x" not in inside  # after the join, before the switch


def test_a_step_runs_the_ops_of_a_branch_but_waits_only_for_its_join():
    plan, rewritten, fetch = _rewritten_v1_cond()
    g = rewritten.graph
    in_branches = v1_control_flow.v1_cond_ops(g)
    for worker in (0, 1):
        variant = SyncSteps(g, rewritten.sync, worker, 2).variant((fetch.name,), [fetch])
        replicas = {op.name for op in variant.branch_targets if op.type == "ResourceApplyMomentum"}
        assert replicas == {"train/Momentum/update_head/ResourceApplyMomentum",
                            "train/Momentum/update_side/kernel/ResourceApplyMomentum",
                            "train/Momentum/update_side/bias/ResourceApplyMomentum"}
        assert not set(variant.targets) & in_branches
        waiting = [op for op in variant.targets if op.name.startswith("parallax_sync/")]
        assert waiting, [op.name for op in variant.targets]
        for op in waiting:  # the arrival or the release waits for no op of a branch, only for the cond's join
            waits = set(op.control_inputs)
            waits |= {w for c in op.control_inputs if c.type == "NoOp" for w in c.control_inputs}
            assert not waits & set(variant.branch_targets), op.name


def test_the_tf_backends_fence_waits_for_every_branch_op_through_a_control_trigger():
    """The cond's join fires on its first live input, so a branch not taken may still pass its deadness between
    tasks after it. With TF's collectives (one step id for every worker) the fence must wait for that too, or
    another worker ends the step and cleans its id up on a server first (Aborted: Cleanup); it must not wait for a
    branch op directly, or it is dead itself when the branch is."""
    plan, rewritten, fetch = _rewritten_v1_cond()
    g = rewritten.graph
    in_branches = v1_control_flow.v1_cond_ops(g) - v1_control_flow.v1_loop_ops(g)
    for worker in (0, 1):
        variant = SyncSteps(g, rewritten.sync, worker, 2, collectives.step_fence_for(plan)).variant(
            (fetch.name,), [fetch])
        fences = [op for op in variant.targets if op.name.startswith(step_fence.FENCE_SCOPE)]
        assert len(fences) == 1
        ran = graph_utils.ancestors([op for op in variant.targets if op is not fences[0]] + variant.branch_targets)
        branch_ops = ran & in_branches
        assert variant.branch_targets and branch_ops

        def waited(stops):  # what the fence waits for, on paths that pass no op of `stops`' types
            return graph_utils.closure(fences, lambda op: [] if op.type in stops else
                                       [t.op for t in op.inputs] + list(op.control_inputs))
        # not through the join alone, which does not wait for the branch not taken
        missed = branch_ops - waited(("Merge",))
        assert not missed, sorted(op.name for op in missed)[:5]
        # and only through the join or a ControlTrigger, which are live when a branch is dead
        direct = waited(("Merge", "ControlTrigger")) & in_branches
        assert not direct, sorted(op.name for op in direct)[:5]


def _map_fn_around_dynamic_lstms(depth):
    """tf.map_fn nested `depth` deep around a dynamic LSTM, with its gradients: v1 loops nested depth + 1 deep,
    whose gradient loops' accumulators have back edges that cross frames."""
    tf1.disable_control_flow_v2()
    try:
        g = tf.Graph()
        with g.as_default():
            x = tf1.placeholder(tf.float32, [None] * depth + [5, 3])

            def innermost(rows):
                out, _ = tf1.nn.dynamic_rnn(tf1.nn.rnn_cell.LSTMCell(4, name="lstm"), rows[None], dtype=tf.float32)
                return out[0, -1]

            def mapped(level):
                return innermost if level == 0 else lambda e: tf.map_fn(mapped(level - 1), e)
            states = tf.map_fn(mapped(depth - 1), x)
            tf1.train.AdamOptimizer(0.1).minimize(tf.reduce_mean(tf.square(states)))
        return g
    finally:
        tf1.enable_control_flow_v2()


def test_the_control_flow_walks_are_linear_on_deeply_nested_loops():
    """Issue 57 item 10: on map_fn around a dynamic LSTM (two deep), a walk over (op, nesting depth) pairs grew
    without bound (a PS worker at 12 GB). Each walk is one pass over the graph now: on three levels of map_fn
    (about 1,000 ops) both finish within a generous bound of time and memory, and find every loop op."""
    import signal
    import tracemalloc
    g = _map_fn_around_dynamic_lstms(3)
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(AssertionError("a walk outlasted 30 s")))
    signal.alarm(30)
    tracemalloc.start()
    try:
        loops, branches = v1_control_flow.v1_loop_ops(g), v1_control_flow.v1_cond_ops(g)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        signal.alarm(0)
    assert peak < 50e6, f"{peak / 1e6:.0f} MB"
    whiles = [op for op in g.get_operations() if op.type == "Merge"]
    assert whiles and all(op in loops for op in whiles)
    assert branches <= set(g.get_operations()) and loops
