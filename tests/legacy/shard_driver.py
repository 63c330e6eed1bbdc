"""The original Parallax's shard API: shard.create_num_shards_and_shard_id() and shard.shard(ds), on 2 workers."""
import sys

import numpy as np
import tensorflow as tf

import parallax
from parallax.capture import shard

tf1 = tf.compat.v1
tf1.disable_eager_execution()

graph = tf.Graph()
with graph.as_default():
    num_shards, shard_id = shard.create_num_shards_and_shard_id()
    ids = tf1.data.make_one_shot_iterator(tf.data.Dataset.range(8).shard(num_shards, shard_id).batch(4)).get_next()
    rows = tf1.data.make_one_shot_iterator(parallax.shard.shard(tf.data.Dataset.range(8)).batch(4)).get_next()
    w = tf1.get_variable("w", [1], initializer=tf1.ones_initializer())
    loss = tf.reduce_sum(w * tf.cast(tf.reduce_sum(ids) + tf.reduce_sum(rows), tf.float32))
    train_op = tf1.train.GradientDescentOptimizer(0.1).minimize(loss)

sess, num_workers, worker_id, _ = parallax.parallel_run(graph, sys.argv[1])
got = sess.run({"n": num_shards, "i": shard_id, "ids": ids, "rows": rows, "train": train_op})
assert np.array_equal(got["ids"][0], got["rows"][0]), got
print("shard %d of %d: %s" % (got["i"][0], got["n"][0], got["ids"][0].tolist()), flush=True)
