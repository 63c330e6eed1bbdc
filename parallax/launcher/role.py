"""Who this process is in a job, read from the environment the launcher sets. Imports no TensorFlow.

No PARALLAX_ROLE in the environment means the user started the script by hand: the process is the launcher, and
when the spec has one slot it is also the only worker.
"""
import dataclasses
import os
import socket

from parallax.errors import LaunchError

ENV_ROLE = "PARALLAX_ROLE"
ENV_WORKER_ID = "PARALLAX_WORKER_ID"
ENV_NUM_WORKERS = "PARALLAX_NUM_WORKERS"
ENV_JOB_DIR = "PARALLAX_JOB_DIR"
ENV_CLUSTER = "PARALLAX_CLUSTER"  # JSON {"ps": ["host:port", ...], "worker": [...]}, for jobs with servers
ENV_PS_TASK = "PARALLAX_PS_TASK"
ENV_NUM_SERVERS = "PARALLAX_NUM_SERVERS"
# mpirun gives each rank its number; the launcher cannot know it in advance.
MPI_RANK_ENV = ("OMPI_COMM_WORLD_RANK", "PMI_RANK")


@dataclasses.dataclass(frozen=True)
class Role:
    role: str  # "launcher" | "worker" | "server"
    worker_id: int = 0
    num_workers: int = 1

    @property
    def is_chief(self):
        return self.worker_id == 0

    def env(self):
        return {ENV_ROLE: self.role, ENV_WORKER_ID: str(self.worker_id), ENV_NUM_WORKERS: str(self.num_workers)}


def current_role(environ=None):
    environ = os.environ if environ is None else environ
    role = environ.get(ENV_ROLE)
    if not role:
        return Role("launcher")
    try:
        rank = next((environ[k] for k in MPI_RANK_ENV if k in environ), "0")
        worker_id = int(environ.get(ENV_WORKER_ID, rank))
        num_workers = int(environ.get(ENV_NUM_WORKERS, "1"))
    except ValueError:
        raise LaunchError(f"{ENV_WORKER_ID}/{ENV_NUM_WORKERS} must be integers; they are set by the launcher, "
                          f"do not set {ENV_ROLE} by hand") from None
    if role not in ("worker", "server") or not 0 <= worker_id < num_workers:
        raise LaunchError(f"inconsistent parallax role in the environment: {role!r} {worker_id}/{num_workers}; "
                          f"unset {ENV_ROLE} to run the script as a launcher")
    return Role(role, worker_id, num_workers)


def register_process(environ=None):
    """Record `<host> <pid>` in the job directory, so the launcher can stop this process by id."""
    environ = os.environ if environ is None else environ
    job_dir = environ.get(ENV_JOB_DIR)
    if not job_dir or not environ.get(ENV_ROLE) or not os.path.isdir(job_dir):
        return
    role = current_role(environ)
    name = f"pid.{role.worker_id}" if role.role == "worker" else f"pid.ps{environ.get(ENV_PS_TASK, '')}"
    path = os.path.join(job_dir, name)
    with open(path, "w") as f:
        f.write(f"{socket.gethostname()} {os.getpid()}\n")
