"""Reserve TCP ports for a job's gRPC servers. Imports no TensorFlow."""
import os
import random
import socket
import tempfile
import time

from parallax.errors import LaunchError

EPHEMERAL_RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"
ATTEMPTS_PER_PORT = 50
# Claims of ports reserved but maybe not bound yet, one empty file per port, shared by every parallax job on this
# machine; a claim keeps other jobs off its port for HOLD_SECONDS (a server binds within seconds of the reservation)
REGISTRY = os.path.join(tempfile.gettempdir(), "parallax-ports")
HOLD_SECONDS = 300


def reserve_local_ports(count, ephemeral_range_file=EPHEMERAL_RANGE_FILE, registry=REGISTRY):
    """`count` distinct free ports on this machine, drawn from outside the kernel's ephemeral range. The test
    sockets are closed before the servers bind, so a port could be taken in between:
    - a port the kernel hands out for outgoing connections (gRPC's and MPI's own, thousands per job) could be, and
      was, so none of those is used;
    - another parallax job on this machine reserving at the same time (two tests at a time, or two users' jobs)
      could draw the same port before either server binds it: each reserved port is claimed in `registry` (a file
      created exclusively), and a port claimed in the last HOLD_SECONDS is not drawn again.
    Only another program listening on a fixed port in between can still collide: the job then fails at start-up,
    loudly, and can simply be rerun."""
    candidates = _outside_ephemeral(ephemeral_range_file)
    if candidates is None:  # no room outside the ephemeral range: let the kernel choose
        return _kernel_chosen(count)
    claims = _Claims(registry)
    rng, ports = random.SystemRandom(), []
    for _ in range(count * ATTEMPTS_PER_PORT):
        if len(ports) == count:
            break
        port = rng.randrange(*candidates)
        if port not in ports and _bindable(port) and claims.take(port):
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


class _Claims:
    """The registry of claimed ports: stale claims (older than HOLD_SECONDS) are removed when a reservation starts,
    so the directory holds at most the last few minutes' claims. A registry that cannot be written (another user's,
    a read-only /tmp) claims nothing and refuses nothing."""

    def __init__(self, directory):
        self.directory = directory
        try:
            os.makedirs(directory, exist_ok=True)
            if os.stat(directory).st_uid == os.getuid():
                os.chmod(directory, 0o1777)  # every user's jobs claim here; none removes another's claim
            now = time.time()
            for name in os.listdir(directory):
                path = os.path.join(directory, name)
                try:
                    if now - os.stat(path).st_mtime > HOLD_SECONDS:
                        os.unlink(path)
                except OSError:  # another reservation removed it first, or another user's
                    pass
            self.usable = os.access(directory, os.W_OK)
        except OSError:
            self.usable = False

    def take(self, port):
        if not self.usable:
            return True
        try:
            os.close(os.open(os.path.join(self.directory, str(port)), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            return True
        except FileExistsError:
            return False
        except OSError:
            return True


def release(port, registry=REGISTRY):
    """Drop the claim of `port`: its server has bound it, and the kernel keeps it now."""
    try:
        os.unlink(os.path.join(registry, str(port)))
    except OSError:  # none (a kernel-chosen port, another TMPDIR), or already stale and pruned
        pass


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
