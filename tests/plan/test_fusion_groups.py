"""The fusion groups are decided in planning (plan/fusion_groups.py), shown by explain, and obeyed by the rewrite,
which decides nothing itself: a plan that groups otherwise gets the collectives it names."""
import dataclasses

import pytest
import tensorflow as tf

import parallax
from parallax.errors import PipelineError
from parallax.plan.planning import plan_job
from parallax.plan.records import Aggregation, FusionGroup
from parallax.rewrite import rewrite
from tests.models_for_tests import embedding_mlp

tf1 = tf.compat.v1
DENSE = ("model/hidden/bias", "model/hidden/kernel", "model/out/bias", "model/out/kernel")
MPI = parallax.Config(run_option="MPI", collective_backend="tf")
TWO = parallax.ResourceSpec.load("localhost:2")


def _plan(config=MPI):
    g, _ = embedding_mlp.build("Adam", clip=1.0)
    return g, plan_job(g, parallax.analyze(g), TWO, config)


def _allreduces(graph):
    return sorted(op.name for op in graph.get_operations() if op.type == "CollectiveReduceV2")


def test_planning_records_one_group_per_collective():
    _, plan = _plan()
    assert plan.fusion_groups == (FusionGroup(Aggregation.ALLREDUCE, DENSE),
                                  FusionGroup(Aggregation.ALLGATHER, ("model/embedding",)))


def test_a_plan_without_collectives_has_no_groups():
    _, plan = _plan(parallax.Config(run_option="PS"))
    assert plan.fusion_groups == ()


def test_explain_prints_the_groups_from_the_plan():
    g, _ = embedding_mlp.build("Adam", clip=1.0)
    text = str(parallax.explain(g, TWO, MPI, print_table=False))
    assert "one allreduce of " + ", ".join(DENSE) in text
    assert "one allgather of the rows of model/embedding" in text


def test_the_rewrite_makes_the_collectives_the_plan_names():
    g, plan = _plan()
    assert len(_allreduces(rewrite(g, plan, MPI).graph)) == 1
    split = dataclasses.replace(plan, fusion_groups=(FusionGroup(Aggregation.ALLREDUCE, DENSE[:2]),
                                                     FusionGroup(Aggregation.ALLREDUCE, DENSE[2:])))
    assert [name.split("/")[1] for name in _allreduces(rewrite(g, split, MPI).graph)] == ["fused_0", "fused_1"]
    # a gradient no group names is reduced alone: a plan made without plan_job names none
    unnamed = dataclasses.replace(plan, fusion_groups=())
    assert len(_allreduces(rewrite(g, unnamed, MPI).graph)) == len(DENSE)


def test_a_group_naming_no_gradient_of_the_plan_is_refused():
    g, plan = _plan()
    wrong = dataclasses.replace(plan, fusion_groups=(FusionGroup(Aggregation.ALLREDUCE, ("model/nowhere",)),))
    with pytest.raises(PipelineError, match=r"fusion groups name \['model/nowhere'\]"):
        rewrite(g, wrong, MPI)
