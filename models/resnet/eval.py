"""Test accuracy of a checkpoint written by train.py or train_distributed.py, restored into the unmodified
single-device graph (inference mode) with a plain tf.compat.v1.train.Saver.

    python models/resnet/eval.py --checkpoint-dir ckpt/resnet
"""
import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import resnet  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.compat.v1.disable_eager_execution()
args = resnet.parse_args()
if not args.checkpoint_dir:
    sys.exit("eval.py: --checkpoint-dir is required")
accuracy, checkpoint = resnet.accuracy(args.checkpoint_dir, args)
print(f"test accuracy {accuracy * 100:.2f}% ({checkpoint})", flush=True)
