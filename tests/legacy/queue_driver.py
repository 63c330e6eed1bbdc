"""A script for the original Parallax whose input is a TF1 queue pipeline (slice_input_producer, then
tf.train.batch): it never starts the queue runners, since the original's session (a MonitoredTrainingSession) did.
One slot, 5 steps; prints each step's loss, then `done`.
  argv[1] = the resource_info argument (`localhost:1`: the only worker, in this process)
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

import parallax  # noqa: E402
import tensorflow as tf  # noqa: E402

from tests.models_for_tests import queue_pipeline  # noqa: E402

tf1 = tf.compat.v1
tf1.disable_eager_execution()
g, loss, train = queue_pipeline.build()
sess, _, _, _ = parallax.parallel_run(g, sys.argv[1])
for _ in range(5):
    print(f"loss {sess.run([loss, train])[0][0]!r}", flush=True)
print(f"should_stop {sess.should_stop()}", flush=True)
sess.close()
print("done", flush=True)
