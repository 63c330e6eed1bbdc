"""The LSTM language model of lm.py as a Keras model, trained with `Model.fit` (train_keras.py on one device,
train_keras_distributed.py with parallax: the same script but for two lines).

The same data (lm.token_windows: the same windows, shuffled with the same seed), the same layers (an embedding
[V, E] whose gradient is sparse, one LSTM layer, a full softmax [V, H] with its bias), the same loss (the mean
cross entropy per word), Adam or Adagrad with the gradients clipped by their global norm, the same initial
distribution. Words become ids in the input pipeline: a step that read a lookup table would capture a resource
that is not a variable, which parallax refuses.

One epoch of --steps steps (models/keras_training.py, which every Keras model shares): Keras writes the weights
(ModelCheckpoint) at its end; every worker prints `step S words/s R loss L ppl P` every --log-every steps (a
parallax job's launcher puts `[worker/W] ` before it; the benchmarks read these lines), and the chief writes
TensorBoard scalars when --log-dir is given.
"""
import math
import os

import keras_training
import lm
import tensorflow as tf

WEIGHTS = "lm.weights.h5"
UNIT = "words"  # what the log line counts


def parse_args(argv=None):
    return lm.parse_args(argv)


def train_examples(args):
    """The training stream: (inputs, targets) id windows, shuffled, repeated."""
    return id_windows(args)


def batched(examples, batch_size, args):
    return examples.batch(batch_size)


def id_windows(args, files=lm.TRAIN_FILES, repeat=True):
    """A dataset of (inputs, targets) id windows [num_steps], from lm.token_windows."""
    table = tf.lookup.StaticHashTable(
        tf.lookup.TextFileInitializer(os.path.join(args.data_dir, "vocab.txt"), tf.string,
                                      tf.lookup.TextFileIndex.WHOLE_LINE, tf.int64,
                                      tf.lookup.TextFileIndex.LINE_NUMBER), default_value=2)  # <UNK>
    windows = lm.token_windows(args.data_dir, args.num_steps, files=files, seed=args.seed, repeat=repeat)
    return windows.map(lambda words: _shifted(table.lookup(words)))


def _shifted(ids):
    return ids[:-1], ids[1:]


def build(args):
    """The compiled model, its weights built."""
    model = LanguageModel(args, len(lm.vocabulary(args.data_dir)))
    optimizer = tf.keras.optimizers.Adam(args.learning_rate, global_clipnorm=args.clip_norm) \
        if args.optimizer == "adam" else tf.keras.optimizers.Adagrad(args.learning_rate,
                                                                     global_clipnorm=args.clip_norm)
    model.compile(optimizer)
    model(tf.zeros([1, args.num_steps], tf.int64))  # builds the weights, as a first batch would
    return model


class LanguageModel(tf.keras.Model):
    """Embedding, LSTM and softmax [V, H] with its bias. Called, it gives the logits [B, T, V]; its loss, the mean
    cross entropy per word, over the full softmax, or in training with --num-sampled, a sampled one (the softmax's
    gradient is then sparse too): a custom train_step, as a Keras user writes a loss the compiled losses lack."""

    def __init__(self, args, vocab_size):
        super().__init__(dtype=args.dtype)  # every layer's and weight's (float64: benchmarks/peers/exactness.py)
        init = tf.keras.initializers.RandomUniform(-0.1, 0.1, seed=args.seed)
        self.embedding = tf.keras.layers.Embedding(vocab_size, args.embedding_size, embeddings_initializer=init,
                                                   dtype=args.dtype)
        self.lstm = tf.keras.layers.LSTM(args.hidden_size, return_sequences=True, kernel_initializer=init,
                                         recurrent_initializer=init, dtype=args.dtype)
        self.softmax_w = self.add_weight(name="softmax_w", shape=[vocab_size, args.hidden_size], initializer=init)
        self.softmax_b = self.add_weight(name="softmax_b", shape=[vocab_size], initializer="zeros")
        self.loss_tracker = tf.keras.metrics.Mean("loss")
        self._args, self._vocab_size = args, vocab_size

    @property
    def metrics(self):
        return [self.loss_tracker]

    def _hidden(self, ids, training):
        return tf.reshape(self.lstm(self.embedding(ids), training=training), [-1, self._args.hidden_size])

    def call(self, ids, training=False):
        logits = tf.matmul(self._hidden(ids, training), self.softmax_w, transpose_b=True) + self.softmax_b
        return tf.reshape(logits, [tf.shape(ids)[0], -1, self._vocab_size])

    def word_loss(self, ids, targets, training):
        hidden, labels = self._hidden(ids, training), tf.reshape(targets, [-1])
        if training and self._args.num_sampled:
            return tf.reduce_mean(tf.nn.sampled_softmax_loss(
                self.softmax_w, self.softmax_b, tf.expand_dims(labels, 1), hidden, self._args.num_sampled,
                self._vocab_size, seed=self._args.seed))
        logits = tf.matmul(hidden, self.softmax_w, transpose_b=True) + self.softmax_b
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))

    def train_step(self, data):
        ids, targets = data
        with tf.GradientTape() as tape:
            loss = self.word_loss(ids, targets, training=True)
            # Under a tf.distribute strategy the optimizer sums the replicas' gradients: each replica's share of
            # the global batch's mean loss is its own mean / the number of replicas (TF's guide to custom
            # training loops). Without one (one device, parallax) the number is 1.
            share = loss / tf.distribute.get_strategy().num_replicas_in_sync
        self.optimizer.minimize(share, self.trainable_variables, tape=tape)
        self.loss_tracker.update_state(loss)
        return {"loss": self.loss_tracker.result()}

    def test_step(self, data):
        ids, targets = data
        self.loss_tracker.update_state(self.word_loss(ids, targets, training=False))
        return {"loss": self.loss_tracker.result()}


def units_per_batch(args):
    """The words in one batch of --batch-size."""
    return args.batch_size * args.num_steps


def fit(model, batches, args):
    """One epoch of --steps steps of `batches`; the log line adds the perplexity of the loss."""
    return keras_training.fit(model, batches, args, UNIT, units_per_batch(args), WEIGHTS,
                              extra=lambda loss: f"ppl {math.exp(loss):.1f}")


def perplexity(args):
    """The held-out perplexity of the weights in --checkpoint-dir, loaded into a new single-device model."""
    model = build(args)
    model.load_weights(os.path.join(args.checkpoint_dir, WEIGHTS))
    loss = model.evaluate(id_windows(args, files=lm.HELDOUT_FILES, repeat=False).batch(64), verbose=0)
    return math.exp(loss)
