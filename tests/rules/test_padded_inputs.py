"""Inputs a dataset pads to its batch's longest example (padded_inputs.py): found with the dataset's own padding
value, padded further to the longest over every worker by the rewrite, carried by the plan through JSON."""
import numpy as np
import tensorflow as tf

import parallax
from parallax.rules import padded_inputs
from parallax.plan import plan_json
from parallax.plan.records import Plan
from tests.two_workers import TwoWorkers

tf1 = tf.compat.v1


def _sentences(one_shot=True, padding_values=None, padded_shapes=([None], [])):
    g = tf.Graph()
    with g.as_default():
        words = tf.ragged.constant([[1, 2, 3], [4], [5, 6]], tf.int64)
        ds = tf.data.Dataset.from_tensor_slices((words.to_tensor(), [1.0, 2.0, 3.0]))
        ds = ds.map(lambda w, y: (tf.boolean_mask(w, w > 0), y))
        ds = ds.padded_batch(2, padded_shapes=padded_shapes, padding_values=padding_values)
        iterator = tf1.data.make_one_shot_iterator(ds) if one_shot else tf1.data.make_initializable_iterator(ds)
        tokens, label = iterator.get_next()
    return g, tokens, label, iterator


def test_a_padded_batchs_unknown_extents_are_found_with_its_padding_value():
    g, tokens, label, _ = _sentences()  # the dataset is built in a function (a one-shot iterator)
    assert padded_inputs.padded_by_datasets(g) == ((tokens.name, (1,), 0),)
    g, tokens, _, _ = _sentences(one_shot=False, padding_values=(np.int64(7), 0.0))
    assert padded_inputs.padded_by_datasets(g) == ((tokens.name, (1,), 7),)


def test_a_tensor_array_stacked_from_the_padded_input_is_not_an_input():
    """A v1 loop over the padded positions writes a TensorArray, stacked after the loop: its unknown extent is the
    padded length's, but it is computed in the step. Taken for a padded input, the padding gathered its shape
    before the loop that makes it: a cycle (padded_v1_loop_tensor_array)."""
    tf1.disable_control_flow_v2()
    try:
        g = tf.Graph()
        with g.as_default():
            words = tf.ragged.constant([[1, 2, 3], [4], [5, 6]], tf.int64).to_tensor()
            ds = tf.data.Dataset.from_tensor_slices(words).map(lambda w: tf.boolean_mask(w, w > 0))
            tokens = tf1.data.make_one_shot_iterator(ds.padded_batch(2, padded_shapes=[None])).get_next()
            ta = tf.TensorArray(tf.int64, size=tf.shape(tokens)[1])
            _, ta = tf1.while_loop(lambda i, ta: i < tf.shape(tokens)[1],
                                   lambda i, ta: (i + 1, ta.write(i, tokens[:, i])), [tf.constant(0), ta])
            stacked = ta.stack()
    finally:
        tf1.enable_control_flow_v2()
    assert stacked.shape.as_list() == [None, None]
    assert padded_inputs.padded_by_datasets(g) == ((tokens.name, (1,), 0),)


def test_fixed_lengths_and_fed_placeholders_are_not_padded():
    g, _, _, _ = _sentences(padded_shapes=([4], []))
    assert padded_inputs.padded_by_datasets(g) == ()
    g = tf.Graph()
    with g.as_default():
        tf1.placeholder(tf.int64, [None, None], name="tokens")  # the feeder pads: its value is not the graph's
    assert padded_inputs.padded_by_datasets(g) == ()


def test_a_worker_pads_its_batch_to_the_longest_over_workers_with_the_datasets_value():
    g, tokens, label, _ = _sentences(one_shot=False, padding_values=(np.int64(7), 0.0))
    with g.as_default():
        lengths = tf.reduce_sum(tf.ones_like(tokens), 1)
    padded = padded_inputs.padded_by_datasets(g)
    padded_inputs.pad_to_the_longest(g, TwoWorkers([5]), padded)
    assert padded_inputs.is_padded(g, tokens.name)
    with tf1.Session(graph=g) as sess:
        sess.run(g.get_operation_by_name("MakeIterator"))
        got, got_lengths = sess.run([tokens.consumers()[0].outputs[0], lengths])
    np.testing.assert_array_equal(got, [[1, 2, 3, 7, 7], [4, 7, 7, 7, 7]])
    np.testing.assert_array_equal(got_lengths, [5, 5])  # every reader reads the padded batch


def test_the_plan_carries_the_padded_inputs_through_json_and_explain_states_them():
    plan = Plan("MPI", 2, 1, (), padded_inputs=(("IteratorGetNext:0", (1,), 0), ("IteratorGetNext:2", (1, 2), "")))
    assert plan_json.loads(plan_json.dumps(plan)) == plan and plan.uses_collectives
    assert "inputs padded to the longest over workers: IteratorGetNext:0 (axes 1, with 0)" in str(plan)
    g, tokens, _, _ = _sentences()
    with g.as_default():
        tf1.train.GradientDescentOptimizer(0.1).minimize(tf1.get_variable("w", []) * _mean_over_positions(tokens))
    explained = parallax.explain(g, "localhost:2", print_table=False)
    assert explained.plan.padded_inputs == ((tokens.name, (1,), 0),)
    assert "input(s) padded to the batch's longest example are padded further" in explained.premise


def _mean_over_positions(tokens):
    return tf.reduce_mean(tf.cast(tokens, tf.float32))  # the padding counts: a longer batch has a smaller mean


def test_only_padding_that_reaches_the_gradients_is_padded():
    g, tokens, label, _ = _sentences()
    with g.as_default():
        w = tf1.get_variable("w", [])
        real = tf.cast(tokens > 0, tf.float32)  # a mask: the padding counts nowhere
        masked = tf.reduce_sum(tf.cast(tokens, tf.float32) * real) / tf.reduce_sum(real)
        tf1.train.GradientDescentOptimizer(0.1).minimize(w * masked + w * label)
    assert padded_inputs.inputs_padded_to_the_longest(g, parallax.analyze(g)) == ()
    with g.as_default():
        tf1.train.GradientDescentOptimizer(0.1).minimize(w * _mean_over_positions(tokens))
    assert padded_inputs.inputs_padded_to_the_longest(g, parallax.analyze(g)) == ((tokens.name, (1,), 0),)
