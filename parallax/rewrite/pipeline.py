"""The pass pipeline. Each pass is a small function `pass(ctx) -> None` with a name and its own test; the list
below is the whole story of what happens to a user's graph."""
import dataclasses
import time
from typing import Any, Callable, Dict, List, Optional

import tensorflow as tf

from parallax.rewrite import fingerprint
from parallax.errors import UnsupportedError
from parallax.rewrite.basic_passes import add_initializers, add_saver, copy_graph
from parallax.rewrite.mpi_passes import allgather_sparse_gradients, allreduce_dense_gradients, broadcast_initial_values


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
    broadcast_op: Optional[tf.Operation] = None
    aggregated: Dict[str, Any] = dataclasses.field(default_factory=dict)  # part name -> aggregated gradient
    pass_seconds: Dict[str, float] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class RewrittenGraph:
    graph: tf.Graph
    init_op: tf.Operation
    local_init_op: tf.Operation
    saver: tf.compat.v1.train.Saver
    broadcast_op: Optional[tf.Operation]
    fingerprint: str
    pass_seconds: Dict[str, float]


def passes_for(plan) -> List[Callable[[RewriteContext], None]]:
    methods = {v.method for v in plan.variables}
    if methods <= {"LOCAL"}:
        return [copy_graph, add_initializers, add_saver]
    if methods <= {"AR", "AG"}:
        return [copy_graph, allreduce_dense_gradients, allgather_sparse_gradients, broadcast_initial_values,
                add_initializers, add_saver]
    raise UnsupportedError(f"run_option={plan.run_option} needs methods {sorted(methods - {'AR', 'AG', 'LOCAL'})}, "
                           f"which this version does not implement yet; use Config(run_option='MPI')")


def rewrite(source_graph, analysis, plan, config):
    ctx = RewriteContext(source_graph, analysis, plan, config)
    for p in passes_for(plan):
        start = time.perf_counter()
        p(ctx)
        ctx.pass_seconds[p.__name__] = time.perf_counter() - start
    return RewrittenGraph(ctx.graph, ctx.init_op, ctx.local_init_op, ctx.saver, ctx.broadcast_op,
                          fingerprint.graph_fingerprint(ctx.graph.as_graph_def()), ctx.pass_seconds)
