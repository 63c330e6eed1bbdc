"""The processes a job directory records on this host (`pid.NAME`: "<host> <pid>", written by each process as it
starts, process/role.py), and stopping them by that id only: a pid whose process does not carry the job directory
in its environment is a recycled one, and is left alone."""
import os
import signal
import time

from parallax.launcher.processes import alive, signal_process_and_group
from parallax.process.protocol import ENV_JOB_DIR

GRACE_SECONDS = 3.0


def stop(job_dir, names, grace=GRACE_SECONDS):
    """Stop the job's processes recorded on this host under `names`; returns {name: pid} of any that survived."""
    targets = {}
    for name in names:
        pid = recorded_pid(job_dir, name)
        if pid is not None and belongs_to_job(pid, job_dir):
            targets[name] = pid
    for pid in targets.values():
        signal_process_and_group(pid, signal.SIGTERM)
    deadline = time.time() + grace
    while time.time() < deadline and any(alive(p) for p in targets.values()):
        time.sleep(0.05)
    for pid in targets.values():
        if alive(pid):
            signal_process_and_group(pid, signal.SIGKILL)
    time.sleep(0.1)
    return {name: pid for name, pid in targets.items() if alive(pid)}


def recorded_pid(job_dir, name):
    try:
        with open(os.path.join(job_dir, f"pid.{name}")) as f:
            return int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None


def belongs_to_job(pid, job_dir):
    """True if `pid` runs with this job's directory in its environment (so a recycled pid is left alone)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f"{ENV_JOB_DIR}={job_dir}".encode() in f.read().split(b"\0")
    except OSError:
        return False
