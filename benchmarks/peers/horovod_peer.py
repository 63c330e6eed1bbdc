"""A model of models/ (--model) trained with Horovod, as Horovod's own TensorFlow 1 example (examples/tensorflow/
tensorflow_mnist.py) writes it: hvd.init, the dataset sharded by rank, hvd.DistributedOptimizer around the optimizer,
BroadcastGlobalVariablesHook(0), a MonitoredTrainingSession that checkpoints on rank 0 only.

Two changes from that example, both to compute what one device computes with the global batch (as parallax does):
the learning rate is not multiplied by hvd.size() (each worker's batch is the global batch / size, and the
gradients are averaged), and the step count is not divided by it (--steps is the global step to reach).

    horovodrun -np 2 -H localhost:2 python benchmarks/peers/horovod_peer.py --model recsys \
        --data-dir data/recsys --batch-size 128 [--sparse-as-dense]
"""
import argparse

import peer_models  # sets the models' import path first
import horovod.tensorflow as hvd  # noqa: E402
import tensorflow as tf  # noqa: E402

import peer_loop  # noqa: E402

tf1 = tf.compat.v1
tf1.disable_eager_execution()
own = argparse.ArgumentParser(add_help=False)
own.add_argument("--model", required=True, choices=peer_models.NAMES)
own.add_argument("--sparse-as-dense", action="store_true",
                 help="allreduce the embeddings' gradients as dense tensors instead of allgathering their rows")
peer, rest = own.parse_known_args()
args = peer_models.parse_args(peer.model, rest)
hvd.init()
graph = tf.Graph()
with graph.as_default():
    tf1.set_random_seed(args.seed)
    model = peer_models.build(
        peer.model, args, shard=lambda stream: stream.shard(hvd.size(), hvd.rank()),
        wrap_optimizer=lambda optimizer: hvd.DistributedOptimizer(optimizer, sparse_as_dense=peer.sparse_as_dense))
    hooks = [hvd.BroadcastGlobalVariablesHook(0), tf1.train.StopAtStepHook(last_step=args.steps)]
    checkpoint_dir = args.checkpoint_dir if hvd.rank() == 0 else None
    with peer_loop.monitored_session(checkpoint_dir, args, hooks=hooks) as sess:
        peer_loop.train(sess, model, args, worker=hvd.rank())
