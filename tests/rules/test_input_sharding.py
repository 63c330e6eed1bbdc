"""A dataset or a queue-based pipeline that nothing in the graph shards gives every worker the same batches: the
plan lists its inputs, the launcher warns, explain says so (input_sharding.py); a sharded dataset, a pipeline that
shards itself by the shard id, one that runs Python, a queue the script fills itself, or fed inputs are not
listed."""
import pytest
import tensorflow as tf

import parallax
from parallax.rules.input_sharding import READS_NO_INPUT, REPEATED_SHARDS, UNSHARDED_INPUTS

tf1 = tf.compat.v1


def _graph(pipeline):
    g = tf.Graph()
    with g.as_default():
        x = tf1.data.make_one_shot_iterator(pipeline(tf.data.Dataset.range(64)).batch(4)).get_next()
        w = tf1.get_variable("w", [1], tf.float64)
        tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.square(tf.cast(x, tf.float64) * w)))
    return g


def _by_shard_id(ds):
    workers, index = parallax.shard.create_num_shards_and_shard_id()
    return ds.filter(lambda x: tf.equal(x % workers, index))


@pytest.mark.parametrize("pipeline, listed", [
    (lambda ds: ds, True),
    (lambda ds: ds.map(lambda x: x + 1).shuffle(8, seed=1), True),
    (parallax.shard, False),
    (lambda ds: ds.shard(2, 0), False),
    (_by_shard_id, False),
    (lambda ds: ds.map(lambda x: tf.numpy_function(lambda v: v, [x], tf.int64)), False),  # Python: not judged
])
def test_an_unsharded_dataset_is_listed(pipeline, listed):
    explanation = parallax.explain(_graph(pipeline), "localhost:2", print_table=False)
    assert bool(explanation.plan.noted(UNSHARDED_INPUTS)) == listed
    assert ("nothing in the graph shards" in explanation.premise) == listed
    assert parallax.explain(_graph(pipeline), "localhost:1", print_table=False).plan.notes == ()


def test_the_planner_warns_of_it(tmp_path):
    from tests.planner_role import plan_in_planner_role
    plan, stderr = plan_in_planner_role(tmp_path, [
        "x = tf1.data.make_one_shot_iterator(tf.data.Dataset.range(64).batch(4)).get_next()",
        "w = tf1.get_variable('w', [1], tf.float64)",
        "tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.square(tf.cast(x, tf.float64) * w)))"])
    assert plan.noted(UNSHARDED_INPUTS) and "warning: the workers read" in stderr and "parallax.shard(ds)" in stderr


def _queue_graph(runner_fills):
    """tf1.train.batch over slice_input_producer (queue runners fill both queues), or a queue the script fills
    from a placeholder of its own."""
    g = tf.Graph()
    with g.as_default():
        if runner_fills:
            example, = tf1.train.slice_input_producer([tf.range(64, dtype=tf.int64)], shuffle=False)
            x = tf1.train.batch([example], 4)
        else:
            queue = tf1.FIFOQueue(16, [tf.int64], shapes=[[]])
            queue.enqueue_many(tf1.placeholder(tf.int64, [None], "rows"), name="fill")
            x = queue.dequeue_many(4)
        w = tf1.get_variable("w", [1], tf.float64)
        tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.square(tf.cast(x, tf.float64) * w)))
    return g


@pytest.mark.parametrize("runner_fills", [True, False])
def test_a_queue_that_queue_runners_fill_is_listed(runner_fills):
    explanation = parallax.explain(_queue_graph(runner_fills), "localhost:2", print_table=False)
    unsharded = explanation.plan.noted(UNSHARDED_INPUTS)
    assert (unsharded.startswith("the workers read batch:0 from") if runner_fills else unsharded is None), unsharded
    assert ("read the data with tf.data" in explanation.premise) == runner_fills


def _repeating(examples, pipeline, iterator="one_shot"):
    g = tf.Graph()
    with g.as_default():
        ds = pipeline(tf.data.Dataset.range(examples)).batch(4)
        it = tf1.data.make_one_shot_iterator(ds) if iterator == "one_shot" else tf1.data.make_initializable_iterator(ds)
        w = tf1.get_variable("w", [1], tf.float64)
        tf1.train.GradientDescentOptimizer(0.1).minimize(
            tf.reduce_mean(tf.square(tf.cast(it.get_next(), tf.float64) * w)))
    return g


