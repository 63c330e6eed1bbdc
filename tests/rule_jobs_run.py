"""Run a scenario of tests/rule_jobs.py (thread jobs in every mode) in a process of its own, with the bind shim."""
import json
import os
import subprocess
import sys

from parallax.process import bind_shim

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def rule_jobs(scenario, directory):
    """{mode: what the scenario observed}; the process must end with status 0."""
    out = directory / f"{scenario}.json"
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2", **bind_shim.preloading_environment())
    done = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "rule_jobs.py"), scenario, str(out)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and out.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(out.read_text())
