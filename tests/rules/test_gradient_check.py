"""The planner's last check (gradient_check.py): a trained variable whose gradient on a random batch is not the
workers' mean (or sum) of its gradients on the batch's halves is listed as not exact, whatever ops mix the
examples; graphs the rules cover, or that the check cannot compare, list nothing from it."""
import pytest
import tensorflow as tf

import parallax
from parallax.rules import gradient_check

tf1 = tf.compat.v1


def _graph(loss_of):
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, 3], "x")
        y = tf1.placeholder(tf.float32, [None], "y")
        error = tf.square(tf.squeeze(tf1.layers.dense(x, 1, name="out"), 1) - y)
        tf1.train.GradientDescentOptimizer(0.1).minimize(loss_of(error))
    return g


def _listed(loss_of):
    return parallax.explain(_graph(loss_of), "localhost:2", print_table=False).plan.uncombinable_statistics


RUNNING_TOTAL = lambda e: tf.reduce_mean(tf.sqrt(tf.cumsum(e) + 1.0))  # noqa: E731 (a running total over the batch)
SOFTMAX_OVER_THE_BATCH = lambda e: tf.reduce_sum(tf.nn.softmax(-e) * e)  # noqa: E731 (weights over the examples)


HARDER_HALF = lambda e: tf.math.top_k(e, k=tf.shape(e)[0] // 2).values  # noqa: E731 (hard-example mining)


def test_a_graph_that_mixes_the_examples_in_an_unknown_way_is_listed():
    """A summed error beside the mean of the batch's harder half (a top k of half the batch): the loss reads the
    batch otherwise than through the share, so paired_rows.py makes no region of it, and the check lists it."""
    listed = _listed(lambda e: tf.reduce_sum(e) + tf.reduce_mean(HARDER_HALF(e)))
    assert [entry.split(" (")[0] for entry in listed] == ["out/bias", "out/kernel"], listed
    # a mean's gradients start at each part's share and are summed (loss_seeds.py), a sum's are summed
    assert all("not the workers' sum" in entry for entry in listed)


def test_a_statistic_inside_a_v2_cond_is_listed_with_the_way_out():
    """Inputs standardized by the batch's moments in a tf.cond on a `training` flag: with v2 control flow the
    moments are inside the cond's functions, where no rule looks; the listing says so and how to avoid it (with
    v1 control flow rule 7 combines them: user_graphs_batchwise.py's inputs_standardized_in_v1_cond)."""
    def standardized_in_cond(e):
        training = tf1.placeholder_with_default(True, [], "training")
        return tf.reduce_mean(tf.cond(training, lambda: (e - tf.reduce_mean(e)) ** 2, lambda: e))
    listed = _listed(standardized_in_cond)
    assert [entry.split(" (")[0] for entry in listed] == ["out/bias", "out/kernel"], listed
    assert all("the batch passes through cond (StatelessIf)" in entry and "disable_control_flow_v2()" in entry
               for entry in listed), listed
    assert "graph function" not in " ".join(_listed(lambda e: tf.reduce_mean(tf.math.top_k(e, k=2).values)))


def test_the_hardest_half_alone_is_a_share_of_the_batch_and_two_views_restacked_are_not():
    """The mean of the batch's harder half reads the batch through a share of it alone: paired_rows.py computes it
    on every worker's rows, nothing listed. Two views of each example stacked (2b rows, none mixing another
    example) are no share that mixes: no region (no gathers), and the check finds the mean exact."""
    plan = parallax.explain(_graph(lambda e: tf.reduce_mean(HARDER_HALF(e))), "localhost:2", print_table=False).plan
    assert plan.paired_rows and plan.uncombinable_statistics == ()
    stacked = lambda e: tf.reduce_mean(tf.concat([e, 2.0 * e], 0))  # noqa: E731
    plan = parallax.explain(_graph(stacked), "localhost:2", print_table=False).plan
    assert plan.paired_rows == () and plan.uncombinable_statistics == ()


@pytest.mark.parametrize("loss_of", [RUNNING_TOTAL, SOFTMAX_OVER_THE_BATCH])
def test_the_check_finds_what_mixes_the_examples(loss_of):
    """Run on its own: the planner computes these on every worker's rows (paired_rows.py), so lists nothing."""
    g = _graph(loss_of)
    listed = gradient_check.mismatched(g, parallax.analyze(g), averaged=lambda name: True)
    assert [entry.split(" (")[0] for entry in listed] == ["out/bias", "out/kernel"], listed
    plan = parallax.explain(g, "localhost:2", print_table=False).plan
    assert plan.uncombinable_statistics == () and plan.paired_rows


@pytest.mark.parametrize("loss_of", [
    tf.reduce_mean,
    tf.reduce_sum,  # summed over workers (loss_law.py): the check combines the halves so too
    # a sum plus a penalty: the penalty's gradient counts once over the parts, as over the workers (loss_terms.py)
    lambda e: tf.reduce_sum(e) + tf.add_n([tf.nn.l2_loss(v) for v in tf1.trainable_variables()]),
    lambda e: tf.reduce_mean(tf.nn.dropout(e, rate=0.5, seed=1)),  # a draw: batch_draws.py's, not compared
    # a penalty that reads each variable twice: tf.gradients adds its two gradients up in an AddN that records no
    # forward op, inside the penalty's backward ops (scaled once, where the loss's gradient enters them)
    lambda e: tf.reduce_sum(e) + tf.add_n([tf.reduce_sum(v * v) for v in tf1.trainable_variables()]),
    # a mean beside a sum over the batch: the mean's gradient counts once over the parts, as over the workers
    lambda e: tf.reduce_mean(e) + 0.01 * tf.reduce_sum(tf.abs(e)),
    # ... with a value of its own read twice (the cross entropy reads its logits three times)
    lambda e: tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.ones_like(e), logits=2.0 * e))
    + 0.01 * tf.reduce_sum(e),
])
def test_graphs_whose_gradients_are_the_workers_list_nothing(loss_of):
    assert _listed(loss_of) == ()


