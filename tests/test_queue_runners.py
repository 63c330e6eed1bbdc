"""A TF1 queue-based input pipeline runs in a job: tf1.train.start_queue_runners takes the runner as its session
(its threads call make_callable and run the enqueues while the main thread trains), every worker ends, and the
launcher warns that nothing shards the input (input_sharding.py), which the workers' equal losses confirm."""
import re

import pytest

from tests.launched import script_output

pytestmark = pytest.mark.slow  # real jobs


@pytest.mark.parametrize("mode", ["PS", "HYBRID"])
def test_a_queue_runner_pipeline_trains_and_is_warned_of(mode):
    output = script_output("queue_runners.py", [mode], timeout=180)
    assert output.count("done") >= 2 and "nothing in the graph shards" in output, output[-3000:]
    losses = {w: re.findall(rf"worker {w} loss (\S+)", output) for w in (0, 1)}
    assert len(losses[0]) == 5 and losses[0] == losses[1], output[-3000:]
