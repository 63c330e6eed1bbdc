"""How benchmarks/peers/exactness.py runs each kind of job on localhost: a command (one device, parallax, horovodrun),
a TF 1 parameter-server job (one process per task, given the cluster by flags), and TF 2 MultiWorkerMirroredStrategy
and ParameterServerStrategy jobs (one process per task, given the cluster by TF_CONFIG); and how it and
versus_peers.py make a model's data. Each process runs in its own process group, and every process a job started is
ended by its recorded group when the job ends, fails or times out."""
import json
import os
import signal
import socket
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TIMEOUT = 600


def environment(**extra):
    return dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2", **extra)


def run_command(command, label, env=None, timeout=TIMEOUT):
    """Run `command` to its end; a failure raises with the end of its output."""
    started = time.time()
    result = subprocess.run(command, cwd=ROOT, env=env or environment(), capture_output=True, text=True,
                            timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"{label} failed ({result.returncode}):\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}")
    print(f"{label}: {time.time() - started:.0f} s", flush=True)


def make_model_data(directory, options, out, label):
    """models/<directory>/make_data.py's data in `out` (its options after --out)."""
    run_command([sys.executable, os.path.join(ROOT, "models", directory, "make_data.py"), "--out", out, *options],
                label)


def run_after(command, label, first):
    """`first` ((command, label): a calibration), then `command`."""
    run_command(*first)
    run_command(command, label)


def free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def run_processes(tasks, label, waited):
    """`tasks`: (command, environment) pairs, one process each. The job is done when the processes at the indices
    `waited` are, and fails if one of them does; then every process still running is ended."""
    started, procs = time.time(), []
    try:
        for command, env in tasks:
            procs.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True, start_new_session=True))
        deadline = started + TIMEOUT
        for k in waited:
            out, _ = procs[k].communicate(timeout=max(1.0, deadline - time.time()))
            if procs[k].returncode != 0:
                raise RuntimeError(f"{label}: task {k} failed ({procs[k].returncode}):\n{out[-3000:]}")
        print(f"{label}: {time.time() - started:.0f} s", flush=True)
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def run_ps_job(command, label, workers, servers=2):
    """`command` (ps_peer.py and its options) as `servers` servers and `workers` workers. The job is done when the
    chief is: the servers serve until killed (as TF's guide has them), and a worker may still wait on the sync
    queue."""
    hosts = [f"127.0.0.1:{p}" for p in free_ports(servers + workers)]
    cluster = ["--ps-hosts", ",".join(hosts[:servers]), "--worker-hosts", ",".join(hosts[servers:])]
    tasks = [([*command, *cluster, "--job-name", job, "--task-index", str(i)], environment())
             for job, count in (("ps", servers), ("worker", workers)) for i in range(count)]
    run_processes(tasks, label, waited=[servers])


def run_mwms_job(command, label, workers):
    """`command` (mwms_peer.py and its options) as `workers` workers, each told the cluster and its index by
    TF_CONFIG. The job is done when every worker is (each takes part in every step's collectives)."""
    hosts = [f"127.0.0.1:{p}" for p in free_ports(workers)]
    tasks = [(command, environment(TF_CONFIG=json.dumps({"cluster": {"worker": hosts},
                                                         "task": {"type": "worker", "index": i}})))
             for i in range(workers)]
    run_processes(tasks, label, waited=range(workers))


def run_pss_job(command, label, workers, servers=2):
    """`command` (pss_peer.py and its options) as a coordinator (the chief), `workers` workers and `servers`
    servers, each told the cluster and its task by TF_CONFIG. The job is done when the coordinator is: the workers
    and servers serve until killed (as TF's tutorial has them)."""
    hosts = [f"127.0.0.1:{p}" for p in free_ports(1 + workers + servers)]
    cluster = {"chief": hosts[:1], "worker": hosts[1:1 + workers], "ps": hosts[1 + workers:]}
    tasks = [(command, environment(TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": job, "index": i}})))
             for job in ("chief", "worker", "ps") for i in range(len(cluster[job]))]
    run_processes(tasks, label, waited=[0])
