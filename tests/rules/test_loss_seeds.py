"""A mean loss's gradients start at 1/N on each worker, and the workers' gradients are summed (loss_seeds.py): the
plan records each default seed and its loss's law, the rewrite sets a mean's to 1/N, the gradient check reads
them so, and anything the rule cannot see through (the user's own grad_ys, a gradient no seed reaches, a
Config that sets the averaging) leaves the averaging as it was."""
import numpy as np
import pytest
import tensorflow as tf

import parallax
from parallax.capture import gradients as capture
from parallax.rules import loss_law, loss_seeds
from parallax.analysis.graph_analysis import analyze
from parallax.rewrite.pipeline import rewrite

tf1 = tf.compat.v1
F64 = tf.float64


@tf.custom_gradient
def _clipped(x):
    return tf.identity(x), lambda dy: tf.clip_by_value(dy, -0.05, 0.05)


def _graph(regression, classifier=None, grad_ys=None, clip=False):
    """A dense head on fed features; `regression(errors)` is its loss. With `classifier`, a second head trained
    on `classifier(per-example losses)` by a second optimizer; with `clip`, the hidden layer's gradient clipped
    elementwise by a custom gradient."""
    g = tf.Graph()
    with g.as_default():
        x, y = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None, 1], "y")
        hidden = tf1.layers.dense(x, 4, tf.tanh, name="hidden")
        hidden = _clipped(hidden) if clip else hidden
        loss = regression(tf.square(tf1.layers.dense(hidden, 1, name="out") - y))
        opt = tf1.train.GradientDescentOptimizer(0.1)
        train = [opt.apply_gradients(opt.compute_gradients(loss, grad_loss=grad_ys and grad_ys()))]
        if classifier is not None:
            cls = tf1.layers.dense(x, 1, name="cls")
            train.append(tf1.train.AdagradOptimizer(0.1).minimize(
                classifier(tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=cls)),
                var_list=tf1.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES, "cls")))
        tf.group(*train, name="train")
    return g


def _plan(g, config=None):
    return parallax.explain(g, "localhost:2", config, print_table=False).plan


def test_a_mean_loss_starts_at_one_over_n_and_its_gradients_are_summed():
    plan = _plan(_graph(tf.reduce_mean))
    assert plan.loss_seeds == (("gradients/grad_ys_0", loss_seeds.MEAN),)
    assert {v.average for v in plan.variables} == {False}
    assert "start at 1/N" in plan.averaging


def test_a_summed_loss_changes_nothing():
    plan = _plan(_graph(tf.reduce_sum))
    assert plan.loss_seeds == () and {v.average for v in plan.variables} == {False}
    assert plan.averaging == loss_law.SUMMED


def test_each_loss_keeps_its_own_law():
    g = _graph(tf.reduce_mean, classifier=tf.reduce_sum)
    assert sorted(loss_law.laws(g)[0].values()) == [loss_law.MEAN, loss_law.SUM]
    plan = _plan(g)
    assert sorted(law for _, law in plan.loss_seeds) == [loss_seeds.MEAN, loss_seeds.SUM]
    assert {v.average for v in plan.variables} == {False}
    assert "some losses were found to be sums" in plan.averaging


def test_the_users_own_seed_or_a_set_averaging_leaves_the_averaging_as_it_was():
    given = _graph(tf.reduce_mean, grad_ys=lambda: tf.constant(1.0, F64))
    assert capture.given_seed_losses(given) and _plan(given).loss_seeds == ()
    assert {v.average for v in _plan(given).variables} == {True}
    set_by_user = _plan(_graph(tf.reduce_mean), parallax.Config(average_dense=True, average_sparse=True))
    assert set_by_user.loss_seeds == () and {v.average for v in set_by_user.variables} == {True}
    one_worker = parallax.explain(_graph(tf.reduce_mean), "localhost:1", print_table=False).plan
    assert one_worker.loss_seeds == ()


def test_a_gradient_no_seed_reaches_turns_the_rule_off():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(F64, [None, 3], "x")
        w = tf1.get_variable("w", [3, 1], F64)
        by_hand = tf.reduce_mean(x, 0)[:, None]  # d mean(x w) / d w, written out
        tf.gradients(tf.reduce_mean(tf.matmul(x, w)), [x])  # a seed exists, but w's gradient does not start at it
        tf1.train.GradientDescentOptimizer(0.1).apply_gradients([(by_hand, w)])
    assert capture.default_seeds(g) and loss_seeds.seeds_and_mean_terms(g, analyze(g), {}) == ((), ())


def test_the_rewrite_sets_a_means_seed_to_one_over_n():
    g = _graph(tf.reduce_mean, classifier=tf.reduce_sum)
    plan = _plan(g)
    rewritten = rewrite(g, plan, parallax.Config()).graph
    with tf1.Session(graph=rewritten) as sess:  # a mean's fill value is 1 * 1/N, a sum's is left at 1
        values = sess.run({name: rewritten.get_operation_by_name(name).inputs[1] for name, _ in plan.loss_seeds})
    assert sorted(values.values()) == [0.5, 1.0]
    assert loss_seeds.is_scaled(rewritten, plan.loss_seeds, (), 2)
    assert not loss_seeds.is_scaled(g, plan.loss_seeds, (), 2)


