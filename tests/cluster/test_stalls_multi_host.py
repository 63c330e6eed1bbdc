"""A job never hangs silently, on the 2-host test bed: a stopped worker or server is named and the job ends, the
chief's death is named, and a signal to the launcher tears down every host within 5 s."""
import os
import signal
import time

import pytest

from tests.cluster.conftest import JOB, Job, assert_nothing_left

WARNING, TIMEOUT = 3, 10


def _training(cluster, tmp_path, run_option, stall_flags=True):
    # The limits come from parallax-launch's options, or from the script's Config (which the launcher reads when
    # it plans): both are tested.
    flags = ["--stall-warning", str(WARNING), "--stall-timeout", str(TIMEOUT)] if stall_flags else []
    env = {"JOB_LOOP": "1", "JOB_RUN_OPTION": run_option}
    if not stall_flags:
        env["JOB_STALL"] = f"{WARNING},{TIMEOUT}"
    job = Job(cluster, tmp_path, [JOB], flags, env=env)
    job.wait_for_output("is training")
    return job


def _label(cluster, name):
    role, index = name.split(".")
    host = cluster.hosts[int(index) // cluster.slots] if role == "worker" else cluster.hosts[int(index)]
    return f"{host}/{role}/{index}"


@pytest.mark.parametrize("run_option, victim, stall_flags", [
    ("HYBRID", "worker.3", True), ("MPI", "worker.1", False), ("PS", "ps.1", True)])
def test_a_stopped_process_is_named_and_the_job_ends_on_every_host(cluster, tmp_path, run_option, victim,
                                                                   stall_flags):
    job = _training(cluster, tmp_path, run_option, stall_flags)
    os.kill(job.recorded_pid(victim), signal.SIGSTOP)
    stopped_at = time.time()
    code = job.wait(timeout=90)
    took = time.time() - stopped_at
    print(f"{run_option}: stopped {victim} -> exit {code} after {took:.1f} s")
    label = _label(cluster, victim)
    assert code == 1, job.output[-3000:]
    assert f"parallax: stall: {label} has sent nothing for {WARNING} s" in job.output, job.output[-3000:]
    assert f"job failed: {label} has sent nothing for 1" in job.output, job.output[-3000:]
    assert took < TIMEOUT + 8, took
    assert_nothing_left(cluster)


@pytest.mark.parametrize("run_option", ["PS", "HYBRID"])
def test_the_chiefs_death_is_named_first_on_the_test_bed(cluster, tmp_path, run_option):
    job = _training(cluster, tmp_path, run_option)
    os.kill(job.recorded_pid("worker.0"), signal.SIGKILL)
    code = job.wait(timeout=60)
    assert code != 0
    assert f"job failed: {cluster.hosts[0]}/worker/0 was killed by signal 9" in job.output, job.output[-3000:]
    assert_nothing_left(cluster)


def test_a_worker_that_ends_early_ends_the_job_naming_it(cluster, tmp_path):
    job = Job(cluster, tmp_path, [JOB], env={"JOB_LOOP": "1", "JOB_RUN_OPTION": "HYBRID", "JOB_STEPS_RANK": "3,5"})
    code = job.wait(timeout=120)
    assert code == 1, job.output[-3000:]
    assert f"job failed: {cluster.hosts[1]}/worker/3 stopped after 5 synchronized steps while" in job.output
    assert "every worker must run the same number of synchronized steps" in job.output
    assert_nothing_left(cluster)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_the_launcher_tears_down_every_host_within_5_s(cluster, tmp_path, sig):
    job = _training(cluster, tmp_path, "PS")
    os.kill(job.proc.pid, sig)
    signalled = time.time()
    code = job.wait(timeout=60)
    took = time.time() - signalled
    print(f"signal {sig} -> launcher exit after {took:.2f} s")
    assert code == 128 + sig and "all processes torn down" in job.output, job.output[-3000:]
    assert took <= 5.0, took
    assert_nothing_left(cluster, within=0.5)
