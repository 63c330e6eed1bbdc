"""StepRunner checks that need eager execution on, run by test_step_runner.py in a process of its own (this suite's
processes run with it off). Prints one JSON object: {check name: its figures}."""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import numpy as np  # noqa: E402

import parallax  # noqa: E402
import tensorflow as tf  # noqa: E402
from parallax.errors import ParallaxError  # noqa: E402

tf1 = tf.compat.v1


def _model_and_step():
    tf.keras.backend.clear_session()
    tf.keras.utils.set_random_seed(1)
    model = tf.keras.Sequential([tf.keras.layers.Dense(4, activation="tanh", input_shape=(3,), dtype="float64"),
                                 tf.keras.layers.Dense(1, dtype="float64")])
    optimizer = tf.keras.optimizers.Adam(0.05)

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - y))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss
    return model, optimizer, train_step


def _batches():
    rng = np.random.RandomState(0)
    return [(rng.rand(n, 3), rng.rand(n, 1)) for n in (8, 8, 3)]


def one_worker_job():
    """A one-slot job (this process is the whole job): the losses the runner returns and the eager variables after
    close, against the same steps run eagerly."""
    model, optimizer, step = _model_and_step()
    runner = parallax.get_runner(step, "localhost:1")
    try:
        runner.worker_id
        asked_early = None
    except ParallaxError as e:
        asked_early = str(e)
    returned = [runner(x, y) for x, y in _batches()]
    losses = [float(loss.numpy()) for loss in returned]
    identity = [runner.worker_id, runner.num_workers, runner.is_chief]
    before_close = [v.numpy().copy() for v in model.variables]
    runner.close()
    after = [v.numpy() for v in model.variables + optimizer.variables]
    model, optimizer, step = _model_and_step()
    eager_losses = [float(step(x, y)) for x, y in _batches()]
    eager = [v.numpy() for v in model.variables + optimizer.variables]
    try:
        runner(*_batches()[0])
        closed = None
    except ParallaxError as e:
        closed = str(e)
    return {"loss_diff": float(np.max(np.abs(np.subtract(losses, eager_losses)))),
            "variable_diff": max(float(np.max(np.abs(a - b))) for a, b in zip(after, eager)),
            "unchanged_before_close": max(float(np.max(np.abs(a - b))) for a, b in
                                          zip(before_close, [v.numpy() for v in _model_and_step()[0].variables])),
            "identity": identity, "asked_early": asked_early, "closed": closed,
            "returned": sorted({type(loss).__name__ for loss in returned})}


def refusal(make):
    try:
        make()
    except ParallaxError as e:
        return f"{type(e).__name__}: {e}"
    return None


def plain_functions():
    """A plain Python function as the step: one whose Python computes the same at each call runs (its losses the
    eager function's); one with a Python counter is refused."""
    model, optimizer, step = _model_and_step()
    plain = step.python_function
    runner = parallax.get_runner(plain, "localhost:1")
    losses = [float(runner(x, y)) for x, y in _batches()]
    runner.close()
    _, _, step = _model_and_step()
    eager_losses = [float(step(x, y)) for x, y in _batches()]
    calls = [0]

    def counted(x, y):
        calls[0] += 1
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - y)) * float(calls[0])
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss
    @tf.function
    def noised(x):  # a nested function: it stays one of the graph's library
        return tf.ensure_shape(x + tf.numpy_function(lambda v: v * 0, [x], x.dtype), x.shape)

    def calls_python(step_input):
        @tf.function
        def step(x, y):
            x = step_input(x)
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x) - y))
            optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
            return loss
        return refusal(lambda: parallax.get_runner(step, "localhost:1")(*_batches()[0]))
    return {"loss_diff": float(np.max(np.abs(np.subtract(losses, eager_losses)))),
            "counter": refusal(lambda: parallax.get_runner(counted, "localhost:1")(*_batches()[0])),
            "py_function": calls_python(lambda x: tf.ensure_shape(tf.py_function(lambda v: v, [x], x.dtype), x.shape)),
            "nested_numpy_function": calls_python(noised)}


