"""Who this process is in a job, read from the environment the launcher sets. Imports no TensorFlow.

No PARALLAX_ROLE in the environment means the user started the script by hand: the process is the launcher, and
when the spec has one slot it is also the only worker.
"""
import dataclasses
import os
import socket
import sys
import time

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
    if role.role == "worker":
        sys.excepthook = _record_failure_and_exit(job_dir, role.worker_id, sys.excepthook)


def _record_failure_and_exit(job_dir, worker_id, print_traceback):
    """A worker that fails records when and why (the launcher names the *first* failure: other workers often fail
    after it, in a collective it left), prints its traceback, and exits at once: TF's gRPC teardown can otherwise
    hang the process, and then nobody would notice the failure."""
    def hook(exc_type, exc, tb):
        try:
            with open(os.path.join(job_dir, f"failed.{worker_id}"), "w") as f:
                f.write(f"{time.time():.6f} {exc_type.__name__}: {str(exc).splitlines()[0] if str(exc) else ''}\n")
        except OSError:
            pass
        print_traceback(exc_type, exc, tb)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
    return hook


def first_failure(job_dir):
    """(worker id, "Type: message") of the earliest recorded worker failure, or None."""
    records = []
    for name in os.listdir(job_dir) if os.path.isdir(job_dir) else ():
        if name.startswith("failed."):
            try:
                with open(os.path.join(job_dir, name)) as f:
                    when, _, what = f.read().strip().partition(" ")
                records.append((float(when), int(name.split(".", 1)[1]), what))
            except (OSError, ValueError):
                continue
    return min(records)[1:] if records else None
