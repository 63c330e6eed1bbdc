"""A small MPI-mode job for launcher tests. Behaviour is chosen by environment variables:
  JOB_FAIL_RANK=R     rank R raises after its first step
  JOB_HANG=1          every rank sleeps forever after start-up (for signal tests)
  JOB_LOOP=1          every rank trains until it is stopped (for failure tests in mid-training)
  JOB_MISMATCH_RANK=R rank R builds a slightly different graph
  JOB_WIDER_RANK=R    rank R's variable b has another shape than the launcher's plan says
  JOB_OUT=DIR         each rank writes DIR/identity.<rank> with worker_id num_workers is_chief
  JOB_RUN_OPTION=PS   the run option (default MPI); JOB_SPEC the resource spec (default localhost:2)
  JOB_CKPT=DIR        checkpoint into DIR every step; the chief saves w's final value as JOB_OUT/w.npy
  JOB_PROFILE=1       both workers trace their second training step into JOB_LOG_DIR
  JOB_BACKEND=tf      Config.collective_backend (default auto)
  JOB_BAD_FEED_RANK=R rank R feeds x with 3 columns at its second step (a shape error inside TF)
  JOB_SPARSE=1        add an embedding (a sparse gradient): HYBRID then runs a parameter server too
  JOB_STALL=W,T       Config.stall_warning_s, stall_timeout_s
  JOB_STEPS_RANK=R,K  with JOB_LOOP: rank R stops after K steps (and ends normally)
  JOB_TRANSPORT=ssh   Config.transport (default direct)
  JOB_TWICE=1         every rank calls get_runner again after training (a mistake the job must name)
  JOB_TF_LOG_AS_IS=1  leave TF_CPP_MIN_LOG_LEVEL as the environment has it (else 2 unless set)
"""
import os
import sys
import time

if not os.environ.get("JOB_TF_LOG_AS_IS"):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import parallax  # noqa: E402
import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1
tf1.disable_eager_execution()
rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PARALLAX_WORKER_ID", "-1")))
g = tf.Graph()
with g.as_default():
    x = tf1.placeholder(tf.float32, [None, None], name="x")  # no static width: JOB_BAD_FEED_RANK fails in TF
    w = tf1.get_variable("w", [2, 1], initializer=tf1.zeros_initializer(), use_resource=True)
    # A second variable: in PS mode the plan puts it on the second server, so a 2-host job runs two servers.
    b = tf1.get_variable("b", [2 if os.environ.get("JOB_WIDER_RANK") == str(rank) else 1],
                         initializer=tf1.zeros_initializer(), use_resource=True)
    out = tf.matmul(x, w) + b[:1]
    if os.environ.get("JOB_SPARSE"):
        emb = tf1.get_variable("emb", [10, 1], initializer=tf1.zeros_initializer(), use_resource=True)
        out = out + tf.reduce_sum(tf.nn.embedding_lookup(emb, [1, 3]))
    if os.environ.get("JOB_MISMATCH_RANK") == str(rank):
        out = out * 2.0
    loss = tf.reduce_mean(tf.square(out - 1.0), name="loss")
    train = tf1.train.GradientDescentOptimizer(0.1).minimize(loss)
spec = os.environ.get("JOB_SPEC", "localhost:2")
log_dir = os.environ.get("JOB_LOG_DIR")
ckpt = os.environ.get("JOB_CKPT")
config = parallax.Config(run_option=os.environ.get("JOB_RUN_OPTION", "MPI"), log_dir=log_dir, checkpoint_dir=ckpt,
                         save_checkpoint_steps=1 if ckpt else None,
                         profile_steps=(2,) if os.environ.get("JOB_PROFILE") else (), profile_workers=(0, 1),
                         collective_backend=os.environ.get("JOB_BACKEND", "auto"),
                         transport=os.environ.get("JOB_TRANSPORT", "direct"))
if os.environ.get("JOB_STALL"):
    config.stall_warning_s, config.stall_timeout_s = map(float, os.environ["JOB_STALL"].split(","))
stop_rank, stop_after = map(int, os.environ.get("JOB_STEPS_RANK", "-1,0").split(","))
runner = parallax.get_runner(g, spec, config)
print(f"started worker {runner.worker_id}", flush=True)
if os.environ.get("JOB_OUT"):
    with open(os.path.join(os.environ["JOB_OUT"], f"identity.{runner.worker_id}"), "w") as f:
        f.write(f"{runner.worker_id} {runner.num_workers} {runner.is_chief} {os.getpid()}")
if os.environ.get("JOB_HANG"):
    while True:
        time.sleep(1)
step = 0
while os.environ.get("JOB_LOOP"):
    step += 1
    if runner.worker_id == stop_rank and step > stop_after:
        runner.close()
        sys.exit(0)
    if step == 3:
        print(f"worker {runner.worker_id} is training", flush=True)
    runner.run(train, {x: np.ones((2, 2), np.float32)})
    time.sleep(0.05)
runner.run(train, {x: np.ones((2, 2), np.float32)})
if os.environ.get("JOB_FAIL_RANK") == str(runner.worker_id):
    raise RuntimeError(f"deliberate failure on worker {runner.worker_id}")
bad = os.environ.get("JOB_BAD_FEED_RANK") == str(runner.worker_id)
runner.run(train, {x: np.full((2, 3 if bad else 2), 0.5, np.float32)})
print(f"worker {runner.worker_id} loss {runner.run(loss, {x: np.ones((2, 2), np.float32)}):.6f}", flush=True)
if ckpt and runner.is_chief:
    np.save(os.path.join(os.environ["JOB_OUT"], "w.npy"), runner.run(w))
if os.environ.get("JOB_TWICE"):
    parallax.get_runner(g, spec, config)
runner.close()
sys.exit(0)
