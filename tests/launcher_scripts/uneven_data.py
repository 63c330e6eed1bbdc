"""A job that trains until its input ends (OutOfRangeError), on M examples, 2 workers of batch 5 each.
  argv[1] = M: 42 (21 per worker: both end in the same step, after a short last batch of 1 each),
               43 (22 and 21: the last batches differ, 2 against 1), 41 (21 and 20: worker 1 ends a step early)
  argv[2] = the run option; the spec is two loopback hosts, one worker each.
  argv[3] = epochs: the iterator is initialized again for each (an epoch's end is not the job's)
  argv[4] = (optional) seconds the chief waits before each training step: the other worker then ends its epoch
            first, and starts the next while the chief's last step of the epoch has yet to run
The chief then prints "max diff <x>": its variables against one device that runs the same epochs with batch 10.
"""
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

import numpy as np  # noqa: E402
import parallax  # noqa: E402
import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1
tf1.disable_eager_execution()
M, run_option, epochs = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
chief_delay = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
B, N = 5, 2


def build(batch, sharded):
    rng = np.random.RandomState(7)
    ids, x, y = rng.randint(0, 30, size=M), rng.randn(M, 3), rng.randn(M, 1)
    g = tf.Graph()
    with g.as_default():
        ds = tf.data.Dataset.from_tensor_slices((ids, x, y))
        ds = (parallax.shard(ds) if sharded else ds).batch(batch)
        it = tf1.data.make_initializable_iterator(ds)
        i, xs, ys = it.get_next()
        emb = tf1.get_variable("emb", [30, 3], tf.float64, tf1.random_normal_initializer(seed=1))
        w = tf1.get_variable("w", [3, 1], tf.float64, tf1.random_normal_initializer(seed=2))
        pred = tf.matmul(tf.nn.embedding_lookup(emb, i) * xs, w)
        loss = tf.reduce_mean(tf.square(pred - ys))
        train = tf1.train.GradientDescentOptimizer(0.1).minimize(loss)
    return g, it.initializer, train, [emb, w]


def epochs_of(run, initializer, train):
    steps = 0
    for _ in range(epochs):
        run(initializer)
        try:
            while True:
                run(train)
                steps += 1
        except tf.errors.OutOfRangeError:
            pass
    return steps


graph, initializer, train, variables = build(B, True)
config = parallax.Config(run_option=run_option, stall_warning_s=15, stall_timeout_s=45)
with parallax.get_runner(graph, "127.0.0.1: 0\n127.0.0.2: 0", config) as runner:
    def run(fetch):
        if fetch is train and runner.is_chief:
            time.sleep(chief_delay)
        return runner.run(fetch)

    steps = epochs_of(run, initializer, train)
    print(f"worker {runner.worker_id} ran {steps} steps", flush=True)
    if runner.is_chief:
        got = runner.run(variables)
        g, init, single_train, single_vars = build(N * B, False)
        with tf1.Session(graph=g) as s:
            with g.as_default():
                s.run(tf1.global_variables_initializer())
            epochs_of(s.run, init, single_train)
            want = s.run(single_vars)
        print(f"max diff {max(float(np.abs(a - b).max()) for a, b in zip(got, want)):.3g}", flush=True)
