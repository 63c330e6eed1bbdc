"""Transport ssh on the test bed: every server on its host's loopback, traffic between hosts through ssh
forwards. The job is still exact, and no job port can be reached from outside the hosts."""
import os
import signal
import socket

import numpy as np
import pytest

from tests import listening
from tests.cluster.conftest import JOB, Job, assert_nothing_left
from tests.equivalence import harness


def reachable(address, port):
    """Can a process outside the hosts (this test, in the launcher's namespace) open a connection to it?"""
    try:
        with socket.create_connection((address, port), timeout=3):
            return True
    except OSError:
        return False


@pytest.mark.parametrize("run_option", ["PS", "HYBRID"])
def test_ssh_transport_job_across_two_hosts_is_equivalent_to_one_process(cluster, tmp_path, run_option):
    case, workers = "embedding_clip_adam", 4
    expected = harness.reference(tmp_path, case, workers)
    out = tmp_path / "parallax.npz"
    job = Job(cluster, tmp_path, [harness.SCRIPT, "--case", case, "--mode", "parallax", "--workers", str(workers),
                                  "--batch", str(harness.BATCH), "--steps", str(harness.STEPS), "--out", str(out),
                                  "--run-option", run_option], ["--transport", "ssh"])
    code = job.wait()
    assert code == 0, job.output[-5000:]
    assert "transport: ssh" in job.output
    got = dict(np.load(out))
    assert int(got["global_step"]) == harness.STEPS
    diffs = harness.assert_equivalent(expected, got)
    print(f"{run_option} {case} over ssh on 2 hosts x 2 slots: max abs diff {max(diffs.values()):.3g}")
    assert_nothing_left(cluster)


def test_no_job_port_is_reachable_from_outside_the_hosts_with_ssh_transport(cluster, tmp_path):
    job = Job(cluster, tmp_path, [JOB], ["--transport", "ssh"],
              env={"JOB_LOOP": "1", "JOB_SPARSE": "1", "JOB_RUN_OPTION": "HYBRID"})
    job.wait_for_output("is training")
    try:
        seen = {address: listening.listening([p for p in cluster.namespace_pids(i) if p not in cluster.sshd_pids],
                                             cluster.namespaces[i])
                for i, address in enumerate(cluster.hosts)}
        ports = {int(local.rsplit(":", 1)[1]) for sockets in seen.values() for _, local in sockets}
        open_from_outside = [(a, p) for a in cluster.hosts for p in sorted(ports) if reachable(a, p)]
    finally:
        os.kill(job.proc.pid, signal.SIGTERM)
        job.wait(timeout=60)
    print("listening on the hosts:", seen)
    assert len(ports) >= 5, seen  # 4 workers' servers and 1 parameter server, at least
    for sockets in seen.values():
        assert all(listening.address_of(local).is_loopback for _, local in sockets), seen
    assert open_from_outside == []
    assert_nothing_left(cluster)
