"""A TF1 queue-based input pipeline (slice_input_producer, then tf1.train.batch, filled by queue runners that
tf1.train.start_queue_runners starts on the runner), two loopback hosts, one worker each, batch 4, 5 steps.
  argv[1] = the run option.
Every worker builds the same queues from the same tensor, so every worker reads the same batches: the job runs,
and the launcher warns that nothing shards the input.
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
with parallax.get_runner(g, "127.0.0.1: 0\n127.0.0.2: 0", parallax.Config(run_option=sys.argv[1])) as sess:
    coord = tf1.train.Coordinator()
    threads = tf1.train.start_queue_runners(sess=sess, coord=coord)
    for _ in range(5):
        print(f"worker {sess.worker_id} loss {sess.run([loss, train])[0]!r}", flush=True)
    coord.request_stop()
    coord.join(threads, stop_grace_period_secs=10)
    print(f"worker {sess.worker_id} done", flush=True)
