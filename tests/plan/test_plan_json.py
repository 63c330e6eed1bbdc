"""The plan as JSON: every field survives the trip, the schema is checked, and reading it needs no TensorFlow."""
import dataclasses
import json
import os
import subprocess
import sys

import pytest

import parallax
from parallax.plan import plan_json
from parallax.plan.planning import plan_job
from tests.models_for_tests import embedding_mlp

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TWO_HOSTS = parallax.ResourceSpec.parse("127.0.0.1: 0,1\n127.0.0.2: 0,1")


@pytest.mark.parametrize("config", [parallax.Config(run_option="MPI"), parallax.Config(run_option="PS"),
                                    parallax.Config(run_option="HYBRID", methods={"model/hidden/kernel": "PS"})])
def test_round_trip_keeps_every_field(config):
    g, _ = embedding_mlp.build("Adam", clip=1.0, ema=True, partitions=2)
    plan = plan_job(g, parallax.analyze(g), TWO_HOSTS, config)
    text = plan_json.dumps(plan)
    assert plan_json.loads(text) == plan
    data = json.loads(text)
    assert data["schema"] == plan_json.SCHEMA
    part = data["variables"][0]["parts"][0]
    assert {"name", "device", "ps_task", "slots", "update_ops", "gradients"} <= set(part)


def test_another_schema_is_refused():
    g, _ = embedding_mlp.build("Adam")
    data = plan_json.to_data(plan_job(g, parallax.analyze(g), TWO_HOSTS, parallax.Config()))
    data["schema"] = "parallax-plan/0"
    with pytest.raises(parallax.GraphMismatchError, match="same parallax version"):
        plan_json.loads(json.dumps(data))


def test_reading_a_plan_imports_no_tensorflow(tmp_path):
    g, _ = embedding_mlp.build("Adam")
    path = tmp_path / "plan.json"
    path.write_text(plan_json.dumps(plan_job(g, parallax.analyze(g), TWO_HOSTS, parallax.Config())))
    code = ("import sys; from parallax.plan import plan_json; p = plan_json.loads(open(sys.argv[1]).read()); "
            "print(p.server_tasks, 'tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(path)], cwd=ROOT, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=ROOT), check=True).stdout
    assert out.split() == ["(0,", "1)", "False"]


def _every_rule_field(plan):
    """`plan` with an entry in each rule field, given as plain tuples, as a finder gives them."""
    return dataclasses.replace(
        plan, batch_draws=(("d/RandomUniform", 0),), batch_statistics=(("Sum:0", "mean", ("a", "b")),),
        fused_batch_norms=(("bn/FusedBatchNormV3", ("g",)),), padded_inputs=(("x:0", (1, 2), 0.5),),
        loss_seeds=(("gradients/grad_ys_0", "mean"),), mean_term_edges=(("gradients/mul_grad/Mul", 1),),
        notes=(("repeated_shards", "a dataset repeats after its shard ..."),), paired_rows=(("own", "t:0", ("r",)),),
        guarded_draws=(("cond/d", "cond", "training:0", "if", (0,), 2),), batchless_writes=(("w", ("it",)),))


def test_rule_entries_are_typed_records_and_survive_the_trip():
    g, _ = embedding_mlp.build("Adam")
    plan = _every_rule_field(plan_job(g, parallax.analyze(g), TWO_HOSTS, parallax.Config()))
    assert plan.batch_draws[0].axis == 0 and plan.padded_inputs[0].axes == (1, 2)
    assert plan.guarded_draws[0].branch_count == 2 and plan.batchless_writes[0].inputs == ("it",)
    loaded = plan_json.loads(plan_json.dumps(plan))
    assert loaded == plan and type(loaded.paired_rows[0]).__name__ == "PairedRows"
    assert plan.noted("repeated_shards") == "a dataset repeats after its shard ..." and plan.noted("other") is None
    data = json.loads(plan_json.dumps(plan))
    assert data["batch_statistics"] == [{"tensor": "Sum:0", "law": "mean", "readers": ["a", "b"]}]


@pytest.mark.parametrize("where", ["top", "variable", "record"])
def test_an_unknown_or_missing_field_is_refused_naming_it(where):
    g, _ = embedding_mlp.build("Adam")
    data = plan_json.to_data(_every_rule_field(plan_job(g, parallax.analyze(g), TWO_HOSTS, parallax.Config())))
    at = {"top": data, "variable": data["variables"][0], "record": data["batch_draws"][0]}[where]
    at["surprise"] = 1
    with pytest.raises(parallax.GraphMismatchError, match=r"unknown \['surprise'\], missing \[\]"):
        plan_json.loads(json.dumps(data))
    del at["surprise"]
    del at[sorted(at)[0]]
    with pytest.raises(parallax.GraphMismatchError, match=r"unknown \[\], missing \['"):
        plan_json.loads(json.dumps(data))
