"""The equivalence cases: small models whose distributed run must match the single-process run.

Case functions take (N, b, steps, graph_batch, lr_scale). Data depends on (N, b, steps) only; `graph_batch` is the
batch a tf.data pipeline batches to (b for a worker, N*b for the single process). Graphs use seeded initializers (so that a single process and
rank 0 start from the same values), and makes its data from (num_workers N, b, steps) alone. The k-th global batch
is rows [k*N*b, (k+1)*N*b); worker i feeds rows [k*N*b + i*b, k*N*b + (i+1)*b) of it, so the union of the
workers' batches is exactly the single process's batch of N*b. Case `linear` reads its data through tf.data and
`parallax.shard` instead (element-wise shard, then batch), which has the same union property.
"""
import dataclasses
from typing import Any, Callable, Dict, Optional

import numpy as np
import tensorflow as tf

import parallax

tf1 = tf.compat.v1
F64 = tf.float64


@dataclasses.dataclass
class Case:
    graph: tf.Graph
    train_op: tf.Operation
    feeds: Optional[Callable[[int, int, int], Dict]]  # (step, first row, rows) -> feed_dict; None: tf.data
    float32: bool = False
    step_fetch: Optional[Callable[[int], Any]] = None  # what run k fetches; None: train_op every time
    # Config's average_dense/average_sparse: None (the default) decides from the loss (a sum: summed); True or False
    # sets them.
    average: Optional[bool] = None
    methods: Optional[Dict[str, str]] = None  # Config.methods for the distributed run (a mixed plan)
    # What each step fetches is compared too: every worker's fetched values (an op's None left out) must be one
    # device's, step by step (run_case.py saves them beside the variables as "fetched:<step>:<leaf>").
    fetches_compared: bool = False

    def fetch(self, k):
        return self.train_op if self.step_fetch is None else self.step_fetch(k)


def _init(seed, dtype=F64, scale=0.3):
    return tf1.random_uniform_initializer(-scale, scale, seed=seed, dtype=dtype)


def _rows(arrays, placeholders):
    def feeds(step, first, rows):
        return {p: a[first:first + rows] for p, a in zip(placeholders, arrays)}
    return feeds


def _dense(x, units, name, seed, activation=None, dtype=F64):
    return tf1.layers.dense(x, units, activation=activation, name=name, kernel_initializer=_init(seed, dtype),
                            bias_initializer=_init(seed + 100, dtype, 0.1))


# ---- case 1 -------------------------------------------------------------------------------------------------
def linear_data(n, b, steps):
    rng = np.random.RandomState(1)
    x = rng.randn(n * b * steps, 5)
    return x, x @ rng.randn(5, 1) + 0.5 + 0.01 * rng.randn(n * b * steps, 1)


def linear(n, b, steps, graph_batch, lr_scale=1.0):
    x, y = linear_data(n, b, steps)
    g = tf.Graph()
    with g.as_default():
        ds = parallax.shard(tf.data.Dataset.from_tensor_slices((x, y))).batch(graph_batch)
        xb, yb = tf1.data.make_one_shot_iterator(ds).get_next()
        pred = _dense(xb, 1, "linear", seed=1)
        loss = tf.reduce_mean(tf.square(pred - yb))
        train = tf1.train.GradientDescentOptimizer(0.1 * lr_scale).minimize(
            loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, None)


# ---- case 2 -------------------------------------------------------------------------------------------------
MLP_OPTIMIZERS = {
    "momentum": lambda: tf1.train.MomentumOptimizer(0.05, 0.9),
    "adam": lambda: tf1.train.AdamOptimizer(0.01),
    "adagrad": lambda: tf1.train.AdagradOptimizer(0.1),
    "rmsprop": lambda: tf1.train.RMSPropOptimizer(0.01, momentum=0.5),
    "ftrl": lambda: tf1.train.FtrlOptimizer(0.1, l1_regularization_strength=0.001),
}


