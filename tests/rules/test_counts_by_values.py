"""Counts of the batch that its values set (counts_by_values.py): a boolean mask's count of kept examples, read where the
gradients are computed (the factor of a masked mean's gradient, a sum divided by tf.size) or by an update, is
combined; a count whose whole-batch value is not its parts' sum is listed; shapes the examples do not set are left
alone."""
import pytest
import tensorflow as tf

import parallax
from parallax.rules import batch_statistics, counts_by_values
from tests.rules.test_batch_statistics import _find  # the loss is build(x [batch, 3], lengths [batch], prediction)

tf1 = tf.compat.v1
F64 = tf.float64


def _kept(values, mask):
    return tf.gather(values, tf.where(mask)[:, 0])


@pytest.mark.parametrize("build, reader", [
    (lambda x, n, p: tf.reduce_mean(tf.boolean_mask(p[:, 0], n > 1)), "gradients/Mean_grad/truediv"),
    (lambda x, n, p: tf.reduce_sum(_kept(p, n > 1)) / tf.cast(tf.size(_kept(p, n > 1)), F64), "gradients/truediv_grad"),
    # hard examples: the model's own predictions set the count
    (lambda x, n, p: tf.reduce_mean(tf.boolean_mask(p[:, 0], p[:, 0] > 0)), "gradients/Mean_grad/truediv"),
])
def test_a_count_the_data_set_is_the_workers_mean_where_gradients_read_it(build, reader):
    """With A_i a worker's kept sum and C the whole count, mean_i(A_i / (C / N)) is one device's sum(A_i) / C."""
    found = _find(build)
    assert [law for _, law, _ in found.combined] == ["mean"] and not found.uncombinable, found
    (_, _, readers), = found.combined
    assert readers and all(r.startswith(reader) for r in readers), readers


def test_a_count_the_data_set_that_an_update_reads_is_the_workers_sum():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(F64, [None, 3], name="x")
        prediction = tf.matmul(x, tf1.get_variable("w", [3, 1], F64))
        kept = tf.cast(tf.shape(tf.boolean_mask(prediction, x[:, 0] > 0))[0], F64)
        seen = tf1.get_variable("seen", [], F64, initializer=tf1.zeros_initializer(), trainable=False)
        with tf.control_dependencies([seen.assign_add(kept, name="count")]):
            tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(prediction))
    found = batch_statistics.statistics_of_the_batch(g, parallax.analyze(g))
    assert [(law, readers) for _, law, readers in found.combined] == [("sum", ("count",))], found
    assert not found.uncombinable


def _unique_rows(x, n, p):
    emb = tf1.get_variable("emb", [4, 2], F64)
    return tf.reduce_mean(p) + tf.reduce_mean(tf.square(tf.gather(emb, tf.unique(n).y)))


def _padded_to_the_longest(x, n, p):
    steps = tf.tile(p, [1, 6])[:, :tf.reduce_max(n)]  # a padded length set by the longest example
    return tf.reduce_mean(tf.square(steps))


@pytest.mark.parametrize("build", [_unique_rows, _padded_to_the_longest])
def test_a_count_that_is_no_sum_of_the_workers_is_listed(build):
    """Distinct ids, or a length padded to the batch's longest example: the whole batch's count is no sum of its
    parts', so no combination of the workers' makes one device's."""
    found = _find(build)
    assert not found.combined and len(found.uncombinable) == 1, found
    assert counts_by_values.NOT_A_SUM in found.uncombinable[0]


def test_a_masked_mean_that_is_read_is_still_listed_and_its_gradients_count_combined():
    """sqrt(mean over kept): the gradient reads the mean's own value, each worker's over its own count."""
    found = _find(lambda x, n, p: tf.sqrt(tf.reduce_mean(tf.boolean_mask(tf.square(p[:, 0]), n > 1))))
    assert [law for _, law, _ in found.combined] == ["mean"]
    assert len(found.uncombinable) == 1 and "a mean over a number of elements" in found.uncombinable[0]


def _positive_weights(x, n, p):
    w = tf1.get_variable("v", [5], F64)
    return tf.reduce_sum(p) / tf.cast(tf.size(tf.where(w > 0)), F64)  # set by a variable, not the examples


def _padded_input(x, n, p):
    tokens = tf1.placeholder(F64, [None, None], name="tokens")  # a padded length the input's shape sets
    return tf.reduce_mean(tf.square(tokens * p))


@pytest.mark.parametrize("build", [_positive_weights, _padded_input])
def test_shapes_the_examples_values_do_not_set_are_left_alone(build):
    found = _find(build)
    assert not found.combined and not found.uncombinable, found


def _hard_examples_of(table_rows, dtype=F64):
    def build(x, n, p):
        table = tf1.get_variable("table", [table_rows, 1], dtype)
        scores = tf.cast(tf.gather(table, n), F64) + p
        return tf.reduce_mean(tf.boolean_mask(scores[:, 0], scores[:, 0] > 0))
    return build


@pytest.mark.parametrize("build, why", [
    (_hard_examples_of(1), counts_by_values.NOT_RUN),  # random ids 0-2 are out of the table's range
    (_hard_examples_of(70_000_000, tf.float32), counts_by_values.TOO_LARGE),  # 280 MB, not allocated to check
])
def test_a_count_that_cannot_be_checked_is_listed_with_why(build, why):
    found = _find(build)
    assert not found.combined and [u.split(" (", 1)[1] for u in found.uncombinable] == [why + ")"], found
