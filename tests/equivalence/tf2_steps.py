"""TF2 training steps, run as a parallax job or on one device with the global batch: the script a TF2 user writes,
its parallax version two lines apart (`parallax.shard(ds)`, `parallax.get_runner(step, ...)`).

    python tests/equivalence/tf2_steps.py CASE --workers N --batch b --steps K --out F.npz \
        (--one-device | --spec S --mode M)

The chief (or the one device) writes every model and optimizer variable, by name, to F.npz, and each step's loss.
"""
import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import numpy as np  # noqa: E402

import parallax  # noqa: E402
import tensorflow as tf  # noqa: E402

F64 = "float64"


def _data(n, features=3, ids=None, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.randint(0, ids, size=(n, 2)) if ids else rng.rand(n, features)
    return x, rng.rand(n, 1)


def dense_adam():
    model = tf.keras.Sequential([tf.keras.layers.Dense(8, activation="tanh", input_shape=(3,), dtype=F64),
                                 tf.keras.layers.Dense(1, dtype=F64)])
    return model, [tf.keras.optimizers.Adam(0.05)], None, {}


def momentum_clipped():
    model = tf.keras.Sequential([tf.keras.layers.Dense(8, activation="relu", input_shape=(3,), dtype=F64),
                                 tf.keras.layers.Dense(1, dtype=F64)])
    return model, [tf.keras.optimizers.SGD(0.1, momentum=0.9)], 0.5, {}


def embedding_adam():
    model = tf.keras.Sequential([tf.keras.Input((2,), dtype="int64"), tf.keras.layers.Embedding(50, 4, dtype=F64),
                                 tf.keras.layers.Flatten(dtype=F64), tf.keras.layers.Dense(1, dtype=F64)])
    return model, [tf.keras.optimizers.Adam(0.05)], None, {"ids": 50}


def two_optimizers():
    """The embedding by SGD, the rest by Adam: two optimizers, each with its own variables, in one step."""
    model, _, _, data = embedding_adam()
    return model, [tf.keras.optimizers.SGD(0.2), tf.keras.optimizers.Adam(0.05)], None, data


CASES = {f.__name__: f for f in (dense_adam, momentum_clipped, embedding_adam, two_optimizers)}


def make_step(model, optimizers, clip):
    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - y))
        variables = model.trainable_variables
        grads = tape.gradient(loss, variables)
        if clip:
            grads, _ = tf.clip_by_global_norm(grads, clip)
        if len(optimizers) == 1:
            optimizers[0].apply_gradients(zip(grads, variables))
        else:  # the first variable (the embedding) by the first optimizer, the others by the second
            optimizers[0].apply_gradients(zip(grads[:1], variables[:1]))
            optimizers[1].apply_gradients(zip(grads[1:], variables[1:]))
        return loss
    return train_step


def optimizer_variables(optimizer):
    """A Keras optimizer's variables, a list or a method of it as the generation has them."""
    held = optimizer.variables
    return list(held() if callable(held) else held)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("case", choices=sorted(CASES))
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--out", required=True)
    p.add_argument("--one-device", action="store_true")
    p.add_argument("--spec")
    p.add_argument("--mode", default="HYBRID")
    a = p.parse_args()
    tf.keras.utils.set_random_seed(1)  # the same initial values in every process
    model, optimizers, clip, data = CASES[a.case]()
    step = make_step(model, optimizers, clip)
    ds = tf.data.Dataset.from_tensor_slices(_data(a.workers * a.batch * a.steps, **data))
    if a.one_device:
        batches, run = ds.batch(a.workers * a.batch), step
    else:
        batches = parallax.shard(ds).batch(a.batch)
        run = parallax.get_runner(step, a.spec, parallax.Config(run_option=a.mode))
    losses = [float(run(x, y)) for x, y in batches]
    if not a.one_device:
        run.close()
        if not run.is_chief:
            return
    variables = model.variables + [v for o in optimizers for v in optimizer_variables(o)]
    values = {f"{i}:{v.name}": v.numpy() for i, v in enumerate(variables)}
    np.savez(a.out, losses=np.array(losses), **values)


if __name__ == "__main__":
    main()
