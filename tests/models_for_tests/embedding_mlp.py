"""A small model with a sparse variable (embedding) and dense layers, used across tests."""
import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1

OPTIMIZERS = {
    "GradientDescent": lambda: tf1.train.GradientDescentOptimizer(0.1),
    "Momentum": lambda: tf1.train.MomentumOptimizer(0.1, momentum=0.9),
    "Adam": lambda: tf1.train.AdamOptimizer(0.01),
    "Adagrad": lambda: tf1.train.AdagradOptimizer(0.1),
    "RMSProp": lambda: tf1.train.RMSPropOptimizer(0.01, momentum=0.5),
    "Ftrl": lambda: tf1.train.FtrlOptimizer(0.1),
    "Adadelta": lambda: tf1.train.AdadeltaOptimizer(1.0),
}
VOCAB, DIM, HIDDEN = 40, 6, 5


def build(optimizer="Adam", use_resource=True, clip=None, ema=False, dtype=tf.float32, partitions=None):
    """Returns (graph, handles): ids, labels, loss, train_op, optimizer, raw_grads_and_vars."""
    g = tf.Graph()
    with g.as_default():
        tf1.set_random_seed(7)
        ids = tf1.placeholder(tf.int32, [None], name="ids")
        labels = tf1.placeholder(dtype, [None], name="labels")
        partitioner = tf1.fixed_size_partitioner(partitions) if partitions else None
        with tf1.variable_scope("model", use_resource=use_resource, dtype=dtype):
            emb = tf1.get_variable("embedding", [VOCAB, DIM], partitioner=partitioner)
            h = tf.nn.relu(tf1.layers.dense(tf.nn.embedding_lookup(emb, ids), HIDDEN, name="hidden"))
            pred = tf.squeeze(tf1.layers.dense(h, 1, name="out"), 1)
        loss = tf.reduce_mean(tf.square(pred - labels), name="loss")
        step = tf1.train.get_or_create_global_step()
        opt = OPTIMIZERS[optimizer]()
        grads_and_vars = opt.compute_gradients(loss)
        raw_grads_and_vars = list(grads_and_vars)
        if clip is not None:
            grads, variables = zip(*grads_and_vars)
            grads, _ = tf.clip_by_global_norm(grads, clip)
            grads_and_vars = list(zip(grads, variables))
        train_op = opt.apply_gradients(grads_and_vars, global_step=step)
        if ema:
            averager = tf1.train.ExponentialMovingAverage(0.9)
            with tf.control_dependencies([train_op]):
                train_op = averager.apply(tf1.trainable_variables())
    return g, {"ids": ids, "labels": labels, "loss": loss, "train_op": train_op, "optimizer": opt,
               "raw_grads_and_vars": raw_grads_and_vars}


def batches(steps, batch_size, seed=0, dtype=np.float32):
    rng = np.random.RandomState(seed)
    for _ in range(steps):
        ids = rng.randint(0, VOCAB, size=batch_size).astype(np.int32)
        yield ids, (np.sin(ids) + 0.1 * rng.randn(batch_size)).astype(dtype)
