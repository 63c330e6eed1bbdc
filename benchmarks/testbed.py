"""Jobs on the shaped multi-host test bed (parallax.launcher.local_cluster), measured while they run.

Throughput comes from the workers' own log lines (`worker W step S <unit>/s R`, one per --log-every steps, each over
the steps since the previous one): the job's rate in a window is the sum over workers, and a run's rate is the
median over the windows after warm-up. Bytes come from the hosts' interface counters, read when worker 0 reports
the end of warm-up and the last step: the namespace side of each host's link (bytes that crossed the network) and
each host's loopback (bytes between processes of one host). MPI is told to use TCP (`btl tcp,self`), not shared
memory, so that the counters see every byte a job moves, and to yield the CPU while it waits
(`mpi_yield_when_idle`): the test bed's hosts share this machine's cores, and MPI's busy polling would take them
from the other hosts' workers and servers (it cost MPI a quarter of its throughput on the LM, HYBRID a sixth).
"""
import dataclasses
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time

from parallax.launcher.processes import descendants

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
LOG_LINE = re.compile(r"worker[ /](\d+)\]? step (\d+) (\w+)/s (\d+)")  # a Keras script's: the launcher's prefix


@dataclasses.dataclass
class Measurement:
    rate: float  # units/s of the whole job: median over windows after warm-up
    unit: str
    wire_bytes: float  # bytes that crossed the network, per worker per step
    local_bytes: float  # bytes between processes on one host (loopback), per worker per step
    windows: int
    cpu_seconds: float = float("nan")  # CPU time of every process on the hosts, per step
    step_seconds: float = float("nan")  # wall time per step between the same log lines as the bytes and the CPU

    @property
    def total_bytes(self):
        return self.wire_bytes + self.local_bytes


def host_counters(cluster):
    """Per host: (bytes sent on its link, bytes over its loopback), read from /proc/<pid>/net/dev of its sshd."""
    result = []
    for pid in cluster.sshd_pids:
        sent = local = 0
        with open(f"/proc/{pid}/net/dev") as f:
            for line in f.readlines()[2:]:
                name, data = line.split(":", 1)
                tx_bytes = int(data.split()[8])
                if name.strip() == "lo":
                    local += tx_bytes
                else:
                    sent += tx_bytes
        result.append((sent, local))
    return result


def cpu_seconds(cluster, launcher_pid=None):
    """CPU time (user + system) used so far by every process on the cluster's hosts, and by the launcher's process
    tree on this machine (mpirun; with transport ssh, the tunnels' ssh clients)."""
    pids = [p for i in range(cluster.num_hosts) for p in cluster.namespace_pids(i)]
    pids += descendants(launcher_pid) if launcher_pid else []
    return sum(process_cpu_seconds(pid) or 0.0 for pid in pids)


def process_cpu_seconds(pid):
    """CPU time (user + system) process `pid` used so far, or None when it has ended."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    except (OSError, IndexError):
        return None


def _python_for(root):
    """A Python that imports `root`'s parallax on every host: the hosts' processes are started over ssh, which
    carries no PYTHONPATH, so another checkout gets a wrapper (named python-*, so the launcher treats it as
    Python) that sets it."""
    if os.path.realpath(root) == os.path.realpath(ROOT):
        return sys.executable
    wrapper = os.path.join(root, "python-tree")
    with open(wrapper, "w") as f:
        f.write(f'#!/bin/sh\nPYTHONPATH="{root}" exec "{sys.executable}" "$@"\n')
    os.chmod(wrapper, 0o755)
    return wrapper


def environment(cluster, root=ROOT):
    """The environment of a parallax-launch run on the test bed: MPI kept on its network, and yielding while idle
    (its ranks share 2 cores with everything else)."""
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=root, OMPI_MCA_mpi_yield_when_idle="1",
                **cluster.mpi_environment())


def run_job(cluster, workdir, script, script_args, run_option, steps, log_every, warmup_steps, timeout=900,
            at_snapshot=None, root=ROOT, launch_env=(), launch_args=(), count_launcher=False):
    """Launch `python script script_args` on the cluster with parallax-launch and measure it. The script takes
    --run-option, --steps and --log-every (models/training.py). `at_snapshot(step)` is called where the counters
    are read, for finer accounting. `root` is the source tree whose launcher, parallax and script run (another
    checkout, to compare versions side by side). `launch_env`: NAME=VALUE settings every process gets
    (parallax-launch -x). `launch_args`: more parallax-launch options (--transport ssh); `count_launcher`: the CPU
    figure also counts the launcher's process tree on this machine."""
    cmd = [sys.executable, "-m", "parallax.launcher.cli", *cluster.launch_options(), "--run-option", run_option,
           *launch_args,
           *[w for setting in launch_env for w in ("-x", setting)], "--",
           _python_for(root), os.path.join(root, script), *script_args, "--resource-spec", cluster.spec_file(),
           "--run-option", run_option, "--steps", str(steps), "--log-every", str(log_every)]
    return measure(cluster, cmd, environment(cluster, root), f"{script} {run_option}", steps, warmup_steps,
                   timeout=timeout, at_snapshot=at_snapshot, cwd=root, count_launcher=count_launcher)


