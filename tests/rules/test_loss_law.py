"""Config.average_dense/average_sparse left at None are decided from the loss (loss_law.py): summed over workers when
every loss is a sum over the batch (found by running it on random batches and their parts), averaged otherwise;
set values are kept; the plan and parallax.explain say which it was and why."""
import pytest
import tensorflow as tf

import parallax
from parallax.rules import loss_law

tf1 = tf.compat.v1
F64 = tf.float64


def _graph(loss_of, table_rows=10):
    """A graph whose loss is `loss_of(per-example squared errors [batch], embedding)`, trained by SGD."""
    g = tf.Graph()
    with g.as_default():
        ids = tf1.placeholder(tf.int32, [None, 2], name="ids")
        y = tf1.placeholder(F64, [None], name="y")
        emb = tf1.get_variable("emb", [table_rows, 3], F64)
        w = tf1.get_variable("w", [3, 1], F64)
        per_example = tf.square(tf.matmul(tf.reduce_sum(tf.gather(emb, ids), 1), w)[:, 0] - y)
        tf1.train.GradientDescentOptimizer(0.1).minimize(loss_of(per_example, w))
    return g


@pytest.mark.parametrize("loss_of, average, why", [
    (lambda e, w: tf.reduce_sum(e), False, loss_law.SUMMED),
    (lambda e, w: 0.5 * tf.reduce_sum(e), False, loss_law.SUMMED),
    (lambda e, w: e, False, loss_law.SUMMED),  # a per-example vector: tf.gradients differentiates its sum
    (lambda e, w: tf.reduce_mean(e), True, loss_law.AVERAGED),
    (lambda e, w: tf.reduce_sum(e) / tf.reduce_sum(tf.abs(e)), True, loss_law.AVERAGED),  # a sum over a count
    (lambda e, w: tf.reduce_sum(e) + tf.reduce_sum(tf.square(w)), True, loss_law.AVERAGED),  # plus a penalty
    (lambda e, w: tf.reduce_sum(w), True, loss_law.AVERAGED),  # the examples do not change it
])
def test_the_loss_decides_whether_workers_gradients_are_summed(loss_of, average, why):
    assert loss_law.decide(_graph(loss_of)) == (average, why)


def test_a_loss_over_variables_too_large_to_run_again_is_averaged_and_says_so():
    g = _graph(lambda e, w: tf.reduce_sum(e), table_rows=30_000_000)  # 720 MB: not allocated to check
    assert loss_law.decide(g) == (True, loss_law.NOT_CHECKED)
    assert loss_law.laws_and_means(g).notes() == ((loss_law.UNCHECKED_LOSS, loss_law.UNCHECKED),)


def test_a_loss_that_cannot_run_on_other_batch_sizes_says_its_inputs_fix_the_batch():
    """Placeholders of 4 examples and a reshape to 4 (the batch's size written in): the planner's batches of 8 and
    their parts cannot run, so nothing is checked; the sentence (the launcher's warning) says why and what to do."""
    g = tf.Graph()
    with g.as_default():
        x, w = tf1.placeholder(F64, [4, 3], name="x"), tf1.placeholder(F64, [4], name="weight")
        prediction = tf.reshape(tf.matmul(x, tf1.get_variable("v", [3, 1], F64)), [4])
        tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(w * prediction) / tf.reduce_sum(w))
    reading = loss_law.laws_and_means(g)
    why = reading.unchecked
    assert loss_law.averages(reading.laws) and reading.sentence == loss_law.NOT_CHECKED
    assert why.startswith(loss_law.UNCHECKED), why
    assert "a fixed first dimension (weight:0 [4], x:0 [4, 3])" in why and "[None, ...]" in why


def test_time_major_inputs_are_named_as_such_where_the_loss_cannot_be_checked():
    """Inputs fed [time, batch] (the first axis fixed, a later one unknown): the planner's random batches split
    the first axis, which is time, and a token-weighted loss over them cannot be run so (0.0115 off in MPI, with
    its token count each worker's own); the sentence says the batch seems to be on another axis, and what to do."""
    g = tf.Graph()
    with g.as_default():
        x, lengths = tf1.placeholder(F64, [5, None], name="x"), tf1.placeholder(tf.int32, [None], name="lengths")
        mask = tf.transpose(tf.sequence_mask(lengths, 5, dtype=F64))
        error = tf.square(x * tf1.get_variable("v", [], F64) - 1.0)
        tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(error * mask) / tf.reduce_sum(mask))
    reading = loss_law.laws_and_means(g)
    why = reading.unchecked
    assert loss_law.averages(reading.laws) and why.startswith(loss_law.UNCHECKED), why
    assert "another axis than the first (x:0 [5, None]: time-major?)" in why and "batch-major" in why
    assert "fixed first dimension" not in why


