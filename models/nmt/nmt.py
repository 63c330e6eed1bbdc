"""The attention encoder-decoder (tensorflow/nmt style), shared by train.py, train_distributed.py and eval.py.

Data: train/dev/test .src/.tgt and vocab.src/vocab.tgt written by make_data.py. Sentence pairs are shuffled with a
fixed seed and repeated; the scripts shard them element-wise (distributed) and batch them (padded). Words become
ids in the graph, through lookup tables over the vocabularies.

Model: separate source and target embeddings; an LSTM encoder; an LSTM decoder fed the reference target (teacher
forcing) in training, its own previous word in greedy decoding; Luong attention over the encoder outputs
(`tanh(W [context; decoder output])`) before the output projection. The loss is summed over target words and
divided by the batch size, as tensorflow/nmt does; gradients are clipped by global norm; Adam.
"""
import argparse
import collections
import math
import os
import warnings

import numpy as np
import tensorflow as tf

import training

tf1 = tf.compat.v1
tf.get_logger().setLevel("ERROR")
warnings.filterwarnings("ignore", message=r".*is deprecated and will be removed", category=UserWarning)
PAD = "</s>"  # tensorflow/nmt pads with the end-of-sentence word; padded positions are masked out
MAX_DECODE = 16


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Train the attention encoder-decoder.")
    p.add_argument("--data-dir", required=True, help="a directory written by models/nmt/make_data.py")
    training.add_common_arguments(p, steps=600, batch_size=64, learning_rate=0.01)
    p.add_argument("--embedding-size", type=int, default=32)
    p.add_argument("--hidden-size", type=int, default=64)
    p.add_argument("--clip-norm", type=float, default=1.0)
    p.add_argument("--eval-split", default="test", choices=("dev", "test"), help="what eval.py translates")
    return p.parse_args(argv)


def sentence_pairs(data_dir, split="train", seed=0, repeat=True):
    """A dataset of (source words, source length, target input words, target output words, target length)."""
    src = tf.data.TextLineDataset(os.path.join(data_dir, f"{split}.src")).map(tf.strings.split)
    tgt = tf.data.TextLineDataset(os.path.join(data_dir, f"{split}.tgt")).map(tf.strings.split)
    ds = tf.data.Dataset.zip((src, tgt)).map(
        lambda s, t: (s, tf.size(s), tf.concat([["<s>"], t], 0), tf.concat([t, ["</s>"]], 0), tf.size(t) + 1))
    if repeat:
        ds = ds.shuffle(20000, seed=seed, reshuffle_each_iteration=True).repeat()
    return ds


def padded(pairs, batch_size):
    return pairs.padded_batch(batch_size, padding_values=(PAD, 0, PAD, PAD, 0))


def _table(data_dir, side):
    return tf.lookup.StaticHashTable(
        tf.lookup.TextFileInitializer(os.path.join(data_dir, f"vocab.{side}"), tf.string,
                                      tf.lookup.TextFileIndex.WHOLE_LINE, tf.int64,
                                      tf.lookup.TextFileIndex.LINE_NUMBER), default_value=0)  # <unk>


def _vocab_size(data_dir, side):
    with open(os.path.join(data_dir, f"vocab.{side}")) as f:
        return sum(1 for _ in f)


class Seq2Seq:
    """The variables and the pieces of computation that training and greedy decoding share."""

    def __init__(self, args):
        self.args = args
        self.src_vocab, self.tgt_vocab = _vocab_size(args.data_dir, "src"), _vocab_size(args.data_dir, "tgt")
        self.src_table, self.tgt_table = _table(args.data_dir, "src"), _table(args.data_dir, "tgt")
        init = tf1.random_uniform_initializer(-0.1, 0.1, seed=args.seed)
        self.src_embedding = tf1.get_variable("embedding_src", [self.src_vocab, args.embedding_size],
                                              initializer=init, use_resource=True)
        self.tgt_embedding = tf1.get_variable("embedding_tgt", [self.tgt_vocab, args.embedding_size],
                                              initializer=init, use_resource=True)
        self.init = init

    def encode(self, src_words, src_len):
        with tf1.variable_scope("encoder"):
            cell = tf1.nn.rnn_cell.LSTMCell(self.args.hidden_size, initializer=self.init)
            ids = self.src_table.lookup(src_words)
            outputs, state = tf1.nn.dynamic_rnn(cell, tf.nn.embedding_lookup(self.src_embedding, ids),
                                                sequence_length=src_len, dtype=tf.float32)
        return outputs, state

    def decode(self, tgt_ids, state, memory, src_len):
        """Decoder outputs [B, T, V] (logits) and the final state, for the target input ids [B, T]."""
        with tf1.variable_scope("decoder", reuse=tf1.AUTO_REUSE):
            cell = tf1.nn.rnn_cell.LSTMCell(self.args.hidden_size, initializer=self.init)
            outputs, state = tf1.nn.dynamic_rnn(cell, tf.nn.embedding_lookup(self.tgt_embedding, tgt_ids),
                                                initial_state=state, scope="rnn")
            # Keras' default initializers ignore the graph seed: the v1 one follows it, so that every run of the
            # script starts from the same weights (a resumed run is compared with an uninterrupted one).
            glorot = tf1.glorot_uniform_initializer()
            keys = tf1.layers.dense(memory, self.args.hidden_size, use_bias=False, kernel_initializer=glorot,
                                    name="attention_keys")
            scores = tf.matmul(outputs, keys, transpose_b=True)  # [B, T, S]
            mask = tf.sequence_mask(src_len, tf.shape(memory)[1])[:, None, :]
            scores = tf.where(tf.broadcast_to(mask, tf.shape(scores)), scores, tf.fill(tf.shape(scores), -1e9))
            context = tf.matmul(tf.nn.softmax(scores), memory)
            attentional = tf1.layers.dense(tf.concat([context, outputs], -1), self.args.hidden_size,
                                           activation=tf.tanh, use_bias=False, kernel_initializer=glorot,
                                           name="attention_output")
            logits = tf1.layers.dense(attentional, self.tgt_vocab, kernel_initializer=glorot,
                                      name="output_projection")
        return logits, state


