"""The job parallax-calibrate runs on the user's hosts (parallax-launch ... -- python -m parallax.tools.calibration_job MODE
BACKEND): a synthetic graph whose steps move known bytes by each method, timed in every worker. Each worker prints
one line `parallax-calibration: {json}` (it reaches the launcher's output from any host) with, per probe, the
median wall and CPU seconds of its steps (CPU: this process, TensorFlow's threads and Horovod's included), and
what the fit needs to know about its host.

Probes (each loss has its own input, so that no two share a fused collective):
  compute      the small loss alone: a step with nothing to aggregate
  dense_small  a 1 KB dense variable's step        dense_large  a DENSE_MB dense variable's step
  dense_many   MANY_VARIABLES 1 KB dense variables' step: what one more variable (one more message) costs, apart
               from what every step costs once
  sparse_few   FEW rows of an embedding             sparse_many  MANY rows of it
  read_small, read_large (chief, PS mode, on a server on another host): fetch the variables' values
  read_burst   (the same) fetch a BURST_MB variable after the link has idled long enough to move it twice: a
               shaper that lets a burst through after idling (a token bucket) makes it faster than read_large's
               rate says
Each probe's CPU is measured twice: this process's (CPU time), and the whole machine's (/proc/stat, less the rate
at which it is busy while the job sleeps), which also counts the servers and every other worker there. The workers
run each synchronous probe in lockstep, so the machine's CPU per step is what every process of the job spends.
"""
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import parallax  # noqa: E402
from parallax.plan import calibration# noqa: E402
from parallax.runtime.step_measure import boot_id, machine_busy  # noqa: E402

tf1 = tf.compat.v1
DENSE_MB = 8
ROWS, WIDTH = 50_000, 64
FEW, MANY = 64, 4096
MANY_VARIABLES = 16
WARMUP, STEPS = 3, 20
IDLE_SECONDS = 1.0
BURST_MB, BURST_STEPS, MAX_BURST_IDLE = 1, 10, 1.0


def build():
    g = tf.Graph()
    with g.as_default():
        xs = tf1.placeholder(tf.float32, [None], "x_small")
        xl = tf1.placeholder(tf.float32, [None], "x_large")
        ids = tf1.placeholder(tf.int32, [None], "ids")
        small = tf1.get_variable("small", [256], initializer=tf1.zeros_initializer(), use_resource=True)
        large = tf1.get_variable("large", [DENSE_MB * 2 ** 18], initializer=tf1.zeros_initializer(),
                                 use_resource=True)
        smalls = [tf1.get_variable(f"small_{i}", [256], initializer=tf1.zeros_initializer(), use_resource=True)
                  for i in range(MANY_VARIABLES)]
        # read only (read_burst); trained, by an op no probe runs, so that the plan puts it on a server
        burst = tf1.get_variable("burst", [BURST_MB * 2 ** 18], initializer=tf1.zeros_initializer(),
                                 use_resource=True)
        xb = tf1.placeholder(tf.float32, [None], "x_burst")
        xm = tf1.placeholder(tf.float32, [None], "x_many")
        emb = tf1.get_variable("embedding", [ROWS, WIDTH], initializer=tf1.zeros_initializer(), use_resource=True)
        loss_small = tf.reduce_sum(small * tf.reduce_mean(xs), name="loss_small")
        loss_large = tf.reduce_sum(large * tf.reduce_mean(xl), name="loss_large")
        loss_sparse = tf.reduce_sum(tf.nn.embedding_lookup(emb, ids), name="loss_sparse")
        loss_many = tf.add_n([tf.reduce_sum(v * tf.reduce_mean(xm)) for v in smalls], name="loss_many")
        sgd = tf1.train.GradientDescentOptimizer(0.0)
        sgd.minimize(tf.reduce_sum(burst * tf.reduce_mean(xb)), name="burst_unrun")
        probes = {"compute": (loss_small, xs), "dense_small": (sgd.minimize(loss_small), xs),
                  "dense_large": (sgd.minimize(loss_large), xl), "dense_many": (sgd.minimize(loss_many), xm),
                  "sparse": (sgd.minimize(loss_sparse), ids)}
    return g, probes, {"small": small, "large": large, "burst": burst}


