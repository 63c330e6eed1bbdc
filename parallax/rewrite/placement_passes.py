"""Placement optimizations: where the ops between aggregated gradients and their updates run (OPAU).

The paper's rule, applied in topological order to the ops on a path from an aggregated gradient (an
accumulator's take, a collective's result) to an update:
- an op whose data inputs all come from one process runs in that process;
- an op with one shared input and inputs from one other process runs with those (the clip itself);
- any other op with inputs from several processes is shared (the global norm of a clip_by_global_norm), and runs
  on server 0.
Processes are parameter-server tasks or "the worker" (whichever worker runs the op). Nothing changes numerically:
only devices are set, and every device runs the same kernels.
"""
from parallax import graph_utils
from parallax.rewrite.ps_passes import ps_device

WORKER = "worker"
SHARED = "shared"
SMALL_ELEMENTS = 16


def place_post_aggregation_ops(ctx):
    g = ctx.graph
    sources = _aggregation_outputs(ctx)
    updates = {g.get_operation_by_name(n) for v in ctx.analysis.trained_variables for n in v.update_ops}
    region = (graph_utils.descendants(sources) & graph_utils.ancestors(updates)) - updates - set(sources)
    where = {op: _process_of(op) for op in sources}
    placed = ctx.placements.setdefault("place_post_aggregation_ops", [])
    for op in _topological(region):
        inputs = {where.get(t.op, _process_of(t.op)) for t in op.inputs if t.op in where or not _is_small(t)}
        where[op] = _decide(inputs)
        device = "" if where[op] == WORKER else ps_device(0) if where[op] == SHARED else where[op]
        if op.device != device:
            op._set_device(device)
            placed.append((op.name, device or WORKER))


def _decide(inputs):
    inputs = inputs or {WORKER}
    if len(inputs) == 1:
        return next(iter(inputs))
    others = inputs - {SHARED}
    if SHARED in inputs and len(others) == 1:
        return next(iter(others))
    return SHARED


def _process_of(op):
    return op.device if op.device.startswith("/job:ps") else WORKER


def _is_small(t):
    """Inputs from outside the region that are scalars or tiny (clip_norm, a learning rate, shapes) do not tie an
    op to the process that makes them: sending them costs nothing."""
    n = t.shape.num_elements()
    return n is not None and n <= SMALL_ELEMENTS


def _aggregation_outputs(ctx):
    g = ctx.graph
    out = [take for _, take in ctx.accumulators]
    out += [op for op in g.get_operations() if op.type in ("HorovodAllreduce", "HorovodAllgather")]
    return out


def _topological(ops):
    ops = set(ops)
    order, seen = [], set()

    def visit(op):
        stack = [(op, False)]
        while stack:
            node, done = stack.pop()
            if done:
                order.append(node)
                continue
            if node in seen:
                continue
            seen.add(node)
            stack.append((node, True))
            stack.extend((t.op, False) for t in node.inputs if t.op in ops and t.op not in seen)
    for op in sorted(ops, key=lambda o: o.name):
        visit(op)
    return order
