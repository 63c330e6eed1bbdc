"""Whether the workers read their own shares of the input, or each the whole of it.

A dataset the workers read without `parallax.shard` (or `ds.shard`, or a filter on the shard id of
`create_num_shards_and_shard_id`) gives every worker the same batches, in the same order: N copies of one device
with batch b, not one device with batch N*b (and, for a summed loss, N times its gradient). So does a queue-based
pipeline (`tf.compat.v1.train.batch` over `slice_input_producer` or a reader of `string_input_producer`'s files):
every worker builds the same graph, so its queue runners fill every worker's queues from the same sources. Nothing
in the rewrite can tell that from a share, so the planner looks at the graph: a worker reads batches from an
iterator, or from a queue that a queue runner of the graph fills, and no op in the graph or in its datasets'
functions shards the input. A pipeline that runs Python (from_generator, a py_func) may share the examples out
itself, and is not judged; nor is a queue the script fills itself (its enqueue fed by a thread of its own).
"""
import tensorflow as tf

from parallax.batch_draws import node_types
from parallax.batch_shapes import per_worker_inputs
from parallax.shard import SHARD_ID

ITERATOR_READS = {"IteratorGetNext", "IteratorGetNextSync", "IteratorGetNextAsOptional"}
QUEUE_READS = {"QueueDequeue", "QueueDequeueV2", "QueueDequeueMany", "QueueDequeueManyV2", "QueueDequeueUpTo",
               "QueueDequeueUpToV2"}
SHARDS_OR_PYTHON = {"ShardDataset", "GeneratorDataset", "PyFunc", "PyFuncStateless", "EagerPyFunc"}


def _queues_runners_fill(graph):
    """The names of the queue ops that the graph's queue runners enqueue into."""
    return {qr.queue.name for qr in graph.get_collection(tf.compat.v1.GraphKeys.QUEUE_RUNNERS)
            if getattr(qr, "queue", None) is not None}


def _read_from_pipeline(t, filled):
    return t.op.type in ITERATOR_READS or (t.op.type in QUEUE_READS and t.op.inputs[0].op.name in filled)


def unsharded(graph):
    """The per-worker inputs read from an iterator or a queue runner's queue (tensor names), where nothing in the
    graph shards the input; () otherwise. A pipeline shards itself by the shard id that
    create_num_shards_and_shard_id records."""
    if graph.get_collection(SHARD_ID):
        return ()
    filled = _queues_runners_fill(graph)
    read = sorted(t.name for t in per_worker_inputs(graph) if _read_from_pipeline(t, filled))
    if not read or node_types(graph.as_graph_def()) & SHARDS_OR_PYTHON:
        return ()
    return tuple(read)


def note(plan):
    return (f"the workers read {', '.join(plan.unsharded_inputs)} from an input pipeline that nothing in the graph "
            f"shards: every worker reads the same batches, which is {plan.num_workers} copies of one device with "
            f"batch b, not one device with batch {plan.num_workers}*b; shard a dataset element-wise before "
            f"batching: parallax.shard(ds).batch(b) (a queue-based pipeline, tf.compat.v1.train.batch and its "
            f"kind, cannot be sharded so: read the data with tf.data instead)")
