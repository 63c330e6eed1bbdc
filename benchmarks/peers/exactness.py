"""Does each peer compute what one device computes with the global batch? Each model (the LM, the ResNet, the
recommendation model, each as a v1 graph and as a Keras model) small and in float64, K steps on localhost: one
device with batch N*b, then parallax (MPI, PS, HYBRID, and AUTO from a parallax-calibrate run on localhost) and
each peer with N workers of b: Horovod and TF 1 parameter servers for the v1 graphs, MultiWorkerMirroredStrategy
and ParameterServerStrategy (asynchronous) for the Keras models. Every variable of the one-device checkpoint
(weights, embeddings, batch-norm statistics, the optimizer's slots) is compared with the same variable in the run's
chief checkpoint. Writes benchmarks/results/peers_exactness.md, keeping its
hand-written analysis.

    python benchmarks/peers/exactness.py [--models lm,lm-keras,resnet,resnet-keras,recsys,recsys-keras] \
        [--steps 20] [--workers 2] [--batch-size 32]
"""
import argparse
import functools
import glob
import os
import subprocess
import sys
import tempfile
from typing import NamedTuple

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import common  # noqa: E402
import launch  # noqa: E402

MODELS = os.path.join(ROOT, "models")
ANALYSIS = "## What the table says"  # the results file's hand-written part from this heading on survives a rerun
MWMS, PSS = "TF2 MultiWorkerMirroredStrategy", "TF2 ParameterServerStrategy (asynchronous)"


class Row(NamedTuple):
    """One run's comparison with one device: `error` set (the first line of why) if the run failed."""
    label: str
    step: int = None
    diff: float = None
    worst: str = None
    error: str = None

    def cells(self):
        if self.error:
            return f"{self.label} | - | failed: {self.error} | - |"
        return f"{self.label} | {self.step} | {self.diff:.3g} | `{self.worst}` |"


class Setting(NamedTuple):
    directory: str  # under models/
    data: list  # make_data.py's options after --out (None: the model needs no data directory)
    options: list  # the model's options, float64 and small
    text: str  # for the table's header
    embeddings: bool  # has sparse gradients (Horovod's sparse_as_dense changes something)
    keras: bool = False  # the Keras version: one device train_keras.py, parallax train_keras_distributed.py


LM_DATA, LM = ["--synthetic-vocab", "300", "--synthetic-words", "20000"], [
    "--num-steps", "6", "--embedding-size", "8", "--hidden-size", "8"]
RECSYS_DATA, RECSYS = ["--train-rows", "5000", "--heldout-rows", "100", "--train-files", "1"], [
    "--max-table-rows", "200", "--embedding-size", "4"]
SETTINGS = {
    "lm": Setting("lm", LM_DATA, LM, "300 words, embedding 8, LSTM 8, 6 unrolled steps, Adam, gradients clipped "
                                     "by global norm", True),
    "lm-keras": Setting("lm", LM_DATA, LM, "the same LM in Keras (models/lm/lm_keras.py), trained by Model.fit",
                        True, keras=True),
    "resnet": Setting("resnet", None, [], "3 stages of 1 block, batch norm after every convolution, momentum SGD",
                      False),
    "resnet-keras": Setting("resnet", None, [], "the same ResNet in Keras (models/resnet/resnet_keras.py)", False,
                            keras=True),
    "recsys": Setting("recsys", RECSYS_DATA, RECSYS, "tables of at most 200 rows, 4 columns, the four largest in 2 "
                                                     "shards, Adagrad", True),
    "recsys-keras": Setting("recsys", RECSYS_DATA, RECSYS, "the same model in Keras (models/recsys/recsys_keras.py), "
                                                           "no table partitioned", True, keras=True),
}


def checkpoint_variables(checkpoint_dir):
    """{name: value} of the latest TF checkpoint in `checkpoint_dir`, or of the Keras weights file there (its
    optimizer's step counter named global_step, Keras's metrics left out: they are not the model's state)."""
    keras = glob.glob(os.path.join(checkpoint_dir, "*.weights.h5"))
    if keras:
        return _keras_weights(keras[0])
    import tensorflow as tf
    latest = tf.train.latest_checkpoint(checkpoint_dir)
    if latest is None:
        raise RuntimeError(f"no checkpoint in {checkpoint_dir}")
    return {name: tf.train.load_variable(latest, name) for name, _ in tf.train.list_variables(latest)}


def _keras_weights(path):
    import h5py
    values = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, item: values.__setitem__(name, item[()]) if isinstance(item, h5py.Dataset)
                     else None)
    values = {name: value for name, value in values.items() if not name.startswith("metrics/")}
    values["global_step"] = values.pop("optimizer/vars/0")  # Keras's optimizer.iterations
    return values


def compare(reference, candidate):
    """(max abs diff over the reference's variables, the variable where it is largest, global step)."""
    missing = sorted(set(reference) - set(candidate))
    if missing:
        raise RuntimeError(f"variables missing from the run's checkpoint: {missing}")
    diffs = {k: float(np.max(np.abs(np.asarray(candidate[k], np.float64) - reference[k]))) if np.size(reference[k])
             else 0.0 for k in reference if k != "global_step"}
    worst = max(diffs, key=diffs.get)
    return diffs[worst], worst, int(candidate["global_step"])


