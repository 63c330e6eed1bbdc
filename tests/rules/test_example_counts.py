"""Each worker's count of examples per step (parallax/rules/example_counts.py): the first dimension of each input, a
sparse input's dense shape, and a counter of all the examples an input yielded."""
import numpy as np
import tensorflow as tf

from parallax.rules import example_counts

tf1 = tf.compat.v1


def _graph():
    g = tf.Graph()
    with g.as_default():
        ds = tf.data.Dataset.from_tensor_slices((np.arange(7.0, dtype=np.float32), np.arange(7))).batch(3)
        x, ids = tf1.data.make_one_shot_iterator(ds).get_next()
        sparse = tf1.sparse_placeholder(tf.float32, [None, 5], name="sparse")
        dense = tf1.placeholder(tf.float32, [None, 2], name="dense")
        loss = tf.reduce_sum(x) + tf.sparse.reduce_sum(sparse) + tf.reduce_sum(dense) + \
            tf.cast(tf.reduce_sum(ids), tf.float32)
    return g, loss, sparse, dense


def test_each_input_is_counted_once_by_its_examples():
    g, _, sparse, dense = _graph()
    counts = example_counts.add_counts(g, example_counts.counted_inputs(g))
    by_input = {name: (count, total) for name, count, total in counts}
    assert set(by_input) == {"IteratorGetNext", sparse.dense_shape.op.name, "dense"}  # one per op, x and ids alike
    assert example_counts.is_counted(g, counts)
    feeds = {sparse: tf1.SparseTensorValue([[0, 1], [3, 4]], [1.0, 2.0], [4, 5]), dense: np.zeros((6, 2))}
    with tf1.Session(graph=g) as s:
        s.run(tf1.local_variables_initializer())
        names = [by_input[k][0] for k in ("IteratorGetNext", sparse.dense_shape.op.name, "dense")]
        assert s.run(names, feeds) == [3, 4, 6]  # a batch of 3, 4 sparse rows (not its 2 entries), 6 rows
        assert s.run(names[0]) == 3
        assert s.run(names[0]) == 1  # the short last batch
        assert s.run(by_input["IteratorGetNext"][1]) == 7  # the counter: every example the input yielded


def test_a_step_reads_the_counts_of_the_inputs_it_runs():
    g, loss, _, dense = _graph()
    counts = example_counts.add_counts(g, example_counts.counted_inputs(g))
    with g.as_default():
        only_dense = tf.reduce_sum(dense)
    from parallax.core import graph_utils
    read = example_counts.read_in(counts, graph_utils.ancestors([only_dense.op]))
    assert [c for c, _ in read] == [count for name, count, _ in counts if name == "dense"]
    assert len(example_counts.read_in(counts, graph_utils.ancestors([loss.op]))) == 3


def test_inputs_are_taken_from_the_source_graph():
    source, _, _, _ = _graph()
    rewritten, _, _, _ = _graph()
    with rewritten.as_default():
        queue = tf1.FIFOQueue(2, [tf.float32], shapes=[[3]], name="rewrite_queue")
        queue.dequeue(name="take")  # reads like an input; counting it would take from the queue
    counts = example_counts.add_counts(rewritten, example_counts.counted_inputs(source))
    assert "take" not in {name for name, _, _ in counts} and len(counts) == 3


def test_what_only_reads_like_an_input_is_not_counted():
    """A v1 while loop's gradient keeps stacks (pushed and popped in the loop) that take a handle as an iterator
    does, but what they give is computed from the step's own tensors: only the fed batch is counted."""
    tf1.disable_control_flow_v2()
    try:
        g = tf.Graph()
        with g.as_default():
            x = tf1.placeholder(tf.float32, [None, 4], name="x")
            w = tf1.get_variable("w", [4, 4], tf.float32)
            _, h = tf1.while_loop(lambda i, h: i < 2, lambda i, h: (i + 1, tf.tanh(tf.matmul(h, w))), [0, x])
            tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(h))
    finally:
        tf1.enable_control_flow_v2()
    assert any(op.type == "StackPopV2" for op in g.get_operations())
    assert [name for name, _, _ in example_counts.add_counts(g, example_counts.counted_inputs(g))] == ["x"]
