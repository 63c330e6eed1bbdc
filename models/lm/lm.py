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
import math
import os
import time
import warnings

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1
tf.get_logger().setLevel("ERROR")  # TF 2.15 prints a deprecation notice for every v1 layer this model uses
warnings.filterwarnings("ignore", message=r".*is deprecated and will be removed", category=UserWarning)
TRAIN_FILES = "training-monolingual.tokenized.shuffled/news.en-*"
HELDOUT_FILES = "heldout-monolingual.tokenized.shuffled/news.en.heldout-*"
UNK = "<UNK>"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Train the LSTM language model.")
    p.add_argument("--data-dir", required=True, help="a directory written by models/lm/make_data.py")
    p.add_argument("--resource-spec", default="localhost:2", help="used by train_distributed.py")
    p.add_argument("--run-option", default="HYBRID", choices=("HYBRID", "PS", "MPI"))
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--batch-size", type=int, default=32, help="per worker")
    p.add_argument("--num-steps", type=int, default=20, help="unrolled LSTM steps")
    p.add_argument("--embedding-size", type=int, default=64)
    p.add_argument("--hidden-size", type=int, default=128)
    p.add_argument("--num-sampled", type=int, default=0, help="sampled softmax with this many samples (0: full)")
    p.add_argument("--optimizer", default="adam", choices=("adam", "adagrad"))
    p.add_argument("--learning-rate", type=float, default=0.005)
    p.add_argument("--clip-norm", type=float, default=1.0)
    p.add_argument("--checkpoint-dir")
    p.add_argument("--save-checkpoint-steps", type=int)
    p.add_argument("--log-dir", help="TensorBoard summaries (chief)")
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--seed", type=int, default=0)
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
    def __init__(self, windows, args, vocab_size, training=True):
        """`windows`: a batched dataset of string windows. Builds the loss (and the training op if `training`)."""
        words = tf1.data.make_one_shot_iterator(windows).get_next()
        table = tf.lookup.StaticHashTable(
            tf.lookup.TextFileInitializer(os.path.join(args.data_dir, "vocab.txt"), tf.string,
                                          tf.lookup.TextFileIndex.WHOLE_LINE, tf.int64,
                                          tf.lookup.TextFileIndex.LINE_NUMBER), default_value=2)  # <UNK>
        ids = table.lookup(words)
        inputs, targets = ids[:, :-1], ids[:, 1:]
        init = tf1.random_uniform_initializer(-0.1, 0.1, seed=args.seed)
        embedding = tf1.get_variable("embedding", [vocab_size, args.embedding_size], initializer=init,
                                     use_resource=True)
        cell = tf1.nn.rnn_cell.LSTMCell(args.hidden_size, initializer=init)
        outputs, _ = tf1.nn.dynamic_rnn(cell, tf.nn.embedding_lookup(embedding, inputs), dtype=tf.float32)
        hidden = tf.reshape(outputs, [-1, args.hidden_size])
        softmax_w = tf1.get_variable("softmax_w", [vocab_size, args.hidden_size], initializer=init,
                                     use_resource=True)
        softmax_b = tf1.get_variable("softmax_b", [vocab_size], initializer=tf1.zeros_initializer(),
                                     use_resource=True)
        labels = tf.reshape(targets, [-1])
        logits = tf.matmul(hidden, softmax_w, transpose_b=True) + softmax_b
        # The mean cross entropy per word, with the full softmax: what perplexity is made of.
        self.full_loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                                       logits=logits))
        self.words_per_batch = tf.size(labels)
        if not training:
            return
        if args.num_sampled:
            self.loss = tf.reduce_mean(tf.nn.sampled_softmax_loss(
                softmax_w, softmax_b, tf.expand_dims(labels, 1), hidden, args.num_sampled, vocab_size,
                seed=args.seed))
        else:
            self.loss = self.full_loss
        self.global_step = tf1.train.get_or_create_global_step()
        optimizer = tf1.train.AdamOptimizer(args.learning_rate) if args.optimizer == "adam" else \
            tf1.train.AdagradOptimizer(args.learning_rate)
        grads, variables = zip(*optimizer.compute_gradients(self.loss))
        clipped, _ = tf.clip_by_global_norm(grads, args.clip_norm)
        self.train_op = optimizer.apply_gradients(zip(clipped, variables), global_step=self.global_step)