def mlp_optimizers(n, b, steps, graph_batch, lr_scale=1.0):
    """Five independent MLPs in one graph, one per optimizer, trained by one grouped op."""
    rng = np.random.RandomState(2)
    x = rng.randn(n * b * steps, 4)
    y = np.tanh(x @ rng.randn(4, 1))
    g = tf.Graph()
    with g.as_default():
        xp, yp = tf1.placeholder(F64, [None, 4], "x"), tf1.placeholder(F64, [None, 1], "y")
        step = tf1.train.get_or_create_global_step()
        trains = []
        for i, (name, make_opt) in enumerate(sorted(MLP_OPTIMIZERS.items())):
            with tf1.variable_scope(name):
                h = _dense(xp, 8, "hidden", seed=10 + i, activation=tf.tanh)
                loss = tf.reduce_mean(tf.square(_dense(h, 1, "out", seed=20 + i) - yp))
                trains.append(make_opt().minimize(loss))
        with tf.control_dependencies(trains):
            train = tf1.assign_add(step, 1).op
    return Case(g, train, _rows((x, y), (xp, yp)))


# ---- cases 3 and 7 ------------------------------------------------------------------------------------------
VOCAB = 30


def _embedding_model(n, b, steps, optimizer, clip, partitioner=None):
    rng = np.random.RandomState(3)
    ids = rng.randint(0, VOCAB, size=(n * b * steps, 3)).astype(np.int32)
    y = np.sin(ids).sum(axis=1, keepdims=True)
    g = tf.Graph()
    with g.as_default():
        idp, yp = tf1.placeholder(tf.int32, [None, 3], "ids"), tf1.placeholder(F64, [None, 1], "y")
        emb = tf1.get_variable("embedding", [VOCAB, 6], F64, initializer=_init(3), use_resource=True,
                               partitioner=partitioner)
        h = _dense(tf.reduce_sum(tf.nn.embedding_lookup(emb, idp), axis=1), 8, "hidden", 4, tf.nn.relu)
        loss = tf.reduce_mean(tf.square(_dense(h, 1, "out", 5) - yp))
        grads, variables = zip(*optimizer.compute_gradients(loss))
        if clip:
            grads, _ = tf.clip_by_global_norm(grads, clip)
        train = optimizer.apply_gradients(zip(grads, variables), global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((ids, y), (idp, yp)))


def embedding_clip_adam(n, b, steps, graph_batch, lr_scale=1.0):
    # A clip norm small enough that clipping is active at every step, so aggregation-before-clip matters.
    return _embedding_model(n, b, steps, tf1.train.AdamOptimizer(0.01 * lr_scale), clip=0.05)


def embedding_clip_adam_partitioned(n, b, steps, graph_batch, lr_scale=1.0):
    """Case 3 with the embedding split by parallax.get_partitioner(2): over both servers in a 2-host PS job."""
    return _embedding_model(n, b, steps, tf1.train.AdamOptimizer(0.01 * lr_scale), clip=0.05,
                            partitioner=parallax.get_partitioner(2))


def summed_sgd(n, b, steps, graph_batch, lr_scale=1.0):
    return _embedding_model(n, b, steps, tf1.train.GradientDescentOptimizer(0.05 * lr_scale), clip=None)


# ---- case 4 -------------------------------------------------------------------------------------------------
def ema(n, b, steps, graph_batch, lr_scale=1.0):
    rng = np.random.RandomState(4)
    x = rng.randn(n * b * steps, 4)
    y = np.cos(x).sum(axis=1, keepdims=True)
    g = tf.Graph()
    with g.as_default():
        xp, yp = tf1.placeholder(F64, [None, 4], "x"), tf1.placeholder(F64, [None, 1], "y")
        h = _dense(xp, 8, "hidden", 6, tf.tanh)
        loss = tf.reduce_mean(tf.square(_dense(h, 1, "out", 7) - yp))
        opt_op = tf1.train.MomentumOptimizer(0.05, 0.9).minimize(loss, global_step=tf1.train.get_or_create_global_step())
        averager = tf1.train.ExponentialMovingAverage(0.9)
        with tf.control_dependencies([opt_op]):
            train = averager.apply(tf1.trainable_variables())
    return Case(g, train, _rows((x, y), (xp, yp)))


