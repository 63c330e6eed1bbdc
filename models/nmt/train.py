"""Train the attention encoder-decoder on one device.

    python models/nmt/train.py --data-dir data/nmt --steps 600 --checkpoint-dir ckpt/nmt
"""
import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import nmt  # noqa: E402
import tensorflow as tf  # noqa: E402
import training  # noqa: E402

tf.compat.v1.disable_eager_execution()
args = nmt.parse_args()
graph = tf.Graph()
with graph.as_default():
    tf.compat.v1.set_random_seed(args.seed)
    pairs = nmt.sentence_pairs(args.data_dir, seed=args.seed)
    model = nmt.Model(nmt.padded(pairs, args.batch_size), args)
with training.SingleDeviceSession(graph, args) as sess:
    nmt.train(sess, model, args)
