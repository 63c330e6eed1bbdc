"""State read back after a step wrote it (a hand-written momentum buffer, Adam's slots, the global step an
average's decay follows): where the plan puts it, and that no worker reads it before the write it waited for.
Rewrites only; tests/equivalence runs these graphs (user_graphs_more.py)."""
import pytest
import tensorflow as tf

import parallax
from parallax.errors import UnsupportedError
from parallax.plan.planning import plan_job
from parallax.rewrite.pipeline import rewrite
from tests.equivalence.cases import F64
from tests.equivalence.run_case import case_builder

tf1 = tf.compat.v1
TWO_HOSTS = parallax.ResourceSpec.parse("127.0.0.1: 0\n127.0.0.2: 0")


def _plan_and_rewrite(graph, mode):
    config = parallax.Config(run_option=mode)
    plan = plan_job(graph, parallax.analyze(graph), TWO_HOSTS, config)
    return plan, rewrite(graph, plan, config)


def _graph(name):
    v2_control_flow = tf1.control_flow_v2_enabled()
    try:
        return case_builder(name)(2, 2, 6, 2).graph
    finally:
        if v2_control_flow:
            tf1.enable_control_flow_v2()  # a ref-variable case turns it off, as a TF1 script would


def test_the_analysis_names_what_a_step_writes_from_state_it_read_back():
    for name in ("hand_written_momentum", "hand_written_momentum_ref"):
        analysis = parallax.analyze(_graph(name))
        state = {s.name: s for s in analysis.state}
        # A momentum buffer written from its variable's gradient and read back by its update is that variable's
        # slot (analysis/optimizer_slots.py), so it is placed with it, not as state of its own.
        assert "head/buffer" not in state and "embedding/buffer" not in state
        assert {v.name: v.slots for v in analysis.variables} == {"head": ("head/buffer",),
                                                                 "embedding": ("embedding/buffer",)}
        assert state["global_step"].read_back_by == ()
    state = {s.name: s for s in parallax.analyze(_graph("ema_with_num_updates")).state}
    assert state["global_step"].read_back_by == ("embedding/ExponentialMovingAverage",
                                                 "head/ExponentialMovingAverage")
    assert state["beta1_power"].read_back_by == ()  # read by the updates before its own write, not after


def test_state_a_replica_reads_back_is_held_by_every_worker_and_server_state_stays_on_servers():
    plan, _ = _plan_and_rewrite(_graph("hand_written_momentum"), "HYBRID")
    head, embedding = plan.variable("head"), plan.variable("embedding")
    assert head.method == "AR" and [(p.slots, p.ps_task) for p in head.parts] == [(("head/buffer",), None)]
    assert embedding.method == "PS" and [p.slots for p in embedding.parts] == [("embedding/buffer",)]
    assert embedding.parts[0].ps_task is not None
    plan, _ = _plan_and_rewrite(_graph("ema_with_num_updates"), "HYBRID")
    where = {s.name: s.ps_task for s in plan.state}
    assert where["global_step"] is None and where["head/ExponentialMovingAverage"] is None
    assert where["beta1_power"] is not None and where["embedding/ExponentialMovingAverage"] is not None
    plan, _ = _plan_and_rewrite(_graph("ema_with_num_updates"), "PS")
    assert all(s.ps_task is not None for s in plan.state)  # no replica reads anything back


def test_a_read_through_a_ref_variables_snapshot_is_a_read_back():
    """A TF1 script's global step is a ref variable, and an average's decay reads it through its `read` snapshot,
    which aliases the variable's buffer: after the step's increment, as the decay waits for it, it reads the
    incremented value. Taken for no read back, the global step went to a server in HYBRID, the decay read it
    before the chief's increment, and every shadow was off by up to 4.5e-4 (issue 57 item 1)."""
    graph = _graph("ema_of_global_step_decay_ref")
    assert graph.get_operation_by_name("global_step").outputs[0].dtype._is_ref_dtype
    state = {s.name: s for s in parallax.analyze(graph).state}
    assert state["global_step"].read_back_by == ("embedding/part_0/ExponentialMovingAverage",
                                                 "embedding/part_1/ExponentialMovingAverage",
                                                 "embedding/part_2/ExponentialMovingAverage",
                                                 "w1/ExponentialMovingAverage", "w2/ExponentialMovingAverage")
    plan, _ = _plan_and_rewrite(graph, "HYBRID")
    where = {s.name: s.ps_task for s in plan.state}
    assert where["global_step"] is None and where["w1/ExponentialMovingAverage"] is None


