"""A model of models/ (--model) on TF 1 parameter servers, as TF's distributed-training guide for 1.x writes it: a
ClusterSpec and one tf.distribute.Server per task, variables placed by replica_device_setter with a greedy load
balancer over the servers, SyncReplicasOptimizer aggregating one gradient per worker each step, and a
MonitoredTrainingSession whose chief initializes, runs the sync queue and checkpoints. One process per task:

    python benchmarks/peers/ps_peer.py --ps-hosts h1:2222,h2:2222 --worker-hosts h1:2223,h2:2223 \
        --job-name worker --task-index 0 --model recsys --data-dir data/recsys --batch-size 128

A server runs until it is killed (server.join()), as in the guide; benchmarks/peers/exactness.py and the benchmark
end them. --steps is the global step to reach; each worker's batch is the global batch / the number of workers,
at the single device's learning rate (what parallax computes). One choice beyond the guide: the sync queue starts
without tokens (make_session_run_hook's num_tokens=0, --num-tokens), so that every step, the first included, waits
for one gradient from each worker. With the default, one token per worker, the chief trains alone until the others
are in (their MonitoredTrainingSession polls every 30 s for the chief's initialization), and its updates average
its own consecutive gradients.
"""
import argparse

import peer_models  # sets the models' import path first
import tensorflow as tf  # noqa: E402

import peer_loop  # noqa: E402

tf1 = tf.compat.v1


class GreedyLoadBalancingStrategy:
    """tf.contrib.training.GreedyLoadBalancingStrategy with byte_size_load_fn (TF 2 dropped contrib): each variable
    goes to the server with the fewest bytes so far."""

    def __init__(self, num_tasks):
        self.loads = [0] * num_tasks

    def __call__(self, op):
        task = min(range(len(self.loads)), key=self.loads.__getitem__)
        shape = tf.TensorShape(op.get_attr("shape"))
        dtype = tf.as_dtype(op.get_attr("dtype"))
        self.loads[task] += shape.num_elements() * dtype.size if shape.is_fully_defined() else 0
        return task


own = argparse.ArgumentParser(add_help=False)
own.add_argument("--model", required=True, choices=peer_models.NAMES)
for flag in ("--ps-hosts", "--worker-hosts", "--job-name"):
    own.add_argument(flag, required=True)
own.add_argument("--task-index", type=int, required=True)
own.add_argument("--num-tokens", type=int, default=0,
                 help="tokens the chief puts in the sync queue at start (SyncReplicasOptimizer's default, -1, is one "
                      "per worker: the chief then trains alone until the others join)")
task, rest = own.parse_known_args()
args = peer_models.parse_args(task.model, rest)
cluster = tf1.train.ClusterSpec({"ps": task.ps_hosts.split(","), "worker": task.worker_hosts.split(",")})
server = tf1.distribute.Server(cluster, job_name=task.job_name, task_index=task.task_index)
if task.job_name == "ps":
    server.join()
workers, is_chief = cluster.num_tasks("worker"), task.task_index == 0
tf1.disable_eager_execution()
graph = tf.Graph()
with graph.as_default():
    tf1.set_random_seed(args.seed)
    placement = tf1.train.replica_device_setter(
        worker_device=f"/job:worker/task:{task.task_index}", cluster=cluster,
        ps_strategy=GreedyLoadBalancingStrategy(cluster.num_tasks("ps")))
    synced = []

    def sync_replicas(optimizer):
        synced.append(tf1.train.SyncReplicasOptimizer(optimizer, replicas_to_aggregate=workers,
                                                      total_num_replicas=workers))
        return synced[-1]

    with tf1.device(placement):
        model = peer_models.build(task.model, args, shard=lambda stream: stream.shard(workers, task.task_index),
                                  wrap_optimizer=sync_replicas)
    hooks = [synced[0].make_session_run_hook(is_chief, num_tokens=task.num_tokens),
             tf1.train.StopAtStepHook(last_step=args.steps)]
    # The chief's sync queue runner waits for gradients no worker sends once they all have stopped: closing the
    # session would wait the default 120 s for it.
    with peer_loop.monitored_session(args.checkpoint_dir if is_chief else None, args, master=server.target,
                                     is_chief=is_chief, hooks=hooks, stop_grace_period_secs=2) as sess:
        peer_loop.train(sess, model, args, worker=task.task_index, shared_global_step=True)
