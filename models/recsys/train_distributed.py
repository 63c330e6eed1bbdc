"""Train the DLRM-style recommendation model data-parallel with parallax: train.py plus two parallax lines.

    python models/recsys/train_distributed.py --data-dir data/recsys --resource-spec localhost:2 --batch-size 128
"""
import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import parallax  # noqa: E402
import recsys  # noqa: E402
import tensorflow as tf  # noqa: E402
import training  # noqa: E402

tf.compat.v1.disable_eager_execution()
args = recsys.parse_args()
graph = tf.Graph()
with graph.as_default():
    tf.compat.v1.set_random_seed(args.seed)
    examples = parallax.shard(recsys.train_examples(args.data_dir, seed=args.seed))
    model = recsys.Model(examples.batch(args.batch_size), args)
with parallax.get_runner(graph, args.resource_spec, training.parallax_config(args)) as sess:
    recsys.train(sess, model, args)
