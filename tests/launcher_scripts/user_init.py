"""A script that runs its own initializers through the runner, as TF1 scripts run them through their session:
`sess.run(tf1.global_variables_initializer())` first, then `w.load(values, sess)` (pretrained values), and
mid-training a group of its local variables' initializer (a metric's reset) and its iterator's. Two loopback hosts, one worker each, batch 4.
  argv[1] = the run option; argv[2] = "seeded" (the chief prints "max diff <x>" against one device with batch 8
  that runs the same script), "unseeded" (each worker prints its variables: the replicas must agree) or "again"
  (the script then initializes the global variables a second time, which is refused).
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
run_option, variant = sys.argv[1], sys.argv[2]
seeded = variant != "unseeded"
B, N = 4, 2


def build(batch, sharded):
    rng = np.random.RandomState(0)
    g = tf.Graph()
    with g.as_default():
        ds = tf.data.Dataset.from_tensor_slices((rng.randint(0, 30, 64), rng.randn(64, 1)))
        it = tf1.data.make_initializable_iterator((parallax.shard(ds) if sharded else ds).batch(batch))
        ids, y = it.get_next()
        init = tf1.random_normal_initializer(seed=3) if seeded else None
        emb = tf1.get_variable("emb", [30, 2], tf.float64, init)
        w = tf1.get_variable("w", [2, 1], tf.float64, init)
        loss = tf.reduce_mean(tf.square(tf.matmul(tf.nn.embedding_lookup(emb, ids), w) - y))
        steps = tf1.get_local_variable("steps_since_reset", [], tf.int64, tf1.zeros_initializer())
        train = tf.group(tf1.train.AdamOptimizer(0.1).minimize(loss), steps.assign_add(1))
    return g, it, train, steps, [emb, w]


def script(sess, g, it, train, steps):
    """What the user wrote: initialize, load w, train 3 steps, reset a metric and the input, train 2."""
    with g.as_default():
        sess.run(tf1.global_variables_initializer())
        g.get_collection(tf1.GraphKeys.GLOBAL_VARIABLES, "w")[0].load([[0.5], [-0.25]], sess)
    sess.run(it.initializer)
    for _ in range(3):
        sess.run(train)
    with g.as_default():
        reset = tf.group(tf1.local_variables_initializer(), it.initializer)
    sess.run(reset)
    for _ in range(2):
        sess.run(train)
    if variant == "again":
        with g.as_default():
            sess.run(tf1.global_variables_initializer())
    return int(sess.run(steps))


graph, it, train, steps, variables = build(B, True)
with parallax.get_runner(graph, "127.0.0.1: 0\n127.0.0.2: 0", parallax.Config(run_option=run_option)) as runner:
    since_reset = script(runner, graph, it, train, steps)
    got = runner.run(variables)
    print(f"worker {runner.worker_id} steps since reset {since_reset} values "
          f"{json.dumps([np.round(v, 9).tolist() for v in got])}", flush=True)
    if runner.is_chief and seeded:
        g, it1, train1, steps1, single = build(N * B, False)
        with tf1.Session(graph=g) as sess:
            with g.as_default():
                sess.run(tf1.local_variables_initializer())
            script(sess, g, it1, train1, steps1)
            expected = sess.run(single)
        print(f"max diff {max(float(np.max(np.abs(a - b))) for a, b in zip(got, expected)):.3g}", flush=True)
