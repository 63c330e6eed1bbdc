"""A script's own tf1.train.Saver saves and restores through the runner, which is a session to it
(runner.py, SessionInterface): the checkpoint holds what the job trained, under the user's names, and one device's
plain Saver reads it; a job restores it in every worker."""
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from tests.launched import run_script

pytestmark = pytest.mark.slow  # real jobs


ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SCRIPT = os.path.join(ROOT, "tests", "launcher_scripts", "user_saver.py")
tf1 = tf.compat.v1


def _job(phase, mode, directory):
    proc = run_script([SCRIPT, phase, mode, directory], timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if "values " in line]
    assert len(lines) == 1, proc.stdout[-3000:]
    return json.loads(lines[0].split("values ", 1)[1])


@pytest.mark.parametrize("mode", ["MPI", "PS", "HYBRID"])
def test_a_scripts_own_saver_saves_and_restores_through_the_runner(tmp_path, mode):
    saved = _job("save", mode, tmp_path)
    assert saved["path"].endswith("model.ckpt-3") and saved["values"][2] == 3
    reader = tf1.train.NewCheckpointReader(saved["path"])  # one device reads it under the user's names
    for name, value in zip(("emb", "w", "global_step"), saved["values"]):
        assert np.array_equal(reader.get_tensor(name), np.asarray(value))
    restored = _job("restore", mode, tmp_path)
    assert restored["values"] == saved["values"]


def test_a_partial_run_is_refused_with_a_parallax_error():
    from parallax.errors import UnsupportedError
    from parallax.runtime.runner import Runner
    runner = Runner.__new__(Runner)
    with pytest.raises(UnsupportedError, match="partial runs"):
        runner.partial_run_setup([])
