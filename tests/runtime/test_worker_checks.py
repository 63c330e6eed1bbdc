"""How the workers compare their rewritten graphs (runtime/worker_checks.py): over MPI only where mpi4py is there,
so that a pip install without it (`pip install ".[tf]"`) checks over the workers' TF servers."""
import sys

import pytest

from parallax.errors import LaunchError
from parallax.runtime import worker_checks
from parallax.runtime.worker_checks import checked_over

MPIRUN = {"OMPI_COMM_WORLD_RANK": "1"}
SERVER = object()  # a TF server: only whether there is one matters


def test_mpirun_workers_compare_over_mpi_where_mpi4py_is_installed_else_over_their_servers():
    assert checked_over(MPIRUN, SERVER, has_mpi4py=True) == "mpi"
    assert checked_over(MPIRUN, SERVER, has_mpi4py=False) == "tf"
    assert checked_over({}, SERVER, has_mpi4py=True) == "tf"  # no mpirun: the ssh transport's workers
    assert checked_over(MPIRUN, None, has_mpi4py=False) == "mpi"  # no server to carry it: Horovod's MPI mode


def test_without_mpi4py_and_without_a_server_the_check_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # import mpi4py raises ImportError
    with pytest.raises(LaunchError, match="mpi4py is not installed: pip install mpi4py"):
        worker_checks._differing_worker_over_mpi(None)