@pytest.mark.parametrize("examples, pipeline, iterator, listed", [
    # parallax.shard cuts the stream after a repeat written after it (shard_placement.py): nothing to warn of
    (43, lambda ds: parallax.shard(ds).repeat(), "one_shot", False),
    (43, lambda ds: parallax.shard(ds.map(lambda x: x * 2)).shuffle(8, seed=1).repeat(3), "initializable", False),
    (44, lambda ds: parallax.shard(ds).repeat(), "one_shot", False),  # a multiple of N
    (43, lambda ds: parallax.shard(ds.repeat()), "one_shot", False),  # repeat before the shard: infinite
    (43, lambda ds: parallax.shard(ds).repeat(1), "one_shot", False),
    (43, lambda ds: parallax.shard(ds), "one_shot", False),
    (43, lambda ds: ds.shard(10, 3).repeat(), "one_shot", False),  # a tenth of the data: no shard over the workers
    (43, lambda ds: ds.shard(*parallax.shard.create_num_shards_and_shard_id()).repeat(), "one_shot", True),
    (43, lambda ds: ds.shard(*parallax.shard.create_num_shards_and_shard_id()).map(lambda x: x * 2).shuffle(
        8, seed=1).repeat(3), "initializable", True),
])
def test_a_repeat_after_a_shard_over_examples_no_multiple_of_n_is_listed(examples, pipeline, iterator, listed):
    explanation = parallax.explain(_repeating(examples, pipeline, iterator), "localhost:2", print_table=False)
    assert bool(explanation.plan.noted(REPEATED_SHARDS)) == listed
    if listed:
        assert f"splits {examples} examples into shards of 21 and 22" in explanation.plan.noted(REPEATED_SHARDS)
        assert "shards of 21 and 22" in explanation.premise
        assert "repeat() before the shard" in explanation.premise


def test_a_fed_dataset_is_not_judged():
    g = tf.Graph()
    with g.as_default():
        rows = tf1.placeholder(tf.int64, [None], "rows")
        ds = parallax.shard(tf.data.Dataset.from_tensor_slices(rows)).repeat().batch(4)
        x = tf1.data.make_initializable_iterator(ds).get_next()
        w = tf1.get_variable("w", [1], tf.float64)
        tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.square(tf.cast(x, tf.float64) * w)))
    assert parallax.explain(g, "localhost:2", print_table=False).plan.noted(REPEATED_SHARDS) is None


def test_the_planner_warns_of_a_repeat_after_the_shard(tmp_path):
    from tests.planner_role import plan_in_planner_role
    plan, stderr = plan_in_planner_role(tmp_path, [
        "ds = tf.data.Dataset.range(43).shard(*parallax.shard.create_num_shards_and_shard_id()).repeat().batch(4)",
        "x = tf1.data.make_one_shot_iterator(ds).get_next()",
        "w = tf1.get_variable('w', [1], tf.float64)",
        "tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.square(tf.cast(x, tf.float64) * w)))"])
    assert "splits 43 examples" in plan.noted(REPEATED_SHARDS) and "a dataset repeats after its shard" in stderr


def _synthetic(batch):
    """tf_cnn_benchmarks' synthetic data: images and labels drawn in the graph with fixed seeds, an embedding of the
    labels (a sparse variable: HYBRID puts it on a server) and a dense layer; `batch(ids)` may replace the input."""
    g = tf.Graph()
    with g.as_default():
        images = tf.random.truncated_normal([4, 6], seed=11)
        labels = tf.random.uniform([4], 0, 10, tf.int32, seed=12)
        images, labels = batch(images, labels)
        emb = tf1.get_variable("emb", [10, 6])
        w = tf1.get_variable("w", [6, 1])
        logits = tf.matmul(images + tf.nn.embedding_lookup(emb, labels), w)
        tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.square(logits)))
    return g


def _fed(images, labels):
    return tf1.placeholder_with_default(images, [None, 6], name="images"), labels


def _sharded(images, labels):
    it = tf1.data.make_one_shot_iterator(parallax.shard(tf.data.Dataset.range(64)).batch(4))
    return images * tf.cast(tf.reshape(it.get_next(), [-1, 1]), tf.float32), labels


@pytest.mark.parametrize("mode", ["MPI", "PS", "HYBRID"])
def test_a_step_that_reads_no_input_is_warned_and_explain_says_it_is_not_exact(mode):
    # Every worker draws the same seeded batch: N copies of one device with batch b (issue 57, item 5).
    config = parallax.Config(run_option=mode)
    explanation = parallax.explain(_synthetic(lambda i, l: (i, l)), "localhost:2", config, print_table=False)
    assert explanation.plan.noted(READS_NO_INPUT)
    assert explanation.premise.startswith("not exact: the training step reads no input")
    assert "2 copies of one device with batch b" in explanation.premise
    from parallax.runtime.get_runner import plan_warnings
    assert any("reads no input" in note for note in plan_warnings(explanation.plan))
    for batch in (_fed, _sharded):  # a feed or a sharded dataset gives each worker its own rows
        plan = parallax.explain(_synthetic(batch), "localhost:2", config, print_table=False).plan
        assert not plan.noted(READS_NO_INPUT) and not any("reads no input" in note for note in plan_warnings(plan))
    assert not parallax.explain(_synthetic(lambda i, l: (i, l)), "localhost:1", config,
                                print_table=False).plan.noted(READS_NO_INPUT)
