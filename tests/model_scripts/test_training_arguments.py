"""The model scripts' shared flags reach parallax.Config: the optimizations (for the ablation), profiling and the
collective backend."""
import argparse
import os
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "models"))
import training  # noqa: E402


def _config(*argv):
    p = argparse.ArgumentParser()
    training.add_common_arguments(p, steps=10, batch_size=4, learning_rate=0.1)
    return training.parallax_config(p.parse_args(list(argv)))


def test_all_optimizations_are_on_by_default():
    c = _config()
    assert (c.local_aggregation, c.place_post_aggregation_ops, c.place_boundary_ops) == (True, True, True)
    assert c.profile_steps == () and c.log_dir is None


@pytest.mark.parametrize("text, expected", [
    ("none", (False, False, False)), ("LA", (True, False, False)), ("la,opau", (True, True, False)),
    ("OPSW", (False, False, True))])
def test_optimizations_switch_each_pass(text, expected):
    c = _config("--optimizations", text, "--run-option", "PS")
    assert c.run_option == "PS"
    assert (c.local_aggregation, c.place_post_aggregation_ops, c.place_boundary_ops) == expected


def test_an_unknown_optimization_is_refused_by_name(capsys):
    with pytest.raises(SystemExit):
        _config("--optimizations", "LA,FAST")
    assert "unknown optimization(s) FAST" in capsys.readouterr().err


def test_profile_steps_trace_into_the_log_dir(tmp_path):
    c = _config("--profile-steps", "30,31", "--log-dir", str(tmp_path))
    assert c.profile_steps == (30, 31) and c.log_dir == str(tmp_path)


@pytest.mark.parametrize("choice", ["auto", "horovod", "tf"])
def test_collective_backend_reaches_config(choice):
    assert _config().collective_backend == "auto"
    assert _config("--collective-backend", choice).collective_backend == choice
