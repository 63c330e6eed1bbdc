"""Plans are plain records: built and checked here without starting TensorFlow processes."""
import dataclasses

import pytest

import parallax
from parallax import Config, ResourceSpec
from parallax.plan.variable_decisions import decide_variables


@dataclasses.dataclass
class FakePart:
    name: str
    gradients: tuple = ()
    update_ops: tuple = ()
    slots: tuple = ()


@dataclasses.dataclass
class FakeVar:  # the fields of analysis.VariableRecord that planning reads
    name: str
    kind: str
    bytes: int
    shards: int = 1
    is_trained: bool = True
    shape: tuple = ()
    dtype: str = "float32"
    update_ops: tuple = ()

    @property
    def parts(self):
        return tuple(FakePart(f"{self.name}/part_{i}" if self.shards > 1 else self.name, update_ops=self.update_ops)
                     for i in range(self.shards))


@dataclasses.dataclass
class FakeState:  # the fields of analysis.StateRecord that planning reads
    name: str
    kind: str
    bytes: int
    colocated_with: str = None
    written_by: tuple = ()
    read_back_by: tuple = ()


@dataclasses.dataclass
class FakeAnalysis:
    variables: tuple
    state: tuple = ()

    @property
    def trained_variables(self):
        return tuple(v for v in self.variables if v.is_trained)

    def variable(self, name):
        return next(v for v in self.variables if v.name == name)


ANALYSIS = FakeAnalysis((FakeVar("emb", "sparse", 4000, shards=4), FakeVar("w", "dense", 800),
                         FakeVar("b", "dense", 8), FakeVar("frozen", "dense", 10, is_trained=False),
                         FakeVar("emb2", "sparse", 3000)),
                        (FakeState("global_step", "global_step", 8), FakeState("bn/moving_mean", "update_ops", 16),
                         FakeState("w/ExponentialMovingAverage", "ema", 800, colocated_with="w"),
                         FakeState("beta1_power", "optimizer", 4, colocated_with="emb/part_2"),
                         FakeState("beta2_power", "optimizer", 4, colocated_with="w")))
TWO_HOSTS = ResourceSpec.parse("h1: 0,1\nh2: 0,1")


@pytest.mark.parametrize("run_option, methods", [
    ("MPI", {"emb": "AG", "emb2": "AG", "w": "AR", "b": "AR"}),
    ("PS", {"emb": "PS", "emb2": "PS", "w": "PS", "b": "PS"}),
    ("HYBRID", {"emb": "PS", "emb2": "PS", "w": "AR", "b": "AR"}),
])
def test_methods_per_run_option(run_option, methods):
    plan = decide_variables(ANALYSIS, TWO_HOSTS, Config(run_option=run_option))
    assert {v.name: v.method for v in plan.variables} == methods
    assert plan.num_workers == 4 and plan.num_hosts == 2
    assert [v.name for v in plan.variables] == sorted(methods)  # deterministic order, untrained ones left out


def test_one_worker_needs_no_aggregation():
    plan = decide_variables(ANALYSIS, ResourceSpec.load("localhost: 0"), Config())
    assert {v.method for v in plan.variables} == {"LOCAL"}


def test_servers_balanced_by_bytes_and_shards_spread():
    plan = decide_variables(ANALYSIS, TWO_HOSTS, Config(run_option="PS"))
    tasks = {v.name: v.ps_tasks for v in plan.variables}
    assert tasks["emb"] == (0, 1, 0, 1)  # 4 shards of 1000 bytes alternate over both servers
    assert tasks["emb2"] == (0,) and tasks["w"] == (1,) and tasks["b"] == (1,)  # greedy, largest first


def test_averaging_and_local_aggregation_follow_config():
    plan = decide_variables(ANALYSIS, TWO_HOSTS, Config(average_sparse=False, local_aggregation=False))
    assert plan.variable("emb").average is False and plan.variable("w").average is True
    assert not any(v.local_aggregation for v in plan.variables)
    plan = decide_variables(ANALYSIS, TWO_HOSTS, Config())
    assert plan.variable("emb").local_aggregation is True and plan.variable("w").local_aggregation is False
    assert plan.worker_hosts == (0, 0, 1, 1)
    one_each = ResourceSpec.parse("h1: 0\nh2: 0")  # no host has two workers: nothing to aggregate locally
    assert not any(v.local_aggregation for v in decide_variables(ANALYSIS, one_each, Config()).variables)
    assert not any(v.local_aggregation for v in decide_variables(ANALYSIS, TWO_HOSTS, Config(run_option="PS", sync=False))
                   .variables)


def test_state_follows_its_variable_or_is_balanced_in_ps_mode():
    plan = decide_variables(ANALYSIS, TWO_HOSTS, Config(run_option="PS"))
    state = {s.name: (s.ps_task, s.aggregate) for s in plan.state}
    assert state["w/ExponentialMovingAverage"] == (1, False)  # with w
    assert state["beta1_power"] == (0, False)  # with emb's third shard
    assert state["bn/moving_mean"][1] is True  # batch-norm statistics are averaged over workers
    assert {state["global_step"][0], state["bn/moving_mean"][0]} <= {0, 1}
    assert "bn/moving_mean->ps" in str(plan)


