"""The recommendation model of recsys.py as a Keras model trained with Model.fit (train_keras.py on one device,
train_keras_distributed.py with parallax, benchmarks/peers/ with MultiWorkerMirroredStrategy
and ParameterServerStrategy).

The same data (recsys.train_examples, parsed by recsys.parsed in the input pipeline: counts become log(1 + count),
categories are hashed into their tables' rows), the same layers (the bottom MLP, 26 embedding tables of
min(cardinality, --max-table-rows) rows, DLRM's pairwise dot products, the top MLP), the same loss (sigmoid cross
entropy) and Adagrad. Keras's Embedding has no partitions: each table is one variable.
"""
import recsys
import tensorflow as tf

import keras_training

WEIGHTS = "recsys.weights.h5"
UNIT = "examples"  # what the log line counts


def parse_args(argv=None):
    return recsys.parse_args(argv)


def train_examples(args):
    """The training stream: impression lines, shuffled, repeated."""
    return recsys.train_examples(args.data_dir, seed=args.seed)


def batched(lines, batch_size, args):
    """Batches of ((log counts [B, 13], row ids [B, 26]), labels [B, 1]) of batch_size lines."""
    parsed, _ = recsys.parsed(lines.batch(batch_size), args)
    return parsed.map(lambda labels, counts, ids: ((counts, ids), labels))


def build(args):
    """The compiled model, its weights built."""
    cardinality = recsys.cardinalities(args.data_dir)
    model = ClickModel(args, recsys.table_rows(cardinality, args))
    model.compile(tf.keras.optimizers.Adagrad(args.learning_rate, initial_accumulator_value=0.1),
                  tf.keras.losses.BinaryCrossentropy(from_logits=True))
    model((tf.zeros([1, 13], args.dtype), tf.zeros([1, len(cardinality)], tf.int64)))
    return model


class ClickModel(tf.keras.Model):
    """Called on (log counts, row ids), it gives the click logits [B, 1]."""

    def __init__(self, args, rows):
        super().__init__(dtype=args.dtype)
        dense = tf.keras.layers.Dense
        self.bottom = [dense(args.bottom_units, "relu", dtype=args.dtype),
                       dense(args.embedding_size, "relu", dtype=args.dtype)]
        uniform = tf.keras.initializers.RandomUniform
        self.tables = [tf.keras.layers.Embedding(n, args.embedding_size, name=f"C{f + 1}", dtype=args.dtype,
                                                 embeddings_initializer=uniform(-0.05, 0.05))
                       for f, n in enumerate(rows)]
        self.top = [dense(units, "relu", dtype=args.dtype) for units in args.top_units] + \
            [dense(1, dtype=args.dtype)]

    def call(self, inputs):
        counts, ids = inputs
        bottom = counts
        for layer in self.bottom:
            bottom = layer(bottom)
        vectors = [bottom] + [table(ids[:, f]) for f, table in enumerate(self.tables)]
        stacked = tf.stack(vectors, axis=1)  # [B, 27, E]
        n = len(vectors)
        dots = tf.reshape(tf.matmul(stacked, stacked, transpose_b=True), [-1, n * n])
        upper = [i * n + j for i in range(n) for j in range(i + 1, n)]
        x = tf.concat([bottom, tf.gather(dots, upper, axis=1)], axis=1)
        for layer in self.top:
            x = layer(x)
        return x


def units_per_batch(args):
    """The examples in one batch of --batch-size."""
    return args.batch_size


def fit(model, batches, args):
    return keras_training.fit(model, batches, args, UNIT, units_per_batch(args), WEIGHTS)
