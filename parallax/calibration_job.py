"""The job parallax-calibrate runs on the user's hosts (parallax-launch ... -- python -m parallax.calibration_job MODE
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
"""
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import parallax  # noqa: E402

tf1 = tf.compat.v1
DENSE_MB = 8
ROWS, WIDTH = 50_000, 64
FEW, MANY = 64, 4096
MANY_VARIABLES = 16
WARMUP, STEPS = 3, 10


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
        xm = tf1.placeholder(tf.float32, [None], "x_many")
        emb = tf1.get_variable("embedding", [ROWS, WIDTH], initializer=tf1.zeros_initializer(), use_resource=True)
        loss_small = tf.reduce_sum(small * tf.reduce_mean(xs), name="loss_small")
        loss_large = tf.reduce_sum(large * tf.reduce_mean(xl), name="loss_large")
        loss_sparse = tf.reduce_sum(tf.nn.embedding_lookup(emb, ids), name="loss_sparse")
        loss_many = tf.add_n([tf.reduce_sum(v * tf.reduce_mean(xm)) for v in smalls], name="loss_many")
        sgd = tf1.train.GradientDescentOptimizer(0.0)
        probes = {"compute": (loss_small, xs), "dense_small": (sgd.minimize(loss_small), xs),
                  "dense_large": (sgd.minimize(loss_large), xl), "dense_many": (sgd.minimize(loss_many), xm),
                  "sparse": (sgd.minimize(loss_sparse), ids)}
    return g, probes, {"small": small, "large": large}


def timed(run, steps=STEPS):
    for _ in range(WARMUP):
        run()
    walls, cpus = [], []
    for _ in range(steps):
        wall, cpu = time.perf_counter(), time.process_time()
        run()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return {"wall": float(np.median(walls)), "cpu": float(np.median(cpus))}


MARKER = "parallax-calibration: "


def main(mode, backend):
    tf1.disable_eager_execution()
    g, probes, variables = build()
    config = parallax.Config(run_option=mode, collective_backend=backend)
    runner = parallax.get_runner(g, "localhost:1", config)  # launched: the launcher's spec wins
    rng = np.random.RandomState(runner.worker_id)
    result = {"worker": runner.worker_id, "workers": runner.num_workers, "mode": mode, "backend": runner.plan.backend,
              "cores": os.cpu_count(), "boot_id": _boot_id(), "host": runner.plan.worker_hosts[runner.worker_id],
              "bytes": {"dense_small": 256 * 4, "dense_large": DENSE_MB * 2 ** 20, "row": WIDTH * 4},
              "variables": {"dense_many": MANY_VARIABLES},
              "rows": {"sparse_few": FEW, "sparse_many": MANY}, "embedding_rows": ROWS, "probes": {}}
    ones = np.ones(8, np.float32)
    for name in ("compute", "dense_small", "dense_large", "dense_many"):
        fetch, x = probes[name]
        result["probes"][name] = timed(lambda: runner.run(fetch, {x: ones}))
    fetch, ids = probes["sparse"]
    for name, count in (("sparse_few", FEW), ("sparse_many", MANY)):
        result["probes"][name] = timed(lambda: runner.run(fetch, {ids: rng.randint(0, ROWS, count)}))
    if mode == "PS" and runner.is_chief:
        for name, v in variables.items():
            if any(t != 0 for t in runner.plan.variable(v.op.name).ps_tasks):  # a server on another host
                result["probes"][f"read_{name}"] = timed(lambda: runner.run(v))
    print(MARKER + json.dumps(result), flush=True)
    runner.close()


def _boot_id():
    """Hosts with the same boot id share one kernel, so their cores (network namespaces of the test bed)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return os.uname().nodename


if __name__ == "__main__":
    main(*sys.argv[1:3])
