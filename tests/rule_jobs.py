"""Jobs that show a rule at work, as thread jobs in every mode, in one process started with the bind shim:
`python tests/rule_jobs.py SCENARIO OUT.json` writes {mode: what the scenario observed} (JSON).

- draw_guards (test_draw_guards.py): dropout under a training flag (`tf1.layers.dropout(h, training=flag)` draws
  inside a v2 cond, where parallax cannot split the draw); steps 1-3 leave the flag at its default (False), 4 and
  5 feed True. Observed: what the planner and the workers printed.
- epoch_end (test_batchless_writes.py): sparse Adam on an embedding read from a sharded tf.data pipeline, three
  epochs each run until OutOfRangeError and re-initialized. Observed: the chief's variables, and what was printed.
- step_check (test_step_check.py): Config(check_steps=K, check_fails=False) on jobs that are one device's and on
  jobs that are not: "exact" (the epoch graph, steps before its end), "planted" (average_sparse=False: the
  embedding's gradient summed over the workers), "same_batches" (every worker feeds the same rows), "fixed_batch" (a reshape to
  the per-worker batch size, which one device's global batch cannot take), "epoch_end" (the check spans an
  input's end; HYBRID) and "no_input" (the batch is drawn in the graph, seeded; MPI). Observed: what each job
  printed.
- check_cases (test_step_check.py): the check on user graphs that parallax makes exact, of every kind of input it
  records (fed rows, a sparse placeholder, a dataset sharded element-wise, a dataset of sparse elements, two
  losses fed by turns), with micro-steps that only accumulate, and with v1 and v2 loops. Observed: what each
  printed.
"""
import contextlib
import io
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

import numpy as np  # noqa: E402
import parallax  # noqa: E402
import tensorflow as tf  # noqa: E402

from parallax.thread_job import ServerPool, ThreadJob  # noqa: E402

tf1 = tf.compat.v1
TWO_HOSTS = "127.0.0.1: 0\n127.0.0.2: 0"
STEPS, FED_FROM = 5, 4
EXAMPLES, EPOCHS = 14, 3  # 14 examples, 4 a step: the last batch of each epoch is short, then the input ends


def _config(mode):
    return parallax.Config(run_option=mode, collective_backend="tf")


def draw_guards(mode):
    def script():
        g = tf.Graph()
        with g.as_default():
            x, y = tf1.placeholder(tf.float32, [None, 4], "x"), tf1.placeholder(tf.float32, [None, 1], "y")
            training = tf1.placeholder_with_default(False, [], "training")
            ids = tf1.placeholder(tf.int32, [None], "ids")  # an embedding: PS and HYBRID plans differ from MPI's
            emb = tf1.get_variable("emb", [10, 4], initializer=tf1.random_uniform_initializer(seed=1))
            h = tf1.layers.dense(x + tf.nn.embedding_lookup(emb, ids), 8, tf.nn.relu,
                                 kernel_initializer=tf1.random_uniform_initializer(seed=2))
            h = tf1.layers.dropout(h, 0.5, training=training, seed=3)
            loss = tf.reduce_mean(tf.square(tf1.layers.dense(h, 1) - y))
            train = tf1.train.GradientDescentOptimizer(0.1).minimize(loss, tf1.train.get_or_create_global_step())
        runner = parallax.get_runner(g, TWO_HOSTS, _config(mode))
        rng = np.random.RandomState(runner.worker_id)
        with runner:
            for step in range(1, STEPS + 1):
                feed = {x: rng.rand(2, 4), y: rng.rand(2, 1), ids: rng.randint(0, 10, 2)}
                runner.run(train, {**feed, training: True} if step >= FED_FROM else feed)
    return script, {"fed_from": FED_FROM}


def epoch_graph(batch, sharded):
    """(graph, iterator, train op, embedding): sparse Adam over a dataset of EXAMPLES examples."""
    g = tf.Graph()
    with g.as_default():
        ds = tf.data.Dataset.from_tensor_slices((np.arange(EXAMPLES) % 7, np.sin(np.arange(EXAMPLES, dtype=float))))
        iterator = tf1.data.make_initializable_iterator((parallax.shard(ds) if sharded else ds).batch(batch))
        ids, y = iterator.get_next()
        emb = tf1.get_variable("emb", [7, 3], tf.float64, tf1.random_uniform_initializer(seed=1, dtype=tf.float64))
        loss = tf.reduce_mean(tf.square(tf.reduce_sum(tf.nn.embedding_lookup(emb, ids), 1) - y))
        train = tf1.train.AdamOptimizer(0.1).minimize(loss, tf1.train.get_or_create_global_step())
    return g, iterator, train, emb


def run_epochs(run, iterator, train, steps_per_epoch=None):
    """EPOCHS epochs: each until the input ends (OutOfRangeError), or of `steps_per_epoch` steps."""
    for _ in range(EPOCHS):
        run(iterator.initializer)
        step = 0
        while steps_per_epoch is None or step < steps_per_epoch:
            try:
                run(train)
            except tf.errors.OutOfRangeError:
                break
            step += 1


