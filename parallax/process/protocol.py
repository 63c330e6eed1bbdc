"""The PARALLAX_* environment protocol between the launcher and the processes it starts: names, and who this process
is. Reading only: importing this module, or calling anything in it, changes nothing. Imports no TensorFlow.

Who a process is in a job is a `ProcessContext`: its PARALLAX_* settings, where its control lines go, and the TF
servers it was handed. A process the launcher started is described by its environment (`this_process()` reads
os.environ, live). A job whose workers are threads of one process (thread_job.py) gives each thread its own context
(`ProcessContext.acting()`), as TF gives each thread its default graph: nothing on a worker's path reads the
process's environment directly, so several workers, and several jobs, can live in one process.

No PARALLAX_ROLE in the environment means the user started the script by hand: the process is the launcher, and
when the spec has one slot it is also the only worker. `planner`, `explain` and `calibrate` are roles of a script
run in one process to make or show the plan, or to time its step (parallax-launch, `python -m parallax.explain`,
parallax-calibrate); they start nothing.
"""
import contextlib
import contextvars
import dataclasses
import os
import sys
from typing import Any, Callable, Mapping, Optional

from parallax.errors import LaunchError
from parallax.process import control_lines

ENV_ROLE = "PARALLAX_ROLE"
ENV_WORKER_ID = "PARALLAX_WORKER_ID"
ENV_NUM_WORKERS = "PARALLAX_NUM_WORKERS"
ENV_JOB_DIR = "PARALLAX_JOB_DIR"
ENV_CLUSTER = "PARALLAX_CLUSTER"  # JSON {"ps": ["host:port", ...], "worker": [...]}, for jobs with servers
ENV_PS_TASK = "PARALLAX_PS_TASK"
ENV_NUM_SERVERS = "PARALLAX_NUM_SERVERS"
ENV_PARTITIONS = "PARALLAX_PARTITIONS"  # run_option AUTO: the shards get_partitioner makes (the plan's choice)
ENV_RESOURCE_SPEC = "PARALLAX_RESOURCE_SPEC"  # the launcher's spec, as text: it wins over the script's argument
ENV_RUN_OPTION = "PARALLAX_RUN_OPTION"  # parallax-launch --run-option: it wins over the script's Config
ENV_PLAN = "PARALLAX_PLAN"  # the job's plan (plan_json) in the job directory: workers load it, never make their own
ENV_PLAN_OUT = "PARALLAX_PLAN_OUT"  # role planner: where to write the plan
ENV_HEARTBEAT = "PARALLAX_HEARTBEAT_S"  # seconds between a launched process's heartbeat lines (watchdog.py)
ENV_CHECK = "PARALLAX_CHECK"  # parallax-launch --check-steps K [--check-warns]: "K" or "K:warn"; wins over Config
ENV_TRANSPORT = "PARALLAX_TRANSPORT"  # parallax-launch --transport: it wins over the script's Config
ENV_CWD = "PARALLAX_CWD"  # transport ssh: the directory a remote worker runs in (mpirun's -wdir otherwise)
ENV_SETTINGS_OUT = "PARALLAX_SETTINGS_OUT"  # role planner: where to write the script's launch settings (JSON)
# mpirun gives each rank its number; the launcher cannot know it in advance.
MPI_RANK_ENV = ("OMPI_COMM_WORLD_RANK", "PMI_RANK")
# Lines a job's processes print for the launcher (which reads and hides them): control_lines.py.
CONTROL_PREFIX = control_lines.PREFIX


ONE_PROCESS_ROLES = ("planner", "explain", "calibrate")


@dataclasses.dataclass(frozen=True)
class Role:
    role: str  # "launcher" | "worker" | "server" | "planner" | "explain" | "calibrate"
    worker_id: int = 0
    num_workers: int = 1

    @property
    def is_chief(self):
        return self.worker_id == 0

    def env(self):
        return {ENV_ROLE: self.role, ENV_WORKER_ID: str(self.worker_id), ENV_NUM_WORKERS: str(self.num_workers)}


