"""An AUTO job whose embedding is split by parallax.get_partitioner(1): the calibration in $CALIBRATION makes AUTO
choose another number of shards, so the script runs again with it. The chief writes the shards its graph has to
$OUT."""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import parallax  # noqa: E402
import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1
tf1.disable_eager_execution()
g = tf.Graph()
with g.as_default():
    ids = tf1.placeholder(tf.int32, [8], "ids")
    with tf1.variable_scope("model", partitioner=parallax.get_partitioner(1)):
        emb = tf1.get_variable("emb", [64, 4], use_resource=True)
    loss = tf.reduce_mean(tf.nn.embedding_lookup(emb, ids))
    train = tf1.train.GradientDescentOptimizer(0.1).minimize(loss)
config = parallax.Config(run_option="AUTO", calibration=os.environ["CALIBRATION"], methods={"model/emb": "PS"})
with parallax.get_runner(g, "127.0.0.1: 0\n127.0.0.2: 0", config) as runner:
    for _ in range(2):
        runner.run(train, {ids: np.arange(8, dtype=np.int32)})
    if runner.is_chief:
        with open(os.environ["OUT"], "w") as f:
            f.write(str(len(runner.analysis.variable("model/emb").parts)))