def epoch_end(mode):
    def script():
        g, iterator, train, emb = epoch_graph(2, sharded=True)
        with parallax.get_runner(g, TWO_HOSTS, _config(mode)) as runner:
            run_epochs(runner.run, iterator, train)
            return runner.run(emb).tolist()
    return script, {}


def _fed_graph(fixed_batch):
    g = tf.Graph()
    with g.as_default():
        b = 2 if fixed_batch else None
        x, y = tf1.placeholder(tf.float64, [b, 3], "x"), tf1.placeholder(tf.float64, [b, 1], "y")
        ids = tf1.placeholder(tf.int32, [b], "ids")
        emb = tf1.get_variable("emb", [10, 3], tf.float64, tf1.random_uniform_initializer(seed=1, dtype=tf.float64))
        h = x + tf.nn.embedding_lookup(emb, ids)
        if fixed_batch:  # the batch size written into the graph: the inputs' shapes, and 2 examples of 3 values
            h = tf.reshape(tf.reshape(h, [6]), [2, 3])
        w = tf1.get_variable("w", [3, 1], tf.float64, tf1.random_uniform_initializer(seed=2, dtype=tf.float64))
        loss = tf.reduce_mean(tf.square(tf.matmul(h, w) - y))
        train = tf1.train.AdamOptimizer(0.05).minimize(loss, tf1.train.get_or_create_global_step())
    return g, (x, y, ids), train


def step_check(mode):
    def job(kind):
        check = parallax.Config(run_option=mode, collective_backend="tf", check_steps=3, check_fails=False,
                                average_dense=False if kind == "planted" else None,
                                average_sparse=False if kind == "planted" else None)
        if kind in ("exact", "planted", "epoch_end"):
            g, iterator, train, _ = epoch_graph(2, sharded=True)
            with parallax.get_runner(g, TWO_HOSTS, check.replace(check_steps=6 if kind == "epoch_end" else 3)) \
                    as runner:
                run_epochs(runner.run, iterator, train, steps_per_epoch=None if kind == "epoch_end" else 3)
            return None
        if kind == "no_input":
            g = tf.Graph()
            with g.as_default():  # tf_cnn_benchmarks' synthetic data: the batch is drawn in the graph, seeded
                x = tf.random.uniform([4, 3], dtype=tf.float64, seed=5)
                w = tf1.get_variable("w", [3, 1], tf.float64)
                train = tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.matmul(x, w)))
            with parallax.get_runner(g, TWO_HOSTS, check) as runner:
                for _ in range(3):
                    runner.run(train)
            return None
        g, (x, y, ids), train = _fed_graph(kind == "fixed_batch")
        with parallax.get_runner(g, TWO_HOSTS, check) as runner:
            rng = np.random.RandomState(0 if kind == "same_batches" else runner.worker_id)
            for _ in range(3):
                runner.run(train, {x: rng.rand(2, 3), y: rng.rand(2, 1), ids: rng.randint(0, 10, 2)})
        return None

    kinds = ("exact", "planted", "same_batches", "fixed_batch") + {"HYBRID": ("epoch_end",), "MPI": ("no_input",)}.get(
        mode, ())
    return {kind: (lambda kind=kind: job(kind)) for kind in kinds}, {}


CHECKED_CASES = ("dropout_sharded", "sparse_dataset", "grad_accumulation", "two_losses_own_inputs", "keras_gru",
                 "v1_loop_in_cond_lookups")


def check_cases(mode):
    from tests.equivalence import run_case

    def job(name):
        tf1.enable_control_flow_v2()  # as case_host.py: a TF1 case (v1_loop_in_cond_lookups) turns it off
        args = run_case.parser().parse_args(["--case", name, "--mode", "parallax", "--workers", "2", "--batch", "3",
                                             "--steps", "3", "--out", "unused", "--run-option", mode, "--backend",
                                             "tf", "--check-steps", "3", "--spec", TWO_HOSTS])
        run_case.train_worker(run_case.case_builder(name), args)
    return {name: (lambda name=name: job(name)) for name in CHECKED_CASES}, {}


def main():
    scenarios = {"draw_guards": draw_guards, "epoch_end": epoch_end, "step_check": step_check,
                 "check_cases": check_cases}
    scenario, out = scenarios[sys.argv[1]], sys.argv[2]
    tf1.disable_eager_execution()
    pool, results = ServerPool(), {}
    for mode in ("MPI", "PS", "HYBRID"):
        scripts, facts = scenario(mode)
        for name, script in (scripts.items() if isinstance(scripts, dict) else [(None, scripts)]):
            printed = io.StringIO()
            with contextlib.redirect_stderr(printed):  # the planner's and every worker thread's
                chief = ThreadJob(pool, TWO_HOSTS).run(script)[0]
            observed = {"stderr": printed.getvalue(), "chief": chief, **facts}
            if name is None:
                results[mode] = observed
            else:
                results.setdefault(mode, {})[name] = observed
    with open(out, "w") as f:
        json.dump(results, f)
    os._exit(0)


if __name__ == "__main__":
    main()
