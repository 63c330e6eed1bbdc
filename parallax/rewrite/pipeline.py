"""The pass pipeline, as data. Each pass is a small function `run(ctx) -> None` with a declared contract:
- `applies(plan)`: whether the plan needs it (the plan decides; a pass never looks at the graph to find out);
- `requires`: facts an earlier pass must have provided;
- `after`: facts whose providers, if any apply, must all have run first (ordering without requiring);
- `provides`: facts it establishes, each checked in the context after it runs.
`passes_for(plan)` selects the passes and checks the order before anything is built; a broken contract is a
PipelineError naming both passes. PIPELINE below is the whole story of what happens to a user's graph.
"""
import dataclasses
import time
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Tuple

import tensorflow as tf

from parallax import collectives
from parallax.rules import example_counts
from parallax.rules.catalog import RULES
from parallax.rules.rule import RewriteSite
from parallax.errors import ParallaxError, PipelineError, RewritePassError
from parallax.plan.records import Aggregation
from parallax.plan.placement import OPAU, OPSW
from parallax.rewrite import fingerprint
from parallax.rewrite.basic_passes import add_initializers, add_saver, copy_graph, count_examples
from parallax.rewrite.collective_passes import (allgather_sparse_gradients, allreduce_dense_gradients,
                                                broadcast_initial_values)
from parallax.rewrite.placement_passes import place_boundary_ops, place_post_aggregation_ops
from parallax.rewrite.ps_passes import aggregate_on_servers, pin_ref_reads, place_variables_on_servers
from parallax.rewrite.sync_passes import prepare_sync_steps


@dataclasses.dataclass
class RewriteContext:
    source_graph: tf.Graph
    plan: Any
    config: Any
    graph: Optional[tf.Graph] = None
    init_op: Optional[tf.Operation] = None
    local_init_op: Optional[tf.Operation] = None
    saver: Optional[tf.compat.v1.train.Saver] = None
    ready_op: Optional[tf.Tensor] = None
    replica_init_op: Optional[tf.Operation] = None
    broadcast_op: Optional[tf.Operation] = None
    # gradient scope (or averaged state write) -> its aggregate
    aggregated: Dict[str, Any] = dataclasses.field(default_factory=dict)
    collectives: List[str] = dataclasses.field(default_factory=list)  # the collective ops every worker must run
    placements: Dict[str, List[Tuple[str, str]]] = dataclasses.field(default_factory=dict)  # pass -> (op, device)
    server_variables: Dict[str, str] = dataclasses.field(default_factory=dict)  # variable op -> server device
    devices: Dict[str, str] = dataclasses.field(default_factory=dict)  # op -> device the plan gives it
    aggregations: List[Any] = dataclasses.field(default_factory=list)  # ps_passes.AggregationRecord records
    sync: Any = None  # sync_passes.SyncGraph, with servers in sync mode
    collective_ops: Any = None  # the plan's backend (parallax/collectives), when it uses collectives
    pass_seconds: Dict[str, float] = dataclasses.field(default_factory=dict)
    worker_id: int = 0  # this process's worker: its share of the batch
    example_counts: Tuple[Tuple[str, str, str], ...] = ()  # (input op, its count in a run, their total)
    collective_group: int = 1  # the group key of TF's collectives (a thread job's servers outlive its jobs)

    def __post_init__(self):
        if self.collective_ops is None and self.plan.uses_collectives:
            self.collective_ops = collectives.ops_for(self.plan, self.collective_group)


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
    collectives: Tuple[str, ...] = ()  # collective ops (every worker runs them in a step that needs them)
    example_counts: Tuple[Tuple[str, str, str], ...] = ()  # (input op, its count in a run, their total)
    node_digests: Tuple[Tuple[str, str], ...] = ()  # (node, its digest by structure): the workers' graph check


@dataclasses.dataclass(frozen=True)
class Pass:
    run: Callable[[RewriteContext], None]
    applies: Callable[[Any], bool]
    requires: FrozenSet[str] = frozenset()
    after: FrozenSet[str] = frozenset()
    provides: FrozenSet[str] = frozenset()

    @property
    def name(self):
        return self.run.__name__


def _pass(run, applies, requires=(), after=(), provides=()):
    return Pass(run, applies, frozenset(requires), frozenset(after), frozenset(provides))


def _rule_pass(rule):
    """The pass that applies an equivalence rule (rules/rule.py) to the copy of the user's graph."""
    def run(ctx):
        rule.apply(RewriteSite(ctx.graph, ctx.plan, ctx.worker_id, ctx.collective_ops))
        if rule.uses_collectives:
            ctx.collectives += ctx.collective_ops.created()
    run.__name__ = run.__qualname__ = rule.name
    run.__doc__ = rule.doc
    provides = {rule.fact, "collectives"} if rule.uses_collectives else {rule.fact}
    return _pass(run, rule.applies, {"graph"}, provides=provides)


def _aggregates(*kinds):
    return lambda plan: bool(plan.aggregations & set(kinds))


def _servers_sync(plan):
    return plan.uses_servers and plan.sync


def _all_aggregated(ctx, *kinds):
    return all(g.scope in ctx.aggregated for v in ctx.plan.variables for g in v.gradients if g.aggregation in kinds)


