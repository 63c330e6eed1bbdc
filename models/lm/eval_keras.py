"""Held-out perplexity of the weights written by train_keras.py or train_keras_distributed.py, loaded into a new
single-device Keras model.

    python models/lm/eval_keras.py --data-dir data/lm --checkpoint-dir ckpt/lm-keras
"""
import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import lm_keras  # noqa: E402

args = lm_keras.parse_args()
if not args.checkpoint_dir:
    sys.exit("eval_keras.py: --checkpoint-dir is required")
print(f"held-out perplexity {lm_keras.perplexity(args):.2f} ({args.checkpoint_dir})", flush=True)
