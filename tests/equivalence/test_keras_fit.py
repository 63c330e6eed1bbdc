"""The equivalence promise for Keras's own loop: a compiled model's `fit` (a metric, a validation split,
EarlyStopping, ModelCheckpoint), `evaluate` and `predict`, after `parallax.get_runner(model, ...)`: real jobs of
keras_fit.py, 2 workers on two loopback hosts in MPI, PS and HYBRID, and (a sample) 4, against the same script on
one device. Compared: every model, optimizer and metric variable, the History (the global batch's loss and
metrics, the epoch EarlyStopping stopped at), the evaluation and the predictions; and the trained model saved three
ways and restored into a new single-device model. Each job is a process of its own (eager execution on)."""
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.equivalence.harness import two_hosts

SCRIPT = os.path.join(os.path.dirname(__file__), "keras_fit.py")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CASES = ("dense", "embedding", "gru")
EPOCHS = 8  # keras_fit.py's: EarlyStopping stops every case before
TIMEOUT = 300
# Keras 2 (tf.keras on TF 2.15, tf_keras after), and Keras 3 where TF has it (TF_USE_LEGACY_KERAS=0)
KERAS = ("keras2", "keras3") if tuple(int(part) for part in tf.__version__.split(".")[:2]) >= (2, 16) else ("keras2",)


def _run(tmp, case, *args, keras3=False):
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
    if keras3:
        env["TF_USE_LEGACY_KERAS"] = "0"
    out = tmp / f"{case}.npz"
    done = subprocess.run([sys.executable, SCRIPT, case, "--out", str(out), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT)
    return done, (dict(np.load(out)) if os.path.exists(out) else None)


def _ran(tmp, case, *args, keras3=False):
    done, values = _run(tmp, case, *args, keras3=keras3)
    assert done.returncode == 0 and values is not None, \
        f"{case} {' '.join(args)} exited {done.returncode}\n{(done.stdout + done.stderr)[-6000:]}"
    return values, done.stdout + done.stderr


@pytest.fixture(scope="module")
def one_device(tmp_path_factory):
    made = {}

    def of(case, workers=2, keras3=False):
        if (case, workers, keras3) not in made:
            made[case, workers, keras3] = _ran(tmp_path_factory.mktemp("one"), case, "--one-device",
                                               "--workers", str(workers), keras3=keras3)[0]
        return made[case, workers, keras3]
    return of


def _check(want, got, label):
    assert sorted(k for k in got if not k.startswith("restored:")) == sorted(want)
    stopped = len(want["history:loss"])
    assert 1 < stopped < EPOCHS, f"EarlyStopping did not stop {label} early ({stopped} epochs): nothing tested"
    # Keras's metrics (their states, the History, evaluate's results) are float32 whatever the model's dtype: their
    # sums over the workers add in another order than one device's, within float32's rounding; float64 within 1e-9
    single = [k for k in want if want[k].dtype == np.float32 or k.startswith("history:") or k == "evaluation"]
    for key in single:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-6, atol=1e-7, err_msg=f"{label} {key}")
    doubles = [k for k in want if k not in single]
    assert any(want[k].dtype == np.float64 for k in doubles) and "predictions" in doubles
    diff = max(float(np.max(np.abs(got[k] - want[k]))) for k in doubles)
    print(f"keras fit {label}: {stopped} epochs, max abs diff {diff:.3g} over {len(doubles)} float64 values")
    assert diff < 1e-9, diff


@pytest.mark.slow
@pytest.mark.parametrize("keras", KERAS)
@pytest.mark.parametrize("mode", ["MPI", "PS", "HYBRID"])
@pytest.mark.parametrize("case", CASES)
def test_keras_fit_is_exact(tmp_path, one_device, case, mode, keras):
    keras3 = keras == "keras3"
    got, out = _ran(tmp_path, case, "--spec", two_hosts(2), "--mode", mode, "--checkpoints", str(tmp_path),
                    keras3=keras3)
    _check(one_device(case, keras3=keras3), got, f"{case} {mode} N=2 {keras}")
    # on the chief alone: the progress lines, one ModelCheckpoint file per epoch run, TensorBoard's files
    assert "loss:" in out and "worker/1] Epoch" not in out and "worker/0] Epoch" in out
    saved = sorted(f for f in os.listdir(tmp_path) if f.startswith("ckpt-"))
    assert len(saved) == len(got["history:loss"]), saved
    for way in ("save", "checkpoint", "model_checkpoint"):  # restored into a new single-device model
        assert got[f"restored:{way}"] == 0.0, (way, got[f"restored:{way}"])
    # TensorBoard: one events file per run, the chief's, which holds the History's global losses
    for run, key in (("train", "history:loss"), ("validation", "history:val_loss")):
        np.testing.assert_allclose(_epoch_losses(tmp_path / "tensorboard" / run), got[key], rtol=1e-6)


def _epoch_losses(directory):
    files = [os.path.join(directory, f) for f in os.listdir(directory) if "tfevents" in f]
    assert len(files) == 1, files  # a second worker's TensorBoard would write its own file beside the chief's
    return [float(tf.make_ndarray(value.tensor)) for event in tf.compat.v1.train.summary_iterator(files[0])
            for value in event.summary.value if value.tag == "epoch_loss"]


@pytest.mark.slow
@pytest.mark.parametrize("keras", KERAS)
def test_keras_fit_is_exact_with_four_workers_on_two_hosts(tmp_path, one_device, keras):
    """Batches of 8 in 2 rows per worker; the validation's last batch of 2 leaves two workers without rows."""
    keras3 = keras == "keras3"
    got, _ = _ran(tmp_path, "dense", "--workers", "4", "--spec", two_hosts(4), "--mode", "HYBRID", keras3=keras3)
    _check(one_device("dense", workers=4, keras3=keras3), got, f"dense HYBRID N=4 {keras}")

