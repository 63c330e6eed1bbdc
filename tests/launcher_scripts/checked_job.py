"""A job for Config.check_steps (step_check.py): a sharded tf.data pipeline of ids and features into an embedding
and a dense layer, float64, Adam. argv[1]: the run option; argv[2]: "exact", or "planted" (average_dense=False:
the dense gradients are summed over the workers, not averaged: N times one device's step); argv[3] (optional): the
collective backend. The check's settings
come from parallax-launch (--check-steps K [--check-warns]). Launched by a test, or self-launched on two loopback
hosts when run alone."""
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
rng = np.random.RandomState(0)
ids, feats, labels = rng.randint(0, 20, 64), rng.randn(64, 3), rng.randn(64, 1)
g = tf.Graph()
with g.as_default():
    ds = parallax.shard(tf.data.Dataset.from_tensor_slices((ids, feats, labels))).batch(4)
    i, x, y = tf1.data.make_one_shot_iterator(ds).get_next()
    emb = tf1.get_variable("emb", [20, 3], tf.float64, tf1.random_uniform_initializer(seed=1, dtype=tf.float64))
    h = tf.concat([tf.nn.embedding_lookup(emb, i), x], 1)
    w = tf1.get_variable("w", [6, 1], tf.float64, tf1.random_uniform_initializer(seed=2, dtype=tf.float64))
    loss = tf.reduce_mean(tf.square(tf.matmul(h, w) - y))
    train = tf1.train.AdamOptimizer(0.05).minimize(loss, tf1.train.get_or_create_global_step())
config = parallax.Config(run_option=run_option, average_dense=False if how == "planted" else None,
                         collective_backend=sys.argv[3] if len(sys.argv) > 3 else "auto")
with parallax.get_runner(g, "127.0.0.1: 0\n127.0.0.2: 0", config) as runner:
    for _ in range(4):
        runner.run(train)
    print(f"worker {runner.worker_id} done", flush=True)
