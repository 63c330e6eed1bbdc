"""Planning runs the user's graph on random batches (batch_samples.py); a run that waits on a buffer the script
itself fills, as tf_cnn_benchmarks' StagingArea prefetch, ignores TF's timeout, and planning hung. It is abandoned
after PROBE_LIMIT_S, said so, and planning goes on without those checks (issue 57, item 9)."""
import time

import pytest
import tensorflow as tf
from tensorflow.python.ops import data_flow_ops

import parallax
from parallax.analysis import batch_samples
from parallax.runtime.get_runner import plan_warnings

tf1 = tf.compat.v1


def _staged_graph():
    g = tf.Graph()
    with g.as_default():
        images = tf1.placeholder(tf.float32, [None, 4], "images")  # the script puts each batch, then trains on it
        area = data_flow_ops.StagingArea([tf.float32], shapes=[[None, 4]])
        area.put([images], name="stage_put")
        staged = area.get()
        staged = staged[0] if isinstance(staged, (list, tuple)) else staged
        w = tf1.get_variable("w", [4, 1])
        tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.square(tf.matmul(staged, w))))
    return g


@pytest.mark.parametrize("mode", ["MPI", "PS", "HYBRID"])
def test_a_probe_that_waits_on_a_staging_area_is_abandoned_and_planning_goes_on(mode, monkeypatch, capfd):
    monkeypatch.setattr(batch_samples, "PROBE_LIMIT_S", 1.0)
    started = time.monotonic()
    plan = parallax.explain(_staged_graph(), "localhost:2", parallax.Config(run_option=mode),
                            print_table=False).plan
    took = time.monotonic() - started
    err = capfd.readouterr().err
    assert plan.num_workers == 2 and took < 30, took
    assert err.count("a probe of the graph on random batches did not end within 1 s") == 1, err
    assert "StagingArea" in err
    assert any("could not be checked on random batches" in note for note in plan_warnings(plan))
