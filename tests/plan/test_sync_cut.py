"""The sync cut is decided in planning (plan/sync_cut.py), shown by explain, and obeyed by the rewrite
(rewrite/sync_passes.py): the values it names are those the chief sends, and no others."""
import dataclasses

import pytest
import tensorflow as tf

import parallax
from parallax.plan.planning import plan_job
from parallax.plan.records import SyncBroadcast
from parallax.plan.sync_cut import decide_sync_cut
from parallax.rewrite import rewrite
from tests.models_for_tests import embedding_mlp

tf1 = tf.compat.v1
TWO_HOSTS = parallax.ResourceSpec.parse("127.0.0.1: 0,1\n127.0.0.2: 0,1")
HYBRID = parallax.Config(run_option="HYBRID", collective_backend="tf")


@pytest.fixture(scope="module")
def clipped():
    """HYBRID, the embedding's rows on the servers and the dense gradients clipped by a global norm over all: the
    clip scale of the replicated gradients is computed from an aggregate only the chief takes."""
    g, _ = embedding_mlp.build("Adam", clip=1.0)
    return g, plan_job(g, parallax.analyze(g), TWO_HOSTS, HYBRID)


def test_planning_names_the_one_scalar_that_separates_the_chief_from_every_worker(clipped):
    g, plan = clipped
    (sent,) = plan.sync_broadcasts
    assert sent.aggregate == "" and g.get_tensor_by_name(sent.tensor).shape.num_elements() == 1
    assert "global_norm" in sent.tensor or "clip" in sent.tensor


def test_explain_prints_the_cut_from_the_plan(clipped):
    g, plan = clipped
    text = str(parallax.explain(g, TWO_HOSTS, HYBRID, print_table=False))
    assert "sent by the chief to every worker in each step (" in text and plan.sync_broadcasts[0].tensor in text


def test_the_rewrite_sends_what_the_plan_names(clipped):
    g, plan = clipped
    out = rewrite(g, plan, HYBRID)
    assert [chief_value for chief_value, _, _ in out.sync.broadcasts] == [plan.sync_broadcasts[0].tensor]
    # A plan that sends nothing leaves the replicated updates computed from a value only the chief has: the rewrite
    # does not look for another cut, and every worker's part of the step is refused.
    out = rewrite(g, dataclasses.replace(plan, sync_broadcasts=()), HYBRID)
    assert out.sync.broadcasts == () and out.sync.unsupported


def test_a_plan_made_without_planning_gets_the_same_cut(clipped):
    g, plan = clipped
    undecided = dataclasses.replace(plan, sync_broadcasts=None)
    assert rewrite(g, undecided, HYBRID).sync.broadcasts == rewrite(g, plan, HYBRID).sync.broadcasts


def test_an_aggregate_itself_is_sent_when_it_is_the_smallest_value(tmp_path):
    """A dense server variable's aggregated gradient (one float) read by a replicated variable's update: the
    cheapest value to send is the aggregate the chief takes."""
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, 4], name="x")
        scale = tf1.get_variable("scale", [1])
        w = tf1.get_variable("w", [4, 3])
        loss = tf.reduce_mean(tf.matmul(x, w) * scale)
        (g_scale, g_w) = tf1.gradients(loss, [scale, w])
        optimizer = tf1.train.GradientDescentOptimizer(0.1)
        tf.group(optimizer.apply_gradients([(g_scale, scale)]),
                 optimizer.apply_gradients([(g_w * tf.reduce_sum(g_scale), w)]), name="train")
    config = parallax.Config(run_option="HYBRID", collective_backend="tf", methods={"scale": "PS"})
    plan = plan_job(g, parallax.analyze(g), TWO_HOSTS, config)
    assert plan.variable("scale").method == "PS" and plan.variable("w").method == "AR"
    assert decide_sync_cut(g, plan) == plan.sync_broadcasts == (SyncBroadcast("", "scale"),)
    out = rewrite(g, plan, config)
    (chief_value, _, _), = out.sync.broadcasts
    assert chief_value.startswith("parallax_ps/scale/") and not out.sync.unsupported


def test_no_servers_no_cut():
    g, _ = embedding_mlp.build("Adam", clip=1.0)
    plan = plan_job(g, parallax.analyze(g), TWO_HOSTS, parallax.Config(run_option="MPI", collective_backend="tf"))
    assert plan.sync_broadcasts == ()
