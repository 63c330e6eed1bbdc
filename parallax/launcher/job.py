"""Launch a whole job on the hosts of a resource spec and wait for it: the code behind `parallax-launch` and
`get_runner`'s self-launch. Imports no TensorFlow.

preflight (every host, in parallel; it writes the plan into the job directory) -> layout (which process runs where,
on which port) -> the parameter servers the plan needs (directly here, over ssh elsewhere) -> mpirun (one rank per
slot, over ssh on remote hosts) -> supervision.
"""
import dataclasses
import json
import os
import shutil
import sys
import tempfile
from typing import Optional, Tuple

from parallax.plan import plan_json
from parallax.errors import LaunchError
from parallax.config import check_ssh_carries
from parallax.launcher import mpirun, preflight, ssh_transport, stale
from parallax.process import bind_shim, protocol
from parallax.launcher.ssh import SshSettings, command as ssh_command, on_remote_hosts
from parallax.launcher.layout import Layout, Process
from parallax.launcher.supervisor import Supervisor
from parallax.core.text_table import format_table


PLAN_FILE = "plan.json"


@dataclasses.dataclass(frozen=True)
class LaunchOptions:
    ssh: SshSettings = SshSettings()
    log_dir: Optional[str] = None
    start_timeout: float = 120.0
    dry_run: bool = False
    python: Optional[str] = None  # the Python to run on every host; default: the command's own Python
    run_option: Optional[str] = None  # parallax-launch --run-option; None keeps the script's Config
    mpi_args: Tuple[str, ...] = ()  # extra mpirun arguments (the local cluster restricts MPI to its network)
    env: Tuple[Tuple[str, str], ...] = ()  # extra environment for every process (parallax-launch -x)
    stall_warning_s: float = protocol.DEFAULT_STALL_WARNING_S  # the watchdog's (watchdog.py); 0 turns it off
    stall_timeout_s: float = 600.0
    # "ssh": servers on loopback, reached through ssh forwards (ssh_transport.py); None: the script's Config
    transport: Optional[str] = None


def launch_job(spec, config, plan, command=None, out=None, options=None):
    """`get_runner`'s self-launch: this program again, one worker per slot, all loading `plan`. Returns the job's
    exit status."""
    options = options or LaunchOptions(log_dir=config.log_dir, stall_warning_s=config.stall_warning(),
                                       stall_timeout_s=config.stall_timeout_s, transport=config.transport)
    return launch(spec, command or mpirun.rerun_command(), options, plan_json.dumps(plan),
                  run_option=config.run_option, out=out)


def servers_of(plan, run_option, num_hosts, num_workers=2):
    """(parameter servers, whether every worker runs a TF server) for the plan: server tasks 0..k-1, task t on
    host t; worker servers for parameter servers or TF's collectives. Without a plan: one server per host unless
    MPI, and worker servers always (the workers plan for themselves, and may choose TF's collectives); but none
    for one worker, which is one device: its own plan has no server (planning.py), as a planned 1-slot job's."""
    if plan is None:
        if num_workers == 1:
            return 0, False
        return (0 if run_option == "MPI" else num_hosts), True
    tasks = plan.server_tasks
    if tasks != tuple(range(len(tasks))):
        raise LaunchError(f"the plan uses parameter-server tasks {list(tasks)}; this launcher starts tasks "
                          f"0..k-1 only")
    return len(tasks), plan.uses_worker_servers


