import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import parallax  # noqa: E402,F401  (installs gradient capture before any test builds a graph)
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.compat.v1.disable_eager_execution()


def pytest_configure(config):
    config.addinivalue_line("markers", "alone: the test bounds or measures wall time or counts every process on the "
                                       "machine; make test runs these one at a time, after the others")


# Epoch seconds after which a test not yet started is skipped, with the reason: .ci/run sets it for its last
# phase, so that a machine slower than usual (CI's runs have differed by 2x in speed) ends within CI's 90 minutes
# with the tests that ran reported, rather than being stopped with none. Unset: every test runs.
DEADLINE_ENV = "PARALLAX_TEST_DEADLINE"


def pytest_runtest_setup(item):
    deadline = os.environ.get(DEADLINE_ENV)
    if deadline and time.time() > float(deadline):
        pytest.skip(f"not started: {DEADLINE_ENV} ({time.strftime('%H:%M:%S', time.localtime(float(deadline)))}) "
                    "had passed; CI's 90 minutes ran out. Run it without the deadline, e.g. `make test TF=2.21`")


@pytest.fixture(autouse=True)
def _fresh_default_graph():
    """Each test starts with an empty default graph and TF 2's control flow: a case builder that writes a TF 1 script
    turns v2 control flow off for its process, and the tests of one pytest process run in any order (xdist)."""
    tf.compat.v1.reset_default_graph()
    tf.compat.v1.enable_control_flow_v2()
    yield
