"""parallax/thread_job.py (a job whose workers are threads, on in-process servers) and what it rests on: the
worker's context (launcher/protocol.py's ProcessContext) and a fingerprint that two builds in one process share.
The jobs run in one process started with the bind shim (thread_job_scenarios.py), as a ServerPool requires."""
import json
import os
import subprocess
import sys
import threading

import pytest
import tensorflow as tf

from parallax.errors import LaunchError
from parallax.process import bind_shim, control_lines, protocol
from parallax.rewrite import fingerprint
from tests.equivalence.run_case import case_builder

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SCENARIOS = os.path.join(ROOT, "tests", "thread_job_scenarios.py")


@pytest.fixture(scope="module")
def observed(tmp_path_factory):
    out = tmp_path_factory.mktemp("scenarios") / "observed.json"
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2", **bind_shim.preloading_environment())
    done = subprocess.run([sys.executable, SCENARIOS, str(out)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0 and out.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    results = json.loads(out.read_text())
    crashed = {name: r["crashed"] for name, r in results.items() if "crashed" in r}
    assert not crashed, crashed
    return results


@pytest.mark.slow  # the scenarios' process: about 20 s
def test_consecutive_jobs_on_one_pool_start_from_fresh_state_in_their_own_group(observed):
    first, second = observed["consecutive_jobs_start_fresh"]["first"], observed["consecutive_jobs_start_fresh"]["second"]
    # (rank, global step after the job, the job's collective group, parallax.shard's worker index)
    assert [r[0] for r in first] == [0, 1] and [r[3] for r in first] == [0, 1]
    assert [r[1] for r in first] == [3, 3]
    assert [r[1] for r in second] == [2, 2]  # not 5: the first job's variables were cleared
    assert first[0][2] == first[1][2] != second[0][2] == second[1][2]


@pytest.mark.slow  # the scenarios' process: about 20 s
def test_a_failed_worker_ends_the_job_at_once_and_breaks_the_pool(observed):
    failed = observed["a_failed_worker_ends_the_job"]
    assert failed["error"] == "ThreadJobError"
    assert "worker 1 failed: ValueError: planted failure" in failed["message"]
    assert failed["seconds"] < 30 and failed["pool_broken"]
    refused = observed["refused_after_broken"]
    assert "cannot run another job" in refused["message"]


@pytest.mark.slow  # the scenarios' process: about 20 s
def test_a_job_that_outlives_its_limit_says_where_each_worker_was(observed):
    stuck = observed["a_stuck_worker_is_a_timeout"]
    assert "did not end within 8 s" in stuck["message"]
    assert "worker 0: step 1" in stuck["message"] and "worker 1: no synchronized step" in stuck["message"]
    assert 8 <= stuck["seconds"] < 20
    # and where each blocked worker waits: worker 1 in the script's own wait, worker 0 in a session's run
    blocked = stuck["message"].split("--- worker 1 is blocked in ---")[1]
    assert "in block" in blocked and "forever.wait()" in blocked
    assert "--- worker 0 is blocked in ---" in stuck["message"]
    # The harness runs a case again on new servers only when no worker got past its first step (a hang seen on
    # reused servers, harness.run_case); a worker in step 1 is no such hang.
    from tests.equivalence.case_hosts import hung_before_any_step
    assert not hung_before_any_step(stuck["message"])
    assert hung_before_any_step("ThreadJobError: the job did not end within 60 s (worker 0: no synchronized step; "
                                "worker 1: no synchronized step); worker(s) [0, 1] did not end")


@pytest.mark.slow  # the scenarios' process: about 20 s
def test_workers_that_disagree_on_steps_fail_with_the_launchers_message(observed):
    disagree = observed["workers_that_disagree_on_steps"]
    assert "worker.1 stopped after 2 synchronized steps while worker.0 waits in step 3" in disagree["message"]
    assert disagree["seconds"] < 30


@pytest.mark.slow  # the scenarios' process: about 20 s
def test_a_script_that_never_calls_get_runner_and_horovod_are_refused(observed):
    assert "ended without calling parallax.get_runner" in observed["a_script_without_get_runner"]["message"]
    refused = observed["horovod_is_refused"]
    assert refused["error"] in ("UnsupportedError", "ConfigError")  # ConfigError where Horovod is not installed
    assert "horovod" in refused["message"].lower()


def test_a_server_pool_refuses_to_listen_on_every_address_without_the_bind_shim():
    from parallax.thread_job import ServerPool
    with pytest.raises(LaunchError, match="bind shim is preloaded"):
        ServerPool()


def test_each_thread_acts_as_its_own_process_and_the_process_keeps_its_environment(monkeypatch):
    monkeypatch.delenv(protocol.ENV_ROLE, raising=False)
    seen = {}

    def worker(rank):
        environ = {protocol.ENV_ROLE: "worker", protocol.ENV_WORKER_ID: str(rank), protocol.ENV_NUM_WORKERS: "2"}
        lines = []
        with protocol.ProcessContext(environ, lines.append, in_thread=True).acting():
            protocol.this_process().control(control_lines.Serving())
            seen[rank] = (protocol.current_role(), lines)
    threads = [threading.Thread(target=worker, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen[0] == (protocol.Role("worker", 0, 2), [control_lines.Serving()])
    assert seen[1] == (protocol.Role("worker", 1, 2), [control_lines.Serving()])
    assert protocol.current_role() == protocol.Role("launcher")  # this thread: the process's own environment


# What TF numbers by a counter of the process: v2 control flow's functions (rnn_while_body_79, then _856), whose
# arguments carry those names; tf.data's functions; a py_func's token in the process's registry (pyfunc_0, then
# pyfunc_1); a custom gradient's registered name (CustomGradient-28, then -227).
@pytest.mark.parametrize("case", ["lstm_lm", "padded_final_state", "py_func_example_weights", "custom_gradient_clip"])
def test_two_builds_of_a_graph_in_one_process_have_one_fingerprint(case):
    tf.compat.v1.enable_control_flow_v2()
    first, second = (case_builder(case)(2, 4, 6, 4, 1.0).graph.as_graph_def() for _ in range(2))
    assert first.SerializeToString(deterministic=True) != second.SerializeToString(deterministic=True)
    assert fingerprint.graph_fingerprint(first) == fingerprint.graph_fingerprint(second)
