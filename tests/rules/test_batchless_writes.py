"""Writes of the training step that read no input that can end wait for it (batchless_writes.py): a step whose
input ends writes nothing, in every mode (issue 57, item 4: sparse Adam's slot decays ran in the step where an
epoch's data ended in MPI, as on one device, and not in PS or HYBRID, so the modes differed by 1.5e-2 after three
epochs)."""
import numpy as np
import pytest
import tensorflow as tf

import parallax
from parallax.rules import batchless_writes
from parallax.plan import plan_json
from parallax.explain import premise
from parallax.rewrite.pipeline import passes_for, rewrite
from tests.rule_jobs import EPOCHS, EXAMPLES, epoch_graph, run_epochs
from tests.rule_jobs_run import rule_jobs

tf1 = tf.compat.v1


def _found(g):
    analysis = parallax.analyze(g)
    return batchless_writes.writes_without_the_batch(
        g, [n for v in analysis.trained_variables for p in v.parts for n in p.update_ops])


def test_sparse_adams_slot_decays_are_the_writes_that_read_no_batch():
    g, _, _, _ = epoch_graph(4, sharded=False)
    found = _found(g)
    assert found and {inputs for _, inputs in found} == {("IteratorGetNext",)}, found
    # the decays of m and v (assignments of m * beta1 and v * beta2), not the rows' scatter-adds or the step
    assert len(found) == 2 and all(g.get_operation_by_name(w).type.startswith("Assign") for w, _ in found), found


def test_a_fed_step_has_none():
    g = tf.Graph()
    with g.as_default():
        ids = tf1.placeholder(tf.int32, [None])
        emb = tf1.get_variable("emb", [7, 3], tf.float64)
        tf1.train.AdamOptimizer(0.1).minimize(tf.reduce_sum(tf.nn.embedding_lookup(emb, ids)))
    assert _found(g) == ()


@pytest.mark.parametrize("mode", ["MPI", "PS", "HYBRID"])
def test_the_rewrite_makes_them_wait_and_the_plan_and_explain_carry_them(mode):
    g, _, _, _ = epoch_graph(2, sharded=True)
    config = parallax.Config(run_option=mode, collective_backend="tf")
    plan = parallax.explain(g, "localhost:2", config, print_table=False).plan
    assert plan.batchless_writes == _found(g) != ()
    assert plan_json.loads(plan_json.dumps(plan)) == plan
    assert "a step whose input ends (an epoch's last) writes nothing" in premise(plan, parallax.analyze(g))
    assert not batchless_writes.waits_for_the_batch(g, plan.batchless_writes)  # the user's graph is left as it is
    assert "wait_for_the_batch" in [p.name for p in passes_for(plan)]
    assert batchless_writes.waits_for_the_batch(rewrite(g, plan, config).graph, plan.batchless_writes)


def _one_device(steps_per_epoch=None):
    g, iterator, train, emb = epoch_graph(4, sharded=False)
    with tf1.Session(graph=g) as sess:
        sess.run(tf1.global_variables_initializer())
        run_epochs(sess.run, iterator, train, steps_per_epoch)
        return sess.run(emb)


WHOLE_STEPS = -(-EXAMPLES // 4)  # a step of one device's batch of 4: the last of an epoch is short


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    return rule_jobs("epoch_end", tmp_path_factory.mktemp("epoch_end"))


@pytest.fixture(scope="module")
def one_device():
    """(one device that never runs the step its input ends in, one device that runs into the end each epoch)"""
    return _one_device(WHOLE_STEPS), _one_device()


@pytest.mark.slow  # three thread jobs in a process of their own: about 12 s
@pytest.mark.parametrize("mode", ["MPI", "PS", "HYBRID"])
def test_a_step_whose_input_ends_writes_nothing_in_every_mode(jobs, one_device, mode):
    expected, partial = one_device
    got = np.asarray(jobs[mode]["chief"])
    assert np.max(np.abs(got - expected)) <= 1e-9, np.max(np.abs(got - expected))
    assert np.max(np.abs(partial - expected)) > 1e-3  # one device's partial steps do change the embedding
    warned = [line for line in jobs[mode]["stderr"].splitlines() if "the data ended in synchronized step" in line]
    assert len(warned) == 1 and f"step {WHOLE_STEPS + 1}." in warned[0] and "writes nothing" in warned[0], warned
    assert EPOCHS > 1  # the warning is once a job, not once an epoch
