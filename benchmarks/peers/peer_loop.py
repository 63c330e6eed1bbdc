"""What the peer scripts share: the MonitoredTrainingSession every TF 1 peer trains in, and a loop that prints the
log line models/training.py prints (`worker W step S <unit>/s R loss L`), which benchmarks/testbed.py reads.
Summaries and step-rate logging are off (parallax's runs write neither); a checkpoint is written at the end when
--checkpoint-dir is given (benchmarks/peers/exactness.py compares it with one device's)."""
import time

import tensorflow as tf

tf1 = tf.compat.v1


def monitored_session(checkpoint_dir, args, **kwargs):
    return tf1.train.MonitoredTrainingSession(
        checkpoint_dir=checkpoint_dir, save_checkpoint_steps=args.steps if checkpoint_dir else None,
        save_checkpoint_secs=None, save_summaries_steps=None, save_summaries_secs=None, log_step_count_steps=None,
        **kwargs)


def train(sess, model, args, worker, shared_global_step=False):
    """Train `model` (peer_models.Built) until the StopAtStepHook ends the session: a worker's own count of its
    steps is the global step when each step averages one gradient per worker. With `shared_global_step` (the step
    is a server's variable, which others advance), the loop reads it before each step and ends at --steps, the way
    TF's mnist_replica example ends: a worker that ran one step more would wait for gradients nobody sends."""
    start, seen, step = time.time(), 0, 0
    while not sess.should_stop():
        if shared_global_step:
            step = sess.run(model.global_step)
            if step >= args.steps:
                break
        _, loss, n = sess.run([model.train_op, model.loss, model.count])
        seen, step = seen + n, step + 1
        if step % args.log_every == 0 or step >= args.steps:
            print(f"worker {worker} step {step} {model.unit}/s {seen / (time.time() - start):.0f} loss {loss:.4f}",
                  flush=True)
            start, seen = time.time(), 0
