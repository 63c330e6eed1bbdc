"""The equivalence promise for TF2 training steps (a tf.function with GradientTape and a Keras optimizer, run by
`parallax.get_runner(step, ...)`): real jobs of tf2_steps.py, 2 workers on two loopback hosts, in MPI, PS and HYBRID,
against the same script on one device with the global batch. Every model and optimizer variable is compared (the
slots and the iteration counter too). TF2 code runs eagerly, so each job is a process of its own: this suite's
processes run with eager execution off."""
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.equivalence.harness import two_hosts

SCRIPT = os.path.join(os.path.dirname(__file__), "tf2_steps.py")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CASES = ("dense_adam", "momentum_clipped", "embedding_adam", "two_optimizers")
TIMEOUT = 300


def _run(out, case, *args):
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run([sys.executable, SCRIPT, case, "--out", str(out), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0 and os.path.exists(out), \
        f"{case} {' '.join(args)} exited {done.returncode}\n{(done.stdout + done.stderr)[-6000:]}"
    return dict(np.load(out))


@pytest.fixture(scope="module")
def one_device(tmp_path_factory):
    made = {}

    def of(case):
        if case not in made:
            made[case] = _run(tmp_path_factory.mktemp("one") / f"{case}.npz", case, "--one-device")
        return made[case]
    return of


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["MPI", "PS", "HYBRID"])
@pytest.mark.parametrize("case", CASES)
def test_a_tf2_step_is_exact(tmp_path, one_device, case, mode):
    want = one_device(case)
    got = _run(tmp_path / "job.npz", case, "--spec", two_hosts(2), "--mode", mode)
    names = sorted(k for k in want if k != "losses")
    assert sorted(k for k in got if k != "losses") == names
    diff = max(float(np.max(np.abs(got[k] - want[k]))) for k in names)
    print(f"tf2 {case} {mode} N=2: max abs diff {diff:.3g} over {len(names)} variables")
    assert diff < 1e-9, diff
    assert any("iteration" in k or "iter" in k for k in names)  # the optimizer's counter is compared too
