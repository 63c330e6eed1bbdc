"""Run a job's process tree, forward its output, and tear all of it down on failure or signal.

Each worker records `<job dir>/pid.<rank>` when it starts (see role.register_process), so teardown can stop
workers by id even if mpirun itself is gone. Imports no TensorFlow.
"""
import collections
import glob
import os
import re
import signal
import subprocess
import sys
import threading
import time

_TAG = re.compile(r"\[\d+,(\d+)\]<(?:stdout|stderr)>:")
_FAILED_RANK = (re.compile(r"Process name:\s*\[\[\d+,\d+\],(\d+)\]"), re.compile(r"process rank (\d+) with PID"))
_EXIT_CODE = re.compile(r"Exit code:\s*(-?\d+)")
TAIL_LINES = 20
GRACE_SECONDS = 5.0


class Supervisor:
    def __init__(self, command, env, job_dir, log_dir=None, out=None):
        self.command, self.env, self.job_dir, self.log_dir = command, env, job_dir, log_dir
        self.out = out or sys.stdout
        self.tails = collections.defaultdict(lambda: collections.deque(maxlen=TAIL_LINES))
        self.launcher_lines = collections.deque(maxlen=200)
        self._files = {}
        self._proc = None
        self._stopping = None

    # ---- running ----------------------------------------------------------------------------------------------
    def run(self):
        """Start, forward output, wait. Returns the job's exit status (non-zero on any failure)."""
        previous = self._install_signal_handlers()
        try:
            self._proc = subprocess.Popen(self.command, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, start_new_session=True)
            reader = threading.Thread(target=self._forward, daemon=True)
            reader.start()
            code = self._proc.wait()
            reader.join(timeout=10)
            if self._stopping is not None:
                self._say(f"stopped by signal {self._stopping}; all processes torn down")
                return 128 + self._stopping
            if code != 0:
                self._report_failure(code)
            return code
        finally:
            self.teardown()
            self._restore_signal_handlers(previous)
            for f in self._files.values():
                f.close()

    def teardown(self):
        """Stop mpirun's process group, then any recorded worker still alive: SIGTERM, grace, SIGKILL."""
        if self._proc is not None and self._proc.poll() is None:
            _signal_group(self._proc.pid, signal.SIGTERM)
            try:
                self._proc.wait(timeout=GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                _signal_group(self._proc.pid, signal.SIGKILL)
                self._proc.wait()
        pids = recorded_pids(self.job_dir)
        for pid in pids:
            _signal(pid, signal.SIGTERM)
        deadline = time.time() + GRACE_SECONDS
        while time.time() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.1)
        for pid in pids:
            _signal(pid, signal.SIGKILL)

    # ---- output -----------------------------------------------------------------------------------------------
    def _forward(self):
        partial = collections.defaultdict(str)  # mpirun tags every write, so one rank's line may come in pieces
        for raw in iter(self._proc.stdout.readline, b""):
            line = raw.decode(errors="replace").rstrip("\n")
            pieces = _TAG.split(line)
            if len(pieces) == 1:
                self._launcher_line(line)
                continue
            if pieces[0].strip():
                self._launcher_line(pieces[0])
            segments = list(zip(map(int, pieces[1::2]), pieces[2::2]))
            for rank, text in segments[:-1]:
                partial[rank] += text
            rank, text = segments[-1]
            self._rank_line(rank, partial.pop(rank, "") + text)
        for rank, text in partial.items():
            self._rank_line(rank, text)

    def _rank_line(self, rank, text):
        self.tails[rank].append(text)
        if self.log_dir:
            self._log_file(rank).write(text + "\n")
        else:
            self._write(f"[rank {rank}] {text}")

    def _launcher_line(self, line):
        self.launcher_lines.append(line)
        if line.strip() and not set(line.strip()) <= {"-"}:
            self._write(f"[mpirun] {line}")

    def _log_file(self, rank):
        if rank not in self._files:
            os.makedirs(self.log_dir, exist_ok=True)
            self._files[rank] = open(os.path.join(self.log_dir, f"rank.{rank}.log"), "a", buffering=1)
        return self._files[rank]

    def _write(self, text):
        self.out.write(text + "\n")
        self.out.flush()

    def _say(self, text):
        sys.stderr.write(f"parallax: {text}\n")
        sys.stderr.flush()

    def _report_failure(self, code):
        text = "\n".join(self.launcher_lines)
        rank = None
        for pattern in _FAILED_RANK:
            m = pattern.search(text)
            if m:
                rank = int(m.group(1))
                break
        m = _EXIT_CODE.search(text)
        detail = f"exit code {m.group(1)}" if m else f"mpirun exit status {code}"
        who = f"rank {rank} (worker {rank}, host {self._host_of(rank)})" if rank is not None else "a rank"
        lines = list(self.tails.get(rank, [])) if rank is not None else []
        tail = "\n".join("    " + t for t in lines) or "    (no output)"
        where = f" (full log: {os.path.join(self.log_dir, f'rank.{rank}.log')})" if self.log_dir and rank is not None else ""
        self._say(f"job failed: {who} exited with {detail}; every process was stopped.\n"
                  f"  last lines of rank {rank}{where}:\n{tail}")

    def _host_of(self, rank):
        path = os.path.join(self.job_dir, f"pid.{rank}")
        try:
            with open(path) as f:
                return f.read().split()[0]
        except (OSError, IndexError):
            return "?"

    # ---- signals ----------------------------------------------------------------------------------------------
    def _install_signal_handlers(self):
        if threading.current_thread() is not threading.main_thread():
            return None
        previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        for s in previous:
            signal.signal(s, self._on_signal)
        return previous

    def _restore_signal_handlers(self, previous):
        for s, handler in (previous or {}).items():
            signal.signal(s, handler)

    def _on_signal(self, signum, frame):
        self._stopping = signum
        if self._proc is not None and self._proc.poll() is None:
            _signal_group(self._proc.pid, signal.SIGTERM)


def recorded_pids(job_dir):
    pids = []
    for path in glob.glob(os.path.join(job_dir, "pid.*")):
        try:
            with open(path) as f:
                pids.append(int(f.read().split()[1]))
        except (OSError, ValueError, IndexError):
            continue
    return pids


def _signal_group(pid, sig):
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _signal(pid, sig):
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is not running: it only waits to be reaped by its parent.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
