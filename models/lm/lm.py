"""The word-level LSTM language model (LM-1B style) shared by train.py, train_distributed.py and eval.py.

Data: the One Billion Word layout written by make_data.py. Each sentence is `<S> words </S>`; sentences are
concatenated into one token stream and cut into windows of num_steps + 1 tokens (inputs, then targets shifted by
one). Windows are shuffled with a fixed seed and repeated; the scripts shard them element-wise (distributed) and
batch them. Words become ids in the graph, through a lookup table over vocab.txt.

Model: embedding [V, E] (a sparse gradient), one LSTM layer, a softmax [V, H] (full, or sampled with --num-sampled
for very large vocabularies, which makes its gradient sparse too), gradients clipped by global norm, Adam or
Adagrad.
"""
import argparse
import glob
import importlib.util
import math
import os
import warnings

# From TF 2.16 on, tf.compat.v1.nn.rnn_cell needs Keras 2, which TF takes from tf_keras when this is set before its
# first use (as `import parallax` sets it for the distributed script; the single-device scripts import no parallax).
if importlib.util.find_spec("tf_keras") is not None and not os.environ.get("TF_USE_LEGACY_KERAS"):
    os.environ["TF_USE_LEGACY_KERAS"] = "1"

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import training  # noqa: E402

tf1 = tf.compat.v1
tf.get_logger().setLevel("ERROR")  # TF 2.15 prints a deprecation notice for every v1 layer this model uses
warnings.filterwarnings("ignore", message=r".*is deprecated and will be removed", category=UserWarning)
TRAIN_FILES = "training-monolingual.tokenized.shuffled/news.en-*"
HELDOUT_FILES = "heldout-monolingual.tokenized.shuffled/news.en.heldout-*"
UNK = "<UNK>"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Train the LSTM language model.")
    p.add_argument("--data-dir", required=True, help="a directory written by models/lm/make_data.py")
    training.add_common_arguments(p, steps=1000, batch_size=32, learning_rate=0.005)
    p.add_argument("--num-steps", type=int, default=20, help="unrolled LSTM steps")
    p.add_argument("--embedding-size", type=int, default=64)
    p.add_argument("--hidden-size", type=int, default=128)
    p.add_argument("--partitions", type=int, default=1,
                   help="split the embedding and softmax into this many shards (a checkpoint restores into any "
                        "number)")
    p.add_argument("--num-sampled", type=int, default=0, help="sampled softmax with this many samples (0: full)")
    p.add_argument("--optimizer", default="adam", choices=("adam", "adagrad"))
    p.add_argument("--clip-norm", type=float, default=1.0)
    training.add_dtype_argument(p)
    return p.parse_args(argv)


def vocabulary(data_dir):
    with open(os.path.join(data_dir, "vocab.txt")) as f:
        return [line.rstrip("\n") for line in f]


def token_windows(data_dir, num_steps, files=TRAIN_FILES, seed=0, repeat=True):
    """A dataset of string windows [num_steps + 1], shuffled with `seed`, repeated."""
    paths = sorted(glob.glob(os.path.join(data_dir, files)))
    if not paths:
        raise FileNotFoundError(f"no {files} under {data_dir}; run models/lm/make_data.py --out {data_dir}")
    ds = tf.data.TextLineDataset(paths)
    ds = ds.map(lambda line: tf.strings.split(tf.strings.join(["<S>", line, "</S>"], separator=" ")))
    ds = ds.unbatch().batch(num_steps + 1, drop_remainder=True)
    if repeat:
        ds = ds.shuffle(20000, seed=seed, reshuffle_each_iteration=True).repeat()
    return ds


