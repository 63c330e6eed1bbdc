"""`parallax.shard(ds)`: each worker reads its own slice of the input.

This module is itself callable (`parallax.shard(ds)`), and also offers the original Parallax's spelling:
`parallax.shard.shard(ds)` and `shard.create_num_shards_and_shard_id()`.
"""
import tensorflow as tf

from parallax.core.callable_module import make_callable
from parallax.errors import ParallaxError
from parallax.process.protocol import this_process
from parallax.capture.shard_placement import DeferredShard

tf1 = tf.compat.v1
SCOPE = "parallax_shard"  # rewrite/fingerprint.py compares the values of this scope's constants by structure only
NUM_SHARDS, SHARD_ID = "num_shards", "shard_id"  # the original's graph collections of the two tensors


def shard(ds):
    """`ds.shard(num_workers, worker_id)` for this worker; `ds.shard(1, 0)`, every element, with one worker.

    The union of the workers' k-th batches of size b is exactly the single process's k-th batch of size N*b,
    which is what makes distributed training equivalent: the cut is made right before the batch, after every
    transform written after `shard` that is not element-wise (a shuffle, filter, take: shard_placement.py). One process
    builds the same ops as a worker, so that the seeds TF derives from op positions, and the planner's view of how
    examples are shared (batch_draws.py), are the workers'.
    """
    if not isinstance(ds, tf.data.Dataset):
        raise ParallaxError(f"parallax.shard() takes a tf.data.Dataset, not {type(ds).__name__}")
    context = this_process()
    role = context.role
    return DeferredShard(ds, (), role.num_workers, role.worker_id, SCOPE, context.environ)


def create_num_shards_and_shard_id():
    """The number of workers and this worker's index, as int64 scalar tensors of the default graph (1 and 0 on
    one device), for input pipelines that shard themselves: `ds.shard(num_shards, shard_id)`. Every worker builds
    the same graph; only these constants' values differ, which the same-graph check allows."""
    graph = tf1.get_default_graph()
    if graph.get_collection(NUM_SHARDS) or graph.get_collection(SHARD_ID):
        raise ParallaxError("create_num_shards_and_shard_id() was called twice in this graph; call it once and "
                            "reuse its two tensors")
    role = this_process().role
    workers, index = (role.num_workers, role.worker_id) if role.role == "worker" else (1, 0)
    with graph.as_default(), graph.name_scope(None), graph.name_scope(SCOPE):
        num_shards = tf.constant(workers, tf.int64, name=NUM_SHARDS)
        shard_id = tf.constant(index, tf.int64, name=SHARD_ID)
    graph.add_to_collection(NUM_SHARDS, num_shards)
    graph.add_to_collection(SHARD_ID, shard_id)
    return num_shards, shard_id


make_callable(__name__, shard)