def test_hybrid_puts_chief_written_state_on_servers_and_keeps_replica_state_local():
    plan = decide_variables(ANALYSIS, TWO_HOSTS, Config(run_option="HYBRID"))
    state = {s.name: (s.ps_task, s.aggregate) for s in plan.state}
    assert state["w/ExponentialMovingAverage"] == (None, False)  # with its replicated variable
    assert state["beta1_power"] == (0, False)  # with the sparse embedding shard it is colocated with
    assert state["beta2_power"][0] in (0, 1)  # optimizer state leaves its replicated variable for a server
    assert state["global_step"][0] in (0, 1) and state["bn/moving_mean"][0] in (0, 1)
    assert state["bn/moving_mean"][1] is True


def test_without_servers_all_state_is_replicated():
    dense_only = FakeAnalysis((FakeVar("w", "dense", 800),), ANALYSIS.state[:3])
    for option in ("MPI", "HYBRID"):
        plan = decide_variables(dense_only, TWO_HOSTS, Config(run_option=option))
        assert {s.ps_task for s in plan.state} == {None} and not any(s.aggregate for s in plan.state)
    assert decide_variables(ANALYSIS, ResourceSpec.load("localhost: 0"), Config()).state == ()


def test_state_read_back_by_a_replicas_update_is_held_by_every_worker():
    """A hand-written momentum buffer of a replicated variable, and the global step that a replicated average's
    decay reads after the increment (through that average's shadow): every worker keeps its own copy."""
    analysis = FakeAnalysis(ANALYSIS.variables, (
        FakeState("w/buffer", "other", 800, read_back_by=("w",)),
        FakeState("emb2/buffer", "other", 3000, read_back_by=("emb2",)),
        FakeState("global_step", "global_step", 8, read_back_by=("w/ExponentialMovingAverage",)),
        FakeState("w/ExponentialMovingAverage", "ema", 800, colocated_with="w")))
    hybrid = {s.name: s.ps_task for s in decide_variables(analysis, TWO_HOSTS, Config(run_option="HYBRID")).state}
    assert hybrid["w/buffer"] is None and hybrid["global_step"] is None
    assert hybrid["emb2/buffer"] is not None  # its variable is on a server: so is its buffer
    ps = {s.name: s.ps_task for s in decide_variables(analysis, TWO_HOSTS, Config(run_option="PS")).state}
    assert None not in ps.values()


def test_state_colocated_with_state_lives_beside_it_and_a_value_read_back_from_a_server_write_is_the_chiefs():
    """Batch renormalization: the moving deviation is colocated with the moving variance, which is written from the
    deviation as read back after its update (only the chief has that value on a server), and the deviation's read
    back reaches the replicas' updates (through the train op's control edges) in HYBRID."""
    def analysis(stddev_read_back_by):
        return FakeAnalysis(ANALYSIS.variables, (
            FakeState("bn/moving_mean", "update_ops", 16),
            FakeState("bn/moving_variance", "update_ops", 16),
            FakeState("bn/moving_stddev", "ema", 16, colocated_with="bn/moving_variance",
                      read_back_by=stddev_read_back_by),
            FakeState("bn/renorm_stddev", "ema", 16, colocated_with="bn/moving_variance")))
    ps = {s.name: s for s in decide_variables(analysis(("bn/moving_variance",)), TWO_HOSTS, Config(run_option="PS")).state}
    group = {ps[n].ps_task for n in ("bn/moving_variance", "bn/moving_stddev", "bn/renorm_stddev")}
    assert len(group) == 1 and None not in group
    assert ps["bn/moving_mean"].aggregate and not ps["bn/moving_variance"].aggregate
    hybrid = {s.name: s for s in decide_variables(analysis(("bn/moving_variance", "w")), TWO_HOSTS,
                                           Config(run_option="HYBRID")).state}
    assert {hybrid[n].ps_task for n in ("bn/moving_variance", "bn/moving_stddev", "bn/renorm_stddev")} == {None}
    assert hybrid["bn/moving_mean"].ps_task is not None and hybrid["bn/moving_mean"].aggregate


def test_variables_one_op_updates_share_a_side():
    """apply_gradients inside a v2 tf.cond is one op that updates every variable: if one of them is on a server,
    the others cannot be updated in every worker by that op, so they go to servers too."""
    together = FakeAnalysis((FakeVar("emb", "sparse", 4000, update_ops=("train",)),
                             FakeVar("w", "dense", 800, update_ops=("train",)),
                             FakeVar("b", "dense", 8, update_ops=("b_update",))))
    hybrid = decide_variables(together, TWO_HOSTS, Config(run_option="HYBRID"))
    assert {v.name: v.method for v in hybrid.variables} == {"emb": "PS", "w": "PS", "b": "AR"}
    mpi = decide_variables(together, TWO_HOSTS, Config(run_option="MPI"))
    assert {v.name: v.method for v in mpi.variables} == {"emb": "AG", "w": "AR", "b": "AR"}


def test_methods_override_the_run_option_per_variable():
    plan = decide_variables(ANALYSIS, TWO_HOSTS, Config(run_option="HYBRID", methods={"emb2": "AG", "w": "PS"}))
    assert {v.name: v.method for v in plan.variables} == {"emb": "PS", "emb2": "AG", "w": "PS", "b": "AR"}
    assert plan.uses_servers and plan.uses_collectives
    with pytest.raises(parallax.ConfigError, match=r"Config.methods names \['nope'\], which the graph does not train"):
        decide_variables(ANALYSIS, TWO_HOSTS, Config(methods={"nope": "PS"}))
    with pytest.raises(parallax.UnsupportedError, match="PS with Config.methods runs synchronously"):
        decide_variables(ANALYSIS, TWO_HOSTS, Config(run_option="PS", sync=False, methods={"w": "AR"}))