# How each fact is checked once a pass claims it (torch.fx-style invariants after every pass).
FACTS = {
    "graph": lambda ctx: ctx.graph is not None,
    "server_placement": lambda ctx: bool(ctx.server_variables),
    "allreduced": lambda ctx: _all_aggregated(ctx, Aggregation.ALLREDUCE),
    "allgathered": lambda ctx: _all_aggregated(ctx, Aggregation.ALLGATHER),
    "server_aggregated": lambda ctx: _all_aggregated(ctx, Aggregation.ACCUMULATOR, Aggregation.ROW_QUEUES),
    "collectives": lambda ctx: bool(ctx.collectives),
    "placements": lambda ctx: True,
    "sync_steps": lambda ctx: ctx.sync is not None,
    "broadcast": lambda ctx: ctx.broadcast_op is not None,
    "initializers": lambda ctx: ctx.init_op is not None and ctx.local_init_op is not None,
    "saver": lambda ctx: ctx.saver is not None,
    "examples_counted": lambda ctx: example_counts.is_counted(ctx.graph, ctx.example_counts),
    **{rule.fact: (lambda ctx, rule=rule: rule.holds(ctx.graph, ctx.plan)) for rule in RULES},
}

AGGREGATED = {"allreduced", "allgathered", "server_aggregated"}
PIPELINE = (
    _pass(copy_graph, lambda plan: True, provides={"graph"}),
    *(_rule_pass(rule) for rule in RULES),
    _pass(place_variables_on_servers, lambda plan: plan.uses_servers, {"graph"}, provides={"server_placement"}),
    _pass(pin_ref_reads, lambda plan: plan.uses_servers, {"server_placement"}),
    _pass(allreduce_dense_gradients, _aggregates(Aggregation.ALLREDUCE), {"graph"},
          provides={"allreduced", "collectives"}),
    _pass(allgather_sparse_gradients, _aggregates(Aggregation.ALLGATHER), {"graph"},
          provides={"allgathered", "collectives"}),
    _pass(aggregate_on_servers, _servers_sync, {"server_placement"}, provides={"server_aggregated"}),
    _pass(place_post_aggregation_ops, lambda plan: bool(plan.placed(OPAU)), {"server_placement"},
          after=AGGREGATED, provides={"placements"}),
    _pass(place_boundary_ops, lambda plan: bool(plan.placed(OPSW)), {"server_placement"},
          after=AGGREGATED, provides={"placements"}),
    # The sync step must see every aggregation, every collective and every op's final device.
    _pass(prepare_sync_steps, _servers_sync, {"server_placement", "server_aggregated"},
          after={*AGGREGATED, "collectives", "placements"}, provides={"sync_steps"}),
    _pass(broadcast_initial_values, lambda plan: plan.uses_collectives, {"graph"},
          after={"server_placement", "sync_steps"}, provides={"broadcast"}),
    # The counts are read beside a step: no pass places, reroutes or synchronizes them. Their counters are local
    # variables, which the initializers cover.
    _pass(count_examples, lambda plan: plan.num_workers > 1 and plan.sync, {"graph"},
          after={"server_placement", "placements", "sync_steps", "broadcast"}, provides={"examples_counted"}),
    # Initializers cover every variable, and tell the server-held ones (the chief's) from the replicas.
    _pass(add_initializers, lambda plan: True, {"graph"}, after={"server_placement", "broadcast", "sync_steps"},
          provides={"initializers"}),
    _pass(add_saver, lambda plan: True, {"initializers"}),
)


def passes_for(plan, pipeline=PIPELINE) -> List[Pass]:
    """The passes the plan needs, in pipeline order, with their contracts checked."""
    chosen = [p for p in pipeline if p.applies(plan)]
    check_order(chosen)
    return chosen


def check_order(passes):
    provided_by = {}
    for i, p in enumerate(passes):
        for fact in sorted(p.requires):
            if fact not in provided_by:
                later = next((q.name for q in passes[i + 1:] if fact in q.provides), None)
                raise PipelineError(f"pass {p.name} requires {fact!r}, but " +
                                    (f"pass {later} provides it only later" if later else
                                     "no pass before it provides it"))
        for fact in sorted(p.after):
            later = next((q.name for q in passes[i + 1:] if fact in q.provides), None)
            if later:
                raise PipelineError(f"pass {p.name} must run after every pass that provides {fact!r}, but pass "
                                    f"{later} comes later")
        for fact in p.provides:
            provided_by.setdefault(fact, p.name)


def _run_pass(p, ctx):
    """Run one pass; an exception that is no ParallaxError (which says what to fix) is wrapped with its name."""
    try:
        p.run(ctx)
    except ParallaxError:
        raise
    except Exception as e:  # noqa: BLE001  re-raised, named
        raise RewritePassError(f"rewrite pass {p.name} failed: {type(e).__name__}: {e}. This is a parallax bug: "
                               f"please report it with the traceback PARALLAX_TRACEBACK=1 prints") from e


def rewrite(source_graph, plan, config, pipeline=PIPELINE, worker_id=0, collective_group=1):
    """Run the plan's passes on a copy of `source_graph`, for worker `worker_id`; TF's collectives, if any, in
    group `collective_group`."""
    ctx = RewriteContext(source_graph, plan, config, worker_id=worker_id, collective_group=collective_group)
    for p in passes_for(plan, pipeline):
        start = time.perf_counter()
        _run_pass(p, ctx)
        ctx.pass_seconds[p.name] = time.perf_counter() - start
        broken = sorted(f for f in p.provides if not FACTS[f](ctx))
        if broken:
            raise PipelineError(f"pass {p.name} did not establish {broken}")
    digests = tuple(fingerprint.node_digests(ctx.graph.as_graph_def()))
    return RewrittenGraph(ctx.graph, ctx.init_op, ctx.local_init_op, ctx.saver, ctx.ready_op, ctx.replica_init_op,
                          ctx.broadcast_op, ctx.sync, ctx.placements, fingerprint.graph_fingerprint(None, digests),
                          ctx.pass_seconds, tuple(ctx.collectives), ctx.example_counts, digests)
