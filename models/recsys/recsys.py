"""A DLRM-style click-through-rate model on Criteo-layout data, shared by train.py, train_distributed.py and
eval.py.

Data: the tab-separated impressions that make_data.py writes (label, 13 counts, 26 hashed categories). Training
lines are shuffled with a fixed seed and repeated; the scripts shard them element-wise (distributed) and batch them.
Each batch is parsed in the graph: counts become log(1 + count), and each feature's category strings are hashed
into its own embedding table of min(cardinality, --max-table-rows) rows.

Model (DLRM, Naumov et al. 2019): a bottom MLP turns the counts into a vector of the embedding size; the pairwise
dot products of that vector and the 26 embeddings (351 of them), beside the vector, go through a top MLP to one
logit. Sigmoid cross entropy, Adagrad. The tables hold nearly all the parameters: 4.83 million rows at full size
(309 MB of float32 at --embedding-size 16), of which the four largest (the features with a million categories or
more) are split into --partitions shards.
"""
import argparse
import glob
import json
import os
import warnings

import numpy as np
import tensorflow as tf

import training

tf1 = tf.compat.v1
tf.get_logger().setLevel("ERROR")
warnings.filterwarnings("ignore", message=r".*is deprecated and will be removed", category=UserWarning)
TRAIN_FILES, HELDOUT_FILE = "train-*.tsv", "heldout.tsv"
PARTITIONED_CARDINALITY = 1_000_000  # features with at least this many categories get partitioned tables


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Train the DLRM-style recommendation model.")
    p.add_argument("--data-dir", required=True, help="a directory written by models/recsys/make_data.py")
    training.add_common_arguments(p, steps=1000, batch_size=256, learning_rate=0.1)
    p.add_argument("--embedding-size", type=int, default=16)
    p.add_argument("--max-table-rows", type=int, default=1_000_000,
                   help="each feature's table has min(cardinality, this) rows (default: full size, 309 MB)")
    p.add_argument("--partitions", type=int, default=2,
                   help="shards of each table of a feature with at least a million categories")
    p.add_argument("--bottom-units", type=int, default=64, help="the bottom MLP's hidden layer")
    p.add_argument("--top-units", default="64,32", type=lambda s: tuple(int(u) for u in s.split(",")),
                   help="the top MLP's hidden layers")
    training.add_dtype_argument(p)
    args = p.parse_args(argv)
    if args.max_table_rows < 1 or args.partitions < 1:
        p.error("--max-table-rows and --partitions must be positive")
    return args


def cardinalities(data_dir):
    path = os.path.join(data_dir, "features.json")
    if not os.path.exists(path):
        raise FileNotFoundError(f"no features.json in {data_dir}; run models/recsys/make_data.py --out {data_dir}")
    with open(path) as f:
        return json.load(f)["cardinalities"]


def train_examples(data_dir, seed=0):
    """A dataset of impression lines, shuffled with `seed`, repeated."""
    paths = sorted(glob.glob(os.path.join(data_dir, TRAIN_FILES)))
    if not paths:
        raise FileNotFoundError(f"no {TRAIN_FILES} in {data_dir}; run models/recsys/make_data.py --out {data_dir}")
    return tf.data.TextLineDataset(paths).shuffle(50_000, seed=seed, reshuffle_each_iteration=True).repeat()


def parse(lines, table_rows, dtype):
    """A batch of lines -> (labels [B, 1], log counts [B, 13], table row ids [B, 26]: column f in feature f's
    table)."""
    columns = tf.io.decode_csv(lines, [[0.0]] * 14 + [[""]] * len(table_rows), field_delim="\t")
    labels = tf.cast(tf.expand_dims(columns[0], 1), dtype)
    counts = tf.math.log1p(tf.maximum(tf.cast(tf.stack(columns[1:14], axis=1), dtype), 0.0))
    ids = [tf.strings.to_hash_bucket_fast(column, rows) for column, rows in zip(columns[14:], table_rows)]
    return labels, counts, tf.stack(ids, axis=1)


def table_rows(cardinality, args):
    return [min(c, args.max_table_rows) for c in cardinality]


def parsed(lines, args):
    """A batched dataset of lines, parsed (`parse`) into the tables of --data-dir's features: (the dataset, the
    features' cardinalities)."""
    cardinality = cardinalities(args.data_dir)
    rows, dtype = table_rows(cardinality, args), tf.as_dtype(args.dtype)
    return lines.map(lambda batch: parse(batch, rows, dtype)), cardinality


def _glorot(dtype):
    return tf1.glorot_uniform_initializer(dtype=dtype)