# ---- case 5 -------------------------------------------------------------------------------------------------
def batch_norm(n, b, steps, graph_batch, lr_scale=1.0):
    """Batch norm normalizes with each worker's own batch statistics (see docs/modes.md). The data makes every
    worker's batch a permutation of the same rows, so per-worker and global statistics agree, and what is tested
    is that the UPDATE_OPS moving statistics and the training step survive the rewrite exactly."""
    rng = np.random.RandomState(5)
    blocks = []
    for _ in range(steps):
        base = rng.randn(b, 4) * 2.0 + 1.0
        blocks += [base[rng.permutation(b)] for _ in range(n)]
    x = np.concatenate(blocks)
    y = np.sin(x).sum(axis=1, keepdims=True)
    g = tf.Graph()
    with g.as_default():
        xp, yp = tf1.placeholder(F64, [None, 4], "x"), tf1.placeholder(F64, [None, 1], "y")
        h = _dense(xp, 8, "hidden", 8)
        h = tf.nn.relu(tf1.layers.batch_normalization(h, training=True, momentum=0.9, name="bn"))
        loss = tf.reduce_mean(tf.square(_dense(h, 1, "out", 9) - yp))
        with tf.control_dependencies(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)):
            train = tf1.train.GradientDescentOptimizer(0.05).minimize(
                loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((x, y), (xp, yp)))


# ---- case 6 -------------------------------------------------------------------------------------------------
LM_VOCAB, LM_LEN = 40, 6


def lstm_lm(n, b, steps, graph_batch, lr_scale=1.0):
    """An LSTM language model (dynamic_rnn: a while_loop) in float32, with an embedding and a softmax."""
    rng = np.random.RandomState(6)
    tokens = rng.randint(0, LM_VOCAB, size=(n * b * steps, LM_LEN + 1)).astype(np.int32)
    g = tf.Graph()
    with g.as_default():
        tp = tf1.placeholder(tf.int32, [None, LM_LEN + 1], "tokens")
        emb = tf1.get_variable("embedding", [LM_VOCAB, 8], tf.float32, initializer=_init(11, tf.float32),
                               use_resource=True)
        cell = tf1.nn.rnn_cell.LSTMCell(16, initializer=_init(12, tf.float32), name="lstm")
        outputs, _ = tf1.nn.dynamic_rnn(cell, tf.nn.embedding_lookup(emb, tp[:, :-1]), dtype=tf.float32)
        logits = tf1.layers.dense(outputs, LM_VOCAB, name="softmax", kernel_initializer=_init(13, tf.float32))
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tp[:, 1:], logits=logits))
        train = tf1.train.AdamOptimizer(0.01).minimize(loss, global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((tokens,), (tp,)), float32=True)


# ---- TF's sync_replicas_optimizer_test, in our terms ----------------------------------------------------------
def sync_replicas(n, b, steps, graph_batch, lr_scale=1.0):
    """2 workers, one row each: worker i's gradients are 0.1+0.2i (v0), 0.9+0.2i (v1) and 0.1+0.2i on row 1 of
    the sparse variable; SGD with learning rate 2.0 (the values of TF's test2Workers)."""
    rows = np.array([[0.1 + 0.2 * i, 0.9 + 0.2 * i, 0.1 + 0.2 * i] for i in range(n)] * steps)
    g = tf.Graph()
    with g.as_default():
        xp = tf1.placeholder(F64, [None, 3], "x")
        v0 = tf1.get_variable("v0", [], F64, initializer=tf1.constant_initializer(0.0), use_resource=True)
        v1 = tf1.get_variable("v1", [], F64, initializer=tf1.constant_initializer(1.0), use_resource=True)
        sparse = tf1.get_variable("v_sparse", [2, 1], F64, initializer=tf1.constant_initializer([[3.0], [4.0]]),
                                  use_resource=True)
        per_row = v0 * xp[:, 0] + v1 * xp[:, 1] + tf.gather(sparse, [1])[0, 0] * xp[:, 2]
        train = tf1.train.GradientDescentOptimizer(2.0).minimize(
            tf.reduce_mean(per_row), global_step=tf1.train.get_or_create_global_step())
    return Case(g, train, _rows((rows,), (xp,)))


CASES = {
    "sync_replicas": sync_replicas,
    "embedding_clip_adam_partitioned": embedding_clip_adam_partitioned,
    "linear": linear,
    "mlp_optimizers": mlp_optimizers,
    "embedding_clip_adam": embedding_clip_adam,
    "ema": ema,
    "batch_norm": batch_norm,
    "lstm_lm": lstm_lm,
    "summed_sgd": summed_sgd,
}
