"""A launcher killed with -9 cannot clean up; the next launcher on the host removes what it left, by the ids it
recorded: a `--local-cluster` test bed's namespaces, links, sshd and key, and job directories."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from parallax.launcher import stale
from parallax.launcher import local_cluster
from parallax.launcher.local_cluster import LocalCluster
from tests.cluster.conftest import JOB, LAUNCH, ROOT
from tests.test_launcher import _assert_all_gone


def _namespaces():
    return set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())


def _links():
    return subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout


def test_what_a_launcher_killed_with_9_left_is_removed_at_the_next_start(tmp_path):
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2", JOB_HANG="1", TMPDIR=str(jobs))
    proc = subprocess.Popen([*LAUNCH, "--local-cluster", "2x1", "--run-option", "MPI", "-x", "JOB_HANG", "--",
                             sys.executable, JOB], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        cluster_id = None
        for line in proc.stderr:
            if cluster_id is None and line.startswith("parallax-launch: local cluster "):
                cluster_id = line.split()[3].rstrip(":")
            if "all 2 processes up" in line:
                break
        assert cluster_id, "the launcher never said which cluster it built"
        with open(os.path.join(stale.RECORDS, f"{cluster_id}.json")) as f:
            record = json.load(f)
        inside = [int(p) for ns in record["namespaces"] for p in
                  subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()]
        job_dirs = list(jobs.glob("parallax-job-*"))
        assert len(job_dirs) == 1 and inside
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the launcher's own group only: its children run in sessions of theirs
        proc.wait()
    time.sleep(1)
    # Left behind, as the issue found: namespaces, bridge, sshd (with the key on disk), the job directory.
    assert set(record["namespaces"]) <= _namespaces() and record["links"][0] in _links()
    assert os.path.exists(record["dir"]) and job_dirs[0].exists()

    said = []
    with LocalCluster(1, 1, workdir=None, say=said.append):  # the next start
        pass
    assert any(cluster_id in s and "which is gone" in s for s in said), said
    assert not set(record["namespaces"]) & _namespaces()
    assert all(link not in _links() for link in record["links"])
    assert not os.path.exists(record["dir"]) and not os.path.exists(os.path.join(stale.RECORDS,
                                                                                 f"{cluster_id}.json"))
    _assert_all_gone(inside, within=5.0)  # killed (zombies wait for PID 1 to reap them, which takes a moment)

    removed = stale.sweep_job_dirs(str(jobs))  # what the next launch does first
    assert removed == [str(job_dirs[0])] and not job_dirs[0].exists()


def test_job_directories_of_live_launchers_and_unmarked_ones_are_kept(tmp_path):
    mine = tmp_path / "parallax-job-mine"
    mine.mkdir()
    stale.mark_job_dir(str(mine))
    unmarked = tmp_path / "parallax-job-unmarked"
    unmarked.mkdir()
    gone = tmp_path / "parallax-job-gone"
    gone.mkdir()
    dead = subprocess.Popen(["true"])
    dead.wait()
    (gone / stale.OWNER_FILE).write_text(json.dumps(dict(stale.owner_record(), pid=dead.pid)))
    elsewhere = tmp_path / "parallax-job-elsewhere"  # a launcher on another host: judged by age and processes
    elsewhere.mkdir()
    (elsewhere / stale.OWNER_FILE).write_text(json.dumps({"host": "launcher.invalid", "pid": 1, "started": 1}))
    assert stale.sweep_job_dirs(str(tmp_path)) == [str(gone)]
    assert stale.sweep_job_dirs(str(tmp_path), now=time.time() + stale.ABANDONED_AFTER_S + 1) == [str(elsewhere)]
    assert mine.exists() and unmarked.exists()


def test_stopping_a_cluster_removes_its_hosts_mpi_session_directories_and_no_other():
    """OpenMPI's daemons on a test-bed host keep a session directory named after the host in the temp dir, and one
    that was killed leaves it there: the cluster's stop removes those of its own hosts."""
    cluster = LocalCluster(2, 1)  # not started: stop() is safe after a partial start
    ours = [local_cluster._mpi_session_dir(name) for name in cluster.hostnames]
    for directory in ours:
        os.makedirs(os.path.join(directory, "jf.0"))
    other = tempfile.mkdtemp(prefix="ompi.not-ours-")
    cluster.stop()
    assert not any(os.path.exists(d) for d in ours) and os.path.isdir(other)
    os.rmdir(other)
