"""`make test` runs these jobs three at a time (pytest-xdist): the single-process references live in a directory
that every pytest process shares, so each is made once (harness.REFERENCE_DIR)."""
import os

import pytest

from tests.equivalence import harness


@pytest.fixture(scope="session", autouse=True)
def _references_shared_by_the_sessions_processes(tmp_path_factory):
    base = tmp_path_factory.getbasetemp()
    # Under xdist each process has its own base (.../pytest-N/popen-gwK); their parent is this session's alone.
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    harness.REFERENCE_DIR = str(shared / "references")
    yield
    harness.REFERENCE_DIR = None
