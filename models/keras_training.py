"""What the Keras versions of the models share (models/*/*_keras.py): one epoch of --steps steps of Model.fit,
with the weights written at its end (ModelCheckpoint, --checkpoint-dir), TensorBoard scalars with --log-dir, and
the log line every worker prints every --log-every steps, `step S <unit>/s R loss L [extra]` (a parallax job's
launcher puts `[worker/W] ` before it; benchmarks read these lines)."""
import os
import time

import tensorflow as tf


def fit(model, batches, args, unit, units_per_batch, weights_file, extra=None):
    """One epoch of --steps steps of `batches`. `units_per_batch`: the units (examples, words) in one of this
    process's batches; `extra(loss)`: more text for the log line."""
    callbacks = [Rate(args, unit, units_per_batch, extra)]
    if args.checkpoint_dir:
        os.makedirs(args.checkpoint_dir, exist_ok=True)
        callbacks.append(tf.keras.callbacks.ModelCheckpoint(os.path.join(args.checkpoint_dir, weights_file),
                                                            save_weights_only=True))
    if args.log_dir:
        callbacks.append(tf.keras.callbacks.TensorBoard(args.log_dir, update_freq=args.log_every))
    return model.fit(batches, epochs=1, steps_per_epoch=args.steps, callbacks=callbacks, verbose=0)


class Rate(tf.keras.callbacks.Callback):
    """Every --log-every steps: the rate of this process's own batches since the last line, and the loss Keras
    logs (the mean over the epoch so far: over the run, as it is one epoch)."""

    def __init__(self, args, unit, units_per_batch, extra=None):
        super().__init__()
        self._args, self._unit, self._per_batch, self._extra = args, unit, units_per_batch, extra
        self._start, self._steps = None, 0

    def on_train_batch_begin(self, batch, logs=None):
        if self._start is None:
            self._start = time.time()

    def on_train_batch_end(self, batch, logs=None):
        self._steps += 1
        step, args = batch + 1, self._args
        if step % args.log_every == 0 or step == args.steps:
            rate = self._steps * self._per_batch / (time.time() - self._start)
            log_line(step, self._unit, rate, float(logs["loss"]), self._extra)
            self._start, self._steps = time.time(), 0


def log_line(step, unit, rate, loss, extra=None):
    """Print `step S <unit>/s R loss L [extra(loss)]`, the line benchmarks/testbed.py reads."""
    suffix = f" {extra(loss)}" if extra else ""
    print(f"step {step} {unit}/s {rate:.0f} loss {loss:.4f}{suffix}", flush=True)