def timed(run, steps=STEPS, idle_rate=0.0):
    for _ in range(WARMUP):
        run()
    walls, cpus = [], []
    busy, start = machine_busy(), time.perf_counter()
    for _ in range(steps):
        wall, cpu = time.perf_counter(), time.process_time()
        run()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    elapsed, after = time.perf_counter() - start, machine_busy()
    # the fastest step too: the link's latency is the time of an uncontended read, not of a typical one
    result = {"wall": float(np.median(walls)), "min_wall": float(min(walls)), "cpu": float(np.median(cpus))}
    if busy is not None and after is not None:
        result["machine_cpu"] = max(after - busy - idle_rate * elapsed, 0.0) / steps
    return result


def timed_after_idle(run, idle_seconds, steps=BURST_STEPS):
    """The median and the least wall time of `run`, each time after `idle_seconds` of sleep."""
    run()
    walls = []
    for _ in range(steps):
        time.sleep(idle_seconds)
        start = time.perf_counter()
        run()
        walls.append(time.perf_counter() - start)
    return {"wall": float(np.median(walls)), "min_wall": float(min(walls)), "idle": idle_seconds}


def idle_rate():
    """CPU seconds per second this machine spends while the job's workers sleep (other processes' load)."""
    busy, start = machine_busy(), time.perf_counter()
    time.sleep(IDLE_SECONDS)
    after = machine_busy()
    return 0.0 if busy is None or after is None else (after - busy) / (time.perf_counter() - start)


MARKER = "parallax-calibration: "
VARIABLES = ("small", "large", "burst", *(f"small_{i}" for i in range(MANY_VARIABLES)), "embedding")


def main(mode, backend):
    tf1.disable_eager_execution()
    g, probes, variables = build()
    config = parallax.Config(run_option=mode, collective_backend=backend)
    runner = parallax.get_runner(g, "localhost:1", config)  # launched: the launcher's spec wins
    rng = np.random.RandomState(runner.worker_id)
    result = {"worker": runner.worker_id, "workers": runner.num_workers, "mode": mode, "backend": runner.plan.backend,
              "cores": os.cpu_count(), "boot_id": boot_id(), "host": runner.plan.worker_hosts[runner.worker_id],
              "bytes": {"dense_small": 256 * 4, "dense_large": DENSE_MB * 2 ** 20, "row": WIDTH * 4,
                        "burst": BURST_MB * 2 ** 20},
              "variables": {"dense_many": MANY_VARIABLES},
              "rows": {"sparse_few": FEW, "sparse_many": MANY}, "embedding_rows": ROWS, "probes": {}}
    ones = np.ones(8, np.float32)
    runner.run(probes["dense_small"][0], {probes["dense_small"][1]: ones})  # a synchronous step: all start together
    rate = result["idle_rate"] = idle_rate()
    for name in ("compute", "dense_small", "dense_large", "dense_many"):
        fetch, x = probes[name]
        result["probes"][name] = timed(lambda: runner.run(fetch, {x: ones}), idle_rate=rate)
    fetch, ids = probes["sparse"]
    for name, count in (("sparse_few", FEW), ("sparse_many", MANY)):
        result["probes"][name] = timed(lambda: runner.run(fetch, {ids: rng.randint(0, ROWS, count)}), idle_rate=rate)
    result["servers"] = {name: list(runner.plan.variable(name).ps_tasks) for name in VARIABLES}
    result["local_aggregation"] = {name: runner.plan.variable(name).local_aggregation for name in VARIABLES}
    result["workers_per_host"] = [runner.plan.worker_hosts.count(h) for h in range(runner.plan.num_hosts)]
    if mode == "PS" and runner.is_chief:
        remote = {name: v for name, v in variables.items()  # on a server on another host
                  if any(t != 0 for t in runner.plan.variable(v.op.name).ps_tasks)}
        probes = result["probes"]
        for name in ("small", "large"):
            if name in remote:
                probes[f"read_{name}"] = timed(lambda: runner.run(remote[name]))
        if {"small", "large", "burst"} <= set(remote):
            bandwidth, _ = calibration.link_of([result])  # the rate the fit will take, from the reads above
            idle = min(2 * BURST_MB * 2 ** 20 / bandwidth, MAX_BURST_IDLE)
            probes["read_burst"] = timed_after_idle(lambda: runner.run(remote["burst"]), idle)
    print(MARKER + json.dumps(result), flush=True)
    runner.close()


if __name__ == "__main__":
    main(*sys.argv[1:3])
