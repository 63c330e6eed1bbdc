"""A model's Keras version (models/<model>/<model>_keras.py) with TF 2's ParameterServerStrategy, as TF's
parameter-server training tutorial writes it: every task has TF_CONFIG; workers and parameter servers start a
tf.distribute.Server and serve; the coordinator (the chief) builds the model in strategy.scope() and calls
Model.fit with a DatasetCreator, whose function each worker calls to make its own input pipeline (the one-device
stream, sharded by worker). The strategy places each variable whole on a server, round robin, as the TF 1 peer's
greedy balancer places whole variables. (Sharded by the tutorial's MinSizePartitioner, the LM's LSTM kernel would
be split over two servers, and its fused function's colocation fails: "Cannot merge devices with incompatible
tasks".)

    TF_CONFIG='{"cluster": {"chief": [...], "worker": [...], "ps": [...]}, "task": {"type": "chief", "index": 0}}' \\
        python benchmarks/peers/pss_peer.py --model recsys --data-dir data/recsys --batch-size 128

Training is asynchronous, by the strategy's design: the coordinator dispatches each step to a free worker, which
reads the variables from the servers and writes its update back on its own. No step is one device's step with the
global batch, and --steps counts the workers' steps (of --batch-size examples each), not global ones. Keras runs
no batch-level callbacks under this strategy, so the log line (`step S <unit>/s R loss L`, S in workers' steps, R
the whole job's rate) comes at the end of epochs of --log-every steps. The coordinator writes the weights to
--checkpoint-dir at the end.
"""
import os
import time

import peer_models  # (sets the models' import path first)
import keras_training  # noqa: E402
import tensorflow as tf  # noqa: E402

model_module, args = peer_models.keras_model_and_args()
resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
if resolver.task_type in ("worker", "ps"):
    tf.distribute.Server(resolver.cluster_spec(), job_name=resolver.task_type, task_index=resolver.task_id,
                         protocol=resolver.rpc_layer or "grpc", start=True).join()
strategy = tf.distribute.ParameterServerStrategy(resolver)
tf.keras.utils.set_random_seed(args.seed)
with strategy.scope():
    model = model_module.build(args)


def worker_input(context):
    return model_module.batched(model_module.train_examples(args).shard(
        context.num_input_pipelines, context.input_pipeline_id), args.batch_size, args)


class EpochRate(tf.keras.callbacks.Callback):
    """At the end of each epoch (--log-every workers' steps): the job's rate over it, and the loss."""

    def __init__(self, units_per_batch):
        super().__init__()
        self._per_batch, self._start = units_per_batch, None

    def on_epoch_begin(self, epoch, logs=None):
        self._start = self._start or time.time()

    def on_epoch_end(self, epoch, logs=None):
        now = time.time()
        rate = args.log_every * self._per_batch / (now - self._start)
        keras_training.log_line((epoch + 1) * args.log_every, model_module.UNIT, rate, float(logs["loss"]))
        self._start = now


callbacks = [EpochRate(model_module.units_per_batch(args))]
model.fit(tf.keras.utils.experimental.DatasetCreator(worker_input), epochs=max(1, args.steps // args.log_every),
          steps_per_epoch=args.log_every, callbacks=callbacks, verbose=0)
if args.checkpoint_dir:
    os.makedirs(args.checkpoint_dir, exist_ok=True)
    model.save_weights(os.path.join(args.checkpoint_dir, model_module.WEIGHTS))
