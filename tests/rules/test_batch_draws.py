"""Random draws whose shape follows the batch (batch_draws.py): which are found, on which axis, and that a worker's
rewritten draw is bitwise its share of the draw one device makes for the whole batch."""
import re

import numpy as np
import pytest
import tensorflow as tf

import parallax
from parallax.rules import batch_draws
from parallax.plan import plan_json
from parallax.explain import premise
from parallax.plan.records import Plan
from tests.planner_role import plan_in_planner_role

tf1 = tf.compat.v1
F64 = tf.float64


def _graph():
    """Draws of every kind, each fetched as a named tensor."""
    g = tf.Graph()
    with g.as_default():
        tf1.set_random_seed(1)
        x = tf1.placeholder(F64, [None, 6], name="x")
        w = tf1.get_variable("w", [6, 8], F64, initializer=tf1.random_uniform_initializer(seed=2, dtype=F64))
        h = tf.matmul(x, w)
        tf.nn.dropout(h, rate=0.5, name="rows")
        tf1.nn.dropout(h, keep_prob=0.8, noise_shape=[tf.shape(h)[0], 1], name="per_example")
        tf.nn.dropout(tf.transpose(tf.reshape(h, [-1, 2, 4]), [1, 0, 2]), rate=0.5, name="time_major")
        tf.identity(h + tf.random.normal(tf.shape(h), dtype=F64), name="noise")
        tf.random.uniform([3, 8], dtype=F64, name="fixed_shape")  # does not follow the batch
        tf.random.categorical(h, 2, name="from_logits")  # reads the batch's values
        tf.nn.dropout(tf.reshape(h, [-1]), rate=0.5, name="merged")  # batch merged with another dimension
        tf.nn.learned_unigram_candidate_sampler(tf.cast(tf.reshape(x[:, :1], [-1, 1]), tf.int64), 1, 3, True, 10,
                                                 seed=3, name="sampler")  # draws from the classes, not the batch
        tf1.while_loop(lambda i, a: i < 2, lambda i, a: (i + 1, tf.nn.dropout(a, rate=0.5)), [0, h], name="loop")
    return g


def _ops(names, g):
    return {n: g.get_operation_by_name(n).type for n in names}


def test_draws_that_follow_the_batch_are_found_with_their_batch_axis():
    g = _graph()
    found = batch_draws.draws_following_the_batch(g)
    split = dict(found.split)
    axes = {name.split("/")[0]: axis for name, axis in split.items()}
    assert axes == {"rows": 0, "per_example": 0, "time_major": 1, "random_normal": 0}, split
    assert set(_ops(split, g).values()) == {"RandomUniform", "RandomStandardNormal"}
    prefixes = sorted(re.split("[/:]", name)[0] for name in found.unsplittable)
    assert prefixes == ["from_logits", "loop", "merged"], found.unsplittable
    assert found.layout == batch_draws.BLOCKS
    everything = [name for name, _ in found.split] + list(found.unsplittable)
    assert not any(name.startswith(("w/", "fixed_shape", "sampler")) for name in everything)


def _run(g, names, x):
    with tf1.Session(graph=g) as sess:
        sess.run(tf1.global_variables_initializer())
        return [sess.run([g.get_tensor_by_name(n) for n in names], {g.get_tensor_by_name("x:0"): x})
                for _ in range(2)]


@pytest.mark.parametrize("layout", [batch_draws.BLOCKS, batch_draws.INTERLEAVED])
def test_each_worker_draws_its_share_of_one_devices_draw_bitwise(layout):
    names = ["rows/SelectV2:0", "per_example/SelectV2:0", "time_major/SelectV2:0", "noise:0"]
    g = _graph()
    split = batch_draws.draws_following_the_batch(g).split
    x = np.random.RandomState(0).randn(12, 6)
    one_device = _run(g, names, x)
    for worker in range(3):
        rows = slice(worker * 4, worker * 4 + 4) if layout == batch_draws.BLOCKS else slice(worker, None, 3)
        g = _graph()
        for name, axis in split:
            batch_draws.draw_for_the_whole_batch(g, name, axis, 3, worker, layout)
            assert batch_draws.is_split(g, name)
        for step, (want, got) in enumerate(zip(one_device, _run(g, names, x[rows]))):
            expected = [want[0][rows], want[1][rows], want[2][:, rows], want[3][rows]]
            for name, e, a in zip(names, expected, got):
                assert np.array_equal(e, a), (layout, worker, step, name)


