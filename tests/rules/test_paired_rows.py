"""paired_rows.py: values that pair the batch's examples (in-batch negatives) are computed on every worker's rows,
and the gradients cross between those and the worker's own rows; what it cannot rewrite stays listed."""
import numpy as np
import pytest
import tensorflow as tf

import parallax
from parallax.rules import batch_draws, paired_rows
from parallax.plan import plan_json
from parallax.plan.planning import plan_job

tf1 = tf.compat.v1


def _in_batch(extra=None, concat_views=False):
    """Users and items through a dense layer each, logits u @ v^T, labels at each example's position."""
    g = tf.Graph()
    with g.as_default():
        tf1.set_random_seed(0)  # the same initial values in every session
        users = tf1.placeholder(tf.float32, [None, 3], "users")
        items = tf1.placeholder(tf.float32, [None, 3], "items")
        u = tf1.layers.dense(users, 4, name="user_tower")
        v = tf1.layers.dense(items, 4, name="item_tower")
        if concat_views:  # NT-Xent's two views stacked: 2b rows, each paired with the other view's
            z = tf.concat([u, v], axis=0)
            logits = tf.matmul(z, z, transpose_b=True)
        else:
            logits = tf.matmul(u, v, transpose_b=True)
        logits = extra(logits) if extra else logits
        labels = tf.range(tf.shape(logits)[0])
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        tf1.train.GradientDescentOptimizer(0.1).minimize(loss, name="train")
    return g, loss


def _plan(g, workers=2):
    return plan_job(g, parallax.analyze(g), parallax.ResourceSpec.parse(f"localhost slots={workers}"),
                    parallax.Config(run_option="MPI"))


def test_in_batch_negatives_are_rewritten_and_not_listed():
    plan = _plan(_in_batch()[0])
    assert plan.uncombinable_statistics == ()
    kinds = {}
    for kind, name, readers in plan.paired_rows:
        kinds.setdefault(kind, []).append((name, readers))
    assert sorted(name for name, _ in kinds[paired_rows.GATHERED]) == ["item_tower/BiasAdd:0", "user_tower/BiasAdd:0"]
    # the matmul and its gradient ops read every worker's rows
    assert all("MatMul" in readers and len(readers) == 2 for _, readers in kinds[paired_rows.GATHERED])
    (loss_rows, readers), = kinds[paired_rows.OWN]
    assert loss_rows.startswith("SparseSoftmaxCrossEntropyWithLogits") and "Mean" in readers
    assert len(kinds[paired_rows.PADDED]) == 1 and len(kinds[paired_rows.SUMMED]) == 2
    assert plan_json.loads(plan_json.dumps(plan)).paired_rows == plan.paired_rows
    assert any("every worker's rows" in line for line in plan.batch_summaries())


def test_pairs_of_two_views_stacked_are_computed_on_every_workers_rows_and_read_whole():
    """NT-Xent's two views stacked along the batch (2b rows: a share of the batch, not its examples' rows): the
    region gathers both towers' rows, and the loss's mean reads its per-row losses whole, with no OWN entry; the
    loss reads the batch through that share alone. Before, no region was found and every variable was listed
    (user_graphs_batchwise.py's nt_xent_two_views is exact now)."""
    plan = _plan(_in_batch(concat_views=True)[0])
    assert plan.uncombinable_statistics == ()
    kinds = sorted({kind for kind, _, _ in plan.paired_rows})
    assert kinds == [paired_rows.GATHERED, paired_rows.SUMMED], plan.paired_rows
    assert sorted(name for kind, name, _ in plan.paired_rows if kind == paired_rows.GATHERED) == [
        "item_tower/BiasAdd:0", "user_tower/BiasAdd:0"]


def test_a_share_of_the_batch_beside_another_read_of_it_is_left_to_the_last_check():
    """The same loss plus the towers' mean output: the loss reads the batch otherwise too, where each worker's
    whole-batch term would not add up to one device's; no region, and the check lists the variables."""
    g, loss = _in_batch(concat_views=True)
    with g.as_default():
        tower = g.get_tensor_by_name("user_tower/BiasAdd:0")
        tf1.train.GradientDescentOptimizer(0.1).minimize(loss + tf.reduce_sum(tower), name="train_too")
    plan = _plan(g)
    assert plan.paired_rows == ()
    assert "user_tower/kernel" in [entry.split(" ")[0] for entry in plan.uncombinable_statistics]


def test_a_random_draw_inside_the_region_is_listed():
    plan = _plan(_in_batch(extra=lambda logits: tf.nn.dropout(logits, rate=0.1, seed=3))[0])
    assert plan.paired_rows == ()
    # the mask has the batch on two axes: the samples cannot split it as a worker draws it
    assert len(plan.uncombinable_statistics) == 1
    assert "pairs the batch's examples" in plan.uncombinable_statistics[0]


class _OneWorker:
    """Collectives of a job of one worker: what a gather or a sum over one worker is."""

    def allgather(self, tensor, name):
        return tf.identity(tensor, name=name)

    def allreduce_sum(self, tensor, name):
        return tf.identity(tensor, name=name)


def _rewritten_and_original(feed_users, feed_items):
    g, loss = _in_batch()
    entries = _plan(g).paired_rows
    with g.as_default():
        grads = [op.inputs[2] for op in g.get_operations() if op.type == "ResourceApplyGradientDescent"]
        init = tf1.global_variables_initializer()
    feed = {"users:0": feed_users, "items:0": feed_items}
    with tf1.Session(graph=g) as s:
        s.run(init)
        before = s.run([loss] + grads, feed)
    paired_rows.rewrite(g, _OneWorker(), entries, 0, batch_draws.BLOCKS)
    assert g.get_operation_by_name("MatMul").inputs[0].op.name.startswith(paired_rows.SCOPE)
    with tf1.Session(graph=g) as s:  # a session does not see inputs changed after its first run
        s.run(init)
        after = s.run([loss] + grads, feed)
    return before, after


