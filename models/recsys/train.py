"""Train the DLRM-style recommendation model on one device.

    python models/recsys/train.py --data-dir data/recsys --steps 1000 --checkpoint-dir ckpt/recsys
"""
import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import recsys  # noqa: E402
import tensorflow as tf  # noqa: E402
import training  # noqa: E402

tf.compat.v1.disable_eager_execution()
args = recsys.parse_args()
graph = tf.Graph()
with graph.as_default():
    tf.compat.v1.set_random_seed(args.seed)
    examples = recsys.train_examples(args.data_dir, seed=args.seed)
    model = recsys.Model(examples.batch(args.batch_size), args)
with training.SingleDeviceSession(graph, args) as sess:
    recsys.train(sess, model, args)
