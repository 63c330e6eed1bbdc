"""The worker's side of a job with parameter servers: its own TF server, and how its session reaches the cluster."""
import errno
import json
import os
import socket

import tensorflow as tf

from parallax.collectives import tf_ops
from parallax.errors import LaunchError
from parallax.launcher import bind_shim
from parallax.launcher.protocol import ENV_CLUSTER

tf1 = tf.compat.v1


def start_worker_server(role, local_chiefs=(), tf_collectives=False):
    """This worker's gRPC server (job `worker`, task = worker id); returns (server, session ConfigProto).
    `local_chiefs`: the workers that hold local-aggregation accumulators; `tf_collectives`: the job uses TF's
    collective ops, whose group forms only when the server and the session name its leader."""
    try:
        cluster = json.loads(os.environ[ENV_CLUSTER])
    except (KeyError, ValueError):
        raise LaunchError(f"this job needs a TF server in every worker (parameter servers, or TF's collectives) but "
                          f"${ENV_CLUSTER} is missing or not JSON; start the job through get_runner or parallax's "
                          f"launcher") from None
    if len(cluster.get("worker", [])) != role.num_workers:
        raise LaunchError(f"${ENV_CLUSTER} lists {len(cluster.get('worker', []))} workers, the job has "
                          f"{role.num_workers}")
    server_config = tf_ops.server_config() if tf_collectives else None
    server = start_tf_server(cluster, "worker", role.worker_id, server_config)
    # Talk only to the servers, ourselves and the local chiefs, rather than wait for every worker's server. A
    # distributed session places the whole graph (it ignores place_pruned_graph), so every device the graph names
    # must be visible: the local chiefs hold the local-aggregation accumulators of every host.
    tasks = sorted({role.worker_id, *local_chiefs})
    filters = tf1.ConfigProto(device_filters=["/job:ps", *(f"/job:worker/task:{t}" for t in tasks)])
    if tf_collectives:
        filters.MergeFrom(server_config)
    return server, filters


def start_tf_server(cluster, job_name, task_index, config=None):
    """This process's TF gRPC server; a port someone else took is a LaunchError naming the host and the port
    (TF says only "Could not start gRPC server")."""
    address = cluster[job_name][task_index]
    # TF binds its server on the wildcard; the launcher's preloaded bind shim turns that into this address.
    os.environ[bind_shim.ENV_BIND_MAP] = bind_shim.server_map(address)
    try:
        return tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name=job_name, task_index=task_index,
                                    config=config, start=True)
    except tf.errors.OpError as e:
        host, _, port = address.rpartition(":")
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
