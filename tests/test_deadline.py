"""tests/conftest.py's PARALLAX_TEST_DEADLINE: past it a test not yet started is skipped with the reason; before it,
or unset, the test runs (.ci/run sets it for its last phase only)."""
import os
import subprocess
import sys
import time

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
ONE_TEST = "tests/test_config.py::test_defaults_are_single_device_equivalent"


def run_one(deadline):
    env = {k: v for k, v in os.environ.items() if k != "PARALLAX_TEST_DEADLINE"}
    if deadline is not None:
        env["PARALLAX_TEST_DEADLINE"] = str(deadline)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", ONE_TEST],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout


@pytest.mark.parametrize("deadline", [None, "future"])
def test_before_the_deadline_or_without_one_the_test_runs(deadline):
    code, out = run_one(None if deadline is None else time.time() + 3600)
    assert code == 0 and "1 passed" in out, out


def test_past_the_deadline_a_test_is_skipped_and_says_why():
    code, out = run_one(time.time() - 1)
    assert code == 0, out
    assert "1 skipped" in out and "1 passed" not in out, out
    assert "CI's 90 minutes ran out" in out and "make test TF=2.21" in out, out
