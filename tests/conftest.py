import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import parallax  # noqa: E402,F401  (installs gradient capture before any test builds a graph)
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.compat.v1.disable_eager_execution()


@pytest.fixture(autouse=True)
def _fresh_default_graph():
    tf.compat.v1.reset_default_graph()
    yield
