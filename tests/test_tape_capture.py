"""Gradients taken with tf.GradientTape in a v1 graph are captured as tf.gradients' are (capture/tape.py): the loss,
a default seed the rewrite can scale, the (variable, gradient) pairs, and each gradient op's forward op; so the
loss rules hold for them. A tape run eagerly, or given its own output_gradients, behaves as without parallax."""
import json
import subprocess
import sys

import numpy as np
import tensorflow as tf

import parallax
from parallax.capture import gradients as capture
from parallax.rules import loss_seeds
from parallax.rewrite.pipeline import rewrite

tf1 = tf.compat.v1
F64 = tf.float64


def _tape_graph(loss_of, output_gradients=None):
    g = tf.Graph()
    with g.as_default():
        x, y = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None, 1], "y")
        w = tf1.get_variable("w", [3, 1], F64, tf1.constant_initializer(0.2))
        with tf.GradientTape() as tape:
            errors = tf.square(tf.matmul(x, w) - y)
            loss = loss_of(errors, w)
        known = len(g.get_operations())
        grads = tape.gradient(loss, [w], output_gradients=output_gradients and output_gradients(loss))
        # the tape's own gradient ops (named under gradient_tape/ only with v2 control flow, a process-wide switch)
        _tape_graph.made = [op for op in g.get_operations()[known:] if not op.name.startswith("gradients")]
        tf1.train.GradientDescentOptimizer(0.1).apply_gradients(zip(grads, [w]))
    return g, loss, grads[0]


def test_the_loss_its_seed_and_the_gradient_are_recorded():
    g, loss, grad = _tape_graph(lambda errors, w: tf.reduce_mean(errors))
    assert capture.loss_records(g) == [loss.name]
    seed, = capture.default_seeds(g).items()
    assert seed == ("gradients/grad_ys_0", loss.name)
    assert [json.loads(r) for r in g.get_collection(capture.GRAD_COLLECTION)] == \
        [{"var": "w", "grad": {"values": grad.name}}]


def test_the_tapes_gradient_ops_record_the_forward_op():
    g, _, grad = _tape_graph(lambda errors, w: tf.reduce_mean(errors))
    tape_ops = [op for op in _tape_graph.made if op.type != "AddN"]  # the tape's sums of a source's gradients
    assert tape_ops and all(getattr(op, "_original_op", None) is not None for op in tape_ops)
    assert "MatMul" in {op._original_op.type for op in tape_ops}


def test_the_seed_gives_the_tapes_own_gradient():
    g, _, grad = _tape_graph(lambda errors, w: tf.reduce_mean(errors))
    with g.as_default(), tf1.Session() as sess:
        sess.run(tf1.global_variables_initializer())
        feed = {"x:0": np.arange(6.0).reshape(2, 3), "y:0": [[1.0], [2.0]]}
        expected = sess.run(tf.gradients(g.get_tensor_by_name(capture.loss_records(g)[0]), [tf1.global_variables()[0]]),
                            feed)[0]
        np.testing.assert_allclose(sess.run(grad, feed), expected, rtol=1e-12)


def test_a_mean_loss_starts_at_one_over_n_and_a_penalty_on_a_sum_counts_once():
    mean, _, _ = _tape_graph(lambda errors, w: tf.reduce_mean(errors))
    plan = parallax.explain(mean, "localhost:2", print_table=False).plan
    assert plan.loss_seeds == (("gradients/grad_ys_0", loss_seeds.MEAN),)
    assert loss_seeds.is_scaled(rewrite(mean, plan, parallax.Config()).graph, plan.loss_seeds, (), 2)
    penalized, _, _ = _tape_graph(lambda errors, w: tf.reduce_sum(errors) + 0.1 * tf.nn.l2_loss(w))
    plan = parallax.explain(penalized, "localhost:2", print_table=False).plan
    assert plan.loss_seeds == (("gradients/grad_ys_0", loss_seeds.SUM),)
    made = {op.name for op in _tape_graph.made}
    assert plan.mean_term_edges and all(op in made for op, _ in plan.mean_term_edges)
    assert plan.uncombinable_statistics == ()


def test_a_mean_beside_a_sum_counts_once():
    """The mean's logits are read three times by the cross entropy: the tape's AddN of their gradients is inside
    the mean's backward ops, and the gradient is scaled once, where it enters them (rule 8 would list w else)."""
    g, _, _ = _tape_graph(lambda errors, w: 0.01 * tf.reduce_sum(errors) + tf.reduce_mean(
        tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.ones_like(errors), logits=2.0 * errors)))
    plan = parallax.explain(g, "localhost:2", print_table=False).plan
    assert plan.loss_seeds == (("gradients/grad_ys_0", loss_seeds.SUM),)
    assert len(plan.mean_term_edges) == 1 and plan.uncombinable_statistics == ()


def test_the_users_own_output_gradients_leave_the_averaging_as_it_was():
    g, loss, _ = _tape_graph(lambda errors, w: tf.reduce_mean(errors),
                             output_gradients=lambda loss: [tf.ones_like(loss)])
    assert capture.given_seed_losses(g) == [loss.name] and capture.default_seeds(g) == {}
    assert parallax.explain(g, "localhost:2", print_table=False).plan.loss_seeds == ()


def test_an_eager_tape_is_untouched():
    """In a process of its own: this one runs graphs (conftest disables eager execution)."""
    code = ("import parallax, tensorflow as tf\n"
            "w = tf.Variable([[0.2], [0.3]], dtype=tf.float64)\n"
            "with tf.GradientTape() as tape:\n"
            "    loss = tf.reduce_sum(tf.square(tf.matmul(tf.constant([[1.0, 2.0]], tf.float64), w)))\n"
            "print(tape.gradient(loss, w).numpy().ravel().tolist())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    np.testing.assert_allclose(json.loads(out.stdout.strip().splitlines()[-1]), [1.6, 3.2])
