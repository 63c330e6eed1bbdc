"""A CIFAR-style ResNet on the handwritten digits that ship with scikit-learn, shared by train.py,
train_distributed.py and eval.py.

Data: `sklearn.datasets.load_digits` (1,797 real 8x8 grey images of the digits 0-9), upsampled to 16x16, split
80/20 with a fixed seed. Training examples are shuffled with a fixed seed and repeated; the scripts shard them
element-wise (distributed) and batch them.

Model: a 3x3 convolution, then three stages of residual blocks (16, 32, 64 channels; the last two halve the
resolution), each convolution followed by batch normalization; global average pooling; a dense layer of 10.
Momentum SGD with weight decay.
"""
import argparse
import warnings

import numpy as np
import tensorflow as tf

import training

tf1 = tf.compat.v1
tf.get_logger().setLevel("ERROR")
warnings.filterwarnings("ignore", message=r".*is deprecated and will be removed", category=UserWarning)
SIZE, CLASSES = 16, 10


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Train the ResNet on scikit-learn's digits.")
    training.add_common_arguments(p, steps=300, batch_size=64, learning_rate=0.05)
    p.add_argument("--blocks-per-stage", type=int, default=1)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=1e-4)
    training.add_dtype_argument(p)
    return p.parse_args(argv)


def digits(split, seed=0):
    """(images [n, 16, 16, 1] float32 in [0, 1], labels [n] int64) of the train or test split."""
    from sklearn.datasets import load_digits
    data = load_digits()
    images = (data.images / 16.0).astype(np.float32)
    images = images.repeat(2, axis=1).repeat(2, axis=2)[..., None]  # 8x8 -> 16x16, nearest neighbour
    order = np.random.RandomState(seed).permutation(len(images))
    cut = int(len(order) * 0.8)
    chosen = order[:cut] if split == "train" else order[cut:]
    return images[chosen], data.target[chosen].astype(np.int64)


def train_examples(seed=0):
    images, labels = digits("train")
    return tf.data.Dataset.from_tensor_slices((images, labels)).shuffle(len(images), seed=seed).repeat()


# Keras' default initializers ignore the graph seed; the v1 one follows it (a distinct op seed per layer), so that
# every run of a script starts from the same weights.
def _glorot():
    return tf1.glorot_uniform_initializer()


def _conv_bn(x, channels, stride, training, name, relu=True):
    x = tf1.layers.conv2d(x, channels, 3, strides=stride, padding="same", use_bias=False,
                          kernel_initializer=_glorot(), name=f"{name}/conv")
    x = tf1.layers.batch_normalization(x, training=training, momentum=0.9, name=f"{name}/bn")
    return tf.nn.relu(x) if relu else x


def logits_of(images, args, training):
    x = _conv_bn(images, 16, 1, training, "stem")
    for stage, channels in enumerate((16, 32, 64)):
        for block in range(args.blocks_per_stage):
            stride = 2 if stage > 0 and block == 0 else 1
            name = f"stage{stage}/block{block}"
            shortcut = x
            if stride != 1 or x.shape[-1] != channels:
                shortcut = tf1.layers.conv2d(x, channels, 1, strides=stride, use_bias=False,
                                             kernel_initializer=_glorot(), name=f"{name}/proj")
            y = _conv_bn(x, channels, stride, training, f"{name}/a")
            y = _conv_bn(y, channels, 1, training, f"{name}/b", relu=False)
            x = tf.nn.relu(y + shortcut)
    x = tf.reduce_mean(x, axis=[1, 2])
    return tf1.layers.dense(x, CLASSES, kernel_initializer=_glorot(), name="logits")


class Model:
    def __init__(self, examples, args, wrap_optimizer=None):
        """`examples`: a batched dataset of (images, labels). The optimizer is momentum SGD, wrapped by
        `wrap_optimizer` if given (benchmarks/peers/). In float64 (--dtype) the layers follow the images' dtype,
        and batch normalization runs unfused (TF's fused kernel has no float64)."""
        examples = training.positioned(examples, args)  # a resumed run goes on where its global step says
        images, labels = tf1.data.make_one_shot_iterator(examples).get_next()
        logits = logits_of(tf.cast(images, args.dtype), args, training=True)
        cross_entropy = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                                       logits=logits))
        decay = args.weight_decay * tf.add_n([tf.nn.l2_loss(v) for v in tf1.trainable_variables()
                                              if "kernel" in v.name])
        self.loss = cross_entropy + decay
        self.examples_per_batch = tf.size(labels)
        self.global_step = tf1.train.get_or_create_global_step()
        optimizer = training.wrapped(tf1.train.MomentumOptimizer(args.learning_rate, args.momentum), wrap_optimizer)
        with tf.control_dependencies(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)):
            self.train_op = optimizer.minimize(self.loss, global_step=self.global_step)


def train(sess, model, args):
    return training.train_loop(sess, model.train_op, model.loss, model.examples_per_batch, args, unit="images")


def accuracy(checkpoint_dir, args):
    """Restore the latest checkpoint into a fresh single-device inference graph (plain Saver): test accuracy."""
    images, labels = digits("test")
    graph = tf.Graph()
    with graph.as_default():
        x = tf1.placeholder(args.dtype, [None, SIZE, SIZE, 1])
        predictions = tf.argmax(logits_of(x, args, training=False), axis=1)
        with tf1.Session() as sess:
            latest = training.restore_latest(sess, checkpoint_dir)
            predicted = sess.run(predictions, {x: images})
    return float(np.mean(predicted == labels)), latest