def test_the_combination_is_the_plans():
    """A mean loss checked as if its gradients were summed: every variable differs."""
    g = _graph(tf.reduce_mean)
    listed = gradient_check.mismatched(g, parallax.analyze(g), averaged=lambda name: False)
    assert [entry.split(" (")[0] for entry in listed] == ["out/bias", "out/kernel"]


def test_the_planner_warns_of_it(tmp_path):
    from tests.planner_role import plan_in_planner_role
    plan, stderr = plan_in_planner_role(tmp_path, [
        "x = tf1.placeholder(tf.float32, [None, 4])",
        "w = tf1.get_variable('w', [4, 1])",
        "e = tf.matmul(x, w)[:, 0]",
        "tf1.train.GradientDescentOptimizer(0.1).minimize(",
        "    tf.reduce_sum(e) + tf.reduce_mean(tf.math.top_k(e, k=tf.shape(x)[0] // 2).values ** 2))"])
    assert "parallax: warning: value(s) of the batch that parallax cannot make one device's: w (its gradient on" \
        in stderr
    assert [entry.split(" (")[0] for entry in plan.uncombinable_statistics] == ["w"]


def test_a_graph_that_blocks_when_run_is_not_checked_and_does_not_block_the_planner(monkeypatch):
    from parallax.analysis import batch_samples
    monkeypatch.setattr(batch_samples, "_BOUNDED", tf1.RunOptions(timeout_in_ms=500))
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, 3], "x")
        scale = tf1.FIFOQueue(2, [tf.float32], shapes=[[]]).dequeue()  # nothing ever enqueues
        loss = tf.reduce_sum(tf1.layers.dense(x, 1)) * scale
    assert batch_samples.sampled(g, [loss]) == {}


def test_a_loss_that_cannot_be_run_on_random_batches_is_warned_of(monkeypatch):
    """A summed loss that the planner cannot run (here: it waits on a queue nothing fills) is taken for a mean:
    explain says the loss could not be checked, and the launcher warns, naming the setting that fixes a sum."""
    from parallax.analysis import batch_samples
    from parallax.plan import plan_json
    from parallax.rules import loss_law
    from parallax.runtime.get_runner import plan_warnings
    monkeypatch.setattr(batch_samples, "_BOUNDED", tf1.RunOptions(timeout_in_ms=500))
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, 3], "x")
        scale = tf1.FIFOQueue(2, [tf.float32], shapes=[[]]).dequeue()
        tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(tf1.layers.dense(x, 1)) * scale)
    explained = parallax.explain(g, "localhost:2", print_table=False)
    plan = explained.plan
    assert plan.noted(loss_law.UNCHECKED_LOSS) == loss_law.UNCHECKED and plan.averaging.startswith("the loss was not")
    assert plan_warnings(plan) == [loss_law.UNCHECKED] and "average_dense/average_sparse to False" in loss_law.UNCHECKED
    assert f"{plan.averaging}; {loss_law.UNCHECKED}" in explained.premise
    unseeded = parallax.explain(g, "localhost:2", parallax.Config(run_option="PS", sync=False),
                                print_table=False)
    assert unseeded.plan.averaging == loss_law.NOT_CHECKED and loss_law.NOT_CHECKED not in unseeded.premise
    assert f"for a sum; {loss_law.UNCHECKED})" in unseeded.premise
    assert plan_json.loads(plan_json.dumps(plan)).noted(loss_law.UNCHECKED_LOSS) == loss_law.UNCHECKED
    checked = parallax.explain(_graph(tf.reduce_sum), "localhost:2", print_table=False).plan
    assert checked.averaging != loss_law.NOT_CHECKED and plan_warnings(checked) == [] and not checked.notes


