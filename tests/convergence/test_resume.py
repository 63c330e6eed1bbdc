"""A model script killed mid-run and started again with the same command resumes exactly: `--steps` is the global
step to reach, the input is positioned by the restored global step, and the losses at equal global steps and the
final variables equal an uninterrupted run's (2 HYBRID workers on localhost, every model)."""
import os
import re
import signal
import subprocess
import sys

import numpy as np
import pytest

from tests.convergence.runs import ROOT, make_data, model_dir, run

STEPS, KILL_AT = 30, 10
SMALL = {"lm": ["--num-steps", "8", "--embedding-size", "16", "--hidden-size", "32"],
         "nmt": ["--embedding-size", "16", "--hidden-size", "32"],
         "resnet": [],
         "recsys": ["--max-table-rows", "1000", "--embedding-size", "8"]}
DATA = {"recsys": ["--train-rows", "2000", "--heldout-rows", "100", "--train-files", "1"]}
_LOSS = re.compile(r"\[[^]]*/worker/0\] worker 0 step (\d+) \S+ \S+ loss ([0-9.]+)")


def _command(model, data, ckpt):
    data_args = ["--data-dir", data] if data else []
    return [sys.executable, os.path.join(model_dir(model), "train_distributed.py"), *data_args, *SMALL[model],
            "--steps", str(STEPS), "--batch-size", "8", "--log-every", "1", "--resource-spec", "localhost:2",
            "--run-option", "HYBRID", "--checkpoint-dir", ckpt, "--save-checkpoint-steps", "1"]


def _killed_at(command, step):
    """Run `command` until worker 0 logs `step`, then SIGTERM its launcher (teardown, as Ctrl-C would)."""
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        for line in proc.stdout:
            m = _LOSS.search(line)
            if m and int(m.group(1)) >= step:
                proc.send_signal(signal.SIGTERM)
                break
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 128 + signal.SIGTERM, "the run ended before it could be killed"


def _losses(output):
    return {int(s): float(v) for s, v in _LOSS.findall(output)}


def _variables(ckpt):
    import tensorflow as tf
    latest = tf.train.latest_checkpoint(ckpt)
    return {name: tf.train.load_variable(latest, name) for name, _ in tf.train.list_variables(latest)}


@pytest.mark.parametrize("model", ["lm", "nmt", "resnet", "recsys"])
def test_a_killed_and_restarted_run_equals_an_uninterrupted_one(model, tmp_path_factory, tmp_path):
    data = make_data(tmp_path_factory, model, *DATA.get(model, ())) if model != "resnet" else None
    whole = run(_command(model, data, str(tmp_path / "whole"))[1:])
    resumed_ckpt = str(tmp_path / "resumed")
    _killed_at(_command(model, data, resumed_ckpt), KILL_AT)
    from models.training import resume_step
    restart = resume_step(resumed_ckpt)
    assert KILL_AT - 1 <= restart < STEPS, restart
    resumed = run(_command(model, data, resumed_ckpt)[1:])  # the same command again

    steps = sorted(_losses(resumed))
    assert steps == list(range(restart + 1, STEPS + 1)), steps  # it goes on from the checkpoint, to --steps
    want, got = _losses(whole), _losses(resumed)
    loss_diff = max(abs(want[s] - got[s]) for s in steps)
    a, b = _variables(str(tmp_path / "whole")), _variables(resumed_ckpt)
    assert a.keys() == b.keys() and int(b["global_step"]) == STEPS
    var_diff = max(float(np.max(np.abs(np.asarray(a[k], np.float64) - b[k]))) for k in a)
    print(f"{model}: killed at step {KILL_AT}, resumed from {restart}: max abs diff of the logged losses "
          f"{loss_diff:.3g}, of every variable at step {STEPS} {var_diff:.3g}")
    assert loss_diff <= 1e-4 and var_diff <= 1e-5
