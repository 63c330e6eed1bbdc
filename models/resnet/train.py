"""Train the ResNet on scikit-learn's digits on one device.

    python models/resnet/train.py --steps 300 --checkpoint-dir ckpt/resnet
"""
import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import resnet  # noqa: E402
import tensorflow as tf  # noqa: E402
import training  # noqa: E402

tf.compat.v1.disable_eager_execution()
args = resnet.parse_args()
graph = tf.Graph()
with graph.as_default():
    tf.compat.v1.set_random_seed(args.seed)
    examples = resnet.train_examples(seed=args.seed)
    model = resnet.Model(examples.batch(args.batch_size), args)
with training.SingleDeviceSession(graph, args) as sess:
    resnet.train(sess, model, args)
