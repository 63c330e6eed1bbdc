"""The collective backends (parallax/collectives): choosing one, and real jobs on TensorFlow's own collectives,
also where Horovod cannot be imported at all."""
import os
import re
import signal
import time

import pytest
import tensorflow as tf

import parallax
from parallax import collectives
from parallax.errors import ConfigError
from parallax.launcher import processes
from parallax.launcher.job import servers_of
from parallax.plan.planning import plan_job
from tests.models_for_tests import embedding_mlp
from tests.test_launcher import ROOT, _finish, _start

pytestmark = pytest.mark.alone  # make test runs it one test at a time: it times a dead peer's detection

tf1 = tf.compat.v1
NO_HOROVOD = os.path.join(ROOT, "tests", "no_horovod")
TWO = parallax.ResourceSpec.load("localhost:2")


def test_a_backend_not_known_is_a_config_error_listing_the_choices():
    with pytest.raises(ConfigError, match="'auto', 'horovod', 'tf'"):
        parallax.Config(collective_backend="nccl")


def test_auto_takes_horovod_for_dense_allreduces_where_it_loads_and_tf_otherwise(monkeypatch):
    assert collectives.resolve("tf", dense_only=True) == "tf"
    assert collectives.resolve("auto") == "tf"  # sparse rows allgathered, or servers: tf (backends.md)
    assert collectives.resolve("auto", dense_only=True) == ("horovod" if collectives.horovod_problem() is None
                                                            else "tf")
    monkeypatch.setattr(collectives, "horovod_problem", lambda: "horovod.tensorflow cannot be imported (x)")
    assert collectives.resolve("auto", dense_only=True) == "tf"
    with pytest.raises(ConfigError, match="pip install --no-build-isolation horovod==0.28.1.*collective_backend='tf'"):
        collectives.resolve("horovod")


def test_the_plan_records_the_backend_and_the_launcher_gives_workers_servers_for_it():
    g, _ = embedding_mlp.build("Adam")
    for backend, worker_servers in (("tf", True), ("horovod", False)):
        if backend == "horovod" and collectives.horovod_problem():
            continue
        plan = plan_job(g, parallax.analyze(g), TWO, parallax.Config(run_option="MPI", collective_backend=backend))
        assert plan.backend == backend and f"collectives={backend}" in str(plan)
        assert servers_of(plan, "MPI", 1) == (0, worker_servers)
    ps = plan_job(g, parallax.analyze(g), TWO, parallax.Config(run_option="PS", collective_backend="tf"))
    assert ps.backend == "none" and servers_of(ps, "PS", 1) == (1, True)
    # no plan (a command that cannot be run once to plan): servers for what the workers may plan, none for one
    assert servers_of(None, "PS", 2, 4) == (2, True) and servers_of(None, "MPI", 2, 4) == (0, True)
    assert servers_of(None, "PS", 1, 1) == (0, False) and servers_of(None, "HYBRID", 1, 1) == (0, False)
    # "auto" from what the plan's collectives are: embedding_mlp's sparse rows are allgathered in MPI mode
    assert plan_job(g, parallax.analyze(g), TWO, parallax.Config(run_option="MPI")).backend == "tf"
    expected = "horovod" if collectives.horovod_problem() is None else "tf"
    for normalized, backend in ((False, expected), (True, "tf")):
        dense = tf.Graph()
        with dense.as_default():
            x = tf1.placeholder(tf.float32, [None, 2])
            w = tf1.get_variable("w", [2, 1], use_resource=True)
            h = tf.matmul(x, w)
            if normalized:  # the batch's moments are gathered inside the step, one gather after another
                mean, variance = tf.nn.moments(h, axes=[0])
                h = tf.nn.batch_normalization(h, mean, variance, None, None, 1e-3)
            tf1.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_mean(tf.square(h)))
        plan = plan_job(dense, parallax.analyze(dense), TWO, parallax.Config(run_option="MPI"))
        assert plan.gathers_in_step == normalized and plan.backend == backend, (normalized, plan.backend)


def test_without_horovod_auto_runs_the_job_on_tf_collectives(tmp_path):
    code, out = _finish(_start({"PYTHONPATH": os.pathsep.join([NO_HOROVOD, ROOT])}, tmp_path), timeout=180)
    assert code == 0, out
    assert "(MPI, collectives: tf)" in out, out
    assert "started worker 1" in out


def test_a_dead_peer_ends_a_tf_collectives_job_naming_it(tmp_path):
    proc = _start({"JOB_BACKEND": "tf", "JOB_LOOP": "1"}, tmp_path)
    deadline = time.time() + 120
    while not (tmp_path / "identity.1").exists() or not (tmp_path / "identity.0").exists():
        assert time.time() < deadline and proc.poll() is None, "the job did not start"
        time.sleep(0.3)
    time.sleep(3)  # in mid-training
    pids = [int((tmp_path / f"identity.{w}").read_text().split()[3]) for w in (0, 1)]
    killed_at = time.time()
    os.kill(pids[1], signal.SIGKILL)
    code, out = _finish(proc, timeout=120)
    assert code != 0
    assert "job failed: localhost/worker/1 was killed by signal 9" in out, out  # the cause, not a survivor
    # where the survivor waited for it: the step and its fetch set (the launcher has the workers' step reports)
    assert re.search(r"localhost/worker/0 was in synchronized step \d+ \(\S+\), whose collectives", out), out
    assert time.time() - killed_at < 60
    deadline = time.time() + 10
    while any(processes.alive(p) for p in pids) and time.time() < deadline:
        time.sleep(0.2)
    assert not any(processes.alive(p) for p in pids)


def test_a_tf_error_naming_a_collective_is_told_as_that_collective():
    message = ("Socket closed\n\t [[{{node GroupCrossDeviceControlEdges_1/Const_1_S82}}]]\n"
               "\t [[{{node parallax_allreduce/w/allreduce}}]]")
    assert collectives.collective_named(message, {"parallax_allreduce/w/allreduce"}) == "parallax_allreduce/w/allreduce"
    assert collectives.collective_named(message, {"parallax_allgather/e/rows"}) is None
    assert collectives.collective_named(None, {"x"}) is None
