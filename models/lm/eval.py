"""Held-out perplexity of a checkpoint written by train.py or train_distributed.py, restored into the unmodified
single-device graph with a plain tf.compat.v1.train.Saver.

    python models/lm/eval.py --data-dir data/lm --checkpoint-dir ckpt/lm
"""
import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import lm  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.compat.v1.disable_eager_execution()
args = lm.parse_args()
if not args.checkpoint_dir:
    sys.exit("eval.py: --checkpoint-dir is required")
ppl, checkpoint = lm.perplexity(args.data_dir, args.checkpoint_dir, args)
print(f"held-out perplexity {ppl:.2f} ({checkpoint})", flush=True)
