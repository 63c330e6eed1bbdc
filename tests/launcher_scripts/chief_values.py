"""Every worker's own state written from a value only the chief computes: a local variable (`last_norm`, each
worker's) assigned the global norm of the aggregated gradients, which includes the server-held embedding's rows.
Two loopback hosts, one worker each, batch 4, float64. Each worker prints the norms its own variable held after
each step; the chief also prints one device's (batch 8, the same script).
  argv[1] = the run option.
"""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

import numpy as np  # noqa: E402
import parallax  # noqa: E402
import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1
tf1.disable_eager_execution()
B, N, STEPS = 4, 2, 4


def build(batch, sharded):
    rng = np.random.RandomState(0)
    g = tf.Graph()
    with g.as_default():
        ds = tf.data.Dataset.from_tensor_slices((rng.randint(0, 30, 64), rng.randn(64, 1)))
        ids, y = tf1.data.make_one_shot_iterator((parallax.shard(ds) if sharded else ds).batch(batch)).get_next()
        init = tf1.random_normal_initializer(seed=3)
        emb = tf1.get_variable("emb", [30, 2], tf.float64, init)
        w = tf1.get_variable("w", [2, 1], tf.float64, init)
        loss = tf.reduce_mean(tf.square(tf.matmul(tf.nn.embedding_lookup(emb, ids), w) - y))
        opt = tf1.train.GradientDescentOptimizer(0.5)
        grads, variables = zip(*opt.compute_gradients(loss))
        clipped, norm = tf.clip_by_global_norm(grads, 0.05)
        last_norm = tf1.get_local_variable("last_norm", [], tf.float64, tf1.zeros_initializer())
        with tf.control_dependencies([last_norm.assign(norm)]):
            train = opt.apply_gradients(zip(clipped, variables))
    return g, train, last_norm, [emb, w]


def norms(sess, train, last_norm):
    out = []
    for _ in range(STEPS):
        sess.run(train)
        out.append(float(sess.run(last_norm)))
    return out


graph, train, last_norm, variables = build(B, True)
with parallax.get_runner(graph, "127.0.0.1: 0\n127.0.0.2: 0", parallax.Config(run_option=sys.argv[1])) as runner:
    got = norms(runner, train, last_norm)
    print(f"worker {runner.worker_id} norms {json.dumps(got)}", flush=True)
    values = runner.run(variables)
    if runner.is_chief:
        g, train1, last_norm1, single = build(N * B, False)
        with tf1.Session(graph=g) as sess:
            sess.run([tf1.global_variables_initializer(), tf1.local_variables_initializer()])
            print(f"one device norms {json.dumps(norms(sess, train1, last_norm1))}", flush=True)
            print(f"max diff {max(float(np.max(np.abs(a - b))) for a, b in zip(values, sess.run(single))):.3g}",
                  flush=True)
