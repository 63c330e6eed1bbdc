"""parallax.shared_input (shared_inputs.py): an input fed alike in every worker is no share of the batch, so a
value that scores the examples against its rows does not pair the batch's examples, and the job is exact there."""
import pytest
import tensorflow as tf

import parallax
from parallax.analysis.batch_shapes import per_worker_inputs

tf1 = tf.compat.v1


def _scored_against_a_pool(marked):
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, 3], "x")
        label = tf1.placeholder(tf.int32, [None], "label")
        pool = tf1.placeholder(tf.float32, [None, 4], "candidate_pool")
        pool = parallax.shared_input(pool) if marked else pool
        logits = tf.matmul(tf1.layers.dense(x, 4, name="query"), tf1.layers.dense(pool, 4, name="candidate"),
                           transpose_b=True)
        tf1.train.GradientDescentOptimizer(0.1).minimize(
            tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=label, logits=logits)))
    return g


def test_a_marked_pool_is_no_input_and_nothing_is_listed():
    g = _scored_against_a_pool(marked=True)
    assert [t.op.name for t in per_worker_inputs(g)] == ["x", "label"]
    plan = parallax.explain(g, "localhost:2", print_table=False).plan
    assert plan.uncombinable_statistics == () and "could not be checked" not in plan.averaging


def test_an_unmarked_pool_is_taken_for_examples_that_the_logits_pair():
    plan = parallax.explain(_scored_against_a_pool(marked=False), "localhost:2", print_table=False).plan
    assert [s.split(" (")[0] for s in plan.uncombinable_statistics] == ["MatMul:0"]
    assert "pairs the batch's examples" in plan.uncombinable_statistics[0]


def test_only_an_inputs_output_can_be_marked():
    with tf.Graph().as_default():
        computed = tf.constant(1.0) * 2.0
        with pytest.raises(parallax.GraphAnalysisError, match="takes an input's output"):
            parallax.shared_input(computed)
