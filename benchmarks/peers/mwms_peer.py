"""A model's Keras version (models/<model>/<model>_keras.py, the one parallax's train_keras_distributed.py trains)
with TF 2's MultiWorkerMirroredStrategy, as TF's multi-worker Keras tutorial writes it: TF_CONFIG names the cluster
and this worker, the model is built and compiled in strategy.scope(), and Model.fit reads a dataset batched with
the global batch, which the strategy splits among the workers. One process per worker:

    TF_CONFIG='{"cluster": {"worker": ["h1:2223", "h2:2223"]}, "task": {"type": "worker", "index": 0}}' \\
        python benchmarks/peers/mwms_peer.py --model lm --data-dir data/lm --batch-size 32

--batch-size is per worker, as in parallax's scripts. One choice beyond the tutorial, so that a step's workers read
one device's global batch: the dataset is sharded by DATA (each worker takes its part of every global batch), not
by FILE, the default when there are files enough (each worker would read other files than one device reads). The
chief (worker 0) writes the weights to --checkpoint-dir; the others to a scratch directory, as the tutorial has it.
The ResNet's batch normalization is Keras's default, per replica (synchronized=False), as a user who does not ask
for more gets it.
"""
import json
import os
import tempfile

import peer_models  # (sets the models' import path first)
import tensorflow as tf  # noqa: E402

model_module, args = peer_models.keras_model_and_args()
strategy = tf.distribute.MultiWorkerMirroredStrategy()
worker = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
if worker != 0 and args.checkpoint_dir:
    args.checkpoint_dir = tempfile.mkdtemp(prefix=f"mwms-worker{worker}-")
tf.keras.utils.set_random_seed(args.seed)
with strategy.scope():
    model = model_module.build(args)
options = tf.data.Options()
options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
global_batch = args.batch_size * strategy.num_replicas_in_sync
model_module.fit(model, model_module.batched(model_module.train_examples(args), global_batch, args)
                 .with_options(options), args)
