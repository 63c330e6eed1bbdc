"""The ResNet of resnet.py as a Keras model trained with Model.fit (train_keras.py on one device,
train_keras_distributed.py with parallax, benchmarks/peers/ with MultiWorkerMirroredStrategy
and ParameterServerStrategy).

The same data (resnet.digits, shuffled with the same seed), the same layers (a 3x3 stem, three stages of residual
blocks of 16, 32 and 64 channels, batch normalization after every convolution, global average pooling, a dense
layer of 10), the same loss (the mean cross entropy plus --weight-decay times half the kernels' squared norms,
as tf.nn.l2_loss has it) and momentum SGD. Keras's own initializers, seeded by tf.keras.utils.set_random_seed.
"""
import resnet
import tensorflow as tf

import keras_training

WEIGHTS = "resnet.weights.h5"
UNIT = "images"  # what the log line counts


def parse_args(argv=None):
    return resnet.parse_args(argv)


def train_examples(args):
    """The training stream: (image, label) in --dtype, shuffled, repeated."""
    images, labels = resnet.digits("train")
    return tf.data.Dataset.from_tensor_slices((images.astype(args.dtype), labels)).shuffle(
        len(images), seed=args.seed).repeat()


def batched(examples, batch_size, args):
    return examples.batch(batch_size)


def build(args):
    """The compiled model."""
    layers, dtype = tf.keras.layers, args.dtype
    decay = tf.keras.regularizers.l2(args.weight_decay / 2)  # l2(c) adds c * sum(w^2); tf.nn.l2_loss is half that

    def conv(x, channels, size, stride, name):
        return layers.Conv2D(channels, size, strides=stride, padding="same", use_bias=False,
                             kernel_regularizer=decay, name=name, dtype=dtype)(x)

    def conv_bn(x, channels, stride, name, relu=True):
        x = layers.BatchNormalization(momentum=0.9, name=f"{name}_bn", dtype=dtype)(
            conv(x, channels, 3, stride, f"{name}_conv"))
        return layers.ReLU(dtype=dtype)(x) if relu else x

    images = tf.keras.Input([resnet.SIZE, resnet.SIZE, 1], dtype=dtype)
    x = conv_bn(images, 16, 1, "stem")
    for stage, channels in enumerate((16, 32, 64)):
        for block in range(args.blocks_per_stage):
            stride, name = (2 if stage > 0 and block == 0 else 1), f"stage{stage}_block{block}"
            shortcut = x if stride == 1 and x.shape[-1] == channels else conv(x, channels, 1, stride,
                                                                               f"{name}_proj")
            y = conv_bn(conv_bn(x, channels, stride, f"{name}_a"), channels, 1, f"{name}_b", relu=False)
            x = layers.ReLU(dtype=dtype)(layers.Add(dtype=dtype)([y, shortcut]))
    x = layers.GlobalAveragePooling2D(dtype=dtype)(x)
    logits = layers.Dense(resnet.CLASSES, kernel_regularizer=decay, name="logits", dtype=dtype)(x)
    model = tf.keras.Model(images, logits)
    model.compile(tf.keras.optimizers.SGD(args.learning_rate, momentum=args.momentum),
                  tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def units_per_batch(args):
    """The images in one batch of --batch-size."""
    return args.batch_size


def fit(model, batches, args):
    return keras_training.fit(model, batches, args, UNIT, units_per_batch(args), WEIGHTS)
