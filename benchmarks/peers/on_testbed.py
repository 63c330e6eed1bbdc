"""The commands that start each peer on the shaped test bed (parallax.launcher.local_cluster), for
benchmarks/versus_peers.py to measure with testbed.measure. Each is one process whose output holds every worker's
`worker W step S <unit>/s R` lines, and which ends its whole job when it is ended:

- Horovod: mpirun over the cluster's ssh, one rank per slot (Horovod's documented Open MPI launch; horovodrun runs
  the same mpirun);
- TF 1 parameter servers: one server per host and one worker per slot, each task a process in its host's network
  namespace (benchmarks/peers/tasks.py), given the cluster by flags;
- MultiWorkerMirroredStrategy: one worker per slot, each given the cluster and its index by TF_CONFIG;
- ParameterServerStrategy: a coordinator on the first host, one worker per slot and one server per host, each given
  the cluster and its task by TF_CONFIG; only the coordinator logs (its steps are the workers' steps).

Every process runs on the hosts, so the test bed's counters see its bytes and CPU time. Imports no TensorFlow.
"""
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
PS_PORT, CHIEF_PORT, WORKER_PORT = 2222, 2299, 2223  # per host: each host has its own address


def horovod(cluster, model, model_args, sparse_as_dense=False):
    num_workers = cluster.num_hosts * cluster.slots
    cmd = [shutil.which("mpirun") or "mpirun", "-np", str(num_workers),
           "-H", ",".join(f"{h}:{cluster.slots}" for h in cluster.hosts), "--bind-to", "none", "--map-by", "slot",
           "-mca", "plm_rsh_agent", " ".join(["ssh", *cluster.ssh_options()]), *cluster.mpi_args()]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    for name in ("PATH", "PYTHONPATH", "TF_CPP_MIN_LOG_LEVEL", "OMPI_MCA_mpi_yield_when_idle"):
        cmd += ["-x", name]
    return [*cmd, sys.executable, os.path.join(HERE, "horovod_peer.py"), "--model", model, *model_args,
            *(["--sparse-as-dense"] if sparse_as_dense else [])]


def parameter_servers(cluster, model, model_args, tasks_file):
    """One server per host, one worker per slot; the job is done when the chief is (the servers serve until
    ended, as in TF's guide)."""
    ps = [f"{h}:{PS_PORT}" for h in cluster.hosts]
    workers = _worker_addresses(cluster)
    command = [sys.executable, os.path.join(HERE, "ps_peer.py"), "--model", model, *model_args,
               "--ps-hosts", ",".join(ps), "--worker-hosts", ",".join(workers)]
    tasks = [_task(cluster, i, [*command, "--job-name", "ps", "--task-index", str(i)], f"[ps/{i}] ")
             for i in range(cluster.num_hosts)]
    tasks += [_task(cluster, k // cluster.slots, [*command, "--job-name", "worker", "--task-index", str(k)], "",
                    waited=k == 0) for k in range(len(workers))]
    return _tasks_command(tasks, tasks_file)


def multi_worker_mirrored(cluster, model, model_args, tasks_file):
    """The model's Keras version with MultiWorkerMirroredStrategy (mwms_peer.py), one worker per slot; done when
    every worker is."""
    workers = _worker_addresses(cluster)
    command = [sys.executable, os.path.join(HERE, "mwms_peer.py"), "--model", model, *model_args]
    tasks = [_task(cluster, k // cluster.slots, command,
                   f"[worker/{k}] ", waited=True,
                   env={"TF_CONFIG": json.dumps({"cluster": {"worker": workers},
                                                 "task": {"type": "worker", "index": k}})})
             for k in range(len(workers))]
    return _tasks_command(tasks, tasks_file)


def parameter_server_strategy(cluster, model, model_args, tasks_file):
    """The model's Keras version with ParameterServerStrategy (pss_peer.py); done when the coordinator is. Its
    lines read as worker 0's."""
    spec = {"chief": [f"{cluster.hosts[0]}:{CHIEF_PORT}"], "worker": _worker_addresses(cluster),
            "ps": [f"{h}:{PS_PORT}" for h in cluster.hosts]}
    command = [sys.executable, os.path.join(HERE, "pss_peer.py"), "--model", model, *model_args]

    def task(host, job, index, prefix, waited=False):
        return _task(cluster, host, command, prefix, waited=waited,
                     env={"TF_CONFIG": json.dumps({"cluster": spec, "task": {"type": job, "index": index}})})
    tasks = [task(0, "chief", 0, "[worker/0] ", waited=True)]
    tasks += [task(k // cluster.slots, "worker", k, f"[pss-worker/{k}] ") for k in range(len(spec["worker"]))]
    tasks += [task(i, "ps", i, f"[ps/{i}] ") for i in range(cluster.num_hosts)]
    return _tasks_command(tasks, tasks_file)


def _worker_addresses(cluster):
    """host:port of each worker, slot by slot, host by host (worker k runs on host k // slots)."""
    return [f"{h}:{WORKER_PORT + s}" for h in cluster.hosts for s in range(cluster.slots)]


def _task(cluster, host, argv, prefix, waited=False, env=None):
    return {"namespace": cluster.namespaces[host], "argv": argv, "prefix": prefix, "waited": waited,
            "env": {"PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}}


def _tasks_command(tasks, tasks_file):
    with open(tasks_file, "w") as f:
        json.dump(tasks, f, indent=1)
    return [sys.executable, os.path.join(HERE, "tasks.py"), tasks_file]
