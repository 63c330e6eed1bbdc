"""Train the LSTM language model on one device.

    python models/lm/make_data.py --out data/lm
    python models/lm/train.py --data-dir data/lm --steps 1000 --checkpoint-dir ckpt/lm
"""
import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import lm  # noqa: E402
import tensorflow as tf  # noqa: E402
import training  # noqa: E402

tf.compat.v1.disable_eager_execution()
args = lm.parse_args()
graph = tf.Graph()
with graph.as_default():
    tf.compat.v1.set_random_seed(args.seed)
    windows = lm.token_windows(args.data_dir, args.num_steps, seed=args.seed)
    model = lm.Model(windows.batch(args.batch_size), args, len(lm.vocabulary(args.data_dir)))
with training.SingleDeviceSession(graph, args) as sess:
    lm.train(sess, model, args)
