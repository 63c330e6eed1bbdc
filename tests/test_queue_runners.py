"""A TF1 queue-based input pipeline runs in a job: tf1.train.start_queue_runners takes the runner as its session
(its threads call make_callable and run the enqueues while the main thread trains), every worker ends, and the
launcher warns that nothing shards the input (input_sharding.py), which the workers' equal losses confirm."""
import os
import re

import pytest

from tests.launched import run_script

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SCRIPT = os.path.join(ROOT, "tests", "launcher_scripts", "queue_runners.py")


@pytest.mark.parametrize("mode", ["PS", "HYBRID"])
def test_a_queue_runner_pipeline_trains_and_is_warned_of(mode):
    proc = run_script([SCRIPT, mode], timeout=180)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    assert output.count("done") >= 2 and "nothing in the graph shards" in output, output[-3000:]
    losses = {w: re.findall(rf"worker {w} loss (\S+)", output) for w in (0, 1)}
    assert len(losses[0]) == 5 and losses[0] == losses[1], output[-3000:]
