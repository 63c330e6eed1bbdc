"""The harness's side of case_host.py: one warm host per pytest process (and one with eager execution left on, for
the cases that keep it), started when first needed, started again after a case that broke it, stopped at exit.

A host's servers bind loopback only: it runs with parallax's bind shim preloaded, as a launched job's processes do.
Its output goes to a log file; a failed case's error carries the part of the log written during the case.
"""
import atexit
import json
import os
import re
import select
import subprocess
import sys
import tempfile
import time

from parallax.process import bind_shim

SCRIPT = os.path.join(os.path.dirname(__file__), "case_host.py")
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
START_TIMEOUT_S = 120  # importing TF and starting six servers takes a few seconds; a loaded machine, longer
STOP_WAIT_S = 10
LOG_TAIL = 20000  # a stuck job's thread stacks included


class CaseHostError(AssertionError):
    """A case failed in the host, or the host died or outlived the case's time (an AssertionError: the test fails)."""


class CaseHost:
    def __init__(self, eager=False, env=None):
        self.eager, self.env = eager, env or {}  # env: more environment for the host (benchmarks/job_cost.py's)
        self._proc = self._responses = self._log = None
        self.cases_run = 0

    @property
    def pid(self):
        """The running host's process id (started first if it is not running)."""
        if self._proc is None or self._proc.poll() is not None:
            self._start()
        return self._proc.pid

    def run(self, argv, timeout):
        """Run one case (run_case.py's arguments) in the host; raise CaseHostError when it fails."""
        if self._proc is None or self._proc.poll() is not None:
            self._start()
        start = os.path.getsize(self._log)
        self._proc.stdin.write(json.dumps(list(argv)) + "\n")
        self._proc.stdin.flush()
        answer = self._answer(timeout)
        self.cases_run += 1
        if answer is not None and answer["leaving"]:
            self.stop()  # its servers are broken; the next case starts a new host
        if answer is None:
            alive = self._proc.poll() is None
            self.stop()
            raise CaseHostError(f"{'the case did not end within ' + str(timeout) + ' s' if alive else 'the case host died'}"
                                f" running {' '.join(argv)}\n--- host output (tail) ---\n{self._output_since(start)}")
        if not answer["ok"]:  # the host goes on with the next case, or has exited if the case broke its servers
            raise CaseHostError(f"{' '.join(argv)} failed in the case host: {answer['error']}\n"
                                f"{answer.get('output', '')}\n--- host output (tail) ---\n{self._output_since(start)}")

    def stop(self):
        """End the host: stdin closed, then SIGKILL to its own pid if it has not exited."""
        if self._proc is None:
            return
        try:
            self._proc.stdin.close()
        except OSError:
            pass
        try:
            self._proc.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        os.close(self._responses)
        self._proc = None

    def _start(self):
        read, write = os.pipe()
        if self._log is None:
            fd, self._log = tempfile.mkstemp(prefix="parallax-case-host-", suffix=".log")
            os.close(fd)
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT, **bind_shim.preloading_environment())
        env.update(self.env)
        argv = [sys.executable, SCRIPT, str(write)] + (["--eager"] if self.eager else [])
        with open(self._log, "a") as log:  # O_APPEND: the host's writes land at the end wherever the harness reads
            self._proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=log,
                                          stderr=subprocess.STDOUT, text=True, pass_fds=(write,))
        os.close(write)
        self._responses = read
        self._buffer = b""

    def _answer(self, timeout):
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not _readable(self._responses, left):
                return None
            chunk = os.read(self._responses, 65536)
            if not chunk:  # the host exited
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def _output_since(self, offset):
        with open(self._log, errors="replace") as log:
            log.seek(offset)
            return log.read()[-LOG_TAIL:]


def _readable(fd, timeout):
    return bool(select.select([fd], [], [], timeout)[0])


_hosts = {}


def hung_before_any_step(message):
    """Whether a case host's error is a thread job that outlived its limit with no worker past its first
    synchronized step (thread_job.ThreadJob._where's words), and no worker failed."""
    found = re.search(r"did not end within [\d.]+ s \(([^)]*)\)", message)
    return bool(found) and all(part.endswith("no synchronized step") for part in found.group(1).split("; "))


def host(eager=False):
    """This pytest process's host (one per `eager`)."""
    if eager not in _hosts:
        _hosts[eager] = CaseHost(eager)
    return _hosts[eager]


@atexit.register
def _stop_all():
    for h in _hosts.values():
        h.stop()
        if h._log:
            os.remove(h._log)
