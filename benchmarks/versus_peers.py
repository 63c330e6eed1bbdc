"""parallax against what its users would write instead (benchmarks/peers/), side by side on the shaped test bed
(2 hosts x 2 workers, network namespaces, links shaped with tc; testbed.py), at --rate and at --second-rate: the
LM, the ResNet and the recommendation model.

Runs per model: parallax's PS, MPI, HYBRID and AUTO (AUTO from a parallax-calibrate run on the test bed at that
rate, made before the rounds); Horovod (hvd.DistributedOptimizer, started by mpirun; for models with embeddings
also with sparse_as_dense=True); TF 1 parameter servers (replica_device_setter with a greedy balancer over one
server per host, SyncReplicasOptimizer); and with the model's Keras version, MultiWorkerMirroredStrategy and
ParameterServerStrategy (asynchronous by design: its throughput is not one device's steps'). Same
model, initial values, data, batch per worker (so global batch) and learning rate everywhere.

Each round runs every configuration once, the order rotated by one place per round, so that drift on this shared
machine falls on all alike. A run's throughput is the median over its log windows after warm-up (a TF 1
parameter-server job is measured from when every worker is in: its chief starts alone); a configuration's is the
median over its rounds. Exactness comes from benchmarks/peers/exactness.py, run first in the same invocation.
Writes results/peers.md, peers.png, peers.json (the measurements; --from-saved re-renders them) and
peers_exactness.md.

    python benchmarks/versus_peers.py [--repeats 2] [--rate 1gbit] [--second-rate 100mbit] [--only LM,recsys] \
        [--skip-exactness] [--from-saved] [--merge]
"""
import argparse
import os
import signal
import sys
import tempfile
from typing import NamedTuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, ".."), os.path.join(HERE, "peers")]

import common  # noqa: E402
import exactness  # noqa: E402
import on_testbed  # noqa: E402
import peers_report  # noqa: E402
import testbed  # noqa: E402
from paper_tables import LM_ARGS, add_rate_arguments  # noqa: E402

from parallax.launcher.local_cluster import LocalCluster  # noqa: E402


class Bench(NamedTuple):
    directory: str  # under models/
    data: list  # make_data.py's options after --out; None: no data directory
    args: list
    steps: tuple  # (steps, log every): the first log-every steps are warm-up
    dense_steps: tuple  # the same for Horovod's sparse_as_dense, whose steps move every table whole
    embeddings: bool
    exactness: tuple  # the model's names in exactness.SETTINGS: the v1 graph's, the Keras version's


MODELS = {
    "LM": Bench("lm", ["--synthetic-vocab", "100000"], LM_ARGS, (50, 10), (12, 3), True, ("lm", "lm-keras")),
    "ResNet": Bench("resnet", None, ["--batch-size", "32"], (600, 100), None, False,
                    ("resnet", "resnet-keras")),
    "recsys": Bench("recsys", ["--train-rows", "200000", "--heldout-rows", "1000"],
                    ["--batch-size", "128", "--max-table-rows", "20000"], (100, 10), (20, 4), True,
                    ("recsys", "recsys-keras")),
}
MODES = ("PS", "MPI", "HYBRID", "AUTO")
HOROVOD, SPARSE_AS_DENSE = "Horovod", "Horovod sparse_as_dense"
TF1_PS = "TF1 PS + SyncReplicasOptimizer"
MWMS, PSS = exactness.MWMS, exactness.PSS
SAVED = os.path.join(common.RESULTS, "peers.json")


def labels(model):
    """Every configuration of `model`: parallax's modes, then the peers."""
    peers = [HOROVOD, *([SPARSE_AS_DENSE] if MODELS[model].embeddings else []), TF1_PS, MWMS, PSS]
    return [f"parallax {mode}" for mode in MODES] + peers


def model_args(model, data_dirs):
    return [*(["--data-dir", data_dirs[model]] if model in data_dirs else []), *MODELS[model].args]


def run_one(cluster, work, model, label, data_dirs, calibrations):
    """Measure one configuration on the cluster (testbed.Measurement)."""
    bench, args = MODELS[model], model_args(model, data_dirs)
    script = os.path.join("models", bench.directory, "train_distributed.py")
    if label.startswith("parallax "):
        mode = label.split()[1]
        extra = ["--calibration", calibrations[model]] if mode == "AUTO" else []
        steps, every = bench.steps
        return testbed.run_job(cluster, work, script, [*args, *extra], mode, steps, every, every)
    steps, every = bench.dense_steps if label == SPARSE_AS_DENSE else bench.steps
    if label == PSS:  # its steps are single workers' steps: as many examples as N workers' steps
        steps, every = (x * cluster.num_hosts * cluster.slots for x in (steps, every))
    args += ["--steps", str(steps), "--log-every", str(every)]
    tasks_file = os.path.join(work, "tasks.json")
    if label in (HOROVOD, SPARSE_AS_DENSE):
        cmd = on_testbed.horovod(cluster, bench.directory, args, sparse_as_dense=label == SPARSE_AS_DENSE)
    elif label == TF1_PS:
        cmd = on_testbed.parameter_servers(cluster, bench.directory, args, tasks_file)
    elif label == MWMS:
        cmd = on_testbed.multi_worker_mirrored(cluster, bench.directory, args, tasks_file)
    else:
        cmd = on_testbed.parameter_server_strategy(cluster, bench.directory, args, tasks_file)
    return testbed.measure(cluster, cmd, testbed.environment(cluster), f"{model} {label}", steps, every,
                           late_workers=True, coordinator=label == PSS)


