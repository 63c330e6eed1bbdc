"""TF's gRPC server for one task of a job: a worker's (parallax.runtime.cluster) or a parameter server process's.

A parameter server process only serves. It needs TF's C++ runtime, where every op and kernel is registered, and the
server's Python module, not TF's Python API: `import tensorflow` costs about 3 s of CPU, against 0.5 s for the
server module alone. On a host that starts its workers and its server together on two cores, that is a sixth of
a short job's CPU.
"""
import errno
import importlib
import importlib.util
import os
import socket
import sys
import types

from parallax.errors import LaunchError
from parallax.process import bind_shim, ports


def _tf_module(name):
    """tensorflow.<name>, importing TF's package body (its whole Python API) only if this process already did."""
    if "tensorflow" in sys.modules:
        return importlib.import_module(f"tensorflow.{name}")
    spec = importlib.util.find_spec("tensorflow")
    if spec is None:
        raise LaunchError("TensorFlow is not installed in this Python; install it (make install) on every host")
    # A bare package object stands in for `tensorflow` while its submodules load, then goes: anything that imports
    # `tensorflow` later in this process gets the real package (the submodules already loaded are reused).
    package = types.ModuleType("tensorflow")
    package.__path__ = list(spec.submodule_search_locations)
    package.__spec__ = spec
    sys.modules["tensorflow"] = package
    try:
        return importlib.import_module(f"tensorflow.{name}")
    finally:
        if sys.modules.get("tensorflow") is package:
            del sys.modules["tensorflow"]


def start_tf_server(cluster, job_name, task_index, config=None):
    """This process's TF gRPC server; a port someone else took is a LaunchError naming the host and the port
    (TF says only "Could not start gRPC server")."""
    server_lib = _tf_module("python.training.server_lib")
    errors = _tf_module("python.framework.errors")
    address = cluster[job_name][task_index]
    host, _, port = address.rpartition(":")
    # TF binds its server on the wildcard; the launcher's preloaded bind shim turns that into this address.
    os.environ[bind_shim.ENV_BIND_MAP] = bind_shim.server_map(address)
    try:
        server = server_lib.Server(server_lib.ClusterSpec(cluster), job_name=job_name, task_index=task_index,
                                   config=config, start=True)
        ports.release(int(port))
        return server
    except errors.OpError as e:
        if not _port_taken(host.strip("[]"), int(port)):
            raise
        raise LaunchError(f"{job_name} task {task_index} cannot start its TF server: port {port} on {host} is "
                          f"taken by another process (it was free when the launcher reserved it; TF says: "
                          f"{e.message}); start the job again, and it gets new ports") from None


def _port_taken(host, port):
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.bind((host, port))
    except OSError as e:
        return e.errno == errno.EADDRINUSE
    return False
