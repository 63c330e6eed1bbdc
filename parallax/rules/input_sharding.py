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

A dataset the script shards itself (by create_num_shards_and_shard_id's tensors) that repeats after the shard over
M examples, M not a multiple of N, goes out of step with one device from its second pass on (parallax.shard cuts
the stream after such a repeat, shard_placement.py): the shards hold M // N or M // N + 1 examples, so
each worker's second pass starts at another of one device's examples. Every batch stays full, so no count shows it;
the planner finds a repeat downstream of a shard in the graph and counts the examples before the shard (the
dataset's cardinality, run in a throw-away session; where a feed or a file sets it, it is unknown, and nothing is
said).
"""
import re

import tensorflow as tf

from parallax.core import graph_utils
from parallax.rules.batch_draws import node_types
from parallax.analysis.batch_shapes import per_worker_inputs, shape_subgraph
from parallax.analysis.row_keys import reads_input
from parallax.capture.shard import SCOPE, SHARD_ID

ITERATOR_READS = {"IteratorGetNext", "IteratorGetNextSync", "IteratorGetNextAsOptional"}
QUEUE_READS = {"QueueDequeue", "QueueDequeueV2", "QueueDequeueMany", "QueueDequeueManyV2", "QueueDequeueUpTo",
               "QueueDequeueUpToV2"}
SHARDS_OR_PYTHON = {"ShardDataset", "GeneratorDataset", "PyFunc", "PyFuncStateless", "EagerPyFunc"}
_IN_SCOPE = re.compile(rf"(^|/){SCOPE}(_\d+)?/")


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


def reads_no_input(graph, update_ops):
    """Whether the training step reads no input at all: nothing the updates depend on reads a feed, a dataset or a
    queue (row_keys.reads_input), as when the batch is made in the graph (synthetic data from random ops or
    constants, a variable that caches it). Every worker then computes the same step from the same state: neither
    a feed that differs nor a shard can give a worker its own share of one device's batch."""
    updates = [graph.get_operation_by_name(name) for name in update_ops]
    return bool(updates) and not any(reads_input(op) for op in graph_utils.ancestors(updates))


# The kinds of the plan's notes (PlanNote) this rule makes.
UNSHARDED_INPUTS, REPEATED_SHARDS, READS_NO_INPUT = "unsharded_inputs", "repeated_shards", "reads_no_input"


def notes(graph, num_workers, update_ops):
    """The plan's notes of this rule, (kind, text) each: an input nothing shards, a repeat after a shard over a
    number of examples no multiple of N, a step that reads no input."""
    found = []
    unsharded_inputs = unsharded(graph)
    if unsharded_inputs:
        found.append((UNSHARDED_INPUTS, _unsharded_text(unsharded_inputs, num_workers)))
    shards = repeated_shards(graph, num_workers)
    if shards:
        found.append((REPEATED_SHARDS, _repeat_text(shards, num_workers)))
    if reads_no_input(graph, update_ops):
        found.append((READS_NO_INPUT, _no_input_text(num_workers)))
    return tuple(found)


def _no_input_text(n):
    return (f"the training step reads no input (no feed, no dataset, no queue: its batch is made in the graph, from "
            f"random ops or constants): every worker computes the same batch and the same step, which is "
            f"{n} copies of one device with batch b, not one device with batch {n}*b; "
            f"read the data from a dataset through parallax.shard(ds), or feed each worker its rows of the global "
            f"batch (runner.worker_id, runner.num_workers)")


def _unsharded_text(inputs, n):
    return (f"the workers read {', '.join(inputs)} from an input pipeline that nothing in the graph "
            f"shards: every worker reads the same batches, which is {n} copies of one device with "
            f"batch b, not one device with batch {n}*b; shard a dataset element-wise before "
            f"batching: parallax.shard(ds).batch(b) (a queue-based pipeline, tf.compat.v1.train.batch and its "
            f"kind, cannot be sharded so: read the data with tf.data instead)")


def _shards_over_workers(shard_op):
    """parallax.shard's, or a shard by create_num_shards_and_shard_id's count (both made in SCOPE): not a shard the
    user takes for another reason (ds.shard(10, 3), a tenth of the data)."""
    return any(_IN_SCOPE.search(name) for name in (shard_op.name, shard_op.inputs[1].op.name))


def _repeats_downstream(shard_op):
    """Whether a repeat() other than repeat(1) takes the shard's dataset, or a dataset made from it."""
    seen, todo = set(), [shard_op]
    while todo:
        op = todo.pop()
        for consumer in (c for t in op.outputs if t.dtype == tf.variant for c in t.consumers()):
            if consumer.type == "RepeatDataset" and tf.get_static_value(consumer.inputs[1]) != 1:
                return True
            if consumer.name not in seen:
                seen.add(consumer.name)
                todo.append(consumer)
    return False


def _examples_before(graph, shard_op):
    """The number of examples the shard's input dataset holds, where it is known without feeds; else None."""
    scratch = tf.Graph()
    try:
        with scratch.as_default():
            tf.graph_util.import_graph_def(shape_subgraph(graph, graph.as_graph_def(), [shard_op]), name="")
            count = tf.raw_ops.DatasetCardinality(input_dataset=scratch.get_tensor_by_name(shard_op.inputs[0].name))
        with tf.compat.v1.Session(graph=scratch) as session:
            examples = int(session.run(count))
    except (tf.errors.OpError, ValueError, KeyError, TypeError):
        return None
    return examples if examples >= 0 else None  # -1: infinite, -2: unknown


def repeated_shards(graph, num_workers):
    """((shard op, examples before it), ...) of each dataset shard that a repeat() follows, over a number of
    examples known to be no multiple of `num_workers`."""
    found = []
    for op in graph.get_operations():
        if op.type == "ShardDataset" and _shards_over_workers(op) and _repeats_downstream(op):
            examples = _examples_before(graph, op)
            if examples is not None and examples % num_workers:
                found.append((op.name, examples))
    return tuple(found)


def _repeat_text(found, n):
    shards = "; ".join(f"{name} splits {m} examples into shards of {m // n} and {m // n + 1}" for name, m in found)
    return (f"a dataset repeats after its shard, over a number of examples that is no multiple of the {n} workers "
            f"({shards}): from the second pass over the data on, each worker's batch is no longer its share of one "
            f"device's batch (every batch stays full, so nothing else tells); repeat() before the shard, or take a "
            f"multiple of {n} examples (ds.take(M - M % {n})) before it, or shard with parallax.shard(ds), which "
            f"cuts the stream after a repeat")
