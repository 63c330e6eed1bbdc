"""The worker's side of a job with parameter servers: its own TF server, and how its session reaches the cluster."""
import json
import os

import tensorflow as tf

from parallax.errors import LaunchError
from parallax.launcher.role import ENV_CLUSTER

tf1 = tf.compat.v1


def start_worker_server(role):
    """This worker's gRPC server (job `worker`, task = worker id); returns (target, session ConfigProto)."""
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
    # Talk only to the servers and to ourselves: a worker must not wait for the other workers' servers.
    filters = tf1.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{role.worker_id}"])
    return server, filters
