"""Sparse per-worker inputs (sparse_inputs.py): found as a SparseTensor's three parts, fed as valid random sparse
batches and parts of them (batch_samples.py), and their batch found by running where shape inference cannot see it
(batch_samples.with_extents_from_runs): the rules that read the batch (draws, statistics, the loss law) see
through embedding_lookup_sparse."""
import numpy as np
import pytest
import tensorflow as tf

import parallax
from parallax.rules import batch_draws, batch_statistics, loss_law
from parallax.analysis import batch_samples, random_examples, sparse_inputs
from parallax.analysis.batch_shapes import MARKERS, per_worker_inputs

tf1 = tf.compat.v1
F64 = tf.float64


def _sparse_graph(head, shape=None, dataset=False):
    """ids (a SparseTensor of a batch of examples) -> embedding_lookup_sparse -> `head(rows, y)` (the loss),
    trained by SGD; returns (graph, the looked-up rows)."""
    g = tf.Graph()
    with g.as_default():
        if dataset:
            sp = tf.sparse.SparseTensor([[0, 0], [1, 0], [1, 1], [2, 0]], tf.constant([1, 2, 3, 1], tf.int64), [3, 2])
            ids, y = tf1.data.make_one_shot_iterator(tf.data.Dataset.from_tensor_slices(
                (sp, tf.constant([1.0, 2.0, 3.0], F64))).batch(2)).get_next()
        else:
            ids = tf1.sparse_placeholder(tf.int64, shape, name="ids")
            y = tf1.placeholder(F64, [None], name="y")
        emb = tf1.get_variable("emb", [10, 3], F64)
        rows = tf.nn.embedding_lookup_sparse(emb, ids, None, combiner="mean")
        tf1.train.GradientDescentOptimizer(0.1).minimize(head(rows, y))
    return g, rows


def _squared_errors(rows, y):
    return tf.square(tf.reduce_sum(rows, 1) - y)


@pytest.mark.parametrize("shape, dataset", [(None, False), ([None, 4], False), (None, True)])
def test_a_sparse_inputs_three_parts_are_found_and_its_dense_shape_is_no_batch(shape, dataset):
    g, _ = _sparse_graph(lambda r, y: tf.reduce_mean(_squared_errors(r, y)), shape, dataset)
    (found,) = sparse_inputs.sparse_inputs_of(g)
    assert [t.dtype for t in (found.indices, found.dense_shape)] == [tf.int64, tf.int64]
    assert found.values.dtype == tf.int64 and found.indices.shape.rank == 2
    inputs = {t.name for t in per_worker_inputs(g)}
    assert found.indices.name in inputs and found.values.name in inputs and found.dense_shape.name not in inputs
    assert found.extents() == ([4] if shape else [sparse_inputs.WIDTH])


def test_dense_placeholders_are_no_sparse_input():
    g = tf.Graph()
    with g.as_default():
        tf1.placeholder(tf.int64, [None, 2]), tf1.placeholder(F64, [None]), tf1.placeholder(tf.int64, [None])
    assert sparse_inputs.sparse_inputs_of(g) == []  # a [None] int64 is no dense shape's [rank]... unless rank is unknown
    g = tf.Graph()
    with g.as_default():
        tf1.placeholder(F64, [None, 5]), tf1.placeholder(F64, [None, 1]), tf1.placeholder(tf.int32, [None])
    assert sparse_inputs.sparse_inputs_of(g) == []


def test_a_random_sparse_batch_is_valid_and_its_parts_renumber_their_examples():
    g, _ = _sparse_graph(lambda r, y: tf.reduce_mean(_squared_errors(r, y)), [None, 4])
    (found,) = sparse_inputs.sparse_inputs_of(g)
    indices, values, dense_shape = sparse_inputs.random_batch(np.random.RandomState(0), found, 6,
                                                              random_examples.random_values)
    assert list(dense_shape) == [6, 4] and len(indices) == len(values)
    assert [tuple(i) for i in indices] == sorted({tuple(i) for i in indices})  # row-major, no duplicates
    counts = np.bincount(indices[:, 0], minlength=6)
    assert counts.min() >= 1 and counts.max() <= sparse_inputs.MOST_ENTRIES and indices[:, 1].max() < 4
    part_indices, part_values, part_shape = sparse_inputs.part((indices, values, dense_shape), [4, 1])
    assert list(part_shape) == [2, 4]
    mine = [indices[:, 0] == 4, indices[:, 0] == 1]
    np.testing.assert_array_equal(part_values, np.concatenate([values[m] for m in mine]))
    np.testing.assert_array_equal(part_indices[:, 1], np.concatenate([indices[m, 1] for m in mine]))
    np.testing.assert_array_equal(part_indices[:, 0], [0] * mine[0].sum() + [1] * mine[1].sum())


def test_a_value_over_sparse_examples_is_run_on_parts_of_the_batch():
    g, rows = _sparse_graph(lambda r, y: tf.reduce_sum(_squared_errors(r, y)))
    with g.as_default():
        total = tf.reduce_sum(rows)
    samples = batch_samples.sampled(g, [total, rows])
    for whole, reversed_, first, second, one, rest in samples[total.name]:
        np.testing.assert_allclose([reversed_, first + second, one + rest], whole)
    assert [len(v) for v in samples[rows.name][0]] == [8, 8, 4, 4, 1, 7]  # each part's examples