def _dropped(e):
    return tf1.nn.dropout(e, rate=0.5, seed=3)  # a draw whose shape follows the batch: split by the rewrite


@pytest.mark.parametrize("loss_of, listed", [
    (lambda e: tf.reduce_mean(_dropped(e)), []),
    (lambda e: (lambda d: tf.reduce_sum(d) + tf.reduce_mean(HARDER_HALF(d)))(_dropped(e)), ["out/bias", "out/kernel"]),
])
def test_the_check_reads_split_draws_as_the_rewrite_makes_them(loss_of, listed):
    plan = parallax.explain(_graph(loss_of), "localhost:2", print_table=False).plan
    assert plan.batch_draws == (("dropout/random_uniform/RandomUniform", 0),)
    assert [entry.split(" (")[0] for entry in plan.uncombinable_statistics] == listed


def _sampled_softmax_graph(reduce):
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, 3], "x")
        labels = tf1.placeholder(tf.int64, [None, 1], "labels")
        weights, biases = tf1.get_variable("softmax_w", [20, 3]), tf1.get_variable("softmax_b", [20])
        per_example = tf.nn.sampled_softmax_loss(weights, biases, labels, tf1.layers.dense(x, 3, name="hidden"),
                                                 num_sampled=4, num_classes=20, seed=5)
        tf1.train.GradientDescentOptimizer(0.1).minimize(reduce(per_example))
    return g


@pytest.mark.parametrize("reduce, seeds", [(tf.reduce_sum, ()), (tf.reduce_mean, ("mean",))])
def test_a_samplers_draw_is_the_whole_batchs_in_every_part(reduce, seeds):
    plan = parallax.explain(_sampled_softmax_graph(reduce), "localhost:2", print_table=False).plan
    # summed: a sum's gradients, or a mean's started at 1/N (loss_seeds.py)
    assert {v.average for v in plan.variables} == {False} and plan.uncombinable_statistics == ()
    assert tuple(law for _, law in plan.loss_seeds) == seeds


@pytest.mark.parametrize("noise, listed", [(0.0, False), (0.3, True)])
def test_per_example_gradients_in_a_map_fn_are_checked(noise, listed):
    """DP-SGD written by hand: each example's gradient taken inside a tf.map_fn (a While op, stateful because its
    body reads variables, which made the check skip the graph), clipped, summed, over the batch's size. Without
    noise the gradient is the workers' mean; seeded noise added to the sum before the division is not (each worker
    adds it to its own share), and is listed instead of differing silently. The gradients taken inside the loop
    are not the step's: capture/gradients.py records neither them nor their losses, whose names would name outer tensors."""
    from parallax.capture import gradients as capture
    from tests.equivalence.user_graphs_unseen import dp_sgd_clipped_examples
    g = dp_sgd_clipped_examples(2, 4, 1, 4, noise=noise).graph
    assert capture.loss_records(g) == []
    analysis = parallax.analyze(g)
    assert all(g.get_tensor_by_name(x.values).graph is g for v in analysis.trained_variables for x in v.gradients)
    assert bool(gradient_check.mismatched(g, analysis, lambda name: True)) == listed


def _sum_statistic_graph(loss_of):
    """Targets, and a loss of the batch's errors and of the sum of its targets (a statistic of the data alone)."""
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float64, [None, 3], "x")
        y = tf1.placeholder(tf.float64, [None], "y")
        error = tf.square(tf.squeeze(tf1.layers.dense(x, 1, name="out"), 1) - y)
        tf1.train.GradientDescentOptimizer(0.1).minimize(loss_of(error, tf.reduce_sum(tf.abs(y))))
    return g


def _at_the_workers_mean(g):
    """(the statistics as found, the last check's list with them read as the workers' mean)."""
    from parallax.rules import batch_draws, batch_statistics
    from parallax.plan import planning
    spec, analysis = parallax.ResourceSpec.load("localhost:2"), parallax.analyze(g)
    found, draws = batch_statistics.statistics_of_the_batch(g, analysis), batch_draws.draws_following_the_batch(g)
    plan, _ = planning._planned(g, analysis, spec, parallax.Config(), found, draws)
    return found, planning._checked(g, analysis, plan, found, draws)


