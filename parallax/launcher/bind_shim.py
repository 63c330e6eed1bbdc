"""Make a job's TF gRPC servers listen on their cluster address only (TF itself always binds 0.0.0.0).

The library built from bind_shim.c is preloaded into the servers and workers; PARALLAX_BIND_MAP tells it which
port belongs to which address. Imports no TensorFlow.
"""
import glob
import ipaddress
import os
import socket

from parallax.errors import LaunchError

ENV_BIND_MAP = "PARALLAX_BIND_MAP"
_HERE = os.path.dirname(os.path.abspath(__file__))


def library_path():
    found = sorted(glob.glob(os.path.join(_HERE, "_bind_shim*.so")))
    if not found:
        raise LaunchError(f"parallax's bind shim is not built (no _bind_shim*.so in {_HERE}); reinstall parallax "
                          f"(`make install`, or pip install -e .) with a C compiler present")
    return found[0]


def environment(cluster):
    """The environment a job's processes need so that each server binds only its own cluster address."""
    entries = []
    for address in cluster.get("ps", []) + cluster.get("worker", []):
        host, _, port = address.rpartition(":")
        entries.append(f"{port}={_ipv4(host)}")
    preload = " ".join(filter(None, [library_path(), os.environ.get("LD_PRELOAD")]))
    return {ENV_BIND_MAP: ",".join(entries), "LD_PRELOAD": preload}


def _ipv4(host):
    try:
        return str(ipaddress.IPv4Address(host))
    except ValueError:
        pass
    try:
        return socket.getaddrinfo(host, None, socket.AF_INET)[0][4][0]
    except (socket.gaierror, IndexError):
        raise LaunchError(f"cannot resolve {host!r} to an IPv4 address to bind the job's servers to; use IPv4 "
                          f"addresses or resolvable names in the resource spec") from None