def test_a_sharded_dataset_gives_the_interleaved_layout():
    g = tf.Graph()
    with g.as_default():
        ds = parallax.shard(tf.data.Dataset.from_tensor_slices(np.zeros((8, 3)))).batch(4)
        x = tf1.data.make_one_shot_iterator(ds).get_next()
        tf.nn.dropout(x, rate=0.5)
    found = batch_draws.draws_following_the_batch(g)
    assert len(found.split) == 1 and found.layout == batch_draws.INTERLEAVED


@pytest.mark.parametrize("pipeline, iterator, layout", [
    (lambda ds: parallax.shard(ds).batch(4), "one_shot", batch_draws.INTERLEAVED),
    (lambda ds: parallax.shard(ds.batch(4)), "one_shot", batch_draws.BLOCKS),  # a shard over batches
    (lambda ds: parallax.shard(ds.padded_batch(4).map(lambda x: x * 2).prefetch(1)), "initializable",
     batch_draws.BLOCKS),
    (lambda ds: parallax.shard(ds.batch(2).unbatch()).batch(4), "initializable", batch_draws.INTERLEAVED),
    # parallax.shard cuts the stream after an unbatch written after it (shard_placement.py): over examples
    (lambda ds: parallax.shard(ds.batch(2)).unbatch().batch(4), "one_shot", batch_draws.INTERLEAVED),
    (lambda ds: ds.batch(2).shard(2, 0), "one_shot", batch_draws.BLOCKS),
])
def test_the_layout_follows_what_the_shard_cuts(pipeline, iterator, layout):
    g = tf.Graph()
    with g.as_default():
        ds = pipeline(tf.data.Dataset.from_tensor_slices(np.zeros((8, 3))))
        make = tf1.data.make_one_shot_iterator if iterator == "one_shot" else tf1.data.make_initializable_iterator
        tf.nn.dropout(make(ds).get_next(), rate=0.5)
    assert batch_draws.draws_following_the_batch(g).layout == layout


def test_the_plan_carries_the_draws_through_json_and_explain_states_them():
    plan = Plan("HYBRID", 2, 1, (), batch_draws=(("dropout/random_uniform/RandomUniform", 0),),
                batch_layout=batch_draws.INTERLEAVED, unsplittable_draws=("categorical/Multinomial",))
    assert plan_json.loads(plan_json.dumps(plan)) == plan
    text = premise(plan, parallax.analyze(_graph_with_a_train_op()))
    assert "1 random draw(s) whose shape follows the batch" in text and "every N-th example" in text
    assert "categorical/Multinomial depend on the batch in a way parallax cannot split" in text
    assert "draws for the whole batch: dropout/random_uniform/RandomUniform (batch axis 0, interleaved)" in str(plan)


def _graph_with_a_train_op():
    g = tf.Graph()
    with g.as_default():
        w = tf1.get_variable("w", [2], F64)
        tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(w * w))
    return g


def test_the_planner_warns_of_a_draw_it_cannot_split(tmp_path):
    plan, stderr = plan_in_planner_role(tmp_path, [
        "x = tf1.placeholder(tf.float32, [None, 4])",
        "logits = tf1.layers.dense(x, 3)",
        "picked = tf.cast(tf.random.categorical(logits, 1, seed=1), tf.float32)",
        "tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(logits * picked))"])
    assert "parallax: warning: random draw(s) categorical/Multinomial depend on the batch" in stderr
    assert plan.unsplittable_draws == ("categorical/Multinomial",)
