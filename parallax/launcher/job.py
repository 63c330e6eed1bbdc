"""Launch a whole job from a resource spec and wait for it: the launcher side of `get_runner`.
Imports no TensorFlow."""
import json
import os
import shutil
import sys
import tempfile

from parallax.errors import UnsupportedError
from parallax.launcher import mpirun, ports, role
from parallax.launcher.supervisor import Supervisor


def launch_job(spec, config, with_servers, command=None, out=None):
    """Start one worker per slot running `command` (default: this program again), with mpirun, and, when
    `with_servers`, one parameter server per host first. Returns the job's exit status."""
    remote = [h.hostname for h in spec.hosts if not h.is_local]
    if remote:
        raise UnsupportedError(f"{spec.source}: hosts {remote} are not this machine; this version launches jobs "
                               f"on localhost only")
    job_dir = tempfile.mkdtemp(prefix="parallax-job-")
    try:
        extra = {role.ENV_ROLE: "worker", role.ENV_NUM_WORKERS: str(spec.num_workers), role.ENV_JOB_DIR: job_dir,
                 role.ENV_NUM_SERVERS: str(spec.num_hosts)}
        services = []
        if with_servers:
            cluster = ports.cluster_for(spec, ports.reserve_local_ports(spec.num_hosts + spec.num_workers))
            extra[role.ENV_CLUSTER] = json.dumps(cluster)
            for task in range(spec.num_hosts):
                env = _environment(dict(extra, **{role.ENV_ROLE: "server", role.ENV_PS_TASK: str(task)}))
                services.append((f"ps {task}", [sys.executable, "-m", "parallax.ps_server"], env))
        env = _environment(extra)
        names = [k for k in mpirun.PASSED_ENV if k in env] + list(extra)
        cmd = mpirun.mpirun_command(spec, command or mpirun.rerun_command(), names)
        servers = f" and {spec.num_hosts} parameter server(s)" if with_servers else ""
        print(f"parallax: launching {spec.num_workers} workers{servers} ({config.run_option}) on "
              f"{', '.join(f'{h.hostname}x{h.num_slots}' for h in spec.hosts)}"
              + (f"; logs in {config.log_dir}" if config.log_dir else ""), file=sys.stderr, flush=True)
        return Supervisor(cmd, env, job_dir, log_dir=config.log_dir, out=out, services=services).run()
    finally:
        shutil.rmtree(job_dir, ignore_errors=True)


def _environment(extra):
    env = dict(os.environ)
    env.update(extra)
    return env
