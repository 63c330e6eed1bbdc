"""No process of a job on this machine listens on a wildcard address, in any mode (issue 16; the test bed's
version is in tests/cluster/test_multi_host.py)."""
import os
import signal
import subprocess
import sys
import time

import pytest

from tests import listening

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
JOB = os.path.join(ROOT, "tests", "launcher_scripts", "job.py")


@pytest.mark.parametrize("run_option", ["MPI", "PS", "HYBRID"])
def test_every_process_of_a_local_job_listens_on_loopback_only(run_option, tmp_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT, JOB_LOOP="1", JOB_SPARSE="1",
               JOB_RUN_OPTION=run_option)
    log = tmp_path / "job.log"
    with open(log, "w") as out:
        job = subprocess.Popen([sys.executable, JOB], env=env, stdout=out, stderr=subprocess.STDOUT,
                               start_new_session=True)
    try:
        deadline = time.time() + 120
        while log.read_text().count("is training") < 2:
            assert job.poll() is None and time.time() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        pids = listening.descendants(job.pid)
        sockets = listening.listening(pids)
        names = listening.names(pids)
    finally:
        os.kill(job.pid, signal.SIGTERM)
        job.wait(timeout=60)
    print(run_option, sorted((names.get(p, str(p)), local) for p, local in sockets))
    servers = {"MPI": 0, "PS": 1, "HYBRID": 1}[run_option]
    assert len({p for p, _ in sockets}) >= 1 + servers, sockets  # mpirun, and the servers at least
    assert listening.foreign(sockets, ["127.0.0.1"]) == [], sockets
