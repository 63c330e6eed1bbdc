"""Ports for the job's servers come from outside the kernel's ephemeral range, where the job's own outgoing
connections cannot take them between the reservation and the servers' bind (it happened in CI)."""
import itertools
import socket

import pytest

from parallax.errors import LaunchError
from parallax.launcher import ports


def _range_file(tmp_path, low, high):
    path = tmp_path / "ip_local_port_range"
    path.write_text(f"{low}\t{high}\n")
    return str(path)


def test_ports_are_distinct_free_and_below_the_ephemeral_range(tmp_path):
    got = ports.reserve_local_ports(20, _range_file(tmp_path, 32768, 60999))
    assert len(set(got)) == 20
    assert all(16384 <= p < 32768 for p in got)
    for p in got:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", p))


def test_ports_are_above_the_range_when_it_starts_low(tmp_path):
    assert all(61000 <= p <= 65535 for p in ports.reserve_local_ports(5, _range_file(tmp_path, 1024, 60999)))


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
        assert ports.reserve_local_ports(1) != [busy]


def test_no_free_port_is_a_launch_error_saying_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setattr(ports, "_bindable", lambda port: False)
    with pytest.raises(LaunchError, match="cannot find 2 free TCP ports in 16384-32767"):
        ports.reserve_local_ports(2, _range_file(tmp_path, 32768, 60999))
