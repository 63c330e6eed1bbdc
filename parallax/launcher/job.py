"""Launch a whole job from a resource spec and wait for it: the launcher side of `get_runner`.
Imports no TensorFlow."""
import os
import shutil
import sys
import tempfile

from parallax.errors import UnsupportedError
from parallax.launcher import mpirun, role
from parallax.launcher.supervisor import Supervisor


def launch_mpi_job(spec, config, command=None, out=None):
    """Start one rank per slot running `command` (default: this program again); return the job's exit status."""
    remote = [h.hostname for h in spec.hosts if not h.is_local]
    if remote:
        raise UnsupportedError(f"{spec.source}: hosts {remote} are not this machine; this version launches jobs "
                               f"on localhost only")
    job_dir = tempfile.mkdtemp(prefix="parallax-job-")
    try:
        extra = {role.ENV_ROLE: "worker", role.ENV_NUM_WORKERS: str(spec.num_workers), role.ENV_JOB_DIR: job_dir}
        env = dict(os.environ)
        env.update(extra)
        names = [k for k in mpirun.PASSED_ENV if k in env] + list(extra)
        cmd = mpirun.mpirun_command(spec, command or mpirun.rerun_command(), names)
        print(f"parallax: launching {spec.num_workers} workers ({config.run_option}) on "
              f"{', '.join(f'{h.hostname}x{h.num_slots}' for h in spec.hosts)}"
              + (f"; logs in {config.log_dir}" if config.log_dir else ""), file=sys.stderr, flush=True)
        return Supervisor(cmd, env, job_dir, log_dir=config.log_dir, out=out).run()
    finally:
        shutil.rmtree(job_dir, ignore_errors=True)
