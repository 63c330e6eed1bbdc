"""Held-out AUC and log loss of a checkpoint written by train.py or train_distributed.py, restored into the
unmodified single-device graph with a plain tf.compat.v1.train.Saver. Pass the table settings the run used
(--max-table-rows, --embedding-size, ...).

    python models/recsys/eval.py --data-dir data/recsys --checkpoint-dir ckpt/recsys
"""
import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import recsys  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.compat.v1.disable_eager_execution()
args = recsys.parse_args()
if not args.checkpoint_dir:
    sys.exit("eval.py: --checkpoint-dir is required")
auc, logloss, checkpoint = recsys.evaluate(args.checkpoint_dir, args)
print(f"held-out AUC {auc:.4f} log loss {logloss:.4f} ({checkpoint})", flush=True)
