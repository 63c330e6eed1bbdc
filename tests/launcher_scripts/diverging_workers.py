"""Two workers that break the rule "every worker runs the same sequence of synchronized steps" (docs/modes.md).
  argv[1] = other_fetch   worker 1 fetches the second train op at step 2, worker 0 the first one
  argv[1] = stop_early    worker 1 stops after 2 steps, worker 0 goes on to 5
  argv[2] = the run option; the spec is two loopback hosts, one worker each.
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

import parallax  # noqa: E402
import tensorflow as tf  # noqa: E402

from tests.equivalence.user_graphs import two_train_ops  # noqa: E402

tf.compat.v1.disable_eager_execution()
behaviour, run_option = sys.argv[1], sys.argv[2]
case = two_train_ops(2, 4, 6, 4)
train_a = case.fetch(0)
train_b = case.fetch(1)
with parallax.get_runner(case.graph, "127.0.0.1: 0\n127.0.0.2: 0", parallax.Config(run_option=run_option)) as r:
    w = r.worker_id
    for k in range(5):
        if behaviour == "stop_early" and w == 1 and k == 2:
            break
        fetch = train_b if behaviour == "other_fetch" and w == 1 and k == 1 else train_a
        r.run(fetch, case.feeds(k, k * 8 + w * 4, 4))
