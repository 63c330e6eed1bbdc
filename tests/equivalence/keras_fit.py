"""Keras `Model.fit`, `evaluate` and `predict` of a compiled model, run as a parallax job or on one device: the
script a Keras user writes, its parallax version one line apart (`parallax.get_runner(model, ...)`; the batches of
arrays are global batches, as on one device).

    python tests/equivalence/keras_fit.py CASE --workers N --out F.npz [--checkpoints DIR] \
        (--one-device | --spec S --mode M)

The chief (or the one device) writes every model, optimizer and metric variable by name, the History, the
evaluation and the predictions to F.npz.
"""
import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import numpy as np  # noqa: E402

import parallax  # noqa: E402
import tensorflow as tf  # noqa: E402
from tests.equivalence.tf2_steps import optimizer_variables  # noqa: E402

F64 = "float64"
KERAS3 = int(getattr(tf.keras, "__version__", "2").split(".")[0]) >= 3  # TF_USE_LEGACY_KERAS=0 on TF >= 2.16


def dense():
    """Adam, a metric; 50 examples: 40 to train in batches of 8, 10 to validate (the last batch: 2)."""
    model = tf.keras.Sequential([tf.keras.layers.Dense(8, activation="tanh", input_shape=(3,), dtype=F64),
                                 tf.keras.layers.Dense(1, dtype=F64)])
    model.compile(tf.keras.optimizers.Adam(0.05), "mse", metrics=["mae"])
    rng = np.random.RandomState(0)
    return model, rng.rand(50, 3), rng.rand(50, 1)


def embedding():
    """An Embedding (its gradient: IndexedSlices) with SGD and momentum, an accuracy metric. Keras 3 computes a
    loss named by a string in its floatx (float32) whatever the model's dtype: this case names its loss's dtype, so
    that its gradients are float64 in both generations and compared as such (the dense and GRU cases keep the
    string)."""
    model = tf.keras.Sequential([tf.keras.Input((2,), dtype="int64"), tf.keras.layers.Embedding(40, 4, dtype=F64),
                                 tf.keras.layers.Flatten(dtype=F64),
                                 tf.keras.layers.Dense(1, activation="sigmoid", dtype=F64)])
    loss = tf.keras.losses.BinaryCrossentropy(dtype=F64) if KERAS3 else "binary_crossentropy"
    model.compile(tf.keras.optimizers.SGD(0.5, momentum=0.9), loss, metrics=["accuracy"])
    rng = np.random.RandomState(0)
    x = rng.randint(0, 40, size=(50, 2))
    return model, x, (x[:, :1] % 2).astype("float64")


def gru():
    """A GRU layer: its loop is a function nested in the step."""
    model = tf.keras.Sequential([tf.keras.layers.GRU(4, input_shape=(5, 2), dtype=F64),
                                 tf.keras.layers.Dense(1, dtype=F64)])
    model.compile(tf.keras.optimizers.Adam(0.02), "mse", metrics=["mae"])
    rng = np.random.RandomState(0)
    return model, rng.rand(50, 5, 2), rng.rand(50, 1)


CASES = {f.__name__: f for f in (dense, embedding, gru)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("case", choices=sorted(CASES))
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--out", required=True)
    p.add_argument("--checkpoints")
    p.add_argument("--one-device", action="store_true")
    p.add_argument("--spec")
    p.add_argument("--mode", default="HYBRID")
    a = p.parse_args()
    tf.keras.utils.set_random_seed(1)  # the same initial values in every process
    model, x, y = CASES[a.case]()
    runner = None if a.one_device else parallax.get_runner(model, a.spec, parallax.Config(run_option=a.mode))
    # stops before the last epoch, and puts the best epoch's weights back, which evaluate and predict then read
    callbacks = [tf.keras.callbacks.EarlyStopping("val_loss", patience=1, min_delta=1e-3, restore_best_weights=True)]
    if a.checkpoints:
        callbacks.append(tf.keras.callbacks.ModelCheckpoint(os.path.join(a.checkpoints, "ckpt-{epoch}.weights.h5"),
                                                            save_weights_only=True))
        callbacks.append(tf.keras.callbacks.TensorBoard(os.path.join(a.checkpoints, "tensorboard")))
    history = model.fit(x, y, batch_size=8, epochs=a.epochs, validation_split=0.2, shuffle=False,
                        callbacks=callbacks, verbose=2)
    evaluation = model.evaluate(x[:20], y[:20], batch_size=6, verbose=0)
    predictions = model.predict(x[:7], batch_size=4, verbose=0)
    if runner is not None:
        runner.close()
        if not runner.is_chief:
            return
    variables = model.variables + optimizer_variables(model.optimizer) + \
        [v for m in model.metrics for v in m.variables]
    values = {f"{i}:{v.name}": v.numpy() for i, v in enumerate(variables)}
    logs = {f"history:{k}": np.array(v) for k, v in history.history.items()}
    restored = _restored(a, model, callbacks[0].best_epoch + 1)
    np.savez(a.out, evaluation=np.array(evaluation), predictions=predictions, **logs, **values, **restored)


def _restored(a, model, best_epoch):
    """The trained model saved (model.save, tf.train.Checkpoint, the ModelCheckpoint of the epoch whose weights
    EarlyStopping restored) and restored into a new single-device model: the largest difference from the trained
    weights, per way (0.0 when exact)."""
    if not a.checkpoints:
        return {}
    trained = model.get_weights()
    path = os.path.join(a.checkpoints, "model.keras")
    model.save(path)
    by_way = {"save": tf.keras.models.load_model(path).get_weights()}
    tf.train.Checkpoint(model=model).write(os.path.join(a.checkpoints, "tf-ckpt"))
    fresh = CASES[a.case]()[0]
    tf.train.Checkpoint(model=fresh).read(os.path.join(a.checkpoints, "tf-ckpt")).expect_partial()
    by_way["checkpoint"] = fresh.get_weights()
    fresh = CASES[a.case]()[0]
    fresh.load_weights(os.path.join(a.checkpoints, f"ckpt-{best_epoch}.weights.h5"))
    by_way["model_checkpoint"] = fresh.get_weights()
    return {f"restored:{way}": np.array(max(float(np.max(np.abs(w - t))) for w, t in zip(weights, trained)))
            for way, weights in by_way.items()}


if __name__ == "__main__":
    main()
