"""The plan as JSON: every field survives the trip, the schema is checked, and reading it needs no TensorFlow."""
import json
import os
import subprocess
import sys

import pytest

import parallax
from parallax.plan import plan_json
from parallax.plan.planning import plan_job
from tests.models_for_tests import embedding_mlp

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
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
