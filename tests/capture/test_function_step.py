"""capture/function_step.py: a TF2 step lifted into a v1 graph computes what the step computes eagerly, and records
what planning reads (its variables, each gradient, its losses).

The steps run in a process of their own with eager execution on (function_step_checks.py): this suite's processes
run with it off."""
import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf

CHECKS = os.path.join(os.path.dirname(__file__), "function_step_checks.py")
DENSE = ["dense/bias:0", "dense/kernel:0", "dense_1/bias:0", "dense_1/kernel:0"]


@pytest.fixture(scope="module")
def checked():
    done = subprocess.run([sys.executable, CHECKS], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", ["adam", "momentum_clipped", "legacy_adagrad", "embedding_adam",
                                  "embedding_legacy_sgd"])
def test_the_lifted_step_computes_what_the_eager_step_computes(checked, case):
    """Every variable (the model's, the optimizer's slots and iteration counter) after the same steps, the last
    batch smaller than the first (the batch axis is left unknown): float64, the same ops, so equal."""
    found = checked[case]
    assert found["loss_diff"] < 1e-12 and found["variable_diff"] < 1e-12, found
    assert all(shape[0] is None for shape in found["input_shapes"]), found["input_shapes"]


@pytest.mark.parametrize("case", ["adam", "momentum_clipped", "legacy_adagrad"])
def test_every_variable_of_model_and_optimizer_is_lifted_and_each_trainable_one_has_its_gradient(checked, case):
    found = checked[case]
    assert found["trainable"] == DENSE
    assert set(DENSE) < set(found["variables"]), found["variables"]
    assert len(found["variables"]) > len(DENSE)  # the optimizer's own: slots, its iteration counter
    assert found["gradients"] == [name[:-2] for name in DENSE] == found["trainable_in_graph"]
    assert found["losses"] and found["losses_in_graph"], found


@pytest.mark.parametrize("case", ["embedding_adam", "embedding_legacy_sgd"])
def test_an_embeddings_gradient_stays_rows(checked, case):
    """The embedding's gradient is recorded as IndexedSlices: values and indices, what HYBRID puts on servers."""
    assert checked[case]["sparse_gradients"] == ["embedding/embeddings"], checked[case]
    methods = checked[case]["hybrid_methods"]
    assert methods.pop("embedding/embeddings") == "PS" and set(methods.values()) == {"AR"}, methods


def test_a_captured_resource_that_is_not_a_variable_is_refused_naming_it(checked):
    message = checked["table"]
    assert message is not None and "reads a resource that is not a variable" in message, message
    assert "lookup table" in message and "step's arguments" in message


def test_a_lifted_steps_names_do_not_depend_on_what_the_process_made_before(checked):
    """An embedding lookup's capture of its variable was named by a counter of the whole process: with a
    TensorBoard callback (the chief's alone), a Keras fit job's workers built graphs of other names, and stopped
    with GraphMismatchError. Captures are named by their place now."""
    assert checked["two_lifts"]["same"], checked["two_lifts"]


if tuple(int(part) for part in tf.__version__.split(".")[:2]) >= (2, 16):  # Keras 3 is TF's own from 2.16
    def test_a_keras3_models_variables_keep_their_paths_and_its_optimizers_moments_are_slots():
        done = subprocess.run([sys.executable, CHECKS, "--keras3"], capture_output=True, text=True, timeout=600,
                              env=dict(os.environ, TF_USE_LEGACY_KERAS="0"))
        assert done.returncode == 0, done.stderr[-3000:]
        found = json.loads(done.stdout.strip().splitlines()[-1])["keras3_names"]
        assert found["keras"].startswith("3."), found
        assert found["lifted"] == found["paths"], found  # "sequential/dense/kernel", not "kernel_1"
        assert found["slots"]["sequential/embedding/embeddings"] == [
            "adam/sequential_embedding_embeddings_momentum", "adam/sequential_embedding_embeddings_velocity"], found
        assert all(len(slots) == 2 for slots in found["slots"].values()), found