def launch(spec, command, options, plan_text, run_option=None, out=None):
    """Start the parameter servers the plan needs (task t on host t) and one worker per slot running `command`,
    each loading the plan from the job directory; supervise them; return the job's exit status (0 when every
    worker succeeded). Without a plan (a command that could not be run once to make one, planner.py): one
    server per host unless `run_option` is MPI, and the workers plan for themselves."""
    if not command:
        raise LaunchError("no command to run: give it after `--`, e.g. parallax-launch -H h1:2 -- python train.py")
    plan = plan_json.loads(plan_text) if plan_text else None
    over_ssh = options.transport == "ssh"
    if over_ssh:  # planning refused these already; a command that could not be run once to plan has no plan
        check_ssh_carries(run_option, plan.backend if plan else None)
    num_servers, worker_servers = servers_of(plan, run_option, spec.num_hosts, spec.num_workers)
    if num_servers > spec.num_hosts:
        raise LaunchError(f"the plan needs {num_servers} parameter servers, one per host, but the spec has "
                          f"{spec.num_hosts} hosts")
    python, command = resolve_python(command, options.python)
    script = _script_of(command)
    say = _progress_printer()
    stale.sweep_job_dirs(say=say)  # what launchers killed with -9 left here
    job_dir = tempfile.mkdtemp(prefix="parallax-job-")
    remote_hosts = [h for h in spec.hosts if not h.is_local]
    try:
        needed = {i: (i < num_servers) + (h.num_slots if worker_servers else 0) for i, h in enumerate(spec.hosts)}
        files = {stale.OWNER_FILE: json.dumps(stale.owner_record())}  # how a later launcher tells if we are gone
        if plan_text:
            files[PLAN_FILE] = plan_text
        reports = preflight.run_preflight(spec, needed, python, script, None if options.dry_run else job_dir,
                                          options.ssh, progress=say if remote_hosts else None, files=files)
        layout = _layout(spec, reports, num_servers, worker_servers, job_dir, python, loopback=over_ssh)
        env_extra = _job_environment(spec, layout, options, run_option, with_plan=bool(plan_text),
                                     partitions=plan.partitions if plan else None)
        services = [_server_process(p, python, env_extra, options) for p in layout.servers()]
        if over_ssh:
            services = ssh_transport.tunnels(layout, options) + services
            main_cmd, main_env, main_stdin = ssh_transport.spawner(layout, command, env_extra, options,
                                                                   _local_environment())
        else:
            (main_cmd, main_env), main_stdin = _mpirun_main(spec, command, env_extra, options), None
        if options.dry_run:
            print(describe(layout, python, command, main_cmd), file=out or sys.stdout, flush=True)
            return 0
        say(_launching_line(spec, services, run_option, plan, over_ssh, options))
        supervisor = Supervisor(main_cmd, main_env, layout, services, options, out=out, main_stdin=main_stdin)
        return supervisor.run()
    finally:
        _remove_job_dirs(spec, job_dir, python, options)


def _mpirun_main(spec, command, env_extra, options):
    """(command, environment) of the mpirun that starts every worker, with its host agents' environment."""
    cmd = mpirun.mpirun_command(spec, command, env_extra, options.ssh, extra_args=options.mpi_args)
    shim = {k: v for k, v in env_extra.items() if k in bind_shim.VARIABLES}
    return cmd, dict(_local_environment(), **env_extra, **mpirun.agent_environment(spec, options.ssh, shim))


def _launching_line(spec, services, run_option, plan, over_ssh, options):
    servers = f" and {len(services)} parameter server(s)" if services else ""
    how = (run_option or "run option from the script") + (
        f", collectives: {plan.backend}" if plan and plan.uses_collectives else "") + (
        ", transport: ssh" if over_ssh else "")
    return (f"launching {spec.num_workers} worker{'s' if spec.num_workers != 1 else ''}{servers} ({how}) on "
            f"{', '.join(f'{h.hostname}x{h.num_slots}' for h in spec.hosts)}"
            + (f"; logs in {options.log_dir}" if options.log_dir else ""))


def resolve_python(command, python):
    """The absolute Python every host runs (the same path everywhere), and the command using it."""
    first = command[0]
    is_python = os.path.basename(first).startswith("python")
    found = shutil.which(first) if is_python and python is None else None
    if is_python and python is None and found is None:
        raise LaunchError(f"{first!r} is not on PATH here; give the Python's full path")
    resolved = os.path.abspath(python or found or sys.executable)
    return resolved, ([resolved, *command[1:]] if is_python else list(command))


def _script_of(command):
    """The script a `python script.py ...` command runs, as an absolute path (None for `python -m` and others)."""
    if len(command) > 1 and os.path.basename(command[0]).startswith("python") and not command[1].startswith("-"):
        return os.path.abspath(command[1])
    return None


def _layout(spec, reports, num_servers, worker_servers, job_dir, python, loopback=False):
    """Which process runs where, on which port; `loopback`: every task's address is its host's loopback."""
    address = (lambda host: ssh_transport.LOOPBACK) if loopback else bind_shim.host_name
    processes, cluster = [], None
    if num_servers or worker_servers:
        cluster = {"ps": [], "worker": []} if num_servers else {"worker": []}
        for i, host in enumerate(spec.hosts[:num_servers]):
            port = reports[i].ports[0]
            processes.append(Process(host, i, "ps", i, port))
            cluster["ps"].append(f"{address(host)}:{port}")
    rank = 0
    for i, host in enumerate(spec.hosts):
        free = reports[i].ports[(i < num_servers):] if worker_servers else []
        for slot in range(host.num_slots):
            port = free[slot] if worker_servers else None
            processes.append(Process(host, i, "worker", rank, port))
            if worker_servers:
                cluster["worker"].append(f"{address(host)}:{port}")
            rank += 1
    return Layout(spec, processes, cluster, job_dir, python)


