"""A script's own `sess.run(tf1.global_variables_initializer())`, with the runner as its session
(user_initializers.py): the runner's initialization stands for its first run, so every worker keeps the chief's
values and the job stays one device's; a group made after get_runner (a metric's reset with the input's) runs its
ops; a second initialization of the global variables is refused, naming what to do."""
import json
import os
import re

import pytest
import tensorflow as tf

from parallax.runtime import user_initializers
from tests.launched import run_script

pytestmark = pytest.mark.slow  # real jobs


ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SCRIPT = os.path.join(ROOT, "tests", "launcher_scripts", "user_init.py")
tf1 = tf.compat.v1


def _job(mode, variant):
    proc = run_script([SCRIPT, mode, variant], timeout=180)
    return proc.returncode, proc.stdout + proc.stderr


def _values(output):
    found = dict(re.findall(r"worker (\d) steps since reset 2 values (\[.*\])", output))
    assert sorted(found) == ["0", "1"], output[-3000:]
    return [json.loads(found[w]) for w in ("0", "1")]


@pytest.mark.parametrize("mode", ["MPI", "PS", "HYBRID"])
def test_the_scripts_initialization_keeps_the_job_one_devices(mode):
    code, output = _job(mode, "seeded")
    assert code == 0, output[-3000:]
    assert float(re.search(r"max diff (\S+)", output).group(1)) <= 1e-9
    assert "init initializes variables that the runner initialized" in output


@pytest.mark.parametrize("mode", ["MPI", "HYBRID"])
def test_unseeded_replicas_keep_the_chiefs_values(mode):
    code, output = _job(mode, "unseeded")
    assert code == 0, output[-3000:]
    first, second = _values(output)
    assert first == second


def test_initializing_the_global_variables_again_is_refused():
    code, output = _job("MPI", "again")
    assert code != 0
    assert "UnsupportedError" in output and "initializes again what was initialized in this job" in output


def test_a_group_is_read_through_to_what_it_runs_besides_initializers():
    g = tf.Graph()
    with g.as_default():
        v = tf1.get_variable("v", [2])
        local = tf1.get_local_variable("count", [], tf.int64, tf1.zeros_initializer())
        it = tf1.data.make_initializable_iterator(tf.data.Dataset.range(3))
        inner = tf.group(tf1.global_variables_initializer(), it.initializer)
        outer = tf.group(inner, tf1.local_variables_initializer())
    done = user_initializers.done_at_start(g)
    assert done == {v.initializer}
    found, rest = user_initializers.split(outer, done)
    assert found == [v.initializer] and set(rest) == {it.initializer, local.initializer}
    assert user_initializers.split(it.initializer, done) == ([], [it.initializer])


def test_an_initializer_given_its_value_loads_it():
    """`variable.load(value, session)` runs the initializer with its value fed: an assignment, which runs."""
    g = tf.Graph()
    with g.as_default():
        v = tf1.get_variable("v", [2])
    groups = user_initializers.ScriptGroups(g, g, is_chief=False)
    fetches, rest = groups.read(v.initializer, {v.initializer.inputs[1]: [1.0, 2.0]})
    assert fetches is v.initializer and rest == []
    assert groups.read(v.initializer)[0] is None  # not fed: the runner's initialization stood for it
