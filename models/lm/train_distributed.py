"""Train the LSTM language model data-parallel with parallax: train.py plus two parallax lines.

    python models/lm/make_data.py --out data/lm
    python models/lm/train_distributed.py --data-dir data/lm --resource-spec localhost:2 --batch-size 16
"""
import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import lm  # noqa: E402
import parallax  # noqa: E402
import tensorflow as tf  # noqa: E402
import training  # noqa: E402

tf.compat.v1.disable_eager_execution()
args = lm.parse_args()
graph = tf.Graph()
with graph.as_default():
    tf.compat.v1.set_random_seed(args.seed)
    windows = parallax.shard(lm.token_windows(args.data_dir, args.num_steps, seed=args.seed))
    model = lm.Model(windows.batch(args.batch_size), args, len(lm.vocabulary(args.data_dir)))
with parallax.get_runner(graph, args.resource_spec, training.parallax_config(args)) as sess:
    lm.train(sess, model, args)
