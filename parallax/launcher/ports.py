"""Reserve TCP ports for a job's gRPC servers. Imports no TensorFlow."""
import socket

from parallax.errors import LaunchError


def reserve_local_ports(count):
    """`count` distinct free ports on this machine. The sockets are closed before the servers bind, so another
    program could take a port in between; the job then fails at start-up, loudly, and can simply be rerun."""
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
