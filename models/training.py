"""What every model's scripts share: the single-device session, the matching parallax Config, and the training
loop (a log line from every worker, TensorBoard scalars from the chief).

A distributed script replaces `SingleDeviceSession(graph, args)` by `parallax.get_runner(graph, spec, config)`:
both are context managers with `run`, `is_chief`, `worker_id` and `num_workers`, and both initialize or restore the
latest checkpoint at start, save every `--save-checkpoint-steps` and at close.
"""
import argparse
import os
import time

import tensorflow as tf

tf1 = tf.compat.v1


def add_common_arguments(p, steps, batch_size, learning_rate):
    p.add_argument("--resource-spec", default="localhost:2", help="used by train_distributed.py")
    p.add_argument("--run-option", default="HYBRID", choices=("HYBRID", "PS", "MPI", "AUTO"))
    p.add_argument("--steps", type=int, default=steps)
    p.add_argument("--batch-size", type=int, default=batch_size, help="per worker")
    p.add_argument("--learning-rate", type=float, default=learning_rate)
    p.add_argument("--checkpoint-dir")
    p.add_argument("--save-checkpoint-steps", type=int)
    p.add_argument("--log-dir", help="TensorBoard summaries (chief)")
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile-steps", default=(), type=lambda text: tuple(int(s) for s in text.split(",")),
                   help="train_distributed.py: steps to trace on worker 0, e.g. 30,31; Chrome-trace JSON goes to "
                        "--log-dir (docs/profiling.md)")
    p.add_argument("--optimizations", default="LA,OPAU,OPSW", type=_optimizations,
                   help="HYBRID/PS optimizations to apply, comma-separated, or `none` (docs/optimizations.md): "
                        "LA local aggregation, OPAU post-aggregation op placement, OPSW boundary-op placement")
    p.add_argument("--collective-backend", default="auto", choices=("auto", "horovod", "tf"),
                   help="train_distributed.py: AllReduce/AllGather library in MPI and HYBRID (docs/modes.md)")
    p.add_argument("--calibration", help="train_distributed.py, --run-option AUTO: the calibration.json that "
                                         "parallax-calibrate wrote")


def add_dtype_argument(p):
    """--dtype: benchmarks/peers/exactness.py builds the models in float64, where a diff from one device's result
    is the computation's, not float32's summation order."""
    p.add_argument("--dtype", default="float32", choices=("float32", "float64"))


def wrapped(optimizer, wrap_optimizer):
    """A model's optimizer, or what `wrap_optimizer` makes of it: benchmarks/peers/ pass Horovod's
    DistributedOptimizer or TF's SyncReplicasOptimizer around the very optimizer the model trains with."""
    return wrap_optimizer(optimizer) if wrap_optimizer else optimizer


OPTIMIZATIONS = {"LA": "local_aggregation", "OPAU": "place_post_aggregation_ops", "OPSW": "place_boundary_ops"}


def _optimizations(text):
    names = [] if text.strip().lower() == "none" else [n.strip().upper() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in OPTIMIZATIONS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown optimization(s) {', '.join(unknown)}: use a comma-separated "
                                         f"subset of {','.join(OPTIMIZATIONS)}, or none")
    return frozenset(names)


def parallax_config(args, checkpoints=True):
    """The parallax Config matching SingleDeviceSession's checkpoints (none with `checkpoints=False`: a Keras
    script's own callbacks write them)."""
    import parallax
    switches = {field: name in args.optimizations for name, field in OPTIMIZATIONS.items()}
    return parallax.Config(run_option=args.run_option, checkpoint_dir=args.checkpoint_dir if checkpoints else None,
                           save_checkpoint_steps=args.save_checkpoint_steps if checkpoints else None,
                           profile_steps=args.profile_steps,
                           log_dir=args.log_dir if args.profile_steps else None,
                           collective_backend=args.collective_backend, calibration=args.calibration, **switches)


