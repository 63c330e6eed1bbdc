"""Run a job's processes, forward their output, and tear all of them down on failure or signal.

The main process is mpirun (the workers); services (parameter servers) start before it and are stopped after it.
Each worker and server records `<job dir>/pid.<name>` when it starts (role.register_process), so teardown can stop
them by id even if their parent is gone. Imports no TensorFlow.
"""
import collections
import ctypes
import glob
import os
import re
import signal
import subprocess
import sys
import threading
import time

from parallax.launcher.role import first_failure

_TAG = re.compile(r"\[\d+,(\d+)\]<(?:stdout|stderr)>:")
_FAILED_RANK = (re.compile(r"Process name:\s*\[\[\d+,\d+\],(\d+)\]"), re.compile(r"process rank (\d+) with PID"))
_EXIT_CODE = re.compile(r"Exit code:\s*(-?\d+)")
TAIL_LINES = 20
GRACE_SECONDS = 5.0


class _Proc:
    def __init__(self, label, command, env):
        self.label, self.command, self.env = label, command, env
        self.popen = None
        self.reader = None


class Supervisor:
    def __init__(self, command, env, job_dir, log_dir=None, out=None, services=()):
        """`services`: (label, command, env) of processes that serve the job while `command` runs."""
        self.main = _Proc("mpirun", command, env)
        self.services = [_Proc(*s) for s in services]
        self.job_dir, self.log_dir = job_dir, log_dir
        self.out = out or sys.stdout
        self.tails = collections.defaultdict(lambda: collections.deque(maxlen=TAIL_LINES))
        self.launcher_lines = collections.deque(maxlen=200)
        self._files = {}
        self._lock = threading.Lock()
        self._stopping = None

    # ---- running ----------------------------------------------------------------------------------------------
    def run(self):
        """Start, forward output, wait. Returns the job's exit status (non-zero on any failure)."""
        previous = self._install_signal_handlers()
        try:
            for service in self.services:
                self._start(service, self._forward_plain)
            self._start(self.main, self._forward_mpirun)
            failed_service = self._wait()
            failed_worker = first_failure(self.job_dir)
            if failed_worker is not None and self.main.popen.poll() is None:
                self.teardown()  # do not wait for mpirun to notice: a failed worker's peers may be blocked
            self.main.reader.join(timeout=10)
            if self._stopping is not None:
                self._say(f"stopped by signal {self._stopping}; all processes torn down")
                return 128 + self._stopping
            if failed_service is not None:
                code = failed_service.popen.returncode
                self._report(f"{failed_service.label} exited with code {code} while the workers ran",
                             failed_service.label)
                return code or 1
            code = self.main.popen.returncode
            if failed_worker is not None:
                rank, what = failed_worker
                self._report(f"rank {rank} (worker {rank}, host {self._host_of(f'pid.{rank}')}) failed first: "
                             f"{what}", f"rank {rank}")
                return 1  # mpirun's own status after teardown says nothing about the failure
            if code != 0:
                self._report_rank_failure(code)
            return code
        finally:
            self.teardown()
            self._restore_signal_handlers(previous)
            for f in self._files.values():
                f.close()

    def _start(self, proc, forward):
        proc.popen = subprocess.Popen(proc.command, env=proc.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True,
                                      preexec_fn=_terminate_when_launcher_dies(os.getpid()))
        proc.reader = threading.Thread(target=forward, args=(proc,), daemon=True)
        proc.reader.start()

    def _wait(self):
        """Until the workers end, a worker fails, a signal arrives, or a service dies; returns the dead service."""
        while self._stopping is None and self.main.popen.poll() is None and first_failure(self.job_dir) is None:
            for service in self.services:
                if service.popen.poll() is not None:
                    return service
            time.sleep(0.1)
        return None

    def teardown(self):
        """Stop every process group we started, then any recorded process still alive: SIGTERM, grace, SIGKILL."""
        started = [p.popen for p in [self.main, *self.services] if p.popen is not None]
        for popen in started:
            if popen.poll() is None:
                _signal_group(popen.pid, signal.SIGTERM)
        deadline = time.time() + GRACE_SECONDS
        for popen in started:
            try:
                popen.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                _signal_group(popen.pid, signal.SIGKILL)
                popen.wait()
        pids = recorded_pids(self.job_dir)
        for pid in pids:
            _signal(pid, signal.SIGTERM)
        deadline = time.time() + GRACE_SECONDS
        while time.time() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.1)
        for pid in pids:
            _signal(pid, signal.SIGKILL)

    # ---- output -----------------------------------------------------------------------------------------------
    def _forward_mpirun(self, proc):
        partial = collections.defaultdict(str)  # mpirun tags every write, so one rank's line may come in pieces
        for line in _lines(proc.popen):
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
            self._process_line(f"rank {rank}", partial.pop(rank, "") + text)
        for rank, text in partial.items():
            self._process_line(f"rank {rank}", text)

    def _forward_plain(self, proc):
        for line in _lines(proc.popen):
            self._process_line(proc.label, line)

    def _process_line(self, label, text):
        self.tails[label].append(text)
        if self.log_dir:
            self._log_file(label).write(text + "\n")
        else:
            self._write(f"[{label}] {text}")

    def _launcher_line(self, line):
        self.launcher_lines.append(line)
        if line.strip() and not set(line.strip()) <= {"-"}:
            self._write(f"[mpirun] {line}")

    def _log_file(self, label):
        if label not in self._files:
            os.makedirs(self.log_dir, exist_ok=True)
            self._files[label] = open(os.path.join(self.log_dir, label.replace(" ", ".") + ".log"), "a", buffering=1)
        return self._files[label]

    def _write(self, text):
        with self._lock:
            self.out.write(text + "\n")
            self.out.flush()

    def _say(self, text):
        sys.stderr.write(f"parallax: {text}\n")
        sys.stderr.flush()

    def _report_rank_failure(self, code):
        text = "\n".join(self.launcher_lines)
        rank = next((int(m.group(1)) for m in (p.search(text) for p in _FAILED_RANK) if m), None)
        m = _EXIT_CODE.search(text)
        detail = f"exit code {m.group(1)}" if m else f"mpirun exit status {code}"
        if rank is None:
            self._report(f"a rank exited with {detail}", None)
        else:
            self._report(f"rank {rank} (worker {rank}, host {self._host_of(f'pid.{rank}')}) exited with {detail}",
                         f"rank {rank}")

    def _report(self, what, label):
        lines = list(self.tails.get(label, [])) if label else []
        tail = "\n".join("    " + t for t in lines) or "    (no output)"
        where = f" (full log: {os.path.join(self.log_dir, label.replace(' ', '.') + '.log')})" \
            if self.log_dir and label else ""
        self._say(f"job failed: {what}; every process was stopped.\n  last lines of {label}{where}:\n{tail}")

    def _host_of(self, pid_file):
        try:
            with open(os.path.join(self.job_dir, pid_file)) as f:
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


def _terminate_when_launcher_dies(launcher_pid):
    """Even a SIGKILLed launcher takes its job down: each child gets SIGTERM when the launcher dies (Linux
    PR_SET_PDEATHSIG; mpirun then stops its ranks). Children are started from the main thread, whose exit is
    what the kernel watches."""
    def preexec():
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            return  # not Linux: teardown relies on the launcher alone
        if os.getppid() != launcher_pid:  # the launcher died before prctl took effect
            os._exit(1)
    return preexec


def _lines(popen):
    for raw in iter(popen.stdout.readline, b""):
        yield raw.decode(errors="replace").rstrip("\n")


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
