"""Whether the workers read their own shares of a dataset, or each the whole of it.

A dataset the workers read without `parallax.shard` (or `ds.shard`, or a filter on the shard id of
`create_num_shards_and_shard_id`) gives every worker the same batches, in the same order: N copies of one device
with batch b, not one device with batch N*b (and, for a summed loss, N times its gradient). Nothing in the rewrite
can tell that from a share, so the planner looks at the graph: a worker reads batches from an iterator, and no
op in the graph or in its datasets' functions shards a dataset. A pipeline that runs Python (from_generator, a
py_func) may share the examples out itself, and is not judged.
"""
from parallax.batch_draws import node_types
from parallax.batch_shapes import per_worker_inputs
from parallax.shard import SHARD_ID

ITERATOR_READS = {"IteratorGetNext", "IteratorGetNextSync", "IteratorGetNextAsOptional"}
SHARDS_OR_PYTHON = {"ShardDataset", "GeneratorDataset", "PyFunc", "PyFuncStateless", "EagerPyFunc"}


def unsharded(graph):
    """The per-worker inputs read from an iterator (tensor names), where nothing in the graph shards a dataset;
    () otherwise. A pipeline shards itself by the shard id that create_num_shards_and_shard_id records."""
    if graph.get_collection(SHARD_ID):
        return ()
    read = sorted(t.name for t in per_worker_inputs(graph) if t.op.type in ITERATOR_READS)
    if not read or node_types(graph.as_graph_def()) & SHARDS_OR_PYTHON:
        return ()
    return tuple(read)


def note(plan):
    return (f"the workers read {', '.join(plan.unsharded_inputs)} from a dataset that nothing in the graph shards: "
            f"every worker reads the same batches, which is {plan.num_workers} copies of one device with batch b, "
            f"not one device with batch {plan.num_workers}*b; shard it element-wise before batching: "
            f"parallax.shard(ds).batch(b)")