class SingleDeviceSession:
    """A plain Session with what a training script needs around it: initialize or restore the latest checkpoint,
    save every `save_checkpoint_steps` and at close. Same interface as a parallax Runner."""
    is_chief, worker_id, num_workers = True, 0, 1

    def __init__(self, graph, args):
        self.graph, self.args = graph, args
        with graph.as_default():
            self.saver = tf1.train.Saver(max_to_keep=3) if args.checkpoint_dir else None
            tables = tf1.tables_initializer()
            init = tf.group(tf1.global_variables_initializer(), tables)
            self.step = tf1.train.get_global_step()
        self.session = tf1.Session(graph=graph)
        latest = tf1.train.latest_checkpoint(args.checkpoint_dir) if args.checkpoint_dir else None
        if latest:
            self.saver.restore(self.session, latest)
            self.session.run(tables)
        else:
            self.session.run(init)
        self._runs = 0

    def run(self, fetches, feed_dict=None):
        result = self.session.run(fetches, feed_dict)
        self._runs += 1
        every = self.args.save_checkpoint_steps
        if self.saver and every and self._runs % every == 0:
            self.save_checkpoint()
        return result

    def save_checkpoint(self):
        step = self.session.run(self.step)
        self.saver.save(self.session, os.path.join(self.args.checkpoint_dir, "model.ckpt"), global_step=step)

    def close(self):
        if self.session is not None:
            if self.saver:
                self.save_checkpoint()
            self.session.close()
            self.session = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def restore_latest(sess, checkpoint_dir):
    """What every eval script does first: restore the latest checkpoint with a plain Saver over the graph's
    variables (so under the single-device names) and initialize its lookup tables. Returns the checkpoint path."""
    latest = tf1.train.latest_checkpoint(checkpoint_dir)
    if latest is None:
        raise FileNotFoundError(f"no checkpoint in {checkpoint_dir}")
    tf1.train.Saver().restore(sess, latest)
    sess.run(tf1.tables_initializer())
    return latest


def resume_step(checkpoint_dir):
    """The global step of the latest checkpoint in `checkpoint_dir` (0 when there is none): where a run that
    restores it starts."""
    latest = tf1.train.latest_checkpoint(checkpoint_dir) if checkpoint_dir else None
    if latest is None or "global_step" not in dict(tf.train.list_variables(latest)):
        return 0
    return int(tf.train.load_variable(latest, "global_step"))


def positioned(batches, args):
    """The batches from where the run resumes: every worker reads one batch per global step, so a run restored at
    global step G skips G batches of its (deterministically shuffled) stream, and reads what an uninterrupted run
    reads next. (With a sampled softmax, the sampler's random state still restarts.)"""
    args.start_step = resume_step(args.checkpoint_dir)
    return batches.skip(args.start_step) if args.start_step else batches


def train_loop(sess, train_op, loss, count, args, unit, extra=None):
    """Train until global step args.steps (a resumed run goes on from its checkpoint's step, so killing a run and
    starting the same command again ends where an uninterrupted run would). Every --log-every steps every worker
    prints `worker W step S <unit>/s R loss L [extra]`, and the chief writes TensorBoard scalars (loss, learning
    rate, <unit>/s of the whole job). `count`: the number of examples (or words) in a batch. Returns the last
    logged loss."""
    writer = tf1.summary.FileWriter(args.log_dir) if args.log_dir and sess.is_chief else None
    start, seen, last = time.time(), 0, float("nan")
    first = sess.run(tf1.train.get_global_step(train_op.graph)) + 1
    if first - 1 != getattr(args, "start_step", 0):
        raise RuntimeError(f"the session restored global step {first - 1} but the input was positioned for step "
                           f"{getattr(args, 'start_step', 0)}: every worker must read the same --checkpoint-dir")
    if first > args.steps:
        print(f"worker {sess.worker_id}: global step {first - 1} already reached --steps {args.steps}", flush=True)
    for step in range(first, args.steps + 1):
        _, value, n = sess.run([train_op, loss, count])
        seen += n
        if step % args.log_every == 0 or step == args.steps:
            rate = seen / (time.time() - start)
            suffix = f" {extra(value)}" if extra else ""
            print(f"worker {sess.worker_id} step {step} {unit}/s {rate:.0f} loss {value:.4f}{suffix}", flush=True)
            if writer:
                writer.add_summary(tf1.Summary(value=[
                    tf1.Summary.Value(tag="loss", simple_value=value),
                    tf1.Summary.Value(tag="learning_rate", simple_value=args.learning_rate),
                    tf1.Summary.Value(tag=f"{unit}_per_second", simple_value=rate * sess.num_workers)]), step)
            start, seen, last = time.time(), 0, value
    if writer:
        writer.close()
    return last
