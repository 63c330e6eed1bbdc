"""Does each peer compute what one device computes with the global batch? The recommendation model in float64
with small tables, K steps on localhost: one device with batch N*b, then parallax (MPI, PS, HYBRID) and each peer
with N workers of b. Every variable of the one-device checkpoint (weights, tables, Adagrad's accumulators) is
compared with the same variable in the run's chief checkpoint. Writes benchmarks/results/peers_exactness.md.

    python benchmarks/peers/exactness.py [--steps 20] [--workers 2] [--batch-size 32]
"""
import argparse
import functools
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import common  # noqa: E402

RECSYS = os.path.join(ROOT, "models", "recsys")
MODEL = ["--max-table-rows", "200", "--embedding-size", "4", "--dtype", "float64", "--log-every", "1"]
TIMEOUT = 600


def _env():
    return dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")


def run_command(command, label):
    started = time.time()
    result = subprocess.run(command, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=TIMEOUT)
    if result.returncode != 0:
        raise RuntimeError(f"{label} failed ({result.returncode}):\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}")
    print(f"{label}: {time.time() - started:.0f} s", flush=True)


def _free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _run_ps_job(command, label, workers):
    """`command` (recsys_ps.py and its options) as 2 servers and `workers` workers on localhost, one process each.
    The job is done when the chief is; then the servers (which serve until killed, as TF's guide has them) and any
    worker still waiting on the sync queue are ended by their recorded process groups."""
    hosts = [f"127.0.0.1:{p}" for p in _free_ports(2 + workers)]
    cluster = ["--ps-hosts", ",".join(hosts[:2]), "--worker-hosts", ",".join(hosts[2:])]
    started, procs = time.time(), []
    try:
        for job, count in (("ps", 2), ("worker", workers)):
            for i in range(count):
                procs.append(subprocess.Popen([*command, *cluster, "--job-name", job, "--task-index", str(i)],
                                              cwd=ROOT, env=_env(), stdout=subprocess.PIPE,
                                              stderr=subprocess.STDOUT, text=True, start_new_session=True))
        chief = procs[2]
        out, _ = chief.communicate(timeout=TIMEOUT)
        if chief.returncode != 0:
            raise RuntimeError(f"{label}: the chief failed ({chief.returncode}):\n{out[-3000:]}")
        print(f"{label}: {time.time() - started:.0f} s", flush=True)
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def checkpoint_variables(checkpoint_dir):
    import tensorflow as tf
    latest = tf.train.latest_checkpoint(checkpoint_dir)
    if latest is None:
        raise RuntimeError(f"no checkpoint in {checkpoint_dir}")
    return {name: tf.train.load_variable(latest, name) for name, _ in tf.train.list_variables(latest)}


def compare(reference, candidate):
    """(max abs diff over the reference's variables, the variable where it is largest, global step)."""
    missing = sorted(set(reference) - set(candidate))
    if missing:
        raise RuntimeError(f"variables missing from the run's checkpoint: {missing}")
    diffs = {k: float(np.max(np.abs(np.asarray(candidate[k], np.float64) - reference[k]))) if np.size(reference[k])
             else 0.0 for k in reference if k != "global_step"}
    worst = max(diffs, key=diffs.get)
    return diffs[worst], worst, int(candidate["global_step"])


def runs(data, args):
    """(label, command, launch) for every run, one device's first: `launch(command, label)` runs it. The TF 1
    parameter-server job's command is one task's, without its cluster options."""
    n, b = args.workers, args.batch_size
    model = ["--data-dir", data, "--steps", str(args.steps), *MODEL]
    horovodrun = [os.path.join(os.path.dirname(sys.executable), "horovodrun"), "-np", str(n), "-H", f"localhost:{n}",
                  sys.executable, os.path.join(HERE, "recsys_horovod.py")]
    yield "one device", [sys.executable, os.path.join(RECSYS, "train.py"), *model, "--batch-size", str(n * b)], \
        run_command
    for mode in ("MPI", "PS", "HYBRID"):
        yield f"parallax {mode}", [sys.executable, os.path.join(RECSYS, "train_distributed.py"), *model,
                                   "--batch-size", str(b), "--resource-spec", f"localhost:{n}",
                                   "--run-option", mode], run_command
    yield "Horovod", [*horovodrun, *model, "--batch-size", str(b)], run_command
    yield "Horovod sparse_as_dense", [*horovodrun, *model, "--batch-size", str(b), "--sparse-as-dense"], \
        run_command
    yield "TF1 PS + SyncReplicasOptimizer", [sys.executable, os.path.join(HERE, "recsys_ps.py"), *model,
                                             "--batch-size", str(b)], functools.partial(_run_ps_job, workers=n)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32, help="per worker")
    args = p.parse_args(argv)
    lines = common.header("Peers: exactness against one device (recommendation model, float64)",
                          {"workers": args.workers, "batch per worker": args.batch_size, "steps": args.steps,
                           "tables": "max 200 rows, 4 columns, the four largest in 2 shards"})
    with tempfile.TemporaryDirectory(prefix="peers-exactness-") as work:
        data = os.path.join(work, "data")
        run_command([sys.executable, os.path.join(RECSYS, "make_data.py"), "--out", data, "--train-rows", "5000",
              "--heldout-rows", "100", "--train-files", "1"], "data")
        rows, reference = [], None
        for k, (label, command, launch) in enumerate(runs(data, args)):
            ckpt = os.path.join(work, f"run{k}")
            launch([*command, "--checkpoint-dir", ckpt], label)
            values = checkpoint_variables(ckpt)
            if reference is None:
                reference = values
                continue
            diff, worst, step = compare(reference, values)
            rows.append(f"| {label} | {step} | {diff:.3g} | `{worst}` |")
            print(rows[-1], flush=True)
    lines += ["| run | global step | max abs diff, every variable | where it is largest |", "|---|---|---|---|", *rows]
    common.write("peers_exactness.md", lines)


if __name__ == "__main__":
    main()
