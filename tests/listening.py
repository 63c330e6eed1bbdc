"""The listening TCP sockets of a job's processes, from `ss -ltnp` (in a host's network namespace when given),
and the check that none of them is on a wildcard or another host's address."""
import ipaddress
import socket
import subprocess

from parallax.launcher.processes import descendants  # noqa: F401 (the tests use it from here)


def names(pids):
    """{pid: its command name} of those still alive."""
    found = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/comm") as f:
                found[pid] = f.read().strip()
        except OSError:
            pass
    return found


def listening(pids, namespace=None):
    """[(pid, local address as ss prints it)] of every listening TCP socket of `pids`."""
    prefix = ["ip", "netns", "exec", namespace] if namespace else []
    out = subprocess.run([*prefix, "ss", "-Hltnp"], capture_output=True, text=True, check=True).stdout
    wanted, found = set(pids), []
    for line in out.splitlines():
        fields = line.split()
        owners = [int(part.split(",")[0]) for part in line.split("pid=")[1:]]
        found += [(pid, fields[3]) for pid in owners if pid in wanted]
    return found


def address_of(local):
    """The IP address of ss's `addr:port` (None for a wildcard), IPv4-mapped IPv6 as IPv4."""
    host = local.rsplit(":", 1)[0].strip("[]")
    if host in ("*", "0.0.0.0", "::"):
        return None
    address = ipaddress.ip_address(host.split("%")[0])
    return address.ipv4_mapped or address if address.version == 6 else address


def foreign(sockets, allowed):
    """The sockets bound to a wildcard or to an address that is neither in `allowed` nor loopback (reachable from
    the same host only)."""
    allowed = {ipaddress.ip_address(a) for a in allowed}
    bad = []
    for pid, local in sockets:
        address = address_of(local)
        if address is None or not (address in allowed or address.is_loopback):
            bad.append((pid, local))
    return bad


def reachable(address, port):
    """Can this process (outside the test bed's hosts, in the launcher's namespace) connect to address:port?"""
    try:
        with socket.create_connection((address, port), timeout=3):
            return True
    except OSError:
        return False
