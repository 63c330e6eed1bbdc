"""The sync cut, decided on the user's graph: the chief-only values the chief broadcasts to every worker in a
synchronized step with servers (rewrite/sync_passes.py). Only the chief takes the servers' aggregates and writes
server state; where work every worker must do (its own writes, its contributions, the collectives) reads a value
computed from those, the chief sends that value. Which values: the fewest bytes that separate the aggregates from
that work (one clip scale rather than each shard's norm), a minimum vertex cut (core/min_cut.py).

The step is read as the rewrite will leave it: each aggregated tensor (a server variable's raw gradient, an
averaged state write's value) becomes an aggregate that its readers read instead, while the raw tensor goes only
to the worker's contribution; a replicated gradient reaches its readers through a collective. Values of unknown
shape, or computed after the step's writes of server state, cannot be sent."""
import dataclasses
from typing import Dict, Set

from parallax.core import graph_utils, min_cut
from parallax.plan.placement import server_devices
from parallax.plan.records import Aggregation, SyncBroadcast

SERVER_AGGREGATIONS = (Aggregation.ACCUMULATOR, Aggregation.ROW_QUEUES)


@dataclasses.dataclass
class StepGraph:
    """The data edges of a synchronized step as the rewrite makes it. Nodes are op names, and for what the rewrite
    adds: ("aggregate", its scope), ("contribute", raw tensor), ("collective", raw tensor)."""
    readers: Dict = dataclasses.field(default_factory=dict)  # node -> nodes that read its outputs
    bytes: Dict = dataclasses.field(default_factory=dict)  # node -> bytes of its one output (None: not sendable)
    roots: Set = dataclasses.field(default_factory=set)  # what only the chief runs first: aggregates, server writes
    everyone: Set = dataclasses.field(default_factory=set)  # what every worker must run

    def edge(self, a, b):
        self.readers.setdefault(a, []).append(b)
        self.readers.setdefault(b, [])


def decide_sync_cut(graph, plan):
    """The plan's SyncBroadcasts, in name order; () without servers in sync mode."""
    if not (plan.uses_servers and plan.sync):
        return ()
    step = step_graph(graph, plan)
    data_after = _reached(step.roots, step.readers)
    writers = _inverse(step.readers)
    region = data_after & _reached(step.everyone, writers)
    if not region & step.everyone:
        return ()
    nodes = sorted(region, key=_key)
    edges = [(a, b) for b in nodes for a in writers.get(b, ()) if a in region]

    def cost(node):
        size = step.bytes.get(node)
        return min_cut.INFINITE if node in step.everyone or size is None else size
    cut = min_cut.min_vertex_cut(nodes, edges, [n for n in nodes if n in step.roots],
                                 [n for n in nodes if n in step.everyone], cost) or ()
    return tuple(SyncBroadcast("", n[1]) if isinstance(n, tuple) else SyncBroadcast(_output(graph, n), "")
                 for n in cut)


def step_graph(graph, plan):
    """The StepGraph of `graph`'s training steps under `plan` (servers, sync)."""
    devices, _ = server_devices(graph, plan)
    on_servers = {name for name in devices if graph.get_operation_by_name(name).type in graph_utils.VARIABLE_OP_TYPES}
    aggregated, replicated = _aggregated_tensors(graph, plan)
    step = StepGraph()
    gated = []
    for op in graph.get_operations():
        step.readers.setdefault(op.name, [])
        step.bytes[op.name] = _bytes(op)
        for t in op.inputs:
            if t.name in aggregated:
                step.edge(("aggregate", aggregated[t.name][0]), op.name)
            elif t.name in replicated:
                step.edge(("collective", t.name), op.name)
            else:
                step.edge(t.op.name, op.name)
    for op in graph_utils.step_writes(graph):
        if any(v in on_servers for v in graph_utils.written_variables(op)):
            gated.append(op)  # only the chief writes server state, after every worker's arrival
        else:
            step.everyone.add(op.name)  # every worker writes its own replicas and local state
    for name, (scope, sendable) in aggregated.items():
        t = graph.get_tensor_by_name(name)
        step.edge(t.op.name, ("contribute", name))
        step.everyone.add(("contribute", name))
        step.roots.add(("aggregate", scope))
        step.bytes[("aggregate", scope)] = _tensor_bytes(t) if sendable else None
    for name in replicated:
        step.edge(graph.get_tensor_by_name(name).op.name, ("collective", name))
        step.everyone.add(("collective", name))
    step.roots |= {op.name for op in gated}
    for op in graph_utils.descendants(gated):  # computed after the step's writes of server state
        step.bytes[op.name] = None
    return step


def _aggregated_tensors(graph, plan):
    """({raw tensor the servers aggregate: (the aggregation's scope, whether its aggregate is one tensor of static
    shape)}, {raw tensor a collective aggregates}). A scope is the gradient's, or the name of the averaged state
    write whose value it aggregates (rewrite/ps_passes.py names them so)."""
    aggregated, replicated = {}, set()
    for v in plan.variables:
        for g in v.gradients:
            names = [g.values] + ([g.indices] if g.indices else [])
            if g.aggregation in SERVER_AGGREGATIONS:
                # an accumulator's take is one tensor; rows from queues are concatenated, of unknown length
                aggregated.update({name: (g.scope, g.aggregation == Aggregation.ACCUMULATOR) for name in names})
            elif g.aggregation != Aggregation.NONE:
                replicated.update(names)
    for s in plan.state:
        if s.aggregate:  # averaged state: the value each of its writes writes goes through an accumulator
            aggregated.update({graph.get_operation_by_name(w).inputs[1].name: (w, True) for w in s.written_by})
    return aggregated, replicated


def _bytes(op):
    return _tensor_bytes(op.outputs[0]) if len(op.outputs) == 1 else None


def _tensor_bytes(t):
    return t.shape.num_elements() * t.dtype.size if t.shape.is_fully_defined() else None


def _output(graph, name):
    return graph.get_operation_by_name(name).outputs[0].name


def _reached(starts, neighbours):
    return graph_utils.closure(starts, lambda node: neighbours.get(node, ()))


def _inverse(readers):
    writers = {}
    for a, bs in readers.items():
        for b in bs:
            writers.setdefault(b, []).append(a)
    return writers


def _key(node):
    return node if isinstance(node, str) else f"{node[1]} ({node[0]})"