@pytest.mark.parametrize("loss_of, read_whole", [
    (lambda e, total: tf.reduce_mean(e) / (total + 1.0), 1),  # a smoothing: S + 1 is not N * (S / N + 1)
    # a guard the whole sum passes and the workers' mean does not (8 examples of |normal| sum to about 6.4)
    (lambda e, total: tf.reduce_sum(e) / tf.maximum(total, 5.0), 1),
    (lambda e, total: tf.reduce_mean(e) * (tf.cast(tf.shape(e)[0], tf.float64) - total / 2.0), 2),  # and the size
    (lambda e, total: tf.reduce_mean(e) * tf.math.log(total + 2.0), 1),  # a factor: log(S / N + 2)
    # sizes of the batch alone: a guard on one, a root of one
    (lambda e, total: tf.reduce_sum(e) / tf.maximum(tf.cast(tf.shape(e)[0], tf.float64), 6.0), 1),
    (lambda e, total: tf.reduce_sum(e) / tf.sqrt(tf.cast(tf.size(e), tf.float64)), 1),
])
def test_a_sum_of_the_data_read_through_a_function_not_proportional_to_it_is_read_whole(loss_of, read_whole):
    """At the workers' mean S / N, f(S / N) is no share of one device's f(S): the check lists every variable (it
    was silent before, not run where statistics are combined). The plan reads the sum whole, the workers' sum, and
    the batch's size the forward pass reads too; each worker's loss is then its examples' part of one device's,
    whose law the gradients follow."""
    g = _sum_statistic_graph(loss_of)
    found, listed = _at_the_workers_mean(g)
    assert {law for _, law, _ in found.combined} <= {"mean"} and listed
    plan = parallax.explain(g, "localhost:2", print_table=False).plan
    assert plan.uncombinable_statistics == ()
    assert [law for _, law, _ in plan.batch_statistics] == ["sum"] * read_whole


def test_a_sum_the_loss_divides_by_stays_the_workers_mean():
    """sum(errors) / S: the workers' mean of S makes each worker's loss its share of one device's mean, which the
    check confirms; reading it whole would make the loss a sum, exact too, but the rule that holds is kept."""
    g = _sum_statistic_graph(lambda e, total: tf.reduce_sum(e * tf.abs(e)) / total)
    found, listed = _at_the_workers_mean(g)
    assert listed == []
    plan = parallax.explain(g, "localhost:2", print_table=False).plan
    assert plan.uncombinable_statistics == () and {law for _, law, _ in plan.batch_statistics} == {"mean"}


def test_a_sum_of_variables_under_a_root_is_read_whole_with_its_gradient_summed():
    """tf.norm of the errors as the loss: the root of the workers' mean of the summed squares, with the workers'
    mean of the gradient flowing into it, is sqrt(N) off one device's gradient. The check pools that gradient over
    the halves as the rewrite pools it over the workers, and lists the variables; read whole, the sum and the
    gradient flowing into it are the workers' sums."""
    g = _sum_statistic_graph(lambda e, total: tf.sqrt(tf.reduce_sum(e)))
    found, listed = _at_the_workers_mean(g)
    assert found.upstream and listed
    plan = parallax.explain(g, "localhost:2", print_table=False).plan
    assert plan.uncombinable_statistics == ()
    assert [law for _, law, _ in plan.batch_statistics] == ["sum", "sum"]


def test_batch_normalization_by_hand_is_exact_at_the_workers_mean():
    """tf.nn.moments over the batch: its mean and variance are means (one device's at the workers' mean), and the
    gradient flowing into them pooled as their mean over the halves makes the parts' gradients the whole's."""
    def normalized(e, total):
        mean, variance = tf.nn.moments(e, [0])
        return tf.reduce_mean(tf.square((e - mean) / tf.sqrt(variance + 1e-3) - 0.5))
    g = _sum_statistic_graph(normalized)
    found, listed = _at_the_workers_mean(g)
    assert found.upstream and listed == []
    plan = parallax.explain(g, "localhost:2", print_table=False).plan
    assert plan.uncombinable_statistics == () and {law for _, law, _ in plan.batch_statistics} == {"mean"}


def test_a_guard_on_a_per_id_count_shows_on_the_rare_id_trial():
    """Each id's mean error over its count guarded by max(count, 1): where an id comes once in the whole batch, a
    worker's half of its count is guarded to 1. Of three ids drawn at random over 8 examples, none came once in
    any trial, so the check passed a plan 0.017 off; the third trial holds one id once (RARE_ID_TRIAL). The ones
    the count adds up (tf.ones_like of the targets) are each example's own, so they end no region of paired
    rows, which would have kept the check from running."""
    from tests.equivalence.user_graphs_unseen import per_id_mean_error_guarded
    g = per_id_mean_error_guarded(2, 4, 1, 4).graph
    found, listed = _at_the_workers_mean(g)
    assert found.paired == () and listed
    plan = parallax.explain(g, "localhost:2", print_table=False).plan
    assert plan.uncombinable_statistics == () and {law for _, law, _ in plan.batch_statistics} == {"sum"}
