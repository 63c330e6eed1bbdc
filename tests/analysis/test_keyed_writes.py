"""Rows of the batch written into state by key (parallax/analysis/keyed_writes.py): a keyed write reads every worker's rows;
a write by position, a write of gradients and a graph without either are left alone. The equivalence suite runs
one such graph in every mode (frequency_scaled_rows)."""
import tensorflow as tf

import parallax
from parallax.analysis import keyed_writes
from parallax.plan.planning import plan_job

tf1 = tf.compat.v1
TWO_HOSTS = parallax.ResourceSpec.parse("127.0.0.1: 0\n127.0.0.2: 0")


def _plan(build, mode="MPI"):
    g = tf.Graph()
    with g.as_default():
        build()
    return plan_job(g, parallax.analyze(g), TWO_HOSTS, parallax.Config(run_option=mode))


def _regression(ids):
    emb = tf1.get_variable("emb", [10, 2], tf.float64)
    y = tf1.placeholder(tf.float64, [None], "y")
    loss = tf.reduce_mean(tf.square(tf.reduce_sum(tf.nn.embedding_lookup(emb, ids), [1, 2]) - y))
    return emb, loss


def _ids():
    return tf1.placeholder(tf.int32, [None, 3], "ids")


def _rows(plan):
    return sorted((name, readers) for name, law, readers in plan.batch_statistics if law == keyed_writes.ROWS)


def test_a_count_by_id_reads_every_workers_ids_and_ones_in_every_mode():
    def build():
        ids = _ids()
        _, loss = _regression(ids)
        counts = tf1.get_variable("counts", [10], tf.float64, initializer=tf1.zeros_initializer(), trainable=False)
        flat = tf.reshape(ids, [-1], name="flat")
        tf1.scatter_add(counts, flat, tf.ones_like(flat, tf.float64, name="ones"), name="count")
        tf1.train.GradientDescentOptimizer(0.1).minimize(loss)
    for mode in ("MPI", "PS", "HYBRID"):
        plan = _plan(build, mode)
        assert _rows(plan) == [("flat:0", ("count",)), ("ones:0", ("count",))], mode
        assert not plan.uncombinable_statistics


def test_a_write_by_position_and_a_hand_written_sparse_update_are_left_alone():
    def build():
        ids = _ids()
        emb, loss = _regression(ids)
        last = tf.Variable(tf.zeros([0], tf.int32), shape=tf.TensorShape([None]), trainable=False, name="last")
        last.assign(ids[:, 0])  # each worker's own examples' ids, as a stateful RNN keeps its rows' state
        grad, = tf.gradients(loss, [emb])
        emb.scatter_sub(tf.IndexedSlices(0.1 * grad.values, grad.indices, grad.dense_shape))
    plan = _plan(build)
    assert _rows(plan) == [] and not plan.uncombinable_statistics


def test_rows_on_another_axis_are_listed_not_combined():
    g = tf.Graph()
    with g.as_default():
        table = tf1.get_variable("table", [10, 4], tf.float64, trainable=False)
        ids = tf1.placeholder(tf.int32, [None], "ids")
        rows = tf1.placeholder(tf.float64, [4, None], "rows_t")
        write = tf1.scatter_update(table, ids, tf.transpose(rows), name="write")
    axes = {ids.name: 0}
    follows = {ids.name, write.op.inputs[2].name}
    combined, listed = keyed_writes.rows_written([write.op], lambda t: t.name in follows,
                                                 lambda t: axes.get(t.name, 1), lambda t: False)
    assert combined == [] and listed == [f"transpose:0 ({keyed_writes.NOT_FIRST_AXIS})"]
    combined, listed = keyed_writes.rows_written([write.op], lambda t: t.name in follows, lambda t: 0,
                                                 lambda t: False)
    assert [name for name, _, _ in combined] == ["ids:0", "transpose:0"] and listed == []
    combined, _ = keyed_writes.rows_written([write.op], lambda t: t.name in follows, lambda t: 0,
                                            lambda t: t.name == "transpose:0")  # the rows are a gradient's
    assert combined == []


class _TwoWorkersGathered:
    """Stands for the collectives of two workers whose rows are [0, 1, 2] and [10, 11]."""

    def allgather(self, tensor, name):
        return tf.constant([0, 1, 2, 10, 11], tf.int64) if name == "rows" else tf.constant([3, 2], tf.int64)


def test_rows_are_put_in_one_devices_order_of_an_element_wise_sharded_input():
    """parallax.shard gives worker i every N-th example from the i-th: one device's batch interleaves the workers'
    rows (the last one short at the end of the data); fed rows are blocks in worker order."""
    from parallax.rules import batch_draws
    from parallax.rules.statistics_combined import over_workers
    with tf.Graph().as_default(), tf1.Session() as session:
        own = tf.constant([0, 1, 2], tf.int64)
        interleaved = over_workers(_TwoWorkersGathered(), own, keyed_writes.ROWS, batch_draws.INTERLEAVED)
        blocks = over_workers(_TwoWorkersGathered(), own, keyed_writes.ROWS, batch_draws.BLOCKS)
        assert session.run(interleaved).tolist() == [0, 10, 1, 11, 2]
        assert session.run(blocks).tolist() == [0, 1, 2, 10, 11]


def test_the_layout_is_told_without_random_draws():
    from parallax.rules import batch_draws
    g = tf.Graph()
    with g.as_default():
        ds = parallax.shard(tf.data.Dataset.range(8)).batch(2)
        tf1.data.make_one_shot_iterator(ds).get_next()
    assert batch_draws.draws_following_the_batch(g).layout == batch_draws.INTERLEAVED
