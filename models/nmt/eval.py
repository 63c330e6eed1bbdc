"""BLEU on the test set (or --eval-split dev) of a checkpoint written by train.py or train_distributed.py, restored into the unmodified
single-device graph with a plain tf.compat.v1.train.Saver (greedy decoding).

    python models/nmt/eval.py --data-dir data/nmt --checkpoint-dir ckpt/nmt
"""
import os
import sys

sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)), os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import nmt  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.compat.v1.disable_eager_execution()
args = nmt.parse_args()
if not args.checkpoint_dir:
    sys.exit("eval.py: --checkpoint-dir is required")
translations, references, checkpoint = nmt.translate(args.checkpoint_dir, args, split=args.eval_split)
for hyp, ref in list(zip(translations, references))[:3]:
    print(f"  {' '.join(hyp)}  |  reference: {' '.join(ref)}")
print(f"{args.eval_split} BLEU {nmt.bleu(translations, references):.2f} ({checkpoint})", flush=True)