class Model:
    def __init__(self, pairs, args):
        """`pairs`: a padded, batched dataset of sentence_pairs. Builds the loss and the training op."""
        pairs = training.positioned(pairs, args)  # a resumed run goes on where its global step says
        src, src_len, tgt_in, tgt_out, tgt_len = tf1.data.make_one_shot_iterator(pairs).get_next()
        net = Seq2Seq(args)
        memory, state = net.encode(src, src_len)
        logits, _ = net.decode(net.tgt_table.lookup(tgt_in), state, memory, src_len)
        labels = net.tgt_table.lookup(tgt_out)
        mask = tf.sequence_mask(tgt_len, tf.shape(labels)[1], dtype=tf.float32)
        crossent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        self.loss = tf.reduce_sum(crossent * mask) / tf.cast(tf.shape(labels)[0], tf.float32)
        self.words_per_batch = tf.reduce_sum(tgt_len)
        self.global_step = tf1.train.get_or_create_global_step()
        optimizer = tf1.train.AdamOptimizer(args.learning_rate)
        grads, variables = zip(*optimizer.compute_gradients(self.loss))
        clipped, _ = tf.clip_by_global_norm(grads, args.clip_norm)
        self.train_op = optimizer.apply_gradients(zip(clipped, variables), global_step=self.global_step)


def train(sess, model, args):
    return training.train_loop(sess, model.train_op, model.loss, model.words_per_batch, args, unit="words")


def translate(checkpoint_dir, args, split="test"):
    """Greedy translations of `split`.src by the latest checkpoint, restored into a fresh single-device graph
    (plain Saver); returns (translations, references, checkpoint) as lists of word lists."""
    with open(os.path.join(args.data_dir, f"{split}.tgt")) as f:
        references = [line.split() for line in f]
    graph = tf.Graph()
    with graph.as_default():
        pairs = padded(sentence_pairs(args.data_dir, split, repeat=False), 100)
        src, src_len = tf1.data.make_one_shot_iterator(pairs).get_next()[:2]
        net = Seq2Seq(args)
        memory, state = net.encode(src, src_len)
        inverse = tf.constant([line.rstrip("\n") for line in open(os.path.join(args.data_dir, "vocab.tgt"))])
        word = net.tgt_table.lookup(tf.fill([tf.shape(src)[0], 1], "<s>"))
        words = []
        for _ in range(MAX_DECODE):
            logits, state = net.decode(word, state, memory, src_len)
            word = tf.argmax(logits, axis=-1)
            words.append(tf.gather(inverse, word[:, 0]))
        decoded = tf.stack(words, axis=1)
        translations = []
        with tf1.Session() as sess:
            latest = training.restore_latest(sess, checkpoint_dir)
            while True:
                try:
                    batch = sess.run(decoded)
                except tf.errors.OutOfRangeError:
                    break
                for row in batch:
                    sentence = [w.decode() for w in row]
                    translations.append(sentence[:sentence.index("</s>")] if "</s>" in sentence else sentence)
    return translations, references, latest


def bleu(translations, references, max_order=4):
    """Corpus BLEU-4 with the brevity penalty (Papineni et al.), in percent; one reference per sentence."""
    matches, possible = [0] * max_order, [0] * max_order
    length, ref_length = 0, 0
    for hyp, ref in zip(translations, references):
        length, ref_length = length + len(hyp), ref_length + len(ref)
        for n in range(1, max_order + 1):
            hyp_ngrams = collections.Counter(tuple(hyp[i:i + n]) for i in range(len(hyp) - n + 1))
            ref_ngrams = collections.Counter(tuple(ref[i:i + n]) for i in range(len(ref) - n + 1))
            matches[n - 1] += sum((hyp_ngrams & ref_ngrams).values())
            possible[n - 1] += max(len(hyp) - n + 1, 0)
    if min(matches) == 0:
        return 0.0
    log_precision = sum(math.log(m / p) for m, p in zip(matches, possible)) / max_order
    brevity = 1.0 if length > ref_length else math.exp(1 - ref_length / max(length, 1))
    return float(100 * brevity * np.exp(log_precision))
