"""Transport ssh on this machine: workers start without mpirun (spawn.py), agree on their graph over TF, and MPI
or Horovod is refused. The multi-host behaviour is in tests/cluster/test_ssh_transport.py."""
import os
import signal
import subprocess
import sys
import time

import pytest

from parallax.config import Config
from parallax.errors import ConfigError
from parallax.launcher import rank_output, spawn

pytestmark = pytest.mark.alone  # make test runs it one test at a time: it waits on a job's start with a deadline

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
JOB = os.path.join(ROOT, "tests", "launcher_scripts", "job.py")


def _launch(tmp_path, env_extra, *args):
    (tmp_path / "jobs").mkdir(exist_ok=True)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT, TMPDIR=str(tmp_path / "jobs"), **env_extra)
    return subprocess.Popen([sys.executable, "-m", "parallax.launcher.cli", "-H", "localhost:2", "--transport", "ssh",
                             *args, "--", sys.executable, JOB], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def test_workers_that_built_different_graphs_are_stopped_over_tf(tmp_path):
    out, _ = _launch(tmp_path, {"JOB_RUN_OPTION": "PS", "JOB_MISMATCH_RANK": "1"}).communicate(timeout=180)
    assert "transport: ssh" in out and "[launcher/mpirun]" not in out and "[launcher/spawn]" in out
    assert "GraphMismatchError: worker 1 built a different rewritten graph than worker 0" in out, out[-3000:]
    assert "first differing node: 'mul/y'" in out


def test_a_killed_worker_is_named_without_mpirun(tmp_path):
    # get_runner's own launch, with Config(transport="ssh"), rather than parallax-launch
    (tmp_path / "jobs").mkdir()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT, TMPDIR=str(tmp_path / "jobs"),
               JOB_RUN_OPTION="HYBRID", JOB_SPARSE="1", JOB_LOOP="1", JOB_TRANSPORT="ssh")
    job = subprocess.Popen([sys.executable, JOB], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, start_new_session=True)
    pid_file = None
    deadline = time.time() + 120
    while pid_file is None and time.time() < deadline:
        pid_file = next(iter((tmp_path / "jobs").glob("parallax-job-*/pid.worker.1")), None)
        time.sleep(0.2)
    assert pid_file is not None, "worker 1 never registered"
    time.sleep(3)  # into training
    os.kill(int(pid_file.read_text().split()[1]), signal.SIGKILL)
    out, _ = job.communicate(timeout=60)
    assert job.returncode != 0
    assert "transport: ssh" in out and "job failed: localhost/worker/1 was killed by signal 9" in out, out[-3000:]


@pytest.mark.parametrize("env, refused", [({"JOB_RUN_OPTION": "MPI"}, "run_option='MPI'"),
                                          ({"JOB_RUN_OPTION": "HYBRID", "JOB_BACKEND": "horovod"},
                                           "collective_backend='horovod'")])
def test_mpi_and_horovod_are_refused_with_ssh_transport(tmp_path, env, refused):
    job = _launch(tmp_path, env)
    out, _ = job.communicate(timeout=180)
    assert job.returncode == 2, out[-3000:]
    assert f"transport='ssh' cannot carry {refused}" in out
    assert not list((tmp_path / "jobs").glob("parallax-job-*")), "a job was started"


def test_spawn_reports_a_failed_worker_in_the_words_the_supervisor_reads():
    local = {"rank": 3, "host": "h", "stdin": None}
    remote = {"rank": 2, "host": "h", "stdin": "{}\n"}
    assert rank_output.failed_rank(spawn.describe_end(local, 10, -9)) == (3, "was killed by signal 9 (SIGKILL)")
    assert rank_output.failed_rank(spawn.describe_end(remote, 10, 128 + 15)) == (2, "was killed by signal 15 "
                                                                                   "(SIGTERM)")
    assert rank_output.failed_rank(spawn.describe_end(local, 10, 3)) == (3, "exited with code 3")


def test_transport_must_be_direct_or_ssh():
    with pytest.raises(ConfigError, match="Config.transport='tcp' is not allowed; use one of 'direct', 'ssh'"):
        Config(transport="tcp")
