"""The PARALLAX_* environment protocol between the launcher and the processes it starts: names, and who this process
is. Reading only: importing this module, or calling anything in it, changes nothing. Imports no TensorFlow.

No PARALLAX_ROLE in the environment means the user started the script by hand: the process is the launcher, and
when the spec has one slot it is also the only worker. `planner`, `explain` and `calibrate` are roles of a script
run in one process to make or show the plan, or to time its step (parallax-launch, `python -m parallax.explain`,
parallax-calibrate); they start nothing.
"""
import dataclasses
import os

from parallax.errors import LaunchError

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
ENV_EXPLAIN = "PARALLAX_EXPLAIN"  # role explain: JSON of explain's options
ENV_CALIBRATE = "PARALLAX_CALIBRATE"  # role calibrate: JSON {"out": path, "steps": K}
ENV_HEARTBEAT = "PARALLAX_HEARTBEAT_S"  # seconds between a launched process's heartbeat lines (watchdog.py)
ENV_TRANSPORT = "PARALLAX_TRANSPORT"  # parallax-launch --transport: it wins over the script's Config
ENV_CWD = "PARALLAX_CWD"  # transport ssh: the directory a remote worker runs in (mpirun's -wdir otherwise)
ENV_SETTINGS_OUT = "PARALLAX_SETTINGS_OUT"  # role planner: where to write the script's launch settings (JSON)
# mpirun gives each rank its number; the launcher cannot know it in advance.
MPI_RANK_ENV = ("OMPI_COMM_WORLD_RANK", "PMI_RANK")
# Lines a job's processes print for the launcher (which reads and hides them): they travel with the output, through
# mpirun and ssh, so they reach the launcher from any host.
CONTROL_PREFIX = "parallax-control:"


def exit_line(code):
    """The control line of a worker's end (Popen's status: -N for signal N), written by whoever started it: the
    host agent, or spawn for a worker it started here; the supervisor reads it as the cause of a silent death."""
    return f"{CONTROL_PREFIX} exit {code}"


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
    if role in ONE_PROCESS_ROLES:
        return Role(role)
    if role not in ("worker", "server") or not 0 <= worker_id < num_workers:
        raise LaunchError(f"inconsistent parallax role in the environment: {role!r} {worker_id}/{num_workers}; "
                          f"unset {ENV_ROLE} to run the script as a launcher")
    return Role(role, worker_id, num_workers)


def process_name(environ=None):
    """`worker.<rank>` or `ps.<task>`: how the job directory and the launcher's teardown know this process."""
    environ = os.environ if environ is None else environ
    role = current_role(environ)
    return f"worker.{role.worker_id}" if role.role == "worker" else f"ps.{environ.get(ENV_PS_TASK, '')}"
