"""Train the ResNet with Keras's Model.fit on one device (models/resnet/resnet_keras.py).

    python models/resnet/train_keras.py --steps 300 --checkpoint-dir ckpt/resnet-keras
"""
import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import resnet_keras  # noqa: E402
import tensorflow as tf  # noqa: E402

args = resnet_keras.parse_args()
tf.keras.utils.set_random_seed(args.seed)
examples = resnet_keras.train_examples(args)
model = resnet_keras.build(args)
resnet_keras.fit(model, resnet_keras.batched(examples, args.batch_size, args), args)