def make_data(name, work):
    """The model's data directory under `work` (made by its make_data.py), or None if it reads none."""
    setting = SETTINGS[name]
    if setting.data is None:
        return None
    data = os.path.join(work, f"{name}-data")
    launch.make_model_data(setting.directory, setting.data, data, f"{name} data")
    return data


def runs(name, data, args):
    """(label, command, run) for every run of model `name`, one device's first: `run(command, label)` runs it. The
    parameter-server and MultiWorkerMirroredStrategy jobs' command is one task's, without its cluster."""
    setting, n, b = SETTINGS[name], args.workers, args.batch_size
    model = [*(["--data-dir", data] if data else []), "--steps", str(args.steps), *setting.options,
             "--dtype", "float64", "--log-every", "1"]
    one, distributed = ("train_keras", "train_keras_distributed") if setting.keras else ("train", "train_distributed")
    script = os.path.join(MODELS, setting.directory, "{}.py")
    yield "one device", [sys.executable, script.format(one), *model, "--batch-size", str(n * b)], launch.run_command
    parallax = [sys.executable, script.format(distributed), *model, "--batch-size", str(b), "--resource-spec",
                f"localhost:{n}"]
    for mode in ("MPI", "PS", "HYBRID"):
        yield f"parallax {mode}", [*parallax, "--run-option", mode], launch.run_command
    if setting.keras:  # parallax-calibrate cannot time a Keras script's step yet (docs/status.md)
        peer = [*model, "--model", setting.directory, "--batch-size", str(b)]
        yield MWMS, [sys.executable, os.path.join(HERE, "mwms_peer.py"), *peer], \
            functools.partial(launch.run_mwms_job, workers=n)
        yield PSS, [sys.executable, os.path.join(HERE, "pss_peer.py"), *peer], \
            functools.partial(launch.run_pss_job, workers=n)
        return
    calibration = os.path.join(args.work, f"{name}-calibration")
    calibrate = [sys.executable, "-m", "parallax.tools.calibrate", "--resource-spec", f"localhost:{n}", "--out",
                 calibration, "--", *parallax]
    yield "parallax AUTO", [*parallax, "--run-option", "AUTO", "--calibration",
                            os.path.join(calibration, "calibration.json")], \
        functools.partial(launch.run_after, first=(calibrate, f"{name}: parallax-calibrate"))
    horovodrun = [os.path.join(os.path.dirname(sys.executable), "horovodrun"), "-np", str(n), "-H", f"localhost:{n}",
                  sys.executable, os.path.join(HERE, "horovod_peer.py"), "--model", name, *model, "--batch-size",
                  str(b)]
    yield "Horovod", horovodrun, launch.run_command
    if setting.embeddings:
        yield "Horovod sparse_as_dense", [*horovodrun, "--sparse-as-dense"], launch.run_command
    yield "TF1 PS + SyncReplicasOptimizer", [sys.executable, os.path.join(HERE, "ps_peer.py"), "--model", name,
                                             *model, "--batch-size", str(b)], functools.partial(launch.run_ps_job,
                                                                                                workers=n)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32, help="per worker")
    p.add_argument("--models", default=",".join(SETTINGS), type=lambda text: text.split(","))
    args = p.parse_args(argv)
    unknown = sorted(set(args.models) - set(SETTINGS))
    if unknown:
        p.error(f"unknown model(s) {', '.join(unknown)}: choose from {', '.join(SETTINGS)}")
    with tempfile.TemporaryDirectory(prefix="peers-exactness-") as args.work:
        write({name: list(model_rows(name, args)) for name in args.models}, args)


def write(rows, args):
    """results/peers_exactness.md from {setting name: [Row]} (kept: its hand-written analysis)."""
    lines = common.header("Peers: exactness against one device (float64)",
                          {"workers": args.workers, "batch per worker": args.batch_size, "steps": args.steps,
                           **{name: SETTINGS[name].text for name in rows}})
    lines += ["| model | run | global step | max abs diff, every variable | where it is largest |",
              "|---|---|---|---|---|"]
    for name, model in rows.items():
        lines += [f"| {name} | {row.cells()}" for row in model]
    common.write("peers_exactness.md", lines + common.kept_section("peers_exactness.md", ANALYSIS))


def model_rows(name, args):
    """A Row per run after one device's, against one device's checkpoint. Each run's files go under args.work."""
    work = args.work
    data, reference = make_data(name, work), None
    for k, (label, command, run) in enumerate(runs(name, data, args)):
        ckpt = os.path.join(work, f"{name}-run{k}")
        try:
            run([*command, "--checkpoint-dir", ckpt], f"{name}: {label}")
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            if reference is None:
                raise  # nothing to compare with
            print(f"{name}: {label} FAILED: {e}", flush=True)
            yield Row(label, error=str(e).splitlines()[0])
            continue
        values = checkpoint_variables(ckpt)
        if reference is None:
            reference = values
            continue
        diff, worst, step = compare(reference, values)
        yield Row(label, step, diff, worst)
        print(f"{name}: {label}: {diff:.3g} at {worst}", flush=True)


if __name__ == "__main__":
    main()