TF_LOG_LEVEL = "TF_CPP_MIN_LOG_LEVEL"


def _job_environment(spec, layout, options, run_option, with_plan, partitions=None):
    env = dict(options.env)
    env[protocol.ENV_HEARTBEAT] = f"{heartbeat_interval(options):g}"
    if TF_LOG_LEVEL not in env and TF_LOG_LEVEL not in os.environ:
        # TF's INFO lines (oneDNN's and the CPU's notes at import, a rendezvous's abort after each step on TF's
        # collectives) would come once per process and step; warnings and errors still pass, and a level the
        # user sets is kept.
        env[TF_LOG_LEVEL] = "1"
    env.update(worker_environment(spec, layout.job_dir, layout.cluster, with_plan, options.run_option, partitions,
                                  options.transport))
    env.update(bind_shim.environment(spec, loopback_only=options.transport == "ssh"))
    return env


def worker_environment(spec, job_dir, cluster, with_plan, run_option=None, partitions=None, transport=None):
    """The PARALLAX_* settings every worker of a job on `spec` gets (each adds its rank): its role, the job's
    directory, spec and cluster, the plan in the job directory, and what the launcher's options override. A thread
    job's workers (thread_job.py) get the same."""
    env = {protocol.ENV_ROLE: "worker", protocol.ENV_NUM_WORKERS: str(spec.num_workers),
           protocol.ENV_JOB_DIR: job_dir, protocol.ENV_NUM_SERVERS: str(spec.num_hosts),
           protocol.ENV_RESOURCE_SPEC: str(spec)}
    if partitions is not None:  # AUTO's choice: every worker's get_partitioner makes that many shards
        env[protocol.ENV_PARTITIONS] = str(partitions)
    if with_plan:
        env[protocol.ENV_PLAN] = os.path.join(job_dir, PLAN_FILE)
    if run_option:
        env[protocol.ENV_RUN_OPTION] = run_option
    if cluster:
        env[protocol.ENV_CLUSTER] = json.dumps(cluster)
    if transport == "ssh":
        env[protocol.ENV_TRANSPORT] = "ssh"
    return env


def heartbeat_interval(options):
    """Seconds between a process's heartbeats: a quarter of the shortest stall limit, within [0.2, 2]; 0 (none)
    when the watchdog is off."""
    limits = [s for s in (options.stall_warning_s, options.stall_timeout_s) if s > 0]
    return min(2.0, max(0.2, min(limits) / 4)) if limits else 0


def _local_environment():
    return dict(os.environ)


def _server_process(process, python, env_extra, options):
    """(process, argv, env, stdin text) of a parameter server: run directly here, through ssh and the host agent
    elsewhere (the environment goes on stdin, never in a command line)."""
    extra = dict(env_extra, **{protocol.ENV_ROLE: "server", protocol.ENV_PS_TASK: str(process.index)})
    argv = [python, "-m", "parallax.runtime.ps_server"]
    if process.host.is_local:
        return process, argv, dict(_local_environment(), **extra), None
    env = dict(mpirun.forwarded_environment(_local_environment()), **extra)
    agent = [python, *preflight.AGENT, "run", process.name, "--", *argv]
    return process, ssh_command(options.ssh, process.host, agent), None, json.dumps(env) + "\n"


def describe(layout, python, command, main_cmd):
    """The dry-run table: every process the job would start."""
    by_mpirun = mpirun.is_mpirun(main_cmd)
    rows = []
    for p in layout.processes:
        by = "mpirun" if by_mpirun else "spawn"
        how = f"{python} -m parallax.runtime.ps_server" if p.role == "ps" else f"(by {by}) {' '.join(command)}"
        where = "here" if p.host.is_local else "ssh"
        rows.append([p.host.hostname, p.role, str(p.index), str(p.port or "-"), where, how])
    table = format_table([["host", "role", "rank/task", "port", "started", "command"], *rows])
    starter = "mpirun command" if by_mpirun else "workers started by"
    return f"{table}\n\n{starter}:\n  {' '.join(main_cmd)}\njob directory on every host: {layout.job_dir}"


def _remove_job_dirs(spec, job_dir, python, options):
    shutil.rmtree(job_dir, ignore_errors=True)
    if options.dry_run:
        return
    on_remote_hosts(spec, options.ssh, lambda host, index: [python, *preflight.AGENT, "cleanup", job_dir])


def _progress_printer():
    def say(text):
        print(f"parallax: {text}", file=sys.stderr, flush=True)
    return say

