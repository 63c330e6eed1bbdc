"""Which rows of a sparse gradient one device holds once (row_keys.py): classes found from the graph, and the
merge of all workers' rows, checked against one device's gradient."""
import numpy as np
import tensorflow as tf

from parallax.analysis import row_keys

tf1 = tf.compat.v1


def _gradient_indices(build):
    g = tf.Graph()
    with g.as_default():
        loss, var = build()
        (grad, _), = tf1.train.GradientDescentOptimizer(0.1).compute_gradients(loss, var_list=[var])
    return g, grad


def _classes(build):
    g, grad = _gradient_indices(build)
    return row_keys._Tracer(g).classes(grad.indices)


def _table(shape=(10, 3)):
    return tf1.get_variable("t", shape, tf.float64, tf1.ones_initializer(), use_resource=True)


def test_ids_from_the_batch_are_rows():
    def build():
        t = _table()
        ids = tf1.placeholder(tf.int32, [None])
        return tf.reduce_sum(tf.nn.embedding_lookup(t, ids)), t
    assert _classes(build) == {row_keys.ROWS}


def test_deduplicated_ids_are_unique():
    def build():
        t = _table()
        ids = tf1.sparse_placeholder(tf.int64)
        return tf.reduce_sum(tf.nn.embedding_lookup_sparse(t, ids, None, combiner="sum")), t
    assert _classes(build) == {row_keys.UNIQUE}


def test_a_seeded_sampler_draw_is_the_same_in_every_worker():
    def build():
        t = _table((20, 3))
        labels = tf1.placeholder(tf.int64, [None, 1])
        x = tf1.placeholder(tf.float64, [None, 3])
        b = tf1.get_variable("b", [20], tf.float64, tf1.zeros_initializer(), use_resource=True)
        return tf.reduce_sum(tf.nn.sampled_softmax_loss(tf.cast(t, tf.float32), tf.cast(b, tf.float32), labels,
                                                        tf.cast(x, tf.float32), 4, 20, seed=3)), t
    assert _classes(build) == {row_keys.ROWS, row_keys.SAME}


def test_merge_sums_the_rows_one_device_holds_once():
    # Worker 0 and 1 each hold: two rows of their own examples (ROWS), then the shared draw [7, 9] (SAME). One
    # device holds four example rows and one row per drawn id, summed over both workers.
    raw = np.array([[1.], [2.], [10.], [20.], [3.], [4.], [30.], [40.]])
    rows, same = row_keys.ROWS, row_keys.SAME
    with tf.Graph().as_default(), tf1.Session() as sess:
        merged = row_keys.merge_rows(tf.constant(raw), tf.constant([5, 7, 7, 9, 5, 1, 7, 9], tf.int64),
                                     tf.constant([rows, rows, 0 * 4 + same, 1 * 4 + same] * 2, tf.int64))
        v, i = sess.run(merged)
    assert sorted(zip(i.tolist(), v[:, 0].tolist())) == [(1, 4.), (5, 1.), (5, 3.), (7, 2.), (7, 40.), (9, 60.)]
    assert np.sum(v ** 2) != np.sum(raw ** 2)  # what a global-norm clip tells apart
