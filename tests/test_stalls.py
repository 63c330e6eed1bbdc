"""A job never hangs silently (real processes on localhost): a stopped worker or server is named by the watchdog and
the job ends; a dead chief is named as the first failure; a signal to the launcher tears everything down within
5 s; a failure report carries the error's cause, not TF's header."""
import os
import re
import signal
import time

import pytest

from tests.test_launcher import PS_SPEC, _assert_all_gone, _finish, _recorded_pids, _start, _wait_for

pytestmark = pytest.mark.alone  # make test runs it one test at a time: it times stalls and teardowns

STALL = {"JOB_STALL": "2,6"}  # warn after 2 s, end after 6 s: heartbeats every 0.5 s, and this test runs alone
SPECS = {"MPI": "localhost:2", "PS": PS_SPEC, "HYBRID": PS_SPEC}
HOST_OF_WORKER_1 = {"MPI": "localhost", "PS": "127.0.0.2", "HYBRID": "127.0.0.2"}


def _silent_for(out, failure):
    """The seconds of silence the launcher's failure line `failure ... has sent nothing for N s` names."""
    found = re.search(re.escape(failure) + r" has sent nothing for (\d+) s", out)
    assert found, out[-3000:]
    return int(found.group(1))


def _training(tmp_path, run_option, **env):
    proc = _start(dict(STALL, JOB_LOOP="1", JOB_RUN_OPTION=run_option, JOB_SPEC=SPECS[run_option], **env), tmp_path)
    _wait_for(lambda: len(_recorded_pids(tmp_path, "pid.worker.*")) == 2 and os.path.exists(tmp_path / "identity.1"))
    time.sleep(1)  # some steps (a step takes about 0.1 s)
    return proc, _recorded_pids(tmp_path, "pid.*")  # the servers the plan needs are up before any worker


@pytest.mark.parametrize("run_option", ["MPI", "PS", "HYBRID"])
def test_a_stopped_worker_is_named_and_the_job_ends(tmp_path, run_option):
    proc, everything = _training(tmp_path, run_option)
    os.kill(everything["pid.worker.1"], signal.SIGSTOP)
    stopped_at = time.time()
    code, out = _finish(proc, timeout=60)
    took = time.time() - stopped_at
    print(f"{run_option}: stopped worker -> exit {code} after {took:.1f} s")
    label = f"{HOST_OF_WORKER_1[run_option]}/worker/1"
    assert code == 1, out[-3000:]
    assert f"parallax: stall: {label} has sent nothing for 2 s" in out, out[-3000:]
    assert _silent_for(out, f"job failed: {label}") >= 6 and "stall_timeout_s=6" in out, out[-3000:]
    assert took < 6 + 8, took
    _assert_all_gone(list(everything.values()))


@pytest.mark.parametrize("run_option", ["PS", "HYBRID"])  # HYBRID: with an embedding, whose rows live on a server
def test_a_stopped_parameter_server_is_named_and_the_job_ends(tmp_path, run_option):
    proc, everything = _training(tmp_path, run_option, JOB_SPARSE="1")
    assert "pid.ps.0" in everything
    os.kill(everything["pid.ps.0"], signal.SIGSTOP)
    code, out = _finish(proc, timeout=60)
    assert code == 1, out[-3000:]
    assert _silent_for(out, "job failed: 127.0.0.1/ps/0") >= 6 and "a parameter server" in out, out[-3000:]
    _assert_all_gone(list(everything.values()))


@pytest.mark.parametrize("run_option", ["MPI", "PS", "HYBRID"])
def test_the_chiefs_death_is_named_first(tmp_path, run_option):
    proc, everything = _training(tmp_path, run_option)
    os.kill(everything["pid.worker.0"], signal.SIGKILL)
    code, out = _finish(proc, timeout=60)
    assert code != 0, out[-3000:]
    chief = "localhost" if run_option == "MPI" else "127.0.0.1"
    assert f"job failed: {chief}/worker/0 was killed by signal 9 (SIGKILL)" in out, out[-3000:]
    _assert_all_gone(list(everything.values()))


@pytest.mark.parametrize("run_option, sig", [("MPI", signal.SIGTERM), ("PS", signal.SIGINT),
                                             ("HYBRID", signal.SIGTERM)])
def test_a_signal_to_the_launcher_tears_down_within_5_s(tmp_path, run_option, sig):
    proc, everything = _training(tmp_path, run_option)
    os.kill(proc.pid, sig)
    signalled = time.time()
    code, out = _finish(proc, timeout=60)
    took = time.time() - signalled
    print(f"{run_option}: signal {sig} -> exit after {took:.2f} s")
    assert code == 128 + sig and "all processes torn down" in out, out[-3000:]
    assert took <= 5.0, took
    _assert_all_gone(list(everything.values()), within=0.5)


def test_a_failure_report_carries_the_cause_not_tfs_header(tmp_path):
    code, out = _finish(_start({"JOB_BAD_FEED_RANK": "1"}, tmp_path))
    assert code == 1, out[-3000:]
    failed = next(line for line in out.splitlines() if "job failed:" in line)
    assert "localhost/worker/1 failed first: InvalidArgumentError: Matrix size-incompatible" in failed, failed
    assert "Graph execution error" not in failed
