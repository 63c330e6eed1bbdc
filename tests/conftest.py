import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import parallax  # noqa: E402,F401  (installs gradient capture before any test builds a graph)
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.compat.v1.disable_eager_execution()


def pytest_configure(config):
    config.addinivalue_line("markers", "alone: the test bounds or measures wall time or counts every process on the "
                                       "machine; make test runs these one at a time, after the others")
    config.addinivalue_line("markers", "slow: make check leaves it out (it starts real multi-process jobs, or takes "
                                       "many seconds); make test runs it")


@pytest.fixture(autouse=True)
def _fresh_default_graph():
    """Each test starts with an empty default graph and TF 2's control flow: a case builder that writes a TF 1 script
    turns v2 control flow off for its process, and the tests of one pytest process run in any order (xdist)."""
    tf.compat.v1.reset_default_graph()
    tf.compat.v1.enable_control_flow_v2()
    yield
