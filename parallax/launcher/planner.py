"""`parallax-launch` makes the job's plan before it starts anything: it runs the training command once, here, in the
`planner` role, where get_runner analyzes and plans the graph, writes the plan and ends the script. Imports no
TensorFlow (the script does, in its own process).

Only a command that is a Python program (`python train.py ...`, `python -m package.train ...`) is run so. Any other
command (a shell wrapper, `python -c ...`) cannot be run once without side effects: it gets no plan, its workers
make their own (and check by graph fingerprint that they agree), and the launcher starts one server per host
unless --run-option is MPI or the job has one slot."""
import json
import os
import subprocess
import sys
import tempfile

from parallax.errors import LaunchError
from parallax.process import protocol

TIMEOUT_SECONDS = 600


def plannable(command):
    """Is `command` a Python program that can be run once to plan (a script file, or -m module)?"""
    return len(command) > 1 and os.path.basename(command[0]).startswith("python") and \
        (command[1] == "-m" or not command[1].startswith("-"))


def plan_by_running(spec, command, options):
    """(the plan (JSON text) that `command`'s get_runner makes for `spec`, the launch settings of the script's
    Config (a dict: the watchdog's limits)); (None, {}) when the command is not plannable."""
    if not plannable(command):
        return None, {}
    if command[1] != "-m" and not os.path.isfile(command[1]):
        raise LaunchError(f"the script {command[1]} does not exist on this host")
    with tempfile.TemporaryDirectory(prefix="parallax-plan-") as work:
        out = os.path.join(work, "plan.json")
        env = dict(os.environ, **dict(options.env))
        settings = os.path.join(work, "settings.json")
        env.update({protocol.ENV_ROLE: "planner", protocol.ENV_PLAN_OUT: out, protocol.ENV_SETTINGS_OUT: settings,
                    protocol.ENV_RESOURCE_SPEC: str(spec)})
        if options.run_option:
            env[protocol.ENV_RUN_OPTION] = options.run_option
        if options.transport:
            env[protocol.ENV_TRANSPORT] = options.transport
        print("parallax: planning: running the script once here to analyze and plan its graph", file=sys.stderr,
              flush=True)
        try:
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=TIMEOUT_SECONDS,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise LaunchError(f"planning: the script did not reach parallax.get_runner within {TIMEOUT_SECONDS} s"
                              ) from None
        except OSError as e:
            raise LaunchError(f"planning: cannot run {command[0]}: {e}") from None
        if done.returncode != 0 or not os.path.exists(out):
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
            why = "it ended without calling parallax.get_runner" if done.returncode == 0 else \
                f"it exited {done.returncode}"
            raise LaunchError(f"planning: the script was run once here to make the job's plan, and {why}; its "
                              f"output ends:\n{tail}")
        notes = [line for line in done.stderr.splitlines() if line.startswith("parallax: ")]
        if notes:  # what parallax itself said while planning (warnings, notes) is said once, here
            print("\n".join(notes), file=sys.stderr, flush=True)
        with open(out) as f:
            plan = f.read()
        if not os.path.exists(settings):
            return plan, {}
        with open(settings) as f:
            return plan, json.load(f)
