"""What the convergence tests share: running a model's scripts, and the single-device vs 2-worker comparison."""
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def model_dir(name):
    return os.path.join(ROOT, "models", name)


def run(args, timeout=600):
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, f"{' '.join(args)}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def make_data(tmp_path_factory, model, *args):
    out = tmp_path_factory.mktemp(f"{model}-data")
    run([os.path.join(model_dir(model), "make_data.py"), "--out", str(out), *args])
    return str(out)


def metric(model, pattern, args, script="eval.py"):
    """The number `pattern` captures in the output of the model's eval script."""
    return float(re.search(pattern, run([os.path.join(model_dir(model), script), *args])).group(1))


def single_and_distributed(model, tmp_path, common, batch, distributed_extra=()):
    """Train `model` on one device with `batch`, then with 2 HYBRID workers of batch/2 on localhost. Returns the
    distributed run's output and both checkpoint directories (single, distributed)."""
    single, dist = str(tmp_path / "single"), str(tmp_path / "dist")
    run([os.path.join(model_dir(model), "train.py"), *common, "--batch-size", str(batch), "--checkpoint-dir",
         single])
    out = run([os.path.join(model_dir(model), "train_distributed.py"), *common, "--batch-size", str(batch // 2),
               "--resource-spec", "localhost:2", "--run-option", "HYBRID", "--checkpoint-dir", dist,
               *distributed_extra])
    return out, single, dist
