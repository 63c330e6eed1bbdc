"""A one-process role: the user's training script run in this process (by `python -m parallax.explain`, the
workload probe of parallax-calibrate, a benchmark) until its get_runner call, which hands its graph to the role's
function instead of joining a job, and then stops the script.

The role's function travels in the ProcessContext, so get_runner needs to know no role's module: the roles sit
above it and call it, never the reverse."""
import os
import runpy
import sys

from parallax.process.protocol import ProcessContext


class ScriptStopped(BaseException):
    """Ends a script at its get_runner call (a BaseException, so that the script's own `except Exception` blocks
    let it through)."""


def run_script_in_role(script, script_args, role_env, at_get_runner):
    """Run `script` with `script_args` in this process, with `role_env` set, until its get_runner call: that calls
    `at_get_runner(graph, spec, config)` and stops the script. True when it got there."""
    sys.argv = [script, *script_args]
    context = ProcessContext({**os.environ, **role_env}, at_get_runner=at_get_runner)
    try:
        with context.acting():
            runpy.run_path(script, run_name="__main__")
    except ScriptStopped:
        return True
    return False