def test_a_gradient_clipped_on_its_way_is_exact_only_with_the_seeds():
    g = _graph(tf.reduce_mean, clip=True)
    plan = _plan(g)
    assert plan.loss_seeds and plan.uncombinable_statistics == ()
    averaged = parallax.explain(g, "localhost:2", parallax.Config(average_dense=True, average_sparse=True),
                                print_table=False).plan
    assert [entry.split(" (")[0] for entry in averaged.uncombinable_statistics] == ["hidden/bias", "hidden/kernel"]


@pytest.mark.parametrize("workers", [2, 4])
def test_where_the_backward_pass_is_linear_a_workers_gradient_is_one_nth_of_what_it_was(workers):
    g = _graph(tf.reduce_mean)
    plan = parallax.explain(g, f"localhost:{workers}", print_table=False).plan
    seeded = rewrite(g, plan, parallax.Config()).graph
    rng = np.random.RandomState(0)
    feed = {"x:0": rng.randn(4, 3), "y:0": rng.randn(4, 1)}
    name = analyze(g).variable("hidden/kernel").parts[0].gradients[0].values
    grads = []
    for graph in (g, seeded):
        variables = graph.get_collection(tf1.GraphKeys.GLOBAL_VARIABLES)
        with tf1.Session(graph=graph) as sess:
            for v in variables:
                v.load(np.linspace(-0.5, 0.5, v.shape.num_elements()).reshape(v.shape), sess)
            grads.append(sess.run(graph.get_tensor_by_name(name), feed))
    assert np.abs(grads[0]).max() > 0 and np.array_equal(grads[1], grads[0] / workers)


def _penalized(loss_of):
    """`loss_of(summed squared errors, a penalty on the head's kernel, the batch's size)`."""
    g = tf.Graph()
    with g.as_default():
        x, y = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None, 1], "y")
        w = tf1.get_variable("w", [3, 1], F64)
        tf1.train.GradientDescentOptimizer(0.1).minimize(
            loss_of(tf.reduce_sum(tf.square(tf.matmul(x, w) - y)), 0.01 * tf.nn.l2_loss(w),
                    tf.cast(tf.shape(x)[0], F64)))
    return g


@pytest.mark.parametrize("loss_of, law", [
    (lambda errors, penalty, n: errors + penalty, loss_law.SUM_PLUS_MEANS),
    (lambda errors, penalty, n: tf.add_n([errors, penalty, 2.0 * penalty]), loss_law.SUM_PLUS_MEANS),
    (lambda errors, penalty, n: tf.identity(errors - penalty), loss_law.SUM_PLUS_MEANS),
    (lambda errors, penalty, n: errors / n + penalty, loss_law.MEAN),  # a mean plus a penalty: averaged
    (lambda errors, penalty, n: errors / n + 0.1 * errors, loss_law.SUM_PLUS_MEANS),  # a mean beside a sum
    (lambda errors, penalty, n: errors / n + penalty + tf.sqrt(errors), loss_law.MEAN),  # and neither
    (lambda errors, penalty, n: tf.sqrt(errors) + penalty, loss_law.MEAN),  # neither
    (lambda errors, penalty, n: errors * penalty, loss_law.SUM),  # a sum weighted by a value of the variables
    (lambda errors, penalty, n: errors, loss_law.SUM),
])
def test_a_sum_plus_a_term_the_batch_does_not_change_is_found(loss_of, law):
    assert list(loss_law.laws(_penalized(loss_of))[0].values()) == [law]


def test_a_penalty_on_a_summed_loss_counts_once_over_the_workers():
    g = _penalized(lambda errors, penalty, n: errors + penalty)
    plan = _plan(g)
    assert plan.loss_seeds == (("gradients/grad_ys_0", loss_seeds.SUM),)
    assert plan.mean_term_edges and all(op.startswith("gradients/mul_grad/") for op, _ in plan.mean_term_edges)
    assert {v.average for v in plan.variables} == {False} and plan.uncombinable_statistics == ()
    assert "plus mean terms" in parallax.explain(g, "localhost:2", print_table=False).premise
    rewritten = rewrite(g, plan, parallax.Config()).graph
    assert loss_seeds.is_scaled(rewritten, plan.loss_seeds, plan.mean_term_edges, 2)
    assert not loss_seeds.is_scaled(g, plan.loss_seeds, plan.mean_term_edges, 2)
    # summed without the scaling, the penalty would count twice: the check lists the kernel
    summed = _plan(g, parallax.Config(average_dense=False, average_sparse=False))
    assert summed.mean_term_edges == () and [s.split(" (")[0] for s in summed.uncombinable_statistics] == ["w"]