def parallax_config(args):
    """The parallax Config matching SingleDeviceSession's checkpoints."""
    import parallax
    return parallax.Config(run_option=args.run_option, checkpoint_dir=args.checkpoint_dir,
                           save_checkpoint_steps=args.save_checkpoint_steps)


class SingleDeviceSession:
    """A plain Session with what a training script needs around it: initialize or restore the latest checkpoint,
    save every `save_checkpoint_steps` and at close. Same interface as a parallax Runner."""
    is_chief, worker_id, num_workers = True, 0, 1

    def __init__(self, graph, args):
        self.graph, self.args = graph, args
        with graph.as_default():
            self.saver = tf1.train.Saver(max_to_keep=3) if args.checkpoint_dir else None
            tables = tf1.tables_initializer()
            init = tf.group(tf1.global_variables_initializer(), tables)
            self.step = tf1.train.get_global_step()
        self.session = tf1.Session(graph=graph)
        latest = tf1.train.latest_checkpoint(args.checkpoint_dir) if args.checkpoint_dir else None
        if latest:
            self.saver.restore(self.session, latest)
            self.session.run(tables)
        else:
            self.session.run(init)
        self._runs = 0

    def run(self, fetches, feed_dict=None):
        result = self.session.run(fetches, feed_dict)
        self._runs += 1
        every = self.args.save_checkpoint_steps
        if self.saver and every and self._runs % every == 0:
            self.save_checkpoint()
        return result

    def save_checkpoint(self):
        step = self.session.run(self.step)
        self.saver.save(self.session, os.path.join(self.args.checkpoint_dir, "model.ckpt"), global_step=step)

    def close(self):
        if self.session is not None:
            if self.saver:
                self.save_checkpoint()
            self.session.close()
            self.session = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def train(sess, model, args):
    """The training loop: a log line every --log-every steps from every worker (step, words/s, loss, perplexity
    of the batch), TensorBoard summaries from the chief. Returns the last logged loss."""
    writer = tf1.summary.FileWriter(args.log_dir) if args.log_dir and sess.is_chief else None
    start, words, last = time.time(), 0, float("nan")
    for step in range(1, args.steps + 1):
        _, loss, n = sess.run([model.train_op, model.full_loss, model.words_per_batch])
        words += n
        if step % args.log_every == 0 or step == args.steps:
            rate = words / (time.time() - start)
            print(f"worker {sess.worker_id} step {step} words/s {rate:.0f} loss {loss:.4f} "
                  f"ppl {math.exp(loss):.1f}", flush=True)
            if writer:
                writer.add_summary(tf1.Summary(value=[
                    tf1.Summary.Value(tag="loss", simple_value=loss),
                    tf1.Summary.Value(tag="learning_rate", simple_value=args.learning_rate),
                    tf1.Summary.Value(tag="words_per_second", simple_value=rate * sess.num_workers)]), step)
            start, words, last = time.time(), 0, loss
    if writer:
        writer.close()
    return last


def perplexity(data_dir, checkpoint_dir, args, max_batches=None):
    """Restore the latest checkpoint into a fresh single-device graph (plain Saver) and compute the held-out
    perplexity with the full softmax."""
    vocab_size = len(vocabulary(data_dir))
    graph = tf.Graph()
    with graph.as_default():
        windows = token_windows(data_dir, args.num_steps, files=HELDOUT_FILES, repeat=False).batch(64)
        model = Model(windows, args, vocab_size, training=False)
        saver = tf1.train.Saver()
        with tf1.Session() as sess:
            latest = tf1.train.latest_checkpoint(checkpoint_dir)
            if latest is None:
                raise FileNotFoundError(f"no checkpoint in {checkpoint_dir}")
            saver.restore(sess, latest)
            sess.run(tf1.tables_initializer())
            total, count, batches = 0.0, 0, 0
            while max_batches is None or batches < max_batches:
                try:
                    loss, n = sess.run([model.full_loss, model.words_per_batch])
                except tf.errors.OutOfRangeError:
                    break
                total, count, batches = total + loss * n, count + n, batches + 1
    return float(np.exp(total / max(count, 1))), latest
