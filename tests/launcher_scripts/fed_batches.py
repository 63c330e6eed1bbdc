"""A script fed by feed_dict, two loopback hosts, one worker each, batch 4.
  argv[1] = the run option; argv[2] = "shares" (worker i feeds rows [i*b, (i+1)*b) of the global batch, as the
  docs say) or "same" (every worker feeds the global batch's first b rows: a script that did not share them out).
The steps run as a TF1 tutorial runs them: `train.run(feed_dict=...)` inside `with get_runner(...)`, the runner
being the default session there.
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

import numpy as np  # noqa: E402
import parallax  # noqa: E402
import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1
tf1.disable_eager_execution()
run_option, how = sys.argv[1], sys.argv[2]
B = 4
rng = np.random.RandomState(0)
data_x, data_y = rng.randn(64, 3), rng.randn(64, 1)
g = tf.Graph()
with g.as_default():
    x, y = tf1.placeholder(tf.float64, [None, 3], "x"), tf1.placeholder(tf.float64, [None, 1], "y")
    w = tf1.get_variable("w", [3, 1], tf.float64)
    train = tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.square(tf.matmul(x, w) - y)))
with parallax.get_runner(g, "127.0.0.1: 0\n127.0.0.2: 0", parallax.Config(run_option=run_option)) as runner:
    for k in range(3):
        first = k * runner.num_workers * B + (runner.worker_id * B if how == "shares" else 0)
        train.run(feed_dict={x: data_x[first:first + B], y: data_y[first:first + B]})
    print(f"worker {runner.worker_id} w {w.eval().ravel().tolist()}", flush=True)
    print(f"worker {runner.worker_id} done", flush=True)