def calibrate(cluster, work, model, data_dirs, rate):
    """parallax-calibrate for `model` on the cluster; the calibration.json's path."""
    out = os.path.join(work, f"calibration-{rate}-{model}")
    script = os.path.join(common.ROOT, "models", MODELS[model].directory, "train_distributed.py")
    exactness.launch.run_command(
        [sys.executable, "-m", "parallax.tools.calibrate", *cluster.launch_options(), "--out", out, "--",
         sys.executable, script, *model_args(model, data_dirs)], f"{rate}: parallax-calibrate {model}",
        env=testbed.environment(cluster), timeout=1800)
    return os.path.join(out, "calibration.json")


def run_rate(rate, models, data_dirs, work, repeats, runs, failures):
    """Every configuration at `rate`, in rotated rounds; a run that fails is noted in `failures` (the report lists
    them) and the rounds go on."""
    with LocalCluster(2, 2, rate=rate) as cluster:
        testbed.progress(f"{cluster}: calibrating AUTO for {', '.join(models)}")
        calibrations = {model: calibrate(cluster, work, model, data_dirs, rate) for model in models}
        configurations = [(model, label) for model in models for label in labels(model)]
        testbed.progress(f"{rate}: {len(configurations)} configurations x {repeats} rounds")
        for round_ in range(repeats):
            shift = round_ % len(configurations)
            for model, label in configurations[shift:] + configurations[:shift]:
                try:
                    m = run_one(cluster, work, model, label, data_dirs, calibrations)
                except RuntimeError as e:
                    failures.append({"rate": rate, "model": model, "label": label, "round": round_ + 1,
                                     "error": str(e)[-1500:]})
                    testbed.progress(f"{rate} round {round_ + 1}/{repeats} {model} {label} FAILED: "
                                     f"{str(e).splitlines()[0]}")
                    continue
                runs.setdefault((rate, model, label), []).append(m)
                testbed.progress(f"{rate} round {round_ + 1}/{repeats} {model} {label}: {m.rate:,.0f} {m.unit}/s, "
                                 f"{m.cpu_seconds:.2f} CPU s/step, {m.total_bytes / 1e6:.2f} MB/worker-step")


def make_data(models, work):
    data_dirs = {}
    for model in models:
        if MODELS[model].data is not None:
            data_dirs[model] = os.path.join(work, model)
            exactness.launch.make_model_data(MODELS[model].directory, MODELS[model].data, data_dirs[model],
                                             f"{model} data")
    return data_dirs


def exactness_rows(models, work):
    """{(model, label): max abs diff} from exactness.py's runs (float64, localhost), for `models`; the runs' table
    goes to results/peers_exactness.md as exactness.py writes it."""
    args = argparse.Namespace(steps=20, workers=2, batch_size=32, work=work)
    rows = {name: list(exactness.model_rows(name, args)) for model in models for name in MODELS[model].exactness}
    exactness.write(rows, args)
    return {(model, row.label): row.diff for model in models for name in MODELS[model].exactness
            for row in rows[name] if row.error is None}


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: each job and the test bed are taken down
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_rate_arguments(p)
    p.add_argument("--skip-exactness", action="store_true",
                   help="leave out the exactness runs (about 10 minutes; the column then shows -)")
    p.add_argument("--from-saved", action="store_true", help=f"re-render {os.path.relpath(SAVED, common.ROOT)}")
    p.add_argument("--merge", action="store_true", help=f"put this run's models and rates in place of their rows "
                   f"in {os.path.relpath(SAVED, common.ROOT)}, keeping the rest (the header says which)")
    bench = p.parse_args()
    models = bench.only.split(",") if bench.only else list(MODELS)
    if set(models) - set(MODELS):
        p.error(f"unknown model(s) {', '.join(sorted(set(models) - set(MODELS)))}: choose from {', '.join(MODELS)}")
    if bench.from_saved:
        return peers_report.write(*peers_report.load(SAVED))
    rates = [r for r in (bench.rate, bench.second_rate) if r]
    settings = {"hosts": "2 (network namespaces)", "workers per host": 2, "rates": ", ".join(rates),
                "rounds": bench.repeats, **{m: _describe(m) for m in models}}
    runs, failures = {}, []
    with tempfile.TemporaryDirectory(prefix="parallax-versus-peers-") as work:
        if not bench.skip_exactness:
            testbed.progress("exactness (float64, localhost)")
        diffs = {} if bench.skip_exactness else exactness_rows(models, work)
        data_dirs = make_data(models, work)
        for rate in rates:
            run_rate(rate, models, data_dirs, work, bench.repeats, runs, failures)
    header = common.header(peers_report.TITLE, settings)
    results = (header, rates, models, {m: labels(m) for m in models}, runs, diffs, failures)
    if bench.merge:
        results = peers_report.merge(SAVED, header, rates, models, runs, diffs, failures)
    peers_report.write(*peers_report.load(peers_report.save(SAVED, *results)))


def _describe(model):
    b = MODELS[model]
    data = f"data {' '.join(b.data)}; " if b.data else ""
    dense = f"; sparse_as_dense {b.dense_steps[0]} steps, {b.dense_steps[1]} warm-up" if b.dense_steps else ""
    return f"{data}{' '.join(b.args)}; {b.steps[0]} steps, the first {b.steps[1]} warm-up{dense}"


if __name__ == "__main__":
    main()
