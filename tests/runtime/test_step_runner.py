"""runtime/step_runner.py and get_runner's front end for TF2 code: a training step's runner is called like the step
and leaves the trained values in the user's eager variables; what cannot be taken is refused, saying what to do.

The checks that need eager execution run in a process of their own (step_runner_checks.py); the suite's processes
run with it off, which is itself one of the refusals checked here."""
import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf

import parallax
from parallax.errors import UnsupportedError

tf1 = tf.compat.v1
CHECKS = os.path.join(os.path.dirname(__file__), "step_runner_checks.py")


@pytest.fixture(scope="module")
def checked():
    done = subprocess.run([sys.executable, CHECKS], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_one_worker_step_runner_computes_the_eager_steps_and_writes_back_at_close(checked):
    """Three steps (the last batch smaller): the same losses, and after close every model and optimizer variable
    the eager steps' (float64, equal); before close the eager variables are untouched."""
    found = checked["one_worker"]
    assert found["loss_diff"] == 0.0 and found["variable_diff"] == 0.0, found
    assert found["unchanged_before_close"] == 0.0
    assert found["identity"] == [0, 1, True]
    assert found["returned"] == ["EagerTensor"]  # as the step returns its loss
    assert "joins its job at its first call" in found["asked_early"]
    assert "this runner is closed" in found["closed"]


def test_a_plain_python_step_runs_and_one_whose_python_differs_per_call_is_refused(checked):
    found = checked["plain"]
    assert found["loss_diff"] == 0.0, found
    message = found["counter"]
    assert message.startswith("UnsupportedError: the training step is a Python function whose code computes "
                              "something else at each call (two traces of it differ, first in step/mul/y)"), message
    assert "@tf.function" in message


def test_a_keras_optimizers_slots_are_its_variables_slots(checked):
    """A Keras optimizer names no slots in a record: the variables its update of one variable writes (and reads),
    and no other variable's update does, are that variable's slots, planned on its server; the iteration counter,
    written after every update, stays state."""
    adagrad, adam = checked["keras_slots"]["Adagrad"], checked["keras_slots"]["Adam"]
    assert adagrad["slots"] == {"dense/bias": ["Adagrad/accumulator/dense/bias"],
                                "dense/kernel": ["Adagrad/accumulator/dense/kernel"],
                                "embedding/embeddings": ["Adagrad/accumulator/embedding/embeddings"]}, adagrad
    assert adam["slots"]["embedding/embeddings"] == ["Adam/m/embedding/embeddings", "Adam/v/embedding/embeddings"]
    assert adagrad["state"] == adam["state"] == ["iteration"], (adagrad, adam)


def test_a_step_that_calls_python_is_refused_before_it_runs(checked):
    """tf.py_function in the step, and tf.numpy_function in a function the step calls: parallax cannot read what
    the Python computes over the batch (nor place the op, which is bound to the tracing process: in PS mode it
    failed as TF's 'Cannot assign a device')."""
    for found, op in ((checked["plain"]["py_function"], "EagerPyFunc"),
                      (checked["plain"]["nested_numpy_function"], "PyFunc")):
        assert found is not None and found.startswith(
            "UnsupportedError: the training step calls Python through tf.py_function or tf.numpy_function ("), found
        assert op in found and "dataset.map" in found, found


def test_a_keras_models_fit_runs_in_a_one_worker_job_and_what_it_cannot_take_is_refused(checked):
    found = checked["keras_model"]
    assert found["uncompiled"].startswith("UnsupportedError: get_runner(model) takes a compiled model: call "
                                          "model.compile"), found
    assert found["history_diff"] == 0.0 and found["weights_diff"] == 0.0, found
    assert found["restored"], "close() leaves the model's own fit and make_*_function"
    assert found["wrong_structure"].startswith("UnsupportedError: this model's steps were traced for batches of 2 "
                                               "tensor(s)"), found
    assert found["mixed_precision"].startswith("UnsupportedError: get_runner(model) was given a model compiled for "
                                               "mixed precision"), found
    assert "set_global_policy('float32')" in found["mixed_precision"]
    assert found["steps_per_execution"].startswith("UnsupportedError: get_runner(model) was given a model compiled "
                                                   "with steps_per_execution=4"), found


def test_an_empty_graph_with_eager_on_points_at_the_training_step(checked):
    message = checked["eager_default_graph"]
    assert message.startswith("UnsupportedError: get_runner was given a graph without variables while eager"), message
    assert "Pass the training step itself" in message


def test_a_step_with_eager_execution_off_is_refused():
    with pytest.raises(UnsupportedError, match=r"needs eager execution, which this script turned off \(tf.compat"
                                               r".v1.disable_eager_execution\): remove that call"):
        parallax.get_runner(lambda x, y: x, "localhost:1")


@pytest.mark.slow
def test_the_api_docs_example_runs_as_a_two_worker_job(tmp_path):
    """docs/api.md's TF2 example, as written: a job of 2 workers on localhost whose workers end with the same
    trained model (written back into the eager variables at close)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    text = open(os.path.join(root, "docs", "api.md")).read()
    start = text.index("```python\nimport numpy as np\nimport parallax") + len("```python\n")
    script = tmp_path / "train.py"
    script.write_text(text[start:text.index("```", start)])
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=root, TF_CPP_MIN_LOG_LEVEL="2"))
    output = done.stdout + done.stderr
    errors = sorted(line.split("mean squared error:")[1].strip() for line in output.splitlines()
                    if "mean squared error:" in line)
    assert done.returncode == 0 and len(errors) == 2 and errors[0] == errors[1], output[-4000:]
    assert "launching 2 workers" in output


@pytest.mark.slow
def test_the_api_docs_keras_example_runs_as_a_two_worker_job(tmp_path):
    """docs/api.md's Keras example, as written: model.fit in a job of 2 workers on localhost; the progress bar is
    the chief's alone, and so is the saved model, which loads into a new model."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    text = open(os.path.join(root, "docs", "api.md")).read()
    start = text.index("## `parallax.get_runner(model, ")
    start = text.index("```python\n", start) + len("```python\n")
    script = tmp_path / "train.py"
    script.write_text(text[start:text.index("```", start)] + "\nif runner.is_chief:\n    print('saved model loads:', "
                                                              "bool(tf.keras.models.load_model('model.keras').get_weights()))\n")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=root, TF_CPP_MIN_LOG_LEVEL="2"))
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "launching 2 workers" in output, output[-4000:]
    assert "worker/0] Epoch 1/" in output and "worker/1] Epoch" not in output, output[-4000:]
    assert output.count("saved model loads: True") == 1  # the chief's file; the other worker saved nothing
    assert (tmp_path / "model.keras").exists()
