"""The worker's side of a job with parameter servers: its own TF server, and how its session reaches the cluster."""
import json
import os

import tensorflow as tf

from parallax.errors import LaunchError
from parallax.launcher.protocol import ENV_CLUSTER

tf1 = tf.compat.v1


def start_worker_server(role, local_chiefs=()):
    """This worker's gRPC server (job `worker`, task = worker id); returns (server, session ConfigProto).
    `local_chiefs`: the workers that hold local-aggregation accumulators."""
    try:
        cluster = json.loads(os.environ[ENV_CLUSTER])
    except (KeyError, ValueError):
        raise LaunchError(f"this job needs parameter servers but ${ENV_CLUSTER} is missing or not JSON; start the "
                          f"job through get_runner or parallax's launcher") from None
    if len(cluster.get("worker", [])) != role.num_workers:
        raise LaunchError(f"${ENV_CLUSTER} lists {len(cluster.get('worker', []))} workers, the job has "
                          f"{role.num_workers}")
    server = tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name="worker", task_index=role.worker_id,
                                  start=True)
    # Talk only to the servers, ourselves and the local chiefs, rather than wait for every worker's server. A
    # distributed session places the whole graph (it ignores place_pruned_graph), so every device the graph names
    # must be visible: the local chiefs hold the local-aggregation accumulators of every host.
    tasks = sorted({role.worker_id, *local_chiefs})
    filters = tf1.ConfigProto(device_filters=["/job:ps", *(f"/job:worker/task:{t}" for t in tasks)])
    return server, filters