def keras_models():
    """get_runner(model): an uncompiled model is refused; a one-slot job's fit gives one device's History and
    weights; close puts the model's own methods back; a later structure of batches is refused."""
    model, _, _ = _model_and_step()
    uncompiled = refusal(lambda: parallax.get_runner(model, "localhost:1"))
    x, y = _batches()[0]
    model.compile(tf.keras.optimizers.SGD(0.1), "mse", metrics=["mae"])
    runner = parallax.get_runner(model, "localhost:1")
    history = model.fit(x, y, batch_size=3, epochs=2, verbose=0).history
    wrong = refusal(lambda: model.evaluate(x, verbose=0))  # no labels: batches of another structure
    runner.close()
    trained = model.get_weights()
    restored = "fit" not in model.__dict__ and "make_train_function" not in model.__dict__
    model, _, _ = _model_and_step()
    model.compile(tf.keras.optimizers.SGD(0.1), "mse", metrics=["mae"])
    eager_history = model.fit(x, y, batch_size=3, epochs=2, verbose=0).history
    found = {"uncompiled": uncompiled, "restored": restored, "wrong_structure": wrong,
             "history_diff": max(abs(a - b) for k in history for a, b in zip(history[k], eager_history[k])),
             "weights_diff": max(float(np.max(np.abs(a - b))) for a, b in zip(trained, model.get_weights()))}
    tf.keras.mixed_precision.set_global_policy("mixed_float16")  # compile wraps the optimizer for loss scaling
    mixed = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(3,))])
    mixed.compile(tf.keras.optimizers.SGD(0.1), "mse")
    found["mixed_precision"] = refusal(lambda: parallax.get_runner(mixed, "localhost:1"))
    tf.keras.mixed_precision.set_global_policy("float32")
    several = tf.keras.Sequential([tf.keras.layers.Dense(1, input_shape=(3,))])
    several.compile(tf.keras.optimizers.SGD(0.1), "mse", steps_per_execution=4)
    found["steps_per_execution"] = refusal(lambda: parallax.get_runner(several, "localhost:1"))
    return found


def keras_slots():
    """The analysis of a lifted step with Keras optimizers (Adagrad with global_clipnorm, whose clipped gradients
    each depend on every gradient; Adam): {variable: its slots}, and the state left."""
    from parallax.analysis.graph_analysis import analyze
    from parallax.capture.function_step import lift
    found = {}
    for make in (lambda: tf.keras.optimizers.Adagrad(0.1, global_clipnorm=1.0), lambda: tf.keras.optimizers.Adam(0.1)):
        tf.keras.backend.clear_session()
        tf.keras.utils.set_random_seed(1)
        optimizer = make()
        embedding, dense = tf.keras.layers.Embedding(50, 4), tf.keras.layers.Dense(1)

        @tf.function
        def step(ids, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(dense(tf.reduce_mean(embedding(ids), 1)) - y))
            trained = embedding.trainable_variables + dense.trainable_variables
            optimizer.apply_gradients(zip(tape.gradient(loss, trained), trained))
            return loss
        batch = (tf.constant([[1, 2], [3, 4]]), tf.constant([[1.0], [2.0]]))
        step(*batch)  # the optimizer makes its slots at its first apply, eagerly
        analysis = analyze(lift(step, batch).graph)
        found[type(optimizer).__name__] = {"slots": {v.name: sorted(v.slots) for v in analysis.variables},
                                           "state": sorted(s.name for s in analysis.state)}
    return found


def main():
    results = {
        "keras_slots": keras_slots(),
        "one_worker": one_worker_job(),
        "plain": plain_functions(),
        "keras_model": keras_models(),
        "eager_default_graph": refusal(lambda: parallax.get_runner(tf1.get_default_graph(), "localhost:1")),
    }
    print(json.dumps(results))


if __name__ == "__main__":
    main()