class Model:
    def __init__(self, windows, args, vocab_size, for_training=True, wrap_optimizer=None):
        """`windows`: a batched dataset of string windows. Builds the loss (and the training op if
        `for_training`; its input then starts where a resumed run's global step says). The optimizer is wrapped
        by `wrap_optimizer` if given (benchmarks/peers/)."""
        windows = training.positioned(windows, args) if for_training else windows
        words = tf1.data.make_one_shot_iterator(windows).get_next()
        table = tf.lookup.StaticHashTable(
            tf.lookup.TextFileInitializer(os.path.join(args.data_dir, "vocab.txt"), tf.string,
                                          tf.lookup.TextFileIndex.WHOLE_LINE, tf.int64,
                                          tf.lookup.TextFileIndex.LINE_NUMBER), default_value=2)  # <UNK>
        ids = table.lookup(words)
        inputs, targets = ids[:, :-1], ids[:, 1:]
        dtype = tf.as_dtype(args.dtype)
        init = tf1.random_uniform_initializer(-0.1, 0.1, seed=args.seed, dtype=dtype)
        shards = tf1.fixed_size_partitioner(args.partitions) if args.partitions > 1 else None
        embedding = tf1.get_variable("embedding", [vocab_size, args.embedding_size], dtype, initializer=init,
                                     partitioner=shards, use_resource=True)
        cell = tf1.nn.rnn_cell.LSTMCell(args.hidden_size, initializer=init, dtype=dtype)
        outputs, _ = tf1.nn.dynamic_rnn(cell, tf.nn.embedding_lookup(embedding, inputs), dtype=dtype)
        hidden = tf.reshape(outputs, [-1, args.hidden_size])
        softmax_w = tf1.get_variable("softmax_w", [vocab_size, args.hidden_size], dtype, initializer=init,
                                     partitioner=shards, use_resource=True)
        softmax_b = tf1.get_variable("softmax_b", [vocab_size], dtype, initializer=tf1.zeros_initializer(),
                                     use_resource=True)
        labels = tf.reshape(targets, [-1])
        logits = tf.matmul(hidden, tf.convert_to_tensor(softmax_w), transpose_b=True) + softmax_b
        # The mean cross entropy per word, with the full softmax: what perplexity is made of.
        self.full_loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                                       logits=logits))
        self.words_per_batch = tf.size(labels)
        if not for_training:
            return
        if args.num_sampled:
            self.loss = tf.reduce_mean(tf.nn.sampled_softmax_loss(
                softmax_w, softmax_b, tf.expand_dims(labels, 1), hidden, args.num_sampled, vocab_size,
                seed=args.seed))
        else:
            self.loss = self.full_loss
        self.global_step = tf1.train.get_or_create_global_step()
        optimizer = training.wrapped(tf1.train.AdamOptimizer(args.learning_rate) if args.optimizer == "adam" else
                                     tf1.train.AdagradOptimizer(args.learning_rate), wrap_optimizer)
        grads, variables = zip(*optimizer.compute_gradients(self.loss))
        clipped, _ = tf.clip_by_global_norm(grads, args.clip_norm)
        self.train_op = optimizer.apply_gradients(zip(clipped, variables), global_step=self.global_step)


def train(sess, model, args):
    """Every worker logs step, words/s, loss and the batch's perplexity; the chief writes TensorBoard scalars.
    With a sampled softmax the loss logged is the sampled one, without perplexity: the full softmax would read the
    whole [V, H] matrix every step, which the sampled softmax is there to avoid (on servers, over the network)."""
    if args.num_sampled:
        return training.train_loop(sess, model.train_op, model.loss, model.words_per_batch, args, unit="words")
    return training.train_loop(sess, model.train_op, model.full_loss, model.words_per_batch, args, unit="words",
                               extra=lambda loss: f"ppl {math.exp(loss):.1f}")


def perplexity(data_dir, checkpoint_dir, args, max_batches=None):
    """Restore the latest checkpoint into a fresh single-device graph (plain Saver) and compute the held-out
    perplexity with the full softmax."""
    vocab_size = len(vocabulary(data_dir))
    graph = tf.Graph()
    with graph.as_default():
        windows = token_windows(data_dir, args.num_steps, files=HELDOUT_FILES, repeat=False).batch(64)
        model = Model(windows, args, vocab_size, for_training=False)
        with tf1.Session() as sess:
            latest = training.restore_latest(sess, checkpoint_dir)
            total, count, batches = 0.0, 0, 0
            while max_batches is None or batches < max_batches:
                try:
                    loss, n = sess.run([model.full_loss, model.words_per_batch])
                except tf.errors.OutOfRangeError:
                    break
                total, count, batches = total + loss * n, count + n, batches + 1
    return float(np.exp(total / max(count, 1))), latest
