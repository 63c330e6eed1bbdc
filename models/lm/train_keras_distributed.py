"""Train the LSTM language model with Keras's Model.fit, data-parallel with parallax: train_keras.py plus two
parallax lines.

    python models/lm/make_data.py --out data/lm
    python models/lm/train_keras_distributed.py --data-dir data/lm --resource-spec localhost:2 --batch-size 16
"""
import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import lm_keras  # noqa: E402
import parallax  # noqa: E402
import tensorflow as tf  # noqa: E402
import training  # noqa: E402

args = lm_keras.parse_args()
tf.keras.utils.set_random_seed(args.seed)
windows = parallax.shard(lm_keras.train_examples(args))
model = lm_keras.build(args)
runner = parallax.get_runner(model, args.resource_spec, training.parallax_config(args, checkpoints=False))
lm_keras.fit(model, lm_keras.batched(windows, args.batch_size, args), args)
