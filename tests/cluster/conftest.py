"""The multi-host test bed: separate hosts (network namespaces with their own sshd) on this machine.

Needs root, iproute2 and openssh-server (`make install` installs them). Everything is removed by the ids the
fixture created, even when a test fails.
"""
import os
import subprocess
import sys
import time

import pytest

from parallax.launcher.local_cluster import LocalCluster

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
JOB = os.path.join(ROOT, "tests", "launcher_scripts", "job.py")
LAUNCH = [sys.executable, "-m", "parallax.launcher.cli"]


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(2, 2, rate="1gbit") as c:
        yield c


class Job:
    """A parallax-launch process on the test bed, with its output collected."""

    def __init__(self, cluster, tmp_path, command, launch_args=(), env=None, slots=None):
        """`slots`: per host (default: all of the test bed's)."""
        self.cluster, self.tmp_path = cluster, tmp_path
        (tmp_path / "jobs").mkdir(exist_ok=True)
        self.spec = tmp_path / "hosts.txt"
        self.spec.write_text("".join(f"{a} slots={slots}\n" for a in cluster.hosts) if slots else cluster.spec_text())
        args = [*LAUNCH, "--resource-spec", str(self.spec), "--ssh-identity-file", cluster.client_key,
                "--ssh-option", f"UserKnownHostsFile={cluster.known_hosts}", "--ssh-option",
                "StrictHostKeyChecking=yes", *launch_args]
        forwarded = dict(env or {}, JOB_OUT=str(tmp_path))
        for name in forwarded:  # only what is named crosses to the hosts, as for users
            args += ["-x", name]
        args += ["--", sys.executable, *command]
        # TMPDIR puts the job directory (the same path on every host) under tmp_path, where tests read pid files.
        full_env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT, TMPDIR=str(tmp_path / "jobs"),
                        **forwarded)
        self.proc = subprocess.Popen(args, cwd=ROOT, env=full_env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.lines = []
        import threading
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def output(self):
        return "".join(self.lines)

    def wait_for_output(self, text, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if text in self.output:
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        raise AssertionError(f"{text!r} did not appear\n{self.output[-5000:]}")

    def recorded_pid(self, name):
        for job_dir in (self.tmp_path / "jobs").glob("parallax-job-*"):
            path = job_dir / f"pid.{name}"
            if path.exists():
                return int(path.read_text().split()[1])
        raise AssertionError(f"no pid.{name} recorded")

    def wait(self, timeout=300):
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            raise AssertionError(f"the launcher did not exit within {timeout} s\n{self.output[-5000:]}")
        self._reader.join(timeout=10)
        return self.proc.returncode


def assert_nothing_left(cluster, within=15.0):
    """Every process the job started on any host is gone: only each namespace's sshd remains."""
    deadline = time.time() + within
    while True:
        left = {cluster.hosts[i]: [p for p in cluster.namespace_pids(i) if p not in cluster.sshd_pids]
                for i in range(cluster.num_hosts)}
        left = {h: pids for h, pids in left.items() if pids}
        if not left:
            return
        if time.time() > deadline:
            described = {h: [_cmdline(p) for p in pids] for h, pids in left.items()}
            raise AssertionError(f"processes left on the test bed: {described}")
        time.sleep(0.25)


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f"{pid}: " + f.read().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return f"{pid}: (gone)"
