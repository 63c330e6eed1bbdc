"""benchmarks/cpu_by_role.py: each process on a host is counted under its kind, by its command line."""
import importlib.util
import os
import subprocess
import sys
import time

import pytest

# make test runs it one test at a time: it counts every process on this machine by what it runs
pytestmark = pytest.mark.alone

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path[:0] = [os.path.join(ROOT, "benchmarks"), ROOT]
spec = importlib.util.spec_from_file_location("cpu_by_role", os.path.join(ROOT, "benchmarks", "cpu_by_role.py"))
cpu_by_role = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cpu_by_role)


def _wait_for_exec(pid, marker, timeout=10.0):
    """Until `pid` runs its own command line: just after the fork it still shows its parent's (this pytest's)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        with open(f"/proc/{pid}/cmdline") as f:
            if marker in f.read():
                return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} did not start its command within {timeout} s")


def test_processes_are_counted_by_what_they_run():
    sleeping = "import sys, time; time.sleep(30)"
    started = {role: subprocess.Popen([sys.executable, "-c", sleeping, *argv]) for role, argv in
               {"server": ["-m", "parallax.runtime.ps_server"], "worker": ["models/lm/train_distributed.py"],
                "other": ["something"]}.items()}
    try:
        for proc in started.values():
            _wait_for_exec(proc.pid, sleeping)
        for role, proc in started.items():
            assert cpu_by_role.role_of(proc.pid) == role
    finally:
        for proc in started.values():
            proc.kill()
            proc.wait()
    assert cpu_by_role.role_of(started["other"].pid) is None  # ended: not counted