def _mlp(x, units, name, dtype, last_relu=True):
    for i, n in enumerate(units):
        relu = last_relu or i < len(units) - 1
        x = tf1.layers.dense(x, n, activation=tf.nn.relu if relu else None, kernel_initializer=_glorot(dtype),
                             name=f"{name}/layer{i}")
    return x


def logits_of(counts, ids, cardinality, args):
    """The DLRM forward pass: [B, 1] logits."""
    dtype = tf.as_dtype(args.dtype)
    bottom = _mlp(counts, (args.bottom_units, args.embedding_size), "bottom", dtype)
    vectors = [bottom]
    init = tf1.random_uniform_initializer(-0.05, 0.05, dtype=dtype)
    for f, rows in enumerate(table_rows(cardinality, args)):
        split = args.partitions > 1 and cardinality[f] >= PARTITIONED_CARDINALITY
        table = tf1.get_variable(f"embedding/C{f + 1}", [rows, args.embedding_size], dtype, initializer=init,
                                 partitioner=tf1.fixed_size_partitioner(args.partitions) if split else None,
                                 use_resource=True)
        vectors.append(tf.nn.embedding_lookup(table, ids[:, f]))
    stacked = tf.stack(vectors, axis=1)  # [B, 27, E]
    n = len(vectors)
    dots = tf.reshape(tf.matmul(stacked, stacked, transpose_b=True), [-1, n * n])
    upper = [i * n + j for i in range(n) for j in range(i + 1, n)]
    interactions = tf.concat([bottom, tf.gather(dots, upper, axis=1)], axis=1)
    hidden = _mlp(interactions, args.top_units, "top", dtype)
    return tf1.layers.dense(hidden, 1, kernel_initializer=_glorot(dtype), name="top/logit")


def loss_of(labels, logits):
    return tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))


class Model:
    def __init__(self, lines, args, wrap_optimizer=None):
        """`lines`: a batched dataset of impression lines. Builds the loss and the training op (Adagrad, wrapped by
        `wrap_optimizer` if given: benchmarks/peers/ pass Horovod's or SyncReplicasOptimizer); the input starts
        where a resumed run's global step says."""
        batches, cardinality = parsed(training.positioned(lines, args), args)
        labels, counts, ids = tf1.data.make_one_shot_iterator(batches.prefetch(2)).get_next()
        self.loss = loss_of(labels, logits_of(counts, ids, cardinality, args))
        self.examples_per_batch = tf.size(labels)
        self.global_step = tf1.train.get_or_create_global_step()
        optimizer = training.wrapped(tf1.train.AdagradOptimizer(args.learning_rate), wrap_optimizer)
        self.train_op = optimizer.minimize(self.loss, global_step=self.global_step)


def train(sess, model, args):
    return training.train_loop(sess, model.train_op, model.loss, model.examples_per_batch, args, unit="examples")


def auc_of(labels, scores):
    """The area under the ROC curve: the chance that a random click scores above a random non-click (ties half)."""
    labels, scores = np.asarray(labels).ravel(), np.asarray(scores).ravel()
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    # Average ranks over ties: each run of equal scores gets the mean of its positions.
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_scores)) + 1]
    ends = np.r_[starts[1:], len(scores)]
    for s, e in zip(starts, ends):
        ranks[order[s:e]] = (s + e + 1) / 2.0
    positives = labels > 0.5
    n_pos, n_neg = positives.sum(), (~positives).sum()
    if n_pos == 0 or n_neg == 0:
        raise ValueError("AUC needs both clicks and non-clicks")
    return float((ranks[positives].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def evaluate(checkpoint_dir, args, batch_size=4096):
    """Restore the latest checkpoint into a fresh single-device graph (plain Saver): (held-out AUC, log loss,
    checkpoint path)."""
    graph = tf.Graph()
    with graph.as_default():
        batches, cardinality = parsed(
            tf.data.TextLineDataset(os.path.join(args.data_dir, HELDOUT_FILE)).batch(batch_size), args)
        labels, counts, ids = tf1.data.make_one_shot_iterator(batches).get_next()
        probabilities = tf.sigmoid(logits_of(counts, ids, cardinality, args))
        with tf1.Session() as sess:
            latest = training.restore_latest(sess, checkpoint_dir)
            got = []
            while True:
                try:
                    got.append(sess.run([labels, probabilities]))
                except tf.errors.OutOfRangeError:
                    break
    y, p = (np.concatenate(parts).ravel() for parts in zip(*got))
    p = np.clip(p, 1e-7, 1 - 1e-7)
    return auc_of(y, p), float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))), latest
