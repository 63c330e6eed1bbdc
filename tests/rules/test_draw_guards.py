"""Random draws parallax cannot split that only some branches of a cond run (draw_guards.py): which guard each
gets, and that a job warns of one at the step that runs it, in every mode, not at start (issue 57, item 8: a
warning about dropout's draw in `dropout/cond`, which the steps never ran)."""
import re

import pytest
import tensorflow as tf

from parallax.rules import batch_draws, draw_guards
from parallax.plan import plan_json
from parallax.plan.records import Plan
from tests.rule_jobs_run import rule_jobs

tf1 = tf.compat.v1


def _found(build, v2=True):
    (tf1.enable_control_flow_v2 if v2 else tf1.disable_control_flow_v2)()
    try:
        g = tf.Graph()
        with g.as_default():
            x = tf1.placeholder(tf.float32, [None, 4], "x")
            build(x, tf1.placeholder_with_default(False, [], "flag"))
        return batch_draws.draws_following_the_batch(g)
    finally:
        tf1.enable_control_flow_v2()


def _unsplittable(x):
    """A draw that reads the batch's values: parallax cannot split it."""
    return tf.cast(tf.random.categorical(x, 1, seed=1), tf.float32)


def test_a_draw_in_one_branch_of_a_v2_cond_runs_when_the_cond_takes_it():
    found = _found(lambda x, flag: tf.cond(flag, lambda: tf1.layers.dropout(x, 0.5, training=True), lambda: x))
    [(entry, runs, pred, kind, branches, count)] = found.guarded
    assert entry in found.unsplittable and re.match(r"cond: .*RandomUniform$", entry), found
    assert (runs, pred, kind, branches, count) == ("cond", "flag:0", draw_guards.IF, (0,), 2)
    found = _found(lambda x, flag: tf.cond(flag, lambda: x, lambda: _unsplittable(x)))
    assert [g[4] for g in found.guarded] == [(1,)]  # the else branch


def test_a_switch_case_and_a_v1_cond_are_guards_too():
    found = _found(lambda x, flag: tf.switch_case(tf.cast(flag, tf.int32), [lambda: x, lambda: _unsplittable(x),
                                                                             lambda: x]))
    [(_, _, pred, kind, branches, count)] = found.guarded
    assert (pred, kind, branches, count) == ("Cast:0", draw_guards.CASE, (1,), 3)
    found = _found(lambda x, flag: tf1.cond(flag, lambda: _unsplittable(x), lambda: x), v2=False)
    [(entry, runs, pred, kind, branches, count)] = found.guarded
    assert entry == runs and entry.endswith("Multinomial") and (pred, kind, branches) == ("cond/pred_id:0", "if", (0,))


def test_a_draw_every_branch_or_a_loop_runs_has_no_guard():
    found = _found(lambda x, flag: tf.cond(flag, lambda: _unsplittable(x), lambda: _unsplittable(x) * 2))
    assert found.unsplittable and not found.guarded
    found = _found(lambda x, flag: tf.while_loop(lambda i, a: i < 2, lambda i, a: (i + 1, _unsplittable(a) + a),
                                                 [0, x]))
    assert found.unsplittable and not found.guarded
    found = _found(lambda x, flag: tf1.while_loop(lambda i, a: i < 2, lambda i, a: (i + 1, _unsplittable(a) + a),
                                                  [0, x]), v2=False)
    assert found.unsplittable and not found.guarded


def test_the_taken_branch_is_tfs():
    assert [draw_guards.taken_branch("if", v, 2) for v in (True, False, 3, 0)] == [0, 1, 0, 1]
    assert [draw_guards.taken_branch("case", v, 3) for v in (0, 2, 3, -1)] == [0, 2, 2, 2]


def test_the_plan_and_explain_state_a_guarded_draw_apart():
    guard = ("cond: d/RandomUniform", "cond", "flag:0", "if", (0,), 2)
    plan = Plan("HYBRID", 2, 1, (), unsplittable_draws=("cond: d/RandomUniform", "m/Multinomial"),
                guarded_draws=(guard,))
    assert batch_draws.unsplittable_note(plan).startswith("random draw(s) m/Multinomial depend")
    assert "cond: d/RandomUniform" in batch_draws.guarded_note(plan) and "warned of when it runs" in \
        batch_draws.guarded_note(plan)
    assert "cond: d/RandomUniform (cannot be split: differs from one device's in a step that runs it)" in str(plan)
    assert plan_json.loads(plan_json.dumps(plan)) == plan


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    return rule_jobs("draw_guards", tmp_path_factory.mktemp("draw_guards"))


@pytest.mark.slow  # three thread jobs in a process of their own: about 12 s
@pytest.mark.parametrize("mode", ["MPI", "PS", "HYBRID"])
def test_a_job_warns_of_dropouts_draw_at_the_first_step_that_runs_it(jobs, mode):
    printed = jobs[mode]["stderr"]
    assert "random draw(s)" not in printed, printed  # no warning at start: no step had run it
    warned = sorted(line for line in printed.splitlines() if "ran random draw" in line)
    step = jobs[mode]["fed_from"]
    assert [line.split(": ")[1:3] for line in warned] == [
        ["warning", "worker 0"], ["warning", "worker 1"]], printed  # once per worker, not at every later step
    assert all(f"synchronized step {step} ran random draw dropout/cond: " in line and "training:0 is True" in line
               for line in warned), warned
