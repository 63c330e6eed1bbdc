"""Lifted TF2 steps checked against the same steps run eagerly: run by test_function_step.py in a process of its own,
because the suite's processes run with eager execution off (tests/conftest.py) and TF2 code needs it on.

Prints one JSON object: {check name: its figures}.
"""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import numpy as np  # noqa: E402

import parallax  # noqa: E402  (before the model: the tape's hooks)
import tensorflow as tf  # noqa: E402
from parallax.capture import gradients as capture  # noqa: E402
from parallax.capture.function_step import lift  # noqa: E402
from parallax.errors import UnsupportedError  # noqa: E402

tf1 = tf.compat.v1


def _batches(seed, sizes, features=3, ids=None):
    rng = np.random.RandomState(seed)
    for size in sizes:
        x = rng.randint(0, ids, size=(size, 2)) if ids else rng.rand(size, features)
        yield x, rng.rand(size, 1)


def _dense_model(optimizer):
    tf.keras.backend.clear_session()  # the layers' names start again: dense, dense_1
    tf.keras.utils.set_random_seed(1)
    model = tf.keras.Sequential([tf.keras.layers.Dense(4, activation="tanh", input_shape=(3,), dtype="float64"),
                                 tf.keras.layers.Dense(1, dtype="float64")])
    return model, optimizer


def _embedding_model(optimizer):
    tf.keras.backend.clear_session()
    tf.keras.utils.set_random_seed(2)
    model = tf.keras.Sequential([tf.keras.layers.Embedding(10, 3, input_length=2, dtype="float64"),
                                 tf.keras.layers.Flatten(dtype="float64"), tf.keras.layers.Dense(1, dtype="float64")])
    model.build((None, 2))
    return model, optimizer


def _step(model, optimizer, clip=None):
    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - y))
        grads = tape.gradient(loss, model.trainable_variables)
        if clip:
            grads, _ = tf.clip_by_global_norm(grads, clip)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return {"loss": loss}
    return train_step


def against_eager(build, optimizer, sizes, ids=None, clip=None):
    """Max abs differences of the losses and of every variable after len(sizes) steps, lifted against eager, and
    what the lifted graph records."""
    model, optimizer = build(optimizer)
    step = _step(model, optimizer, clip)
    batches = list(_batches(3, sizes, ids=ids))
    lifted = lift(step, batches[0])
    eager_values = [v.eager.numpy() for v in lifted.variables]
    with lifted.graph.as_default():  # the lifted variables start at zeros: the eager values are loaded, as a runner does
        loads = {v.graph.initial_value: value for v, value in zip(lifted.variables, eager_values)}
        initializers = [v.graph.initializer for v in lifted.variables]
    with tf1.Session(graph=lifted.graph) as session:
        session.run(initializers, loads)
        lifted_losses = [session.run([lifted.outputs, lifted.train_op], dict(zip(lifted.inputs, b)))[0]["loss"]
                         for b in batches]
        lifted_values = {v.eager.name: session.run(v.graph) for v in lifted.variables}
    plan = parallax.explain(lifted.graph, "localhost:2", parallax.Config(run_option="HYBRID"), print_table=False).plan
    eager_losses = [float(step(*b)["loss"]) for b in batches]
    records = capture.grad_records(lifted.graph)
    return {"loss_diff": float(np.max(np.abs(np.subtract(lifted_losses, eager_losses)))),
            "variable_diff": max(float(np.max(np.abs(lifted_values[v.eager.name] - v.eager.numpy())))
                                 for v in lifted.variables),
            "variables": sorted(v.eager.name for v in lifted.variables),
            "trainable": sorted(v.name for v in model.trainable_variables),
            "gradients": sorted(r["var"] for r in records),
            "sparse_gradients": sorted(r["var"] for r in records if "indices" in r["grad"]),
            "losses": capture.loss_records(lifted.graph),
            "losses_in_graph": all(lifted.graph.get_tensor_by_name(n) is not None
                                   for n in capture.loss_records(lifted.graph)),
            "trainable_in_graph": sorted(v.op.name for v in lifted.graph.get_collection("trainable_variables")),
            "input_shapes": [t.shape.as_list() for t in lifted.inputs],
            "hybrid_methods": {v.name: str(v.method) for v in plan.variables}}


def refused_table():
    table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer([1, 2], [0.5, 2.0]), 0.0)
    v = tf.Variable(1.0)
    optimizer = tf.keras.optimizers.SGD(0.1)

    @tf.function
    def train_step(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(table.lookup(x)) * v
        optimizer.apply_gradients([(tape.gradient(loss, v), v)])
        return loss
    try:
        lift(train_step, (tf.constant([1, 2]),))
    except UnsupportedError as e:
        return str(e)
    return None


def names_of_two_lifts():
    """The ops (names and attributes) of the same embedding step lifted twice, with objects made between (a
    TensorBoard callback's, on the chief alone): a worker's graph must not depend on what its process made before
    the trace."""
    def lifted_names():
        model, optimizer = _embedding_model(tf.keras.optimizers.Adam(0.05))
        lifted = lift(_step(model, optimizer), next(_batches(3, [4], ids=10)))
        return {node.name: str(node) for node in lifted.graph.as_graph_def().node}
    first = lifted_names()
    made_between = [tf.Variable(float(i)) for i in range(50)]
    second = lifted_names()
    return {"same": first == second, "made_between": len(made_between),
            "differing": sorted(name for name in first.keys() | second.keys()
                                if first.get(name) != second.get(name))[:6]}


def keras3_names():
    """A Keras 3 model's and optimizer's variables in the lifted graph (run with TF_USE_LEGACY_KERAS=0): named by
    their paths (their tf.Variables are named by the last part alone), and the optimizer's moments as slots."""
    model, optimizer = _embedding_model(tf.keras.optimizers.Adam(0.05))
    lifted = lift(_step(model, optimizer), next(_batches(3, [4], ids=10)))
    analysis = parallax.analyze(lifted.graph)
    return {"keras": tf.keras.__version__, "lifted": sorted(v.graph.op.name for v in lifted.variables),
            "paths": sorted(v.path for v in model.variables + optimizer.variables),
            "slots": {v.name: sorted(name for _, name in v.parts[0].slots) for v in analysis.variables}}


def main():
    if sys.argv[1:] == ["--keras3"]:
        print(json.dumps({"keras3_names": keras3_names()}))
        return
    keras = tf.keras.optimizers
    results = {
        "adam": against_eager(_dense_model, keras.Adam(0.05), [8, 8, 5]),
        "momentum_clipped": against_eager(_dense_model, keras.SGD(0.1, momentum=0.9), [8, 8], clip=0.5),
        "legacy_adagrad": against_eager(_dense_model, keras.legacy.Adagrad(0.1), [8, 8]),
        "embedding_adam": against_eager(_embedding_model, keras.Adam(0.05), [8, 8], ids=10),
        "embedding_legacy_sgd": against_eager(_embedding_model, keras.legacy.SGD(0.1), [8, 8], ids=10),
        "table": refused_table(),
        "two_lifts": names_of_two_lifts(),
    }
    print(json.dumps(results))


if __name__ == "__main__":
    main()