def test_a_read_of_server_state_after_its_write_keeps_its_wait():
    """Adam's sparse update reads its slots back after scattering into them; the global step increment that every
    worker makes (HYBRID, read back by a replicated average) waits for that update's group. Cutting the group's
    waits for the other workers must not cut the reads' waits: the chief's update would read stale slots."""
    graph = _graph("ema_with_num_updates")
    _, rewritten = _plan_and_rewrite(graph, "HYBRID")
    g = rewritten.graph
    deferred = {op for op, _ in rewritten.sync.deferred}
    for op in graph.get_operations():
        if op.type == "ReadVariableOp" and op.control_inputs and "update_embedding" in op.name:
            assert op.name not in deferred
            waits = {c.name for c in g.get_operation_by_name(op.name).control_inputs}
            assert waits == {c.name for c in op.control_inputs}, op.name


def test_work_every_worker_does_that_reads_server_state_after_its_write_is_refused_not_raced():
    """A local variable (every worker's own) set from the global step read after the train op incremented it: in
    PS mode the step lives on a server, and only the chief's step writes it, after every worker's step."""
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(F64, [None, 2], "x")
        w = tf1.get_variable("w", [2, 1], F64, initializer=tf1.ones_initializer())
        step = tf1.train.get_or_create_global_step()
        train = tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.matmul(x, w)), step)
        seen = tf1.get_variable("seen_step", [], tf.int64, initializer=tf1.zeros_initializer(),
                                collections=[tf1.GraphKeys.LOCAL_VARIABLES], use_resource=True)
        with tf.control_dependencies([train]):
            write = seen.assign(step.read_value()).op
    _, rewritten = _plan_and_rewrite(g, "PS")
    why = dict(rewritten.sync.unsupported)
    assert "computed from global_step as this step writes it" in why.get(write.name, ""), why
    assert "only the chief writes global_step" in why[write.name]


def test_a_write_only_the_forward_pass_waits_for_runs_in_the_chiefs_step():
    """Spectral normalization's power iteration assigns its vector u in the forward pass, and the kernel's read
    waits for it. In PS mode u lives on a server and only the chief writes it; the train op reaches the forward
    pass only through the workers' contributions to the accumulators, so the write must be found through those
    (it was left out of every step before: u kept its initial value, max abs diff 0.56 after one step)."""
    from parallax.runtime.sync_step import SyncSteps
    graph = _graph("spectral_norm_power_iteration")
    plan, rewritten = _plan_and_rewrite(graph, "PS")
    u = next(s for s in plan.state if s.name == "u")
    assert u.ps_task is not None and len(u.written_by) == 1
    write = u.written_by[0]
    train = rewritten.graph.get_operation_by_name("train")
    chief = SyncSteps(rewritten.graph, rewritten.sync, 0, 2).variant(("train",), [train])
    other = SyncSteps(rewritten.graph, rewritten.sync, 1, 2).variant(("train",), [train])
    assert write in {op.name for op in chief.targets}
    assert write not in {op.name for op in other.targets}


def test_gradients_taken_after_another_optimizers_update_of_server_variables_are_refused_in_ps_not_raced():
    """A GAN's step: the generator's gradients are taken after the discriminator's update (a control dependency
    on its train op), through the discriminator's variables. In PS mode only the chief writes those, after every
    worker's step, so the other workers' generator gradients read the old discriminator: 0.047 off, silently,
    when the wait was cut at the discriminator's train op. They are refused now, naming the variable; MPI, where
    every worker updates its own discriminator first, has nothing to refuse."""
    case = case_builder("gan_discriminator_then_generator")(2, 2, 6, 2)
    graph = case.graph
    _, rewritten = _plan_and_rewrite(graph, "PS")
    why = dict(rewritten.sync.unsupported)
    generator = sorted(name for name in why if name.startswith("parallax_ps/generator/"))
    assert generator, why
    assert all("computed from discriminator/" in why[name] and "as this step writes it" in why[name]
               for name in generator), why
    # and a worker's step is refused, naming it (the list alone refused nothing: Config.check_steps found the job
    # 0.047 off in PS)
    from parallax.runtime.sync_step import SyncSteps
    train = rewritten.graph.get_operation_by_name(case.train_op.name)
    with pytest.raises(UnsupportedError, match="computed from discriminator/"):
        SyncSteps(rewritten.graph, rewritten.sync, 1, 2).variant(("train",), [train])
    mpi = _plan_and_rewrite(_graph("gan_discriminator_then_generator"), "MPI")[1]
    assert mpi.sync is None or not mpi.sync.unsupported