def measure(cluster, cmd, env, label, steps, warmup_steps, timeout=900, at_snapshot=None, cwd=ROOT,
            count_launcher=False, late_workers=False, coordinator=False):
    """Run `cmd` (a process that starts a job of a worker per slot on the cluster and prints its workers' log
    lines) and measure it from the end of warm-up, worker 0's step `warmup_steps`, to its step `steps`. With
    `late_workers`, warm-up ends at worker 0's first logged step from `warmup_steps` on by which every worker has
    logged (a TF 1 parameter-server job's chief trains alone until the others have waited out their 30 s poll).
    With `coordinator`, only worker 0 logs, for the whole job: its steps are single workers' steps and its rate
    the job's (ParameterServerStrategy's coordinator); the figures per step are per N of its steps."""
    num_workers = cluster.num_hosts * cluster.slots
    reporters = 1 if coordinator else num_workers
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    timer = threading.Timer(timeout, lambda: os.killpg(proc.pid, signal.SIGTERM))
    timer.start()
    lines, rates, snapshots, logged = [], {}, {}, set()

    def snapshot(key, step):
        snapshots[key] = (host_counters(cluster), cpu_seconds(cluster, proc.pid if count_launcher else None),
                          time.monotonic(), step)
        if at_snapshot:
            at_snapshot(step)

    try:
        for line in proc.stdout:
            lines.append(line)
            m = LOG_LINE.search(line)
            if not m:
                continue
            worker, step, unit, rate = int(m[1]), int(m[2]), m[3], float(m[4])
            logged.add(worker)
            if worker == 0 and "warm" not in snapshots and (step >= warmup_steps and len(logged) == reporters
                                                            if late_workers else step == warmup_steps):
                snapshot("warm", step)
            elif worker == 0 and step == steps and "warm" in snapshots:
                snapshot("end", step)
            if "warm" in snapshots and step > snapshots["warm"][3]:
                rates.setdefault(step, {})[worker] = rate
        proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:  # interrupted: the launcher tears its job down on every host when told to stop
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    if proc.returncode != 0 or len(snapshots) != 2:
        raise RuntimeError(f"job {label} failed (exit {proc.returncode}); its output ends:\n" + "".join(lines[-40:]))
    return _measurement(snapshots, rates, num_workers, unit, reporters)


def _measurement(snapshots, rates, num_workers, unit, reporters):
    (sent0, local0), (sent1, local1) = ([sum(c) for c in zip(*snapshots[k][0])] for k in ("warm", "end"))
    measured_steps = (snapshots["end"][3] - snapshots["warm"][3]) * reporters / num_workers
    windows = [sum(by_worker.values()) for by_worker in rates.values() if len(by_worker) == reporters]
    if not windows:
        raise RuntimeError(f"no window after warm-up (step {snapshots['warm'][3]}) where every worker logged: "
                           f"run more steps")
    per = num_workers * measured_steps
    cpu = (snapshots["end"][1] - snapshots["warm"][1]) / measured_steps
    wall = (snapshots["end"][2] - snapshots["warm"][2]) / measured_steps
    return Measurement(statistics.median(windows), unit, (sent1 - sent0) / per, (local1 - local0) / per,
                       len(windows), cpu, wall)


def progress(text):
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)
