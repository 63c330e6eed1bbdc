"""Placement optimizations. OPAU: where the ops between aggregated gradients and their updates run. OPSW (below):
light ops at the worker/server boundary.

The paper's rule, applied in topological order to the ops on a path from an aggregated gradient (an
accumulator's take, a collective's result) to an update:
- inputs that are scalars or tiny do not count, unless all of an op's inputs are tiny;
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
    for op in graph_utils.topological(region):
        inputs = _deciding_processes(op, where)
        if _is_tied(op) or not inputs:
            # TF places an op on a variable's handle (or colocated with it) with that variable; an op with only
            # tiny inputs from elsewhere has no reason to move.
            where[op] = _side(op)
            continue
        where[op] = _decide(inputs)
        device = "" if where[op] == WORKER else ps_device(0) if where[op] == SHARED else where[op]
        if op.device != device:
            _move(op, device)
            placed.append((op.name, device or WORKER))


def _deciding_processes(op, where):
    """The processes whose inputs decide where `op` runs: those of its inputs that are not tiny. An op whose inputs
    are all tiny (the sum of norms in a global norm) is decided by those of its tiny inputs that come from the
    region: a scalar scale next to a server's aggregated rows must not pull the rows to another process."""
    big = {where.get(t.op, _process_of(t.op)) for t in op.inputs if not _is_small(t)}
    return big or {where[t.op] for t in op.inputs if t.op in where}


def _decide(inputs):
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
    out = [g.get_operation_by_name(o) for a in ctx.aggregations for o in a.outputs]  # the servers' takes
    out += [op for op in g.get_operations() if op.type in ("HorovodAllreduce", "HorovodAllgather")]
    return out


# ---- boundary-op placement (OPSW) ----------------------------------------------------------------------------
LIGHT_OPS = {"Cast", "Slice", "StridedSlice", "Gather", "GatherV2", "L2Loss", "Size", "Shape", "Reshape", "Squeeze",
             "ExpandDims", "Identity"}


def place_boundary_ops(ctx):
    """Light ops next to a worker/server boundary move to the other side when fewer bytes then cross it, judged
    from static shapes and dtypes (a Cast to float16 of a server variable moves onto the server, halving what is
    sent). Ops with unknown shapes, heavy ops, and ops a variable's update needs in place never move."""
    g = ctx.graph
    pinned = {n for v in ctx.analysis.variables for n in v.update_ops}
    placed = ctx.placements.setdefault("place_boundary_ops", [])
    for op in g.get_operations():
        if op.type not in LIGHT_OPS or op.name in pinned or op.name.startswith("parallax_") or _is_tied(op):
            continue
        here = _side(op)
        sides = {_side(t.op) for t in op.inputs} | {_side(c) for t in op.outputs for c in t.consumers()}
        for there in sorted(sides - {here}):
            now, then = _crossing(op, here), _crossing(op, there)
            if now is not None and then is not None and then < now:
                _move(op, "" if there == WORKER else there)
                placed.append((op.name, there))
                break


def _side(op):
    """Where an op runs: its device; for an op on a variable (handle or ref) or colocated with one, the variable's
    device; else a worker."""
    if op.device:
        return _process_of(op)
    for t in op.inputs:
        if (t.dtype.name == "resource" or t.dtype._is_ref_dtype) and t.op.device:
            return _process_of(t.op)
    target = graph_utils.colocation_target(op)
    if target is not None:
        return _process_of(op.graph.get_operation_by_name(target))
    return WORKER


def _is_tied(op):
    """Ops TF places with a variable (they read its handle or ref, or are colocated with it) cannot move."""
    target = graph_utils.colocation_target(op)
    if target is not None and op.graph.get_operation_by_name(target).type in graph_utils.VARIABLE_OP_TYPES:
        return True
    return any(t.dtype.name == "resource" or t.dtype._is_ref_dtype for t in op.inputs)


def _move(op, device):
    """Set the device. A colocation hint with another op goes: TF would otherwise drag that op along (global_norm
    colocates each L2Loss with its raw gradient, whose input the rewrite has replaced)."""
    if graph_utils.colocation_target(op) is not None:
        op._clear_attr("_class")
    op._set_device(device)


def _crossing(op, side):
    """Bytes that cross between processes for `op`'s inputs and outputs if it ran on `side`; None if unknown."""
    total = 0
    for t in op.inputs:
        if _side(t.op) != side:
            n = _bytes(t)
            if n is None:
                return None
            total += n
    for t in op.outputs:
        if any(_side(c) != side for c in t.consumers()):
            n = _bytes(t)
            if n is None:
                return None
            total += n
    return total


def _bytes(t):
    n = t.shape.num_elements()
    return None if n is None else n * t.dtype.size