@pytest.mark.parametrize("weighted", [True, False])
def test_a_penalty_that_is_a_bare_variable_read_counts_once_over_the_workers(weighted):
    """`errors * exp(-s) + s` (learned uncertainty weights), or `errors + s`: the bare read of s makes no gradient
    op of its own, so its edge is the addition's gradient for s, the last op before the loss's gradient enters the
    sum of s's gradients (weighted), or s's update."""
    g = tf.Graph()
    with g.as_default():
        x, y = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None, 1], "y")
        w = tf1.get_variable("w", [3, 1], F64)
        s = tf1.get_variable("s", [], F64)
        errors = tf.reduce_sum(tf.square(tf.matmul(x, w) - y))
        tf1.train.GradientDescentOptimizer(0.1).minimize((errors * tf.exp(-s) if weighted else errors) + s)
    plan = _plan(g)
    assert plan.loss_seeds == (("gradients/grad_ys_0", loss_seeds.SUM),) and plan.uncombinable_statistics == ()
    (op, index), = plan.mean_term_edges
    entered = g.get_operation_by_name(op)
    assert entered.type == "Identity" and op.startswith("gradients/add_grad/tuple/") and index == 0
    assert {c.type for c in entered.outputs[0].consumers()} == {"AddN" if weighted else "ResourceApplyGradientDescent"}
    rewritten = rewrite(g, plan, parallax.Config()).graph
    assert loss_seeds.is_scaled(rewritten, plan.loss_seeds, plan.mean_term_edges, 2)


def test_where_the_penalty_gradient_ops_cannot_be_told_the_loss_is_averaged():
    g = _penalized(lambda errors, penalty, n: errors + penalty)
    with g.as_default():
        meta = tf1.train.export_meta_graph()
    imported = tf.Graph()
    with imported.as_default():
        tf1.train.import_meta_graph(meta)  # no op remembers the forward op its gradient op was made for
    plan = _plan(imported)
    assert plan.loss_seeds == (("gradients/grad_ys_0", loss_seeds.MEAN),) and plan.mean_term_edges == ()


@pytest.mark.parametrize("shape", [None, []])
def test_a_setting_fed_alike_in_every_worker_does_not_stop_the_check(shape):
    """A keep probability fed as a placeholder with no default (of no shape, as the TF1 tutorials make it, or a
    scalar) is fed one value per trial, so the summed loss is found a sum, and a mixing one is listed (a sum beside
    the harder half's: the half alone is a share of the batch, which paired_rows.py computes on every worker's rows)."""
    harder_half = lambda e: tf.reduce_sum(e) + tf.reduce_sum(  # noqa: E731
        tf.math.top_k(e[:, 0], k=tf.shape(e)[0] // 2).values)
    for loss_of, law in ((tf.reduce_sum, loss_law.SUM), (harder_half, loss_law.MEAN)):
        g = tf.Graph()
        with g.as_default():
            x, y = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None, 1], "y")
            keep = tf1.placeholder(F64, shape, "keep_prob")
            w = tf1.get_variable("w", [3, 1], F64)
            tf1.train.GradientDescentOptimizer(0.1).minimize(loss_of(tf.square(tf.matmul(x, w) * keep - y)))
        assert list(loss_law.laws(g)[0].values()) == [law]
        listed = parallax.explain(g, "localhost:2", print_table=False).plan.uncombinable_statistics
        assert [entry.split(" (")[0] for entry in listed] == ([] if law == loss_law.SUM else ["w"])


def test_a_penalty_that_is_zero_at_the_initial_values_is_still_found():
    """A penalty on a table initialized to zeros adds nothing at first: the whole looks like a sum there."""
    g = tf.Graph()
    with g.as_default():
        x, y = tf1.placeholder(F64, [None, 3], "x"), tf1.placeholder(F64, [None, 1], "y")
        w = tf1.get_variable("w", [3, 1], F64, tf1.zeros_initializer())
        loss = tf.reduce_sum(tf.square(tf.matmul(x, w) - y)) + 0.01 * tf.nn.l2_loss(w)
        tf1.train.GradientDescentOptimizer(0.1).minimize(loss)
    assert list(loss_law.laws(g)[0].values()) == [loss_law.SUM_PLUS_MEANS]
    assert _plan(g).mean_term_edges


def test_an_inner_losss_seed_is_part_of_the_outer_forward_pass_and_is_not_scaled():
    """MAML's step: the weights less a step along the support loss's gradient score the query examples. The support
    loss's seed feeds the query loss's value, so its gradients are a value of that forward pass: not a loss of the
    step (capture.loss_records), not a gradient the step aggregates (analysis), and its seed is not scaled by 1/N
    (the inner gradient, combined as the workers' mean, was 1/N of one device's; 0.017 off in MPI before)."""
    from tests.equivalence.user_graphs_unseen import maml_one_inner_step
    g = maml_one_inner_step(2, 4, 1, 4).graph
    assert capture.inner_seeds(g) == {"gradients/grad_ys_0"}
    assert capture.loss_records(g) == ["Mean_1:0"]
    analysis = analyze(g)
    assert {v.name: [x.values for x in v.gradients] for v in analysis.trained_variables} == {
        "v": ["gradients_1/AddN_3:0"], "w": ["gradients_1/AddN_4:0"]}
    laws = loss_law.laws(g)[0]
    assert loss_seeds.seeds_and_mean_terms(g, analysis, laws) == ((("gradients_1/grad_ys_0", loss_seeds.MEAN),), ())
