"""The pass pipeline. Each pass is a small function `pass(ctx) -> None` with a name and its own test; the list
below is the whole story of what happens to a user's graph."""
import dataclasses
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import tensorflow as tf

from parallax.rewrite import fingerprint
from parallax.errors import UnsupportedError
from parallax.rewrite.basic_passes import add_initializers, add_saver, copy_graph
from parallax.rewrite.mpi_passes import allgather_sparse_gradients, allreduce_dense_gradients, broadcast_initial_values
from parallax.rewrite.placement_passes import place_boundary_ops, place_post_aggregation_ops
from parallax.rewrite.ps_passes import aggregate_on_servers, pin_ref_reads, place_variables_on_servers
from parallax.rewrite.sync_passes import prepare_sync_steps


@dataclasses.dataclass
class RewriteContext:
    source_graph: tf.Graph
    analysis: Any
    plan: Any
    config: Any
    graph: Optional[tf.Graph] = None
    init_op: Optional[tf.Operation] = None
    local_init_op: Optional[tf.Operation] = None
    saver: Optional[tf.compat.v1.train.Saver] = None
    ready_op: Optional[tf.Tensor] = None
    replica_init_op: Optional[tf.Operation] = None
    broadcast_op: Optional[tf.Operation] = None
    aggregated: Dict[str, Any] = dataclasses.field(default_factory=dict)  # gradient scope -> aggregated gradient
    placements: Dict[str, List[Tuple[str, str]]] = dataclasses.field(default_factory=dict)  # pass -> (op, device)
    server_variables: Dict[str, str] = dataclasses.field(default_factory=dict)  # variable op -> server device
    aggregations: List[Any] = dataclasses.field(default_factory=list)  # ps_passes.Aggregation records
    sync: Any = None  # sync_passes.SyncGraph, with servers in sync mode
    pass_seconds: Dict[str, float] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class RewrittenGraph:
    graph: tf.Graph
    init_op: tf.Operation
    local_init_op: tf.Operation
    saver: tf.compat.v1.train.Saver
    ready_op: Optional[tf.Tensor]  # with servers: names of uninitialized server variables (empty once chief is done)
    replica_init_op: Optional[tf.Operation]  # with servers: initializes the variables every worker holds
    broadcast_op: Optional[tf.Operation]
    sync: Any  # sync_passes.SyncGraph: how any fetch becomes a synchronized step (None without servers or async)
    placements: Dict[str, List[Tuple[str, str]]]  # placement pass -> the (op, device) pairs it set
    fingerprint: str
    pass_seconds: Dict[str, float]


def passes_for(plan) -> List[Callable[[RewriteContext], None]]:
    methods = {v.method for v in plan.variables}
    if methods <= {"LOCAL"}:
        return [copy_graph, add_initializers, add_saver]
    if methods <= {"AR", "AG"}:
        return [copy_graph, allreduce_dense_gradients, allgather_sparse_gradients, broadcast_initial_values,
                add_initializers, add_saver]
    opau = [place_post_aggregation_ops] if plan.place_post_aggregation_ops else []
    opsw = [place_boundary_ops] if plan.place_boundary_ops else []
    if methods == {"PS"}:
        sync = [aggregate_on_servers, *opau, *opsw, prepare_sync_steps] if plan.sync else [*opsw]
        return [copy_graph, place_variables_on_servers, pin_ref_reads, *sync, add_initializers, add_saver]
    if methods == {"AR", "PS"}:
        if not plan.sync:
            raise UnsupportedError("HYBRID runs synchronously (its allreduce is a collective of all workers); "
                                   "use Config(run_option='PS', sync=False) for asynchronous training")
        return [copy_graph, place_variables_on_servers, pin_ref_reads, allreduce_dense_gradients,
                aggregate_on_servers, *opau, *opsw, prepare_sync_steps, broadcast_initial_values, add_initializers,
                add_saver]
    raise UnsupportedError(f"run_option={plan.run_option} mixes methods {sorted(methods)}, which this version "
                           f"does not implement")


def rewrite(source_graph, analysis, plan, config):
    ctx = RewriteContext(source_graph, analysis, plan, config)
    for p in passes_for(plan):
        start = time.perf_counter()
        p(ctx)
        ctx.pass_seconds[p.__name__] = time.perf_counter() - start
    return RewrittenGraph(ctx.graph, ctx.init_op, ctx.local_init_op, ctx.saver, ctx.ready_op, ctx.replica_init_op,
                          ctx.broadcast_op,
                          ctx.sync, ctx.placements,
                          fingerprint.graph_fingerprint(ctx.graph.as_graph_def()), ctx.pass_seconds)
