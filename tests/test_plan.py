"""Plans are plain records: built and checked here without starting TensorFlow processes."""
import dataclasses

import pytest

from parallax import Config, ResourceSpec
from parallax.plan import make_plan


@dataclasses.dataclass
class FakeVar:  # the fields of analysis.VariableRecord that planning reads
    name: str
    kind: str
    bytes: int
    parts: tuple = ((),)
    is_trained: bool = True


@dataclasses.dataclass
class FakeAnalysis:
    variables: tuple

    @property
    def trained_variables(self):
        return tuple(v for v in self.variables if v.is_trained)


ANALYSIS = FakeAnalysis((FakeVar("emb", "sparse", 4000, parts=((), (), (), ())), FakeVar("w", "dense", 800),
                         FakeVar("b", "dense", 8), FakeVar("frozen", "dense", 10, is_trained=False),
                         FakeVar("emb2", "sparse", 3000)))
TWO_HOSTS = ResourceSpec.parse("h1: 0,1\nh2: 0,1")


@pytest.mark.parametrize("run_option, methods", [
    ("MPI", {"emb": "AG", "emb2": "AG", "w": "AR", "b": "AR"}),
    ("PS", {"emb": "PS", "emb2": "PS", "w": "PS", "b": "PS"}),
    ("HYBRID", {"emb": "PS", "emb2": "PS", "w": "AR", "b": "AR"}),
])
def test_methods_per_run_option(run_option, methods):
    plan = make_plan(ANALYSIS, TWO_HOSTS, Config(run_option=run_option))
    assert {v.name: v.method for v in plan.variables} == methods
    assert plan.num_workers == 4 and plan.num_hosts == 2
    assert [v.name for v in plan.variables] == sorted(methods)  # deterministic order, untrained ones left out


def test_one_worker_needs_no_aggregation():
    plan = make_plan(ANALYSIS, ResourceSpec.load("localhost: 0"), Config())
    assert {v.method for v in plan.variables} == {"LOCAL"}


def test_servers_balanced_by_bytes_and_shards_spread():
    plan = make_plan(ANALYSIS, TWO_HOSTS, Config(run_option="PS"))
    tasks = {v.name: v.ps_tasks for v in plan.variables}
    assert tasks["emb"] == (0, 1, 0, 1)  # 4 shards of 1000 bytes alternate over both servers
    assert tasks["emb2"] == (0,) and tasks["w"] == (1,) and tasks["b"] == (1,)  # greedy, largest first


def test_averaging_flags_and_local_aggregation_follow_config():
    plan = make_plan(ANALYSIS, TWO_HOSTS, Config(average_sparse=False, local_aggregation=False))
    assert plan.variable("emb").average is False and plan.variable("w").average is True
    assert plan.variable("emb").local_aggregation is False
    plan = make_plan(ANALYSIS, TWO_HOSTS, Config())
    assert plan.variable("emb").local_aggregation is True and plan.variable("w").local_aggregation is False
    text = str(plan)
    assert "run_option=HYBRID workers=4 hosts=2" in text and "emb2" in text
