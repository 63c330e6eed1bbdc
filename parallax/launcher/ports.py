"""Reserve TCP ports for a job's gRPC servers. Imports no TensorFlow."""
import random
import socket

from parallax.errors import LaunchError

EPHEMERAL_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"
ATTEMPTS_PER_PORT = 50


def reserve_local_ports(count, ephemeral_range_file=EPHEMERAL_RANGE_FILE):
    """`count` distinct free ports on this machine, drawn from outside the kernel's ephemeral range. The test
    sockets are closed before the servers bind, so a port could be taken in between; a port the kernel hands out
    for outgoing connections (gRPC's and MPI's own, thousands per job) could be, and was, so none of those is used.
    Only another program listening on a fixed port in between can still collide: the job then fails at start-up,
    loudly, and can simply be rerun."""
    candidates = _outside_ephemeral(ephemeral_range_file)
    if candidates is None:  # no room outside the ephemeral range: let the kernel choose
        return _kernel_chosen(count)
    rng, ports = random.SystemRandom(), []
    for _ in range(count * ATTEMPTS_PER_PORT):
        if len(ports) == count:
            break
        port = rng.randrange(*candidates)
        if port not in ports and _bindable(port):
            ports.append(port)
    if len(ports) < count:
        raise LaunchError(f"cannot find {count} free TCP ports in {candidates[0]}-{candidates[1] - 1} on this "
                          f"machine (found {len(ports)}); stop what listens there, or widen the range outside "
                          f"{ephemeral_range_file}")
    return ports


def _outside_ephemeral(path):
    """[start, stop) below the ephemeral range (or above it), at least 4096 ports wide, or None."""
    try:
        with open(path) as f:
            low, high = (int(x) for x in f.read().split())
    except (OSError, ValueError):
        low, high = 32768, 60999  # Linux's default
    if low - 1024 >= 4096:
        return max(1024, low // 2), low
    if 65535 - high >= 4096:
        return high + 1, 65536
    return None


def _bindable(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC binds: a port in TIME_WAIT is free
        s.bind(("", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def _kernel_chosen(count):
    sockets, ports = [], []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("", 0))
            sockets.append(s)
            ports.append(s.getsockname()[1])
    except OSError as e:
        raise LaunchError(f"cannot reserve {count} TCP ports on this machine: {e}") from None
    finally:
        for s in sockets:
            s.close()
    return ports
