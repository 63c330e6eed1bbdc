"""Transport ssh on the test bed: every server on its host's loopback, traffic between hosts through ssh
forwards. The job is still exact, and no job port can be reached from outside the hosts."""
import os
import signal

import numpy as np
import pytest

from tests import listening
from tests.cluster.conftest import JOB, Job, assert_nothing_left
from tests.equivalence import harness
from tests.equivalence.test_hybrid import HYBRID_CASES
from tests.equivalence.run_case import case_builder
from tests.equivalence.test_ps import PS_CASES


SUITE = [("HYBRID", c, w) for c, w in HYBRID_CASES] + [("PS", c, w) for c, w in PS_CASES]
# CI's 90 minutes hold one case of each kind: 4 workers (local aggregation, two per host) in both modes, and the
# float32 LSTM (a while_loop). `make test-cluster SSH_SUITE=all` runs all 15 (about 9 minutes).
CI_CASES = [("HYBRID", "embedding_clip_adam", 4), ("PS", "embedding_clip_adam_partitioned", 4),
            ("HYBRID", "lstm_lm", 2)]
_CHOICE = os.environ.get("PARALLAX_SSH_SUITE", "ci")
if _CHOICE not in ("ci", "all"):
    raise ValueError(f"PARALLAX_SSH_SUITE={_CHOICE!r}: use 'ci' (a case of each kind) or 'all' (make test-cluster "
                     f"SSH_SUITE=all)")


@pytest.mark.parametrize("run_option, case, workers", SUITE if _CHOICE == "all" else CI_CASES)
def test_equivalence_suite_over_ssh_across_two_hosts(cluster, tmp_path, run_option, case, workers):
    """The equivalence suite's HYBRID and PS cases, with every worker's traffic to another host through ssh; the
    workers are split evenly over the two hosts."""
    expected = harness.reference(tmp_path, case, workers)
    out = tmp_path / "parallax.npz"
    job = Job(cluster, tmp_path, [harness.SCRIPT, "--case", case, "--mode", "parallax", "--workers", str(workers),
                                  "--batch", str(harness.BATCH), "--steps", str(harness.STEPS), "--out", str(out),
                                  "--run-option", run_option], ["--transport", "ssh"], slots=workers // 2)
    code = job.wait()
    assert code == 0, job.output[-5000:]
    assert "transport: ssh" in job.output
    got = dict(np.load(out))
    assert int(got["global_step"]) == harness.STEPS
    diffs = harness.assert_equivalent(expected, got, float32=case_builder(case)(1, 1, 1, 1).float32)
    print(f"{run_option} {case} over ssh on 2 hosts x {workers // 2}: max abs diff {max(diffs.values()):.3g}")
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
        open_from_outside = [(a, p) for a in cluster.hosts for p in sorted(ports) if listening.reachable(a, p)]
    finally:
        os.kill(job.proc.pid, signal.SIGTERM)
        job.wait(timeout=60)
    print("listening on the hosts:", seen)
    assert len(ports) >= 5, seen  # 4 workers' servers and 1 parameter server, at least
    for sockets in seen.values():
        assert all(listening.address_of(local).is_loopback for _, local in sockets), seen
    assert open_from_outside == []
    assert_nothing_left(cluster)