def test_a_table_fed_alike_to_every_worker_is_named_until_it_is_marked_shared():
    """A [3] placeholder of class weights is taken for examples (a per-worker input's first axis) and the loss's
    parts cannot run on it; the warning names it and parallax.shared_input, and once marked nothing is warned."""
    from parallax.runtime.get_runner import plan_warnings
    from tests.equivalence.user_graphs_batchwise import fed_class_weights, fed_class_weights_shared
    unmarked = parallax.explain(fed_class_weights(2, 4, 6, 4).graph, "localhost:2", print_table=False).plan
    (warning,) = plan_warnings(unmarked)
    assert "(class_weights:0 [3])" in warning and "parallax.shared_input" in warning, warning
    marked = parallax.explain(fed_class_weights_shared(2, 4, 6, 4).graph, "localhost:2", print_table=False).plan
    assert plan_warnings(marked) == []


def test_none_is_decided_in_the_plan_and_a_set_value_is_kept():
    g = _graph(lambda e, w: tf.reduce_sum(e))
    decided = parallax.explain(g, "localhost:2", print_table=False)
    assert {v.average for v in decided.plan.variables} == {False} and decided.plan.averaging == loss_law.SUMMED
    assert "when the loss is a sum over the batch" in decided.premise and loss_law.SUMMED in decided.premise
    kept = parallax.explain(g, "localhost:2", parallax.Config(average_dense=True), print_table=False)
    assert kept.plan.variable("w").average is True and kept.plan.variable("emb").average is False
    assert kept.plan.averaging == loss_law.SUMMED  # average_sparse was None: decided
    given = parallax.explain(g, "localhost:2", parallax.Config(average_dense=True, average_sparse=True),
                             print_table=False)
    assert {v.average for v in given.plan.variables} == {True} and given.plan.averaging == ""


def _words_graph(reduce, time_major):
    """Sampled softmax over every word of the batch, the batch merged with 3 time steps: batch-major ([b, T]
    reshaped to [b*T]) or time-major ([T, b] reshaped)."""
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, 3, 4], name="x")
        labels = tf1.placeholder(tf.int64, [None, 3], name="labels")
        if time_major:
            x, labels = tf.transpose(x, [1, 0, 2]), tf.transpose(labels)
        w = tf1.get_variable("softmax_w", [30, 4], tf.float32)
        b = tf1.get_variable("softmax_b", [30], tf.float32)
        per_word = tf.nn.sampled_softmax_loss(w, b, tf.reshape(labels, [-1, 1]), tf.reshape(x, [-1, 4]),
                                              num_sampled=6, num_classes=30, seed=7)
        tf1.train.GradientDescentOptimizer(0.1).minimize(reduce(per_word))
    return g


@pytest.mark.parametrize("time_major", [False, True])
def test_a_sampler_over_the_words_of_the_batch_is_read_in_the_layout_that_adds_up(time_major):
    assert loss_law.decide(_words_graph(tf.reduce_sum, time_major)) == (False, loss_law.SUMMED)
    assert loss_law.decide(_words_graph(tf.reduce_mean, time_major)) == (True, loss_law.AVERAGED)



def test_a_sum_over_a_guarded_count_of_a_float_input_is_averaged():
    """A Cox likelihood: sum(event * (risk - log of the risk set)) / max(sum(event), 1) with float events. On this
    graph's random normal events the guard held its constant in every trial, where the loss is a sum of its parts;
    the trial of non-negative floats shows the count it divides by (batch_samples.NONNEGATIVE_TRIAL). Summed, the
    job took twice one device's step."""
    from parallax.rules import batch_statistics
    from tests.equivalence.user_graphs_unseen import cox_partial_likelihood
    g = cox_partial_likelihood(2, 4, 6, 4).graph
    statistics = batch_statistics.statistics_of_the_batch(g, parallax.analyze(g))
    assert ("Sum_1:0", batch_statistics.SUM) in statistics.laws
    assert loss_law.decide(g, statistics.laws) == (True, loss_law.AVERAGED)
