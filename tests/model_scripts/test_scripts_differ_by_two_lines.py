"""Each model's distributed script is its single-device script plus the two parallax lines (and the import)."""
import difflib
import os

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _code(path):
    """The script's lines after its docstring (which says how to run each one)."""
    with open(path) as f:
        text = f.read()
    return text.split('"""', 2)[2].splitlines()


@pytest.mark.parametrize("model", ["lm", "nmt", "resnet", "recsys"])
def test_distributed_script_changes_only_the_parallax_lines(model):
    single = _code(os.path.join(ROOT, "models", model, "train.py"))
    distributed = _code(os.path.join(ROOT, "models", model, "train_distributed.py"))
    diff = [line for line in difflib.unified_diff(single, distributed, lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    added = [line[1:].strip() for line in diff if line.startswith("+")]
    removed = [line[1:].strip() for line in diff if line.startswith("-")]
    assert added[0] == "import parallax  # noqa: E402"
    assert len(added) == 3 and len(removed) == 2, diff
    assert "parallax.shard(" in added[1] and "parallax.get_runner(" in added[2]
    # The changed lines wrap the same code: shard() wraps the same dataset, get_runner replaces the session.
    assert added[1].replace("parallax.shard(", "", 1).rstrip(")") == removed[0].rstrip(")")
    assert removed[1].startswith("with ") and added[2].startswith("with ") and added[2].endswith(" as sess:")


@pytest.mark.parametrize("model", ["lm", "resnet", "recsys"])
def test_distributed_keras_script_changes_only_the_parallax_lines(model):
    """train_keras_distributed.py: the dataset wrapped by parallax.shard, and one get_runner line before fit."""
    single = _code(os.path.join(ROOT, "models", model, "train_keras.py"))
    distributed = _code(os.path.join(ROOT, "models", model, "train_keras_distributed.py"))
    diff = [line for line in difflib.unified_diff(single, distributed, lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    added = [line[1:].strip() for line in diff if line.startswith("+") and "import" not in line]
    removed = [line[1:].strip() for line in diff if line.startswith("-")]
    assert len(added) == 2 and len(removed) == 1, diff
    assert added[0].replace("parallax.shard(", "", 1).rstrip(")") == removed[0].rstrip(")")
    assert added[1].startswith("runner = parallax.get_runner(model, ")