def _stderr_line(message):
    # One write call: a line of another thread cannot land in the middle of it.
    sys.stderr.write(control_lines.line(message) + "\n")
    sys.stderr.flush()


@dataclasses.dataclass(frozen=True)
class ProcessContext:
    """Who this process, or a thread standing for one, is in a job.

    - `environ`: the PARALLAX_* variables the launcher set (os.environ itself for a launched process);
    - `write_control`: where its control lines (control_lines.py records) go (stderr, which the launcher reads;
      a list in a thread job);
    - `servers`: None, or an object whose `server(job_name, task)` returns an already started TF server for this
      worker to use instead of starting its own (a thread job's in-process servers);
    - `collective_group`: the group key of the job's TF collectives (a thread job takes a new one per job, as its
      servers outlive the job);
    - `in_thread`: the worker is a thread: it installs no exception hook, heartbeat or pid file of a process;
    - `at_get_runner`: in a one-process role (script_roles.py), what get_runner does with the script's graph,
      spec and config instead of joining a job."""
    environ: Mapping[str, str]
    write_control: Callable[[Any], None] = _stderr_line
    servers: Any = None
    collective_group: int = 1
    in_thread: bool = False
    at_get_runner: Optional[Callable[[Any, Any, Any], None]] = None
    # The Runners made in this process (weak references): a launched worker joins its job once (get_runner.py).
    runners: list = dataclasses.field(default_factory=list, compare=False, repr=False)

    @property
    def role(self):
        return current_role(self.environ)

    @property
    def launched(self):
        """Started by parallax's launcher (or a thread job) as a worker or server: its control lines are read."""
        return bool(self.environ.get(ENV_ROLE))

    def control(self, message):
        """A control line (a control_lines.py record) for the launcher, when someone reads them."""
        if self.launched:
            self.write_control(message)

    @contextlib.contextmanager
    def acting(self):
        """This context is `this_process()` in the calling thread (and what it runs) until the block ends."""
        token = _ACTIVE.set(self)
        try:
            yield self
        finally:
            _ACTIVE.reset(token)


_ACTIVE = contextvars.ContextVar("parallax_process_context", default=None)


_OWN = []  # this process's own context, made once: it reads os.environ live, and records the process's Runners


def this_process():
    """The context of the calling thread: the one a thread job made it act as, else this process's own."""
    active = _ACTIVE.get()
    if active is not None:
        return active
    if not _OWN:
        _OWN.append(ProcessContext(os.environ))
    return _OWN[0]


def current_role(environ=None):
    environ = this_process().environ if environ is None else environ
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
    if role in ONE_PROCESS_ROLES:
        return Role(role)
    if role not in ("worker", "server") or not 0 <= worker_id < num_workers:
        raise LaunchError(f"inconsistent parallax role in the environment: {role!r} {worker_id}/{num_workers}; "
                          f"unset {ENV_ROLE} to run the script as a launcher")
    return Role(role, worker_id, num_workers)


def process_name(environ=None):
    """`worker.<rank>` or `ps.<task>`: how the job directory and the launcher's teardown know this process."""
    environ = this_process().environ if environ is None else environ
    role = current_role(environ)
    return f"worker.{role.worker_id}" if role.role == "worker" else f"ps.{environ.get(ENV_PS_TASK, '')}"


DEFAULT_STALL_WARNING_S = 60.0


def derived_stall_warning(stall_timeout_s):
    """The stall warning when only the timeout is given: 60 s, or half the timeout when that is sooner (a job
    ended after 30 s of silence is warned about at 15)."""
    return min(DEFAULT_STALL_WARNING_S, stall_timeout_s / 2) if stall_timeout_s > 0 else DEFAULT_STALL_WARNING_S
