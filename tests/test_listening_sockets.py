"""No process of a job on this machine listens on a wildcard address, in any mode (issue 16; the test bed's
version is in tests/cluster/test_multi_host.py)."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from parallax.process import bind_shim, ports
from parallax.process.resource_spec import ResourceSpec
from tests import listening

pytestmark = pytest.mark.alone  # make test runs it one test at a time: it waits on a job's start with a deadline

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


def test_two_hosts_that_drew_the_same_port_each_serve_on_their_own_address(tmp_path):
    """Each host's agent draws its ports on its own, so two hosts can get the same port. Two "hosts" on this machine
    (127.0.0.1 and 127.0.0.2) with one port: each TF server, started as the launcher starts it (its environment and
    the bind shim), serves on its own address. (A job-wide port map once bound both to the first address: "Could
    not start gRPC server" for the second.)"""
    port = ports.reserve_local_ports(1)[0]
    cluster = {"worker": [f"127.0.0.1:{port}", f"127.0.0.2:{port}"]}
    spec = ResourceSpec.load("127.0.0.1: 0\n127.0.0.2: 0")
    env = dict(os.environ, **bind_shim.environment(spec), TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT,
               SERVE_CLUSTER=json.dumps(cluster))
    serve = ("import json, os, sys, time\nfrom parallax.runtime.tf_server import start_tf_server\n"
             "start_tf_server(json.loads(os.environ['SERVE_CLUSTER']), 'worker', int(sys.argv[1]))\n"
             "print('serving', flush=True)\ntime.sleep(300)\n")
    logs = [tmp_path / f"task{t}.log" for t in (0, 1)]
    servers = []
    try:
        for task, log in enumerate(logs):
            with open(log, "w") as out:
                servers.append(subprocess.Popen([sys.executable, "-c", serve, str(task)], env=env, stdout=out,
                                                stderr=subprocess.STDOUT, start_new_session=True))
        deadline = time.time() + 120
        for server, log in zip(servers, logs):
            while "serving" not in log.read_text():
                assert server.poll() is None and time.time() < deadline, log.read_text()[-3000:]
                time.sleep(0.2)
        bound = [sorted({(str(listening.address_of(local)), local.rsplit(":", 1)[1])
                         for _, local in listening.listening([server.pid])}) for server in servers]
    finally:
        for server in servers:
            server.kill()
            server.wait(timeout=30)
    assert bound == [[("127.0.0.1", str(port))], [("127.0.0.2", str(port))]], bound
