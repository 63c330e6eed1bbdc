"""What a step fetches beside its train op, compared with one device's step by step (Case.fetches_compared), not
only the variables at the end.

A fetched ref variable is its buffer on one device, which the step's in-place writes change before the run returns
(so is its `read` snapshot, an Identity that aliases it): `_, step = sess.run([train_op, global_step])` gives the
step after the increment. In PS mode the fetch came from the server, copied when sent, before the chief's write:
each worker got the step before it (issue 57, item 17)."""
import numpy as np
import tensorflow as tf

from tests.equivalence.cases import F64, Case, _init, _rows
from tests.equivalence.user_graphs_more import VOCAB

tf1 = tf.compat.v1


def fetched_ref_state_with_train_op(n, b, steps, graph_batch, lr_scale=1.0):
    """A TF1 script over ref variables that fetches the global step, a dense weight, its snapshot and a part of a
    partitioned embedding with the train op, every step, as a training loop that logs them does."""
    rng = np.random.RandomState(480)
    ids = rng.randint(0, VOCAB, size=(n * b * steps, 2)).astype(np.int32)
    y = np.cos(ids).sum(axis=1, keepdims=True)
    g = tf.Graph()
    with g.as_default():
        idp, yp = tf1.placeholder(tf.int32, [None, 2], "ids"), tf1.placeholder(F64, [None, 1], "y")
        emb = tf1.get_variable("embedding", [VOCAB, 3], F64, initializer=_init(481), use_resource=False,
                               partitioner=tf1.fixed_size_partitioner(2))
        w = tf1.get_variable("w", [3, 1], F64, initializer=_init(482), use_resource=False)
        loss = tf.reduce_mean(tf.square(tf.matmul(tf.reduce_sum(tf.nn.embedding_lookup(emb, idp), 1), w) - yp))
        step = tf1.get_variable("global_step", [], tf.int64, tf1.zeros_initializer(), trainable=False,
                                use_resource=False, collections=[tf1.GraphKeys.GLOBAL_VARIABLES,
                                                                 tf1.GraphKeys.GLOBAL_STEP])
        train = tf1.train.MomentumOptimizer(0.05 * lr_scale, 0.9).minimize(loss, step, name="train")
        logged = {"step": step, "w": w, "w_read": w.value(), "embedding_part_0": list(emb)[0]}
    return Case(g, train, _rows((ids, y), (idp, yp)), step_fetch=lambda k: [train, logged], fetches_compared=True)


USER_GRAPHS_FETCHES = {f.__name__: f for f in (fetched_ref_state_with_train_op,)}
