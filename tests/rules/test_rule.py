"""The rules' one interface (parallax/rules/rule.py): planning records exactly what each rule's `find` returns, and
refuses a finder that sets a field its rule does not declare."""
import dataclasses

import pytest
import tensorflow as tf

import parallax
from parallax.errors import PipelineError
from parallax.plan import planning
from parallax.plan.records import Plan
from parallax.rules.catalog import RULES
from tests.models_for_tests import embedding_mlp

tf1 = tf.compat.v1
TWO = parallax.ResourceSpec.parse("localhost: 0,1")


def _dropout_graph():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, 3], name="x")
        w = tf1.get_variable("w", [3, 2])
        tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.nn.dropout(tf.matmul(x, w), rate=0.5,
                                                                                          seed=1)))
    return g


def test_every_rule_declares_plan_fields_and_finds_only_them():
    plan_fields = {f.name for f in dataclasses.fields(Plan)}
    for rule in RULES:
        assert set(rule.fields) | set(rule.records) <= plan_fields, rule.name
        assert not set(rule.fields) & set(rule.records), rule.name
    g = _dropout_graph()
    plan = planning.plan_job(g, parallax.analyze(g), TWO, parallax.Config(run_option="MPI"))
    applying = [rule.name for rule in RULES if rule.applies(plan)]
    assert applying == ["scale_loss_seeds", "split_batch_draws"], applying


def test_planning_records_what_a_rules_finder_returns(monkeypatch):
    """A finder replaced: planning records its value and nothing of the rule's own reading."""
    g = _dropout_graph()
    (draws,) = [r for r in RULES if r.name == "split_batch_draws"]
    found = {"batch_draws": (("planted/draw", 0),), "batch_layout": "interleaved"}
    planted = dataclasses.replace(draws, find=lambda site: found)
    monkeypatch.setattr(planning, "RULES", tuple(planted if r is draws else r for r in RULES))
    plan = planning.plan_job(g, parallax.analyze(g), TWO, parallax.Config(run_option="MPI"))
    assert [tuple(d) for d in plan.batch_draws] == [("planted/draw", 0)] and plan.batch_layout == "interleaved"


def test_a_finder_that_sets_an_undeclared_field_is_refused(monkeypatch):
    g, _ = embedding_mlp.build("Adam")
    (padded,) = [r for r in RULES if r.name == "pad_inputs_to_the_longest"]
    planted = dataclasses.replace(padded, find=lambda site: {"padded_inputs": (), "batch_draws": ()})
    monkeypatch.setattr(planning, "RULES", tuple(planted if r is padded else r for r in RULES))
    with pytest.raises(PipelineError, match=r"rule pad_inputs_to_the_longest found \['batch_draws'\], fields it "
                                            r"does not declare"):
        planning.plan_job(g, parallax.analyze(g), TWO, parallax.Config(run_option="MPI"))


def test_one_worker_runs_no_finder(monkeypatch):
    def refused(site):
        raise AssertionError("a finder ran for one worker")
    monkeypatch.setattr(planning, "RULES", tuple(dataclasses.replace(r, find=refused) for r in RULES))
    g = _dropout_graph()
    plan = planning.plan_job(g, parallax.analyze(g), parallax.ResourceSpec.parse("localhost: 0"), parallax.Config())
    assert not any(rule.applies(plan) for rule in RULES)
