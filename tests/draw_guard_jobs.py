"""Jobs of a graph with dropout under a training flag (`tf1.layers.dropout(h, training=flag)` draws inside a v2
cond, where parallax cannot split the draw), run as thread jobs in every mode in one process started with the bind
shim: `python tests/draw_guard_jobs.py OUT.json` writes {mode: {"stderr": what the planner and the workers printed
there, "fed_from": the first step fed training=True}} for test_draw_guards.py."""
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
STEPS, FED_FROM = 5, 4  # steps 1-3 leave the flag at its default (False); 4 and 5 feed True


def _script(mode):
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
        runner = parallax.get_runner(g, TWO_HOSTS, parallax.Config(run_option=mode, collective_backend="tf"))
        rng = np.random.RandomState(runner.worker_id)
        with runner:
            for step in range(1, STEPS + 1):
                feed = {x: rng.rand(2, 4), y: rng.rand(2, 1), ids: rng.randint(0, 10, 2)}
                runner.run(train, {**feed, training: True} if step >= FED_FROM else feed)
    return script


def main():
    tf1.disable_eager_execution()
    pool, results = ServerPool(), {}
    for mode in ("MPI", "PS", "HYBRID"):
        printed = io.StringIO()
        with contextlib.redirect_stderr(printed):  # the planner's and every worker thread's
            ThreadJob(pool, TWO_HOSTS).run(_script(mode))
        results[mode] = {"stderr": printed.getvalue(), "fed_from": FED_FROM}
    with open(sys.argv[1], "w") as f:
        json.dump(results, f)
    os._exit(0)


if __name__ == "__main__":
    main()
