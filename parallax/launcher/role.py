"""What a launched process tells its launcher: that it is up (`register_process`, called explicitly by get_runner
and the parameter server), its synchronized steps, and its failure. Imports no TensorFlow. The PARALLAX_*
protocol itself is in protocol.py."""
import os
import socket
import sys
import time

from parallax.launcher.protocol import (CONTROL_PREFIX, ENV_CLUSTER, ENV_JOB_DIR, ENV_NUM_SERVERS,  # noqa: F401
                                        ENV_NUM_WORKERS, ENV_PLAN, ENV_PLAN_OUT, ENV_PS_TASK, ENV_RESOURCE_SPEC,
                                        ENV_ROLE, ENV_RUN_OPTION, ENV_WORKER_ID, MPI_RANK_ENV, Role, current_role,
                                        process_name)


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
