"""Ports for the job's servers come from outside the kernel's ephemeral range, where the job's own outgoing
connections cannot take them between the reservation and the servers' bind (it happened in CI)."""
import itertools
import json
import os
import socket
import sys
import time

import pytest

from parallax.errors import LaunchError
from parallax.launcher import preflight
from parallax.process import ports
from parallax.launcher.preflight import HostReport
from parallax.process.resource_spec import ResourceSpec
from parallax.launcher.ssh import SshSettings


def _range_file(tmp_path, low, high):
    path = tmp_path / "ip_local_port_range"
    path.write_text(f"{low}\t{high}\n")
    return str(path)


def test_ports_are_distinct_free_and_below_the_ephemeral_range(tmp_path):
    got = ports.reserve_local_ports(20, _range_file(tmp_path, 32768, 60999), registry=str(tmp_path / "claims"))
    assert len(set(got)) == 20
    assert all(16384 <= p < 32768 for p in got)
    for p in got:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", p))


def test_ports_are_above_the_range_when_it_starts_low(tmp_path):
    assert all(61000 <= p <= 65535 for p in ports.reserve_local_ports(5, _range_file(tmp_path, 1024, 60999),
                                                                    registry=str(tmp_path / "claims")))


def test_without_room_outside_the_range_the_kernel_chooses(tmp_path):
    got = ports.reserve_local_ports(3, _range_file(tmp_path, 1024, 65000))
    assert len(set(got)) == 3 and all(p > 0 for p in got)


def test_a_port_in_use_is_never_handed_out(tmp_path, monkeypatch):
    with socket.socket() as held:
        held.bind(("", 0))
        held.listen()
        busy = held.getsockname()[1]
        draws = itertools.chain([busy, busy], itertools.count(20000))
        monkeypatch.setattr(ports.random.SystemRandom, "randrange", lambda self, a, b: next(draws))
        monkeypatch.setattr(ports, "_outside_ephemeral", lambda path: (1024, 65536))
        assert ports.reserve_local_ports(1, registry=str(tmp_path / "claims")) != [busy]


def test_no_free_port_is_a_launch_error_saying_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setattr(ports, "_bindable", lambda port: False)
    with pytest.raises(LaunchError, match="cannot find 2 free TCP ports in 16384-32767"):
        ports.reserve_local_ports(2, _range_file(tmp_path, 32768, 60999), registry=str(tmp_path / "claims"))


def test_preflight_gives_each_host_ports_no_other_host_has():
    spec = ResourceSpec.load("a.invalid:1,b.invalid:2,c.invalid:1,d.invalid:1")
    drawn = {0: HostReport([5000, 5001, 5002], "a"), 1: HostReport([5000, 5001, 5003, 5004], "b"),
             2: HostReport([5003, 5005], "c"), 3: HostReport([], "d")}
    got = preflight.distinct_ports(spec, drawn, {0: 2, 1: 2, 2: 1})
    assert {i: r.ports for i, r in got.items()} == {0: [5000, 5001], 1: [5003, 5004], 2: [5005], 3: []}
    assert got[1].hostname == "b"
    with pytest.raises(LaunchError, match=r"b.invalid: of the 4 free ports drawn there, 2 are not another host's, "
                                          r"and it needs 3; start the job again"):
        preflight.distinct_ports(spec, drawn, {0: 2, 1: 3})


def test_preflight_draws_spare_ports_and_keeps_what_the_host_needs(monkeypatch):
    spec = ResourceSpec.load("localhost:2")
    report = preflight.run_preflight(spec, {0: 3}, sys.executable, None, None, SshSettings())[0]
    assert len(report.ports) == len(set(report.ports)) == 3
    asked = []
    real = preflight._run_here

    drawn = []

    def recording(argv, request):
        asked.append(json.loads(request)["ports"])
        out = real(argv, request)
        drawn.extend(json.loads(out.strip().splitlines()[-1])["ports"])
        return out
    monkeypatch.setattr(preflight, "_run_here", recording)
    kept = preflight.run_preflight(spec, {0: 3}, sys.executable, None, None, SshSettings())[0].ports
    assert asked == [3 + preflight.SPARE_PORTS]
    # this machine's spare ports are claimed no longer; the ports the job keeps are, until their servers bind
    claimed = set(map(int, os.listdir(ports.REGISTRY)))
    assert len(drawn) == 3 + preflight.SPARE_PORTS and set(kept) <= claimed
    assert not (set(drawn) - set(kept)) & claimed
    for port in kept:
        ports.release(port)


def test_a_port_another_job_reserved_is_not_drawn_until_its_claim_is_stale(tmp_path, monkeypatch):
    """Two jobs reserving at once on one machine (two tests at a time): neither server has bound yet, so both
    draws find the same ports free; the claims in the registry keep them apart, for HOLD_SECONDS."""
    monkeypatch.setattr(ports, "_outside_ephemeral", lambda path: (20000, 20006))
    monkeypatch.setattr(ports, "_bindable", lambda port: True)  # whatever listens on this machine
    registry = str(tmp_path / "claims")
    first = ports.reserve_local_ports(3, registry=registry)
    second = ports.reserve_local_ports(3, registry=registry)
    assert sorted(first + second) == list(range(20000, 20006))
    with pytest.raises(LaunchError, match="cannot find 1 free TCP ports"):
        ports.reserve_local_ports(1, registry=registry)
    stale = time.time() - ports.HOLD_SECONDS - 1
    for p in first:
        os.utime(os.path.join(registry, str(p)), (stale, stale))
    assert sorted(ports.reserve_local_ports(3, registry=registry)) == sorted(first)
    assert sorted(os.listdir(registry)) == sorted(str(p) for p in first + second)  # the stale claims went


def test_a_registry_that_cannot_be_written_claims_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(ports, "_outside_ephemeral", lambda path: (20000, 20003))
    monkeypatch.setattr(ports, "_bindable", lambda port: True)
    blocked = tmp_path / "file"
    blocked.write_text("")  # a file where the directory would be
    assert sorted(ports.reserve_local_ports(3, registry=str(blocked / "claims"))) == [20000, 20001, 20002]
