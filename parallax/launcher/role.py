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
ENV_RESOURCE_SPEC = "PARALLAX_RESOURCE_SPEC"  # the launcher's spec, as text: it wins over the script's argument
ENV_RUN_OPTION = "PARALLAX_RUN_OPTION"  # parallax-launch --run-option: it wins over the script's Config
# mpirun gives each rank its number; the launcher cannot know it in advance.
MPI_RANK_ENV = ("OMPI_COMM_WORLD_RANK", "PMI_RANK")
# Lines a job's processes print for the launcher (which reads and hides them): they travel with the output, through
# mpirun and ssh, so they reach the launcher from any host.
CONTROL_PREFIX = "parallax-control:"


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


def process_name(environ=None):
    """`worker.<rank>` or `ps.<task>`: how the job directory and the launcher's teardown know this process."""
    environ = os.environ if environ is None else environ
    role = current_role(environ)
    return f"worker.{role.worker_id}" if role.role == "worker" else f"ps.{environ.get(ENV_PS_TASK, '')}"


def register_process(environ=None):
    """Tell the launcher this process is up, and record `<host> <pid>` in the job directory on this host, so the
    launcher can stop it by id even if its parent is gone."""
    environ = os.environ if environ is None else environ
    job_dir = environ.get(ENV_JOB_DIR)
    if not job_dir or not environ.get(ENV_ROLE):
        return
    role = current_role(environ)
    if os.path.isdir(job_dir):
        with open(os.path.join(job_dir, f"pid.{process_name(environ)}"), "w") as f:
            f.write(f"{socket.gethostname()} {os.getpid()}\n")
    print(f"{CONTROL_PREFIX} up {socket.gethostname()} {os.getpid()}", file=sys.stderr, flush=True)
    if role.role == "worker":
        sys.excepthook = _report_failure_and_exit(sys.excepthook)


def report_step(step, digest, name):
    """A launched worker starts synchronized step `step` (1-based) of the fetch set `digest` (its first fetch
    `name`): the launcher checks that every worker runs the same sequence (step_ledger.py)."""
    if os.environ.get(ENV_ROLE):
        print(f"{CONTROL_PREFIX} step {step} {digest} {name}", file=sys.stderr, flush=True)


def report_done(steps):
    """A launched worker ran its last synchronized step: `steps` of them."""
    if os.environ.get(ENV_ROLE):
        print(f"{CONTROL_PREFIX} done {steps}", file=sys.stderr, flush=True)


def _report_failure_and_exit(print_traceback):
    """A worker that fails tells the launcher when and why (the launcher names the *first* failure: other workers
    often fail after it, in a collective it left), prints its traceback, and exits at once: TF's gRPC teardown can
    otherwise hang the process, and then nobody would notice the failure."""
    def hook(exc_type, exc, tb):
        first_line = str(exc).splitlines()[0] if str(exc) else ""
        print(f"{CONTROL_PREFIX} failed {time.time():.6f} {exc_type.__name__}: {first_line}", file=sys.stderr,
              flush=True)
        print_traceback(exc_type, exc, tb)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
    return hook
