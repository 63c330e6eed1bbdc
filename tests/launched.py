"""Run a launched job's script from a test: like subprocess.run, but a job that outlives its time limit is ended
by SIGTERM (the launcher then tears its job down on every host and prints its report) and the test fails with the
tail of what it printed, so a hang in CI says where it was."""
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def run_script(args, timeout, env=None):
    """Runs `python args...` in the project root with PYTHONPATH set; returns the CompletedProcess (text)."""
    cmd = [sys.executable] + [str(a) for a in args]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=ROOT, **(env or {})))
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()  # its children get SIGTERM from their parent-death signal (launcher/processes.py)
            out, err = proc.communicate()
        raise AssertionError(f"{' '.join(cmd)} did not end within {timeout} s; ended by SIGTERM (exit "
                             f"{proc.returncode})\n--- stdout (tail) ---\n{out[-4000:]}\n"
                             f"--- stderr (tail) ---\n{err[-6000:]}") from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def script_output(name, args, timeout):
    """What tests/launcher_scripts/`name` printed (stdout, then stderr) when run with `args`; fails the test, with
    the tail of it, unless the script exited 0."""
    proc = run_script([os.path.join(ROOT, "tests", "launcher_scripts", name), *args], timeout)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    return output
