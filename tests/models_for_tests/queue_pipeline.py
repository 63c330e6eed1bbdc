"""A TF1 queue-based input pipeline as scripts of that era wrote it: slice_input_producer over 64 rows, then
tf1.train.batch of 4, filled by queue runners (the QUEUE_RUNNERS collection), and a linear regression on it."""
import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1


def build():
    """(graph, loss, train op)."""
    g = tf.Graph()
    with g.as_default():
        data = np.arange(64 * 3, dtype=np.float64).reshape(64, 3) / 100.0
        example, = tf1.train.slice_input_producer([tf.constant(data)], shuffle=False)
        batch = tf1.train.batch([example], 4)
        w = tf1.get_variable("w", [3, 1], tf.float64, tf1.constant_initializer(0.1))
        loss = tf.reduce_mean(tf.square(tf.matmul(batch, w) - 1.0))
        train = tf1.train.GradientDescentOptimizer(0.1).minimize(loss,
                                                                 global_step=tf1.train.get_or_create_global_step())
    return g, loss, train
