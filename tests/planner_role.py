"""Run a graph's script in the planner role (as parallax-launch does first): its plan and what it printed."""
import os
import subprocess
import sys

from parallax.plan import plan_json

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
HEADER = "import tensorflow as tf, parallax\ntf1 = tf.compat.v1\ng = tf.Graph()\nwith g.as_default():\n"


def plan_in_planner_role(tmp_path, graph_lines, spec="localhost:2"):
    """(plan, stderr) of a script that builds `graph_lines` (statements, indented under `with g.as_default():`) and
    calls parallax.get_runner(g, spec); the planner must end with status 0."""
    script = HEADER + "".join(f"    {line}\n" for line in graph_lines) + f"parallax.get_runner(g, {spec!r})\n"
    out = tmp_path / "plan.json"
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3", PARALLAX_ROLE="planner",
               PARALLAX_PLAN_OUT=str(out))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return plan_json.loads(out.read_text()), done.stderr
