"""The worker's side of a job with parameter servers: its own TF server, and how its session reaches the cluster."""
import json
import time

import tensorflow as tf

from parallax.collectives import tf_ops
from parallax.errors import LaunchError
from parallax.process.protocol import ENV_CLUSTER
from parallax.runtime.tf_server import start_tf_server

tf1 = tf.compat.v1


def start_worker_server(role, context, local_chiefs=(), tf_collectives=False):
    """This worker's gRPC server (job `worker`, task = worker id); returns (server, session ConfigProto).
    `context` (protocol.ProcessContext) gives the job's cluster, and may hand over a server already started (a
    thread job's); `local_chiefs`: the workers that hold local-aggregation accumulators; `tf_collectives`: the job
    uses TF's collective ops, whose group forms only when the server and the session name its leader."""
    try:
        cluster = json.loads(context.environ[ENV_CLUSTER])
    except (KeyError, ValueError):
        raise LaunchError(f"this job needs a TF server in every worker (parameter servers, or TF's collectives) but "
                          f"${ENV_CLUSTER} is missing or not JSON; start the job through get_runner or parallax's "
                          f"launcher") from None
    if len(cluster.get("worker", [])) != role.num_workers:
        raise LaunchError(f"${ENV_CLUSTER} lists {len(cluster.get('worker', []))} workers, the job has "
                          f"{role.num_workers}")
    server_config = tf_ops.server_config() if tf_collectives else None
    server = context.servers.server("worker", role.worker_id) if context.servers is not None else \
        start_tf_server(cluster, "worker", role.worker_id, server_config)
    # Talk only to the servers, ourselves and the local chiefs, rather than wait for every worker's server. A
    # distributed session places the whole graph (it ignores place_pruned_graph), so every device the graph names
    # must be visible: the local chiefs hold the local-aggregation accumulators of every host.
    tasks = sorted({role.worker_id, *local_chiefs})
    filters = tf1.ConfigProto(device_filters=["/job:ps", *(f"/job:worker/task:{t}" for t in tasks)])
    if tf_collectives:
        filters.MergeFrom(server_config)
    return server, filters


def wait_for_chief(session, ready_op, worker_id, timeout_s):
    """Until the chief has initialized the variables on the servers (`ready_op` lists those it has not yet)."""
    deadline = time.time() + timeout_s
    wait = 0.005  # the chief is usually a few milliseconds from done: ask again soon, then back off to 0.2 s
    while True:
        missing = session.run(ready_op)
        if len(missing) == 0:
            return
        if time.time() > deadline:
            raise LaunchError(f"worker {worker_id}: the chief did not initialize {len(missing)} variables "
                              f"(e.g. {missing[0].decode()}) within {timeout_s} s; see the chief's log")
        time.sleep(wait)
        wait = min(2 * wait, 0.2)