def test_the_batch_shape_inference_cannot_see_is_found_by_running():
    g, rows = _sparse_graph(lambda r, y: tf.reduce_mean(_squared_errors(r, y)))
    with g.as_default():
        distinct = tf.unique(tf.reshape(rows, [-1]))[0]  # set by the values, not by the number of examples
    tensors = [rows, distinct]
    probes = [{rows.name: (None, 3), distinct.name: (None,)} for _ in MARKERS]
    filled = batch_samples.with_extents_from_runs(g, tensors, probes, MARKERS)
    assert [p[rows.name] for p in filled] == [(m, 3) for m in MARKERS]
    assert [p[distinct.name] for p in filled] == [(None,), (None,)]


def test_dropout_after_a_sparse_lookup_is_split_and_a_draw_of_unknown_extent_is_listed():
    g, _ = _sparse_graph(lambda r, y: tf.reduce_mean(_squared_errors(tf1.nn.dropout(r, rate=0.5, seed=1), y)))
    assert batch_draws.draws_following_the_batch(g).split == (("dropout/random_uniform/RandomUniform", 0),)
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.int64, [None], name="x")
        words = tf.unique(x)[0]  # as many as the distinct values: no extent of the batch
        tf.random.uniform(tf.shape(words), seed=2, name="noise")
    assert batch_draws.draws_following_the_batch(g).unsplittable == ("noise/RandomUniform",)


def test_the_batch_mean_after_a_sparse_lookup_is_a_statistic():
    g, _ = _sparse_graph(lambda r, y: tf.reduce_mean(_squared_errors(r - tf.reduce_mean(r, 0), y)))
    found = batch_statistics.statistics_of_the_batch(g, parallax.analyze(g))
    assert ("Mean:0", batch_statistics.AVERAGE) in found.laws and not found.uncombinable
    assert ("Mean:0", batch_statistics.MEAN, ("sub",)) in found.combined


def test_a_summed_loss_is_a_sum_with_statistics_and_draws_as_the_rewrite_makes_them():
    g, _ = _sparse_graph(lambda r, y: tf.reduce_sum(_squared_errors(r, y)))
    assert loss_law.decide(g) == (False, loss_law.SUMMED)
    centred, _ = _sparse_graph(lambda r, y: tf.reduce_sum(_squared_errors(r - tf.reduce_mean(r, 0), y)))
    laws = batch_statistics.statistics_of_the_batch(centred, parallax.analyze(centred)).laws
    assert loss_law.decide(centred) == (True, loss_law.AVERAGED)  # each part centred by its own mean: no sum
    assert loss_law.decide(centred, laws) == (False, loss_law.SUMMED)
    dropped, _ = _sparse_graph(lambda r, y: tf.reduce_sum(_squared_errors(tf1.nn.dropout(r, rate=0.5, seed=1), y)))
    assert loss_law.decide(dropped, (), batch_draws.draws_following_the_batch(dropped).split) == (False, loss_law.SUMMED)


def _parsed(reduce):
    """Serialized tf.train.Examples fed as strings and parsed in the graph: two sparse features, one dense."""
    g = tf.Graph()
    with g.as_default():
        serialized = tf1.placeholder(tf.string, [None], "serialized")
        f = tf.io.parse_example(serialized, {"a": tf.io.VarLenFeature(tf.int64), "b": tf.io.VarLenFeature(tf.int64),
                                             "x": tf.io.FixedLenFeature([2], tf.float32)})
        emb = tf1.get_variable("emb", [10, 2], F64)
        rows = tf.nn.embedding_lookup_sparse(emb, f["a"], None) + tf.nn.embedding_lookup_sparse(emb, f["b"], None)
        loss = reduce(tf.square(tf.reduce_sum(rows * tf.cast(f["x"], F64), 1)))
        tf1.train.GradientDescentOptimizer(0.1).minimize(loss)
    return g, f, loss


def test_sparse_features_parsed_together_are_found_each_as_its_three_parts():
    g, f, _ = _parsed(tf.reduce_sum)
    found = {(s.indices.name, s.values.name, s.dense_shape.name) for s in sparse_inputs.sparse_inputs_of(g)}
    assert found == {(f[k].indices.name, f[k].values.name, f[k].dense_shape.name) for k in ("a", "b")}


@pytest.mark.parametrize("reduce, law", [(tf.reduce_sum, loss_law.SUM), (tf.reduce_mean, loss_law.MEAN)])
def test_a_loss_over_parsed_examples_is_run_on_its_decoded_features(reduce, law):
    """Random words are no serialized Example: the parse fails on them, so its outputs are fed instead."""
    g, _, loss = _parsed(reduce)
    assert batch_samples.sampled(g, [loss], trials=1)[loss.name]
    assert loss_law.laws(g)[0] == {loss.name: law}
