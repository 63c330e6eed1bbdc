"""Train the ResNet with Keras's Model.fit, data-parallel with parallax: train_keras.py plus two parallax lines.

    python models/resnet/train_keras_distributed.py --resource-spec localhost:2 --batch-size 32
"""
import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import parallax  # noqa: E402
import resnet_keras  # noqa: E402
import tensorflow as tf  # noqa: E402
import training  # noqa: E402

args = resnet_keras.parse_args()
tf.keras.utils.set_random_seed(args.seed)
examples = parallax.shard(resnet_keras.train_examples(args))
model = resnet_keras.build(args)
runner = parallax.get_runner(model, args.resource_spec, training.parallax_config(args, checkpoints=False))
resnet_keras.fit(model, resnet_keras.batched(examples, args.batch_size, args), args)
