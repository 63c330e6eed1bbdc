"""A script's own tf1.train.Saver, given the runner as its session (the two-line change leaves `saver.save(sess,
...)` as it was). Two loopback hosts, one worker each.
  argv[1] = "save": train 3 steps, the chief saves with the global step and prints the variables;
            "restore": every worker restores the latest checkpoint (as one device does before training), and the
            chief prints the variables; then one more step is trained.
  argv[2] = the run option; argv[3] = the checkpoint directory.
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
phase, run_option, directory = sys.argv[1], sys.argv[2], sys.argv[3]


def build():
    rng = np.random.RandomState(0)
    g = tf.Graph()
    with g.as_default():
        ds = parallax.shard(tf.data.Dataset.from_tensor_slices((rng.randint(0, 30, 80), rng.randn(80, 1))))
        ids, y = tf1.data.make_one_shot_iterator(ds.batch(4)).get_next()
        emb = tf1.get_variable("emb", [30, 2], tf.float64)
        w = tf1.get_variable("w", [2, 1], tf.float64)
        loss = tf.reduce_mean(tf.square(tf.matmul(tf.nn.embedding_lookup(emb, ids), w) - y))
        step = tf1.train.get_or_create_global_step()
        train = tf1.train.AdagradOptimizer(0.1).minimize(loss, global_step=step)
        saver = tf1.train.Saver()
    return g, train, step, saver, [emb, w, step]


graph, train, step, saver, variables = build()
with parallax.get_runner(graph, "127.0.0.1: 0\n127.0.0.2: 0", parallax.Config(run_option=run_option)) as sess:
    if phase == "save":
        for _ in range(3):
            sess.run(train)
        if sess.is_chief:
            path = saver.save(sess, os.path.join(directory, "model.ckpt"), global_step=step)
            print("values", json.dumps({"path": path, "values": [np.asarray(v).tolist() for v in sess.run(variables)]}),
                  flush=True)
    else:
        saver.restore(sess, tf1.train.latest_checkpoint(directory))
        values = sess.run(variables)
        sess.run(train)
        if sess.is_chief:
            print("values", json.dumps({"values": [np.asarray(v).tolist() for v in values]}), flush=True)