def test_with_one_worker_the_rewrite_computes_the_graphs_own_loss_and_gradients():
    rng = np.random.RandomState(0)
    before, after = _rewritten_and_original(rng.randn(5, 3), rng.randn(5, 3))
    assert len(before) == 5
    for x, y in zip(before, after):
        np.testing.assert_allclose(x, y, rtol=1e-6)


def test_an_input_of_another_size_than_the_batch_stops_the_step_with_what_to_do():
    """A pool of candidates fed alike to every worker, not marked: its rows are not the batch's."""
    rng = np.random.RandomState(1)
    what = "mark its input with parallax.shared_input; if it is a second per-worker input, paired with this one, " \
           "it needs as many rows per worker"
    with pytest.raises(tf.errors.InvalidArgumentError, match=what):
        _rewritten_and_original(rng.randn(5, 3), rng.randn(7, 3))


@pytest.mark.parametrize("layout, worker, order, mine", [
    (batch_draws.BLOCKS, 0, [0, 1, 2, 3, 4], [0, 1, 2]),
    (batch_draws.BLOCKS, 1, [0, 1, 2, 3, 4], [3, 4]),
    # one device's example p is worker p mod 2's example p div 2
    (batch_draws.INTERLEAVED, 0, [0, 3, 1, 4, 2], [0, 2, 4]),
    (batch_draws.INTERLEAVED, 1, [0, 3, 1, 4, 2], [1, 3]),
])
def test_positions_of_one_devices_examples_with_uneven_workers(layout, worker, order, mine):
    class Gathered:
        def allgather(self, tensor, name):
            return tf.constant([3, 2], tf.int64)  # worker 0 has 3 examples, worker 1 has 2
    with tf.Graph().as_default() as g:
        rows = tf.zeros([3 if worker == 0 else 2, 4])
        found = paired_rows._positions(Gathered(), rows, worker, layout)
        with tf1.Session(graph=g) as s:
            got_order, got_mine, total = s.run(found)
    assert got_order.tolist() == order and got_mine.tolist() == mine and total == 5


def test_a_boolean_frontier_travels_as_integers():
    """A per-example flag read where the examples mix (a softmax over the batch, kept where valid): TF's gather
    takes no bool."""
    from parallax.collectives.tf_ops import TFCollectives
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, 3], "x")
        valid = tf1.placeholder(tf.bool, [None], "valid")
        score = tf1.layers.dense(x, 1, name="score")[:, 0]
        weights = tf.where(valid, tf.nn.softmax(score), tf.zeros_like(score))
        tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(weights * tf.square(score)), name="train")
    entries = _plan(g).paired_rows
    assert (paired_rows.GATHERED, "valid:0") in {(kind, name) for kind, name, _ in entries}
    paired_rows.rewrite(g, TFCollectives(2), entries, 0, batch_draws.BLOCKS)
    gathers = [op for op in g.get_operations() if op.type == "CollectiveGatherV2"]
    assert gathers and all(op.inputs[0].dtype != tf.bool for op in gathers)


def test_a_loss_of_every_pair_reduced_whole_reads_its_examples_rows_of_the_pairs():
    """RankNet: the pairs' losses (the batch on both axes) averaged whole; each worker takes the pairs of its own
    examples with the whole batch's (its rows on the first axis)."""
    g = tf.Graph()
    with g.as_default():
        x, y = tf1.placeholder(tf.float32, [None, 3], "x"), tf1.placeholder(tf.float32, [None], "y")
        score = tf1.layers.dense(x, 1, name="score")[:, 0]
        order = tf.sign(y[:, None] - y[None, :])
        pairs = tf.nn.softplus(-order * (score[:, None] - score[None, :]))
        tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(pairs), name="train")
    plan = _plan(g)
    assert plan.uncombinable_statistics == ()
    own = sorted(name for kind, name, _ in plan.paired_rows if kind == paired_rows.OWN)
    assert len(own) == 2 and all(g.get_tensor_by_name(name).shape.rank == 2 for name in own)


def test_a_gradient_leaving_through_a_gather_by_a_sort_of_the_batch_is_summed_as_the_frontiers_rows():
    """The batch sorted in the graph (argsort, then gather): the region's gradient of the risks leaves tf.gradients'
    gather gradient as IndexedSlices, rows in the sort's order with the sort as indices. It is summed where its
    indices make it the frontier's rows (a segment sum), a float of the batch's rows; before, the indices and dense
    shape were summed over workers as if they were gradients too, and the step failed (indices[1] = 1 is not in
    [0, 1))."""
    g = tf.Graph()
    with g.as_default():
        x, times = tf1.placeholder(tf.float64, [None, 3], "x"), tf1.placeholder(tf.float64, [None], "times")
        risk = tf.squeeze(tf1.layers.dense(x, 1, use_bias=False, name="risk"), 1)
        order = tf.argsort(times, direction="DESCENDING")
        r = tf.gather(risk, order)
        loss = -tf.reduce_sum(r - tf.math.cumulative_logsumexp(r))
        tf1.train.GradientDescentOptimizer(0.1).minimize(loss, name="train")
    plan = _plan(g)
    summed = [g.get_tensor_by_name(name) for kind, name, _ in plan.paired_rows if kind == paired_rows.SUMMED]
    assert summed and all(t.dtype.is_floating for t in summed), plan.paired_rows
    assert [t.op.type for t in summed] == ["UnsortedSegmentSum"]
    assert plan.uncombinable_statistics == ()
