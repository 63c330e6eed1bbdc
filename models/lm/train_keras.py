"""Train the LSTM language model with Keras's Model.fit on one device.

    python models/lm/make_data.py --out data/lm
    python models/lm/train_keras.py --data-dir data/lm --steps 1000 --checkpoint-dir ckpt/lm-keras
"""
import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import lm_keras  # noqa: E402
import tensorflow as tf  # noqa: E402

args = lm_keras.parse_args()
tf.keras.utils.set_random_seed(args.seed)
windows = lm_keras.train_examples(args)
model = lm_keras.build(args)
lm_keras.fit(model, lm_keras.batched(windows, args.batch_size, args), args)
