"""Train the recommendation model with Keras's Model.fit on one device (models/recsys/recsys_keras.py).

    python models/recsys/train_keras.py --data-dir data/recsys --steps 300 --checkpoint-dir ckpt/recsys-keras
"""
import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import recsys_keras  # noqa: E402
import tensorflow as tf  # noqa: E402

args = recsys_keras.parse_args()
tf.keras.utils.set_random_seed(args.seed)
examples = recsys_keras.train_examples(args)
model = recsys_keras.build(args)
recsys_keras.fit(model, recsys_keras.batched(examples, args.batch_size, args), args)
