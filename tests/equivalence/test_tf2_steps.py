"""The equivalence promise for TF2 training steps (a tf.function with GradientTape and a Keras optimizer, run by
`parallax.get_runner(step, ...)`): real jobs of tf2_steps.py, 2 workers on two loopback hosts in MPI, PS and
HYBRID, and (a sample) 4 workers, against the same script on one device with the global batch. Every model and
optimizer variable is compared (the slots and the iteration counter too). TF2 code runs eagerly, so each job is a
process of its own: this suite's processes run with eager execution off."""
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.equivalence.harness import two_hosts

SCRIPT = os.path.join(os.path.dirname(__file__), "tf2_steps.py")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CASES = ("dense_adam", "momentum_clipped", "embedding_adam", "two_optimizers")
TIMEOUT = 300


def _run(out, case, *args, keras3=False):
    # parallax makes tf.keras tf_keras (Keras 2) where it is installed, unless TF_USE_LEGACY_KERAS is set: "0"
    # keeps TF >= 2.16's own Keras 3
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
    if keras3:
        env["TF_USE_LEGACY_KERAS"] = "0"
    done = subprocess.run([sys.executable, SCRIPT, case, "--out", str(out), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0 and os.path.exists(out), \
        f"{case} {' '.join(args)} exited {done.returncode}\n{(done.stdout + done.stderr)[-6000:]}"
    return dict(np.load(out))


@pytest.fixture(scope="module")
def one_device(tmp_path_factory):
    made = {}

    def of(case, workers=2, keras3=False):
        if (case, workers, keras3) not in made:
            made[case, workers, keras3] = _run(tmp_path_factory.mktemp("one") / f"{case}.npz", case, "--one-device",
                                               "--workers", str(workers), keras3=keras3)
        return made[case, workers, keras3]
    return of


def _compared(want, got):
    names = sorted(k for k in want if k != "losses")
    assert sorted(k for k in got if k != "losses") == names
    assert any("iteration" in k or "iter" in k for k in names)  # the optimizer's counter is compared too
    return max(float(np.max(np.abs(got[k] - want[k]))) for k in names), len(names)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["MPI", "PS", "HYBRID"])
@pytest.mark.parametrize("case", CASES)
def test_a_tf2_step_is_exact(tmp_path, one_device, case, mode):
    got = _run(tmp_path / "job.npz", case, "--spec", two_hosts(2), "--mode", mode)
    diff, count = _compared(one_device(case), got)
    print(f"tf2 {case} {mode} N=2: max abs diff {diff:.3g} over {count} variables")
    assert diff < 1e-9, diff


@pytest.mark.slow
@pytest.mark.parametrize("case, mode", [("embedding_adam", "HYBRID"), ("momentum_clipped", "MPI")])
def test_a_tf2_step_is_exact_with_four_workers_on_two_hosts(tmp_path, one_device, case, mode):
    """Two workers on each host: HYBRID's local aggregation groups each host's rows before the servers."""
    got = _run(tmp_path / "job.npz", case, "--workers", "4", "--spec", two_hosts(4), "--mode", mode)
    diff, count = _compared(one_device(case, workers=4), got)
    print(f"tf2 {case} {mode} N=4: max abs diff {diff:.3g} over {count} variables")
    assert diff < 1e-9, diff


# Keras 3 ships with TF 2.16 and later (TF 2.15's Keras is Keras 2): on those, the same steps with Keras 3's layers,
# variables and optimizers.
KERAS3 = tuple(int(part) for part in tf.__version__.split(".")[:2]) >= (2, 16)


if KERAS3:
    @pytest.mark.slow
    @pytest.mark.parametrize("mode", ["MPI", "PS", "HYBRID"])
    @pytest.mark.parametrize("case", ["dense_adam", "embedding_adam"])
    def test_a_keras3_step_is_exact(tmp_path, one_device, case, mode):
        got = _run(tmp_path / "job.npz", case, "--spec", two_hosts(2), "--mode", mode, keras3=True)
        diff, count = _compared(one_device(case, keras3=True), got)
        print(f"tf2 keras 3 {case} {mode} N=2: max abs diff {diff:.3g} over {count} variables")
        assert diff < 1e-9, diff
