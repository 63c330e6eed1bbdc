"""Keep every process of a job off wildcard addresses: TF's gRPC servers and Open MPI's transports bind 0.0.0.0 and
[::] whatever they are told. The library built from bind_shim.c is preloaded into mpirun, the remote orted daemons
(rsh_agent.py), the workers and the parameter servers; it turns each wildcard bind into a bind to the process's
address in the job. Imports no TensorFlow.
"""
import glob
import ipaddress
import os
import socket

from parallax.errors import LaunchError

ENV_BIND_MAP = "PARALLAX_BIND_MAP"  # port=ipv4: this process's own TF server's port and cluster address
ENV_BIND_HOSTS = "PARALLAX_BIND_HOSTS"  # ipv4,...: each process binds the first one that is an address of its host
VARIABLES = (ENV_BIND_MAP, ENV_BIND_HOSTS, "LD_PRELOAD")
_HERE = os.path.dirname(os.path.abspath(__file__))


def library_path():
    found = sorted(glob.glob(os.path.join(_HERE, "_bind_shim*.so")))
    if not found:
        raise LaunchError(f"parallax's bind shim is not built (no _bind_shim*.so in {_HERE}); reinstall parallax "
                          f"(`make install`, or pip install -e .) with a C compiler present")
    return found[0]


def environment(spec, loopback_only=False):
    """The environment every process of a job on `spec` needs so that it binds only its own address in the job:
    anything it binds on a wildcard binds its host's address (its loopback with `loopback_only`: transport ssh).
    A TF server's own address comes from `server_map`, set by the process that starts it: only that process knows
    which task it is (each host draws its ports on its own, so two hosts can have the same port)."""
    return preloading_environment("127.0.0.1" if loopback_only else ",".join(host_addresses(spec)))


def preloaded_here(environ=None):
    """Whether this process runs with the shim (loaded, and told which addresses to bind): its TF servers then
    listen on their cluster addresses only."""
    environ = os.environ if environ is None else environ
    try:
        with open("/proc/self/maps") as f:
            loaded = "_bind_shim" in f.read()
    except OSError:
        loaded = False
    return loaded and bool(environ.get(ENV_BIND_HOSTS))


def preloading_environment(addresses="127.0.0.1"):
    """What a process needs in its environment, at its start, to run with the shim: binds on a wildcard bind the
    first of `addresses` that is an address of its host."""
    return {ENV_BIND_HOSTS: addresses,
            "LD_PRELOAD": " ".join(filter(None, [library_path(), os.environ.get("LD_PRELOAD")]))}


def server_map(address):
    """$PARALLAX_BIND_MAP for the process whose TF server is at `address` ("host:port" of the cluster spec)."""
    host, _, port = address.rpartition(":")
    return f"{int(port)}={ipv4(host.strip('[]'))}"


def host_addresses(spec):
    """The hosts' IPv4 addresses, in spec order; and, when this machine (which runs mpirun) is none of them, last
    the address it reaches the first remote host from."""
    addresses = list(dict.fromkeys(ipv4(host_name(h)) for h in spec.hosts))
    if not any(_is_address_here(a) for a in addresses):
        addresses.append(source_address(addresses[0]))
    return addresses


def source_address(destination):
    """The local address the kernel would send from to reach `destination` (a UDP connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect((destination, 9))
        except OSError as e:
            raise LaunchError(f"no route from this machine to {destination}: {e}") from None
        return s.getsockname()[0]


def ipv4(host):
    try:
        return str(ipaddress.IPv4Address(host))
    except ValueError:
        pass
    try:
        return socket.getaddrinfo(host, None, socket.AF_INET)[0][4][0]
    except (socket.gaierror, IndexError):
        raise LaunchError(f"cannot resolve {host!r} to an IPv4 address to bind the job's servers to; use IPv4 "
                          f"addresses or resolvable names in the resource spec") from None


def host_name(host):
    """The host's name or address in the job's cluster. ("localhost" can resolve to ::1 first, where a server
    bound to 127.0.0.1 is not listening.)"""
    return "127.0.0.1" if host.hostname == "localhost" else host.hostname.strip("[]")


def _is_address_here(address):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.bind((address, 0))
            return True
        except OSError:
            return False
