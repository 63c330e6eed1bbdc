"""What a launcher killed with -9 leaves behind, removed the next time a launcher starts on the same host: by the ids
the dead one recorded, never by a name pattern. Imports no TensorFlow.

Every launcher writes its owner record (host, pid, the pid's start time, so a reused pid is told apart) into what
it creates: `owner` in its job directory, and a record per `--local-cluster` test bed in RECORDS. A record whose
owner is gone is stale: its processes (those whose environment names the job directory, or that run in the test
bed's namespaces) are killed, and its namespaces, links, files and directories removed.
"""
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from parallax.launcher import recorded_pids
from parallax.launcher.processes import alive, signal_process

OWNER_FILE = "owner"
RECORDS = "/run/parallax/local-clusters"  # tmpfs: it goes with the namespaces at reboot
ABANDONED_AFTER_S = 3600.0
NETNS_ETC = "/etc/netns"  # `ip netns exec` mounts /etc/netns/<ns>/* over /etc: a test bed host's name files
KILL_WAIT_S = 5.0  # how long removing a test bed waits for the processes it killed in its namespaces to die


def owner_record(pid=None):
    pid = pid or os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "started": _start_time(pid)}


def owner_alive(record):
    """Is the process that wrote `record` (on this host) still running?"""
    pid = record.get("pid")
    return isinstance(pid, int) and alive(pid) and _start_time(pid) == record.get("started")


def _start_time(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])  # field 22: start time, in clock ticks
    except (OSError, IndexError, ValueError):
        return None


# ---- job directories ----------------------------------------------------------------------------------------------
def mark_job_dir(job_dir):
    with open(os.path.join(job_dir, OWNER_FILE), "w") as f:
        json.dump(owner_record(), f)


def sweep_job_dirs(temp_dir=None, say=None, now=None):
    """Stop the recorded processes of, and remove, every job directory here whose launcher is gone: a launcher on
    this host is asked directly; one on another host cannot be, so its directory goes once every process it
    recorded here has ended and it is older than ABANDONED_AFTER_S. Returns the directories removed."""
    removed = []
    for job_dir in glob.glob(os.path.join(temp_dir or tempfile.gettempdir(), "parallax-job-*")):
        try:
            with open(os.path.join(job_dir, OWNER_FILE)) as f:
                owner = json.load(f)
        except (OSError, ValueError):
            continue  # not marked (yet, or by an older version): not ours to judge
        names = [os.path.basename(p)[len("pid."):] for p in glob.glob(os.path.join(job_dir, "pid.*"))]
        if owner.get("host") == socket.gethostname():
            if owner_alive(owner):
                continue
        elif any(_recorded_alive(job_dir, name) for name in names) or \
                (now or time.time()) - os.path.getmtime(job_dir) < ABANDONED_AFTER_S:
            continue
        recorded_pids.stop(job_dir, names, grace=1.0)
        shutil.rmtree(job_dir, ignore_errors=True)
        removed.append(job_dir)
        if say:
            say(f"removed the job directory {job_dir} (and its {len(names)} recorded processes) left by launcher "
                f"pid {owner.get('pid')}, which is gone")
    return removed


def _recorded_alive(job_dir, name):
    pid = recorded_pids.recorded_pid(job_dir, name)
    return pid is not None and recorded_pids.belongs_to_job(pid, job_dir) and alive(pid)


# ---- local-cluster test beds ----------------------------------------------------------------------------------------
def record_cluster(cluster_id, state):
    """Write (again) what a test bed has made so far; called before each thing is made."""
    os.makedirs(RECORDS, exist_ok=True)
    path = os.path.join(RECORDS, f"{cluster_id}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(dict(state, owner=owner_record()), f)
    os.replace(path + ".tmp", path)


def forget_cluster(cluster_id):
    try:
        os.remove(os.path.join(RECORDS, f"{cluster_id}.json"))
    except FileNotFoundError:
        pass


def sweep_clusters(say=None):
    """Remove every test bed whose launcher is gone. Returns their ids."""
    removed = []
    for path in sorted(glob.glob(os.path.join(RECORDS, "*.json"))):
        try:
            with open(path) as f:
                state = json.load(f)
        except (OSError, ValueError):
            continue
        if owner_alive(state.get("owner", {})):
            continue
        remove_cluster(state)
        os.remove(path)
        removed.append(os.path.basename(path)[:-len(".json")])
        if say:
            say(f"removed the local cluster {removed[-1]} (namespaces {', '.join(state.get('namespaces', []))}) "
                f"left by launcher pid {state.get('owner', {}).get('pid')}, which is gone")
    return removed


def remove_cluster(state, wait_s=KILL_WAIT_S):
    """Kill what runs in the namespaces (sshd, and what it started: only processes inside them, so a recorded pid
    that was reused elsewhere is never hit) until none is alive (a zombie waiting to be reaped is dead; what sshd
    forks meanwhile is killed too; after `wait_s`, go on), then delete namespaces, links and files."""
    namespaces = state.get("namespaces", [])
    deadline = time.time() + wait_s
    while True:
        pids = [pid for pid in _namespace_pids(namespaces) if alive(pid)]
        if not pids or time.time() > deadline:
            break
        for pid in pids:
            signal_process(pid, signal.SIGKILL)
        time.sleep(0.1)
    for ns in reversed(namespaces):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        shutil.rmtree(os.path.join(NETNS_ETC, ns), ignore_errors=True)  # its name files (LocalCluster)
    for link in reversed(state.get("links", [])):
        subprocess.run(["ip", "link", "del", link], capture_output=True)
    if state.get("dir") and os.path.basename(state["dir"]).startswith("parallax-cluster-"):
        shutil.rmtree(state["dir"], ignore_errors=True)


def _namespace_pids(namespaces):
    pids = set()
    for ns in namespaces:
        out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
        pids.update(int(p) for p in out.split())
    return pids
