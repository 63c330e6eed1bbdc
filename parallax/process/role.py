"""What a launched process tells its launcher: that it is up (`register_process`, called explicitly by get_runner
and the parameter server), its synchronized steps, and its failure. Imports no TensorFlow. The PARALLAX_*
protocol itself is in protocol.py."""
import os
import socket
import sys
import threading
import time

from parallax.errors import print_uncaught
from parallax.process import control_lines
from parallax.process.protocol import (CONTROL_PREFIX, ENV_CLUSTER, ENV_HEARTBEAT, ENV_JOB_DIR,  # noqa: F401
                                        ENV_NUM_SERVERS, ENV_NUM_WORKERS, ENV_PLAN, ENV_PLAN_OUT, ENV_PS_TASK,
                                        ENV_RESOURCE_SPEC,
                                        ENV_ROLE, ENV_RUN_OPTION, ENV_WORKER_ID, MPI_RANK_ENV, Role, current_role,
                                        process_name, this_process)


def register_process(context=None):
    """Tell the launcher this process is up, and record `<host> <pid>` in the job directory on this host, so the
    launcher can stop it by id even if its parent is gone. A worker that is a thread (thread_job.py) only says it
    is up: the process, its exception hook and its heartbeat are its job's, not its own."""
    context = this_process() if context is None else context
    environ = context.environ
    job_dir = environ.get(ENV_JOB_DIR)
    if not job_dir or not context.launched:
        return
    context.control(control_lines.Up(socket.gethostname(), os.getpid()))
    if context.in_thread:
        return
    role = current_role(environ)
    if os.path.isdir(job_dir):
        with open(os.path.join(job_dir, f"pid.{process_name(environ)}"), "w") as f:
            f.write(f"{socket.gethostname()} {os.getpid()}\n")
    if role.role == "worker":
        sys.excepthook = _report_failure_and_exit(sys.excepthook)
    _start_heartbeat(environ)


def _start_heartbeat(environ):
    """A thread that says "alive" every few seconds, so the launcher's watchdog can tell a stopped, hung or
    unreachable process (silent) from one that is only slow (a long graph build or restore still beats). It is a
    thread of this process, not an op in the graph: it stops exactly when the process stops."""
    try:
        interval = float(environ.get(ENV_HEARTBEAT, "0"))
    except ValueError:
        interval = 0.0
    if interval <= 0:
        return

    def beat():
        while True:
            time.sleep(interval)
            _control_line(control_lines.Alive())
    threading.Thread(target=beat, name="parallax-heartbeat", daemon=True).start()


def _control_line(message):
    this_process().control(message)


def report_serving():
    """A parameter server listens: with transport ssh the launcher starts the workers only then, because a
    connection to an ssh forward whose server is not up yet is accepted and then closed, which TF does not retry
    (a refused connection, as without forwards, it does)."""
    _control_line(control_lines.Serving())


def report_step(step, digest, name, context=None):
    """A launched worker starts synchronized step `step` (1-based) of the fetch set `digest` (its first fetch
    `name`): the launcher checks that every worker runs the same sequence (step_ledger.py)."""
    (context or this_process()).control(control_lines.Step(step, digest, name))


def report_examples(step, counts, context=None):
    """Synchronized step `step` read `counts` examples from its inputs (one count per input, example_counts.py):
    the launcher compares the workers' counts of each step (input_ledger.py)."""
    (context or this_process()).control(control_lines.Examples(step, tuple(counts)))


def report_fed(step, digest, context=None):
    """Synchronized step `step` was fed a batch whose digest is `digest` (this worker's first step with fed
    inputs): the launcher warns when every worker was fed the same one (input_ledger.py)."""
    (context or this_process()).control(control_lines.Fed(step, digest))


def report_input_end(step, context=None):
    """Synchronized step `step` found this worker's input at its end (OutOfRangeError): fine when every worker's
    ended in that step; the launcher says so when another worker's had a batch there."""
    (context or this_process()).control(control_lines.InputEnd(step))


def report_done(steps, context=None):
    """A launched worker ran its last synchronized step: `steps` of them."""
    (context or this_process()).control(control_lines.Done(steps))


def _report_failure_and_exit(print_traceback):
    """A worker that fails tells the launcher when and why (the launcher names the *first* failure: other workers
    often fail after it, in a collective it left), prints its traceback, and exits at once: TF's gRPC teardown can
    otherwise hang the process, and then nobody would notice the failure."""
    def hook(exc_type, exc, tb):
        _control_line(control_lines.Failed(time.time(), f"{exc_type.__name__}: {cause_line(exc)}"))
        print_uncaught(exc_type, exc, tb, print_traceback)  # a ParallaxError's message says what to fix
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
    return hook


def cause_line(exc):
    """One line that says what went wrong. A message whose first line is a header (it ends with ':', as TF's
    "Graph execution error:") has its cause further down: the last unindented line of its first section (TF's
    stack traces follow in later sections, and indented lines are traceback entries or node markers)."""
    text = str(exc)
    lines = text.splitlines()
    first = lines[0].strip() if lines else ""
    if not first.endswith(":"):
        return first
    section = text.split("\n\nOriginal stack trace", 1)[0].splitlines()
    plain = [line.strip() for line in section[1:] if line.strip() and not line[:1].isspace()]
    cause = next((line for line in reversed(plain) if not line.endswith(":")), None)
    node = getattr(getattr(exc, "op", None), "name", None)
    return first if cause is None else f"{cause}" + (f" (at node {node})" if node else "")
