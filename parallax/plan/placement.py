"""Where ops run, decided from the user's graph and the plan before any rewrite: the servers' own ops
(`server_devices`), and the two placement optimizations (`decide_placements`):

OPAU (post-aggregation ops). The paper's rule, applied in topological order to the ops on a path from an aggregated
gradient to an update:
- inputs that are scalars or tiny do not count, unless all of an op's inputs are tiny;
- an op whose data inputs all come from one process runs in that process;
- an op with one shared input and inputs from one other process runs with those (the clip itself);
- any other op with inputs from several processes is shared (the global norm of a clip_by_global_norm), and runs
  on server 0.
OPSW (boundary ops). Light ops next to a worker/server boundary move to the other side when fewer bytes then cross
it, judged from static shapes and dtypes (a Cast to float16 of a server variable moves onto the server, halving
what is sent). Ops with unknown shapes, heavy ops, and ops a variable's update needs in place never move.

Processes are parameter-server devices or "the worker" (whichever worker runs the op). The graph is read as the
rewrite will make it: an aggregated gradient comes from where the plan aggregates it (its part's server, or the
worker for a collective), and that is also where its raw value goes. Nothing changes numerically: only devices are
set, and every device runs the same kernels.
"""
from parallax.core import graph_utils
from parallax.plan.records import WORKER_DEVICE, Aggregation, Method, ps_device

OPAU = "place_post_aggregation_ops"
OPSW = "place_boundary_ops"
WORKER = "worker"
SHARED = "shared"
SMALL_ELEMENTS = 16
LIGHT_OPS = {"Cast", "Slice", "StridedSlice", "Gather", "GatherV2", "L2Loss", "Size", "Shape", "Reshape", "Squeeze",
             "ExpandDims", "Identity"}


def server_devices(graph, plan):
    """({op name: server device}, {op names that leave their colocation group}) for every op the plan puts on a
    server: each part, its slots and updates, state on a server, and the ops colocated with any of them. State that
    TF colocated with a variable held elsewhere (Adam's beta powers with a replicated variable) leaves that
    colocation group, together with the ops there that use it (its initializer). So does the step's own state
    colocated with anything, and every op that passes its handle on (graph_utils.carries_step_state): it runs on
    the worker."""
    device_of = {}
    update_devices = {}
    for part in plan.parts:
        if part.ps_task is not None:
            for name in (part.name, *part.slots):
                device_of[name] = part.device
        for name in part.update_ops:
            update_devices.setdefault(name, set()).add(part.device)
    # An update of parts on several servers (a v2 cond's If around apply_gradients) is pinned to none of them:
    # TF places the ops inside it beside the variables each one takes.
    device_of.update({name: next(iter(d)) for name, d in update_devices.items()
                      if len(d) == 1 and next(iter(d)) != WORKER_DEVICE})
    for s in plan.state:
        if s.ps_task is not None:
            device_of[s.name] = s.device
    leaving = {s.name: s.colocated_with for s in plan.state
               if s.ps_task is not None and s.colocated_with is not None and device_of.get(s.colocated_with) !=
               s.device}
    devices, left = {}, set()
    for op in graph.get_operations():
        target = graph_utils.colocation_target(op)
        if target is not None and graph_utils.carries_step_state(op):
            left.add(op.name)  # the step's own state stays on the worker, whatever it was colocated with
            continue
        owner = next((name for name, group in leaving.items() if target == group and
                      (op.name == name or any(t.op.name == name for t in op.inputs))), None)
        if owner is not None:
            left.add(op.name)
            devices[op.name] = device_of[owner]
            continue
        device = device_of.get(op.name) or device_of.get(target or "")
        if device is not None:
            devices[op.name] = device
    return devices, left


class _View:
    """The graph as the rewrite will leave it, for deciding: each op's process, and the aggregated gradients' ends."""

    def __init__(self, graph, plan):
        self.graph = graph
        self.device, self.left = server_devices(graph, plan)  # op name -> device where it differs (placements add
        # to it); ops that leave their colocation group
        self.aggregated = {}  # gradient tensor -> the process its aggregate comes from
        self.raw_to = {}  # gradient tensor -> the process its raw value goes to (the contribution's side)
        for v in plan.variables:
            for part in v.parts:
                for g in part.gradients:
                    if g.aggregation == Aggregation.NONE:
                        continue
                    collective = g.aggregation in (Aggregation.ALLREDUCE, Aggregation.ALLGATHER)
                    held = v.local_aggregation and g.aggregation == Aggregation.ROW_QUEUES  # via the host's holder
                    for name in (g.values, g.indices):
                        if name:
                            t = graph.get_tensor_by_name(name)
                            self.aggregated[t] = WORKER if collective else part.device
                            self.raw_to[t] = WORKER if collective or held else part.device

    def device_of(self, op):
        return self.device.get(op.name, op.device)

    def process(self, op):
        device = self.device_of(op)
        return device if device.startswith("/job:ps") else WORKER

    def side(self, op):
        """Where an op runs: its device; for an op on a variable (handle or ref) or colocated with one, the
        variable's device; else a worker."""
        if self.device_of(op):
            return self.process(op)
        for t in op.inputs:
            if (t.dtype.name == "resource" or t.dtype._is_ref_dtype) and self.device_of(t.op):
                return self.process(t.op)
        target = graph_utils.colocation_target(op)
        if target is not None and op.name not in self.left:
            return self.process(self.graph.get_operation_by_name(target))
        return WORKER

    def input_side(self, t):
        return self.aggregated[t] if t in self.aggregated else self.side(t.op)

    def consumer_sides(self, t):
        if t in self.raw_to:
            return {self.raw_to[t]}
        return {self.side(c) for c in t.consumers()}

    def move(self, op, device):
        self.device[op.name] = device


def decide_placements(graph, plan):
    """((pass name, ((op, device), ...)), ...) for the placement optimizations the plan enables, in name order."""
    view = _View(graph, plan)
    out = []
    if plan.place_post_aggregation_ops and view.aggregated:
        out.append((OPAU, tuple(_post_aggregation(view, plan))))
    if plan.place_boundary_ops:
        out.append((OPSW, tuple(_boundary(view, plan))))
    return tuple(sorted(out))


def _post_aggregation(view, plan):
    g = view.graph
    updates = {g.get_operation_by_name(n) for n in plan.update_ops}
    starts = {c for t in view.aggregated for c in t.consumers()}
    region = (graph_utils.descendants(starts) & graph_utils.ancestors(updates)) - updates
    where = {}
    placed = []
    for op in graph_utils.topological(region):
        inputs = _deciding_processes(view, op, where)
        if _is_tied(view, op) or not inputs:
            # TF places an op on a variable's handle (or colocated with it) with that variable; an op with only
            # tiny inputs from elsewhere has no reason to move.
            where[op] = view.side(op)
            continue
        where[op] = _decide(inputs)
        device = WORKER_DEVICE if where[op] == WORKER else ps_device(0) if where[op] == SHARED else where[op]
        if view.device_of(op) != device:
            view.move(op, device)
            placed.append((op.name, device))
    return placed


def _deciding_processes(view, op, where):
    """The processes whose inputs decide where `op` runs: those of its inputs that are not tiny. An op whose inputs
    are all tiny (the sum of norms in a global norm) is decided by those of its tiny inputs that come from the
    region: a scalar scale next to a server's aggregated rows must not pull the rows to another process."""
    big = {_from(view, t, where) for t in op.inputs if not _is_small(t)}
    return big or {_from(view, t, where) for t in op.inputs if t.op in where or t in view.aggregated}


def _from(view, t, where):
    if t in view.aggregated:
        return view.aggregated[t]
    return where[t.op] if t.op in where else view.process(t.op)


def _decide(inputs):
    if len(inputs) == 1:
        return next(iter(inputs))
    others = inputs - {SHARED}
    if SHARED in inputs and len(others) == 1:
        return next(iter(others))
    return SHARED


def _is_small(t):
    """Inputs from outside the region that are scalars or tiny (clip_norm, a learning rate, shapes) do not tie an
    op to the process that makes them: sending them costs nothing."""
    n = t.shape.num_elements()
    return n is not None and n <= SMALL_ELEMENTS


def _boundary(view, plan):
    pinned = set(plan.update_ops)
    placed = []
    for op in view.graph.get_operations():
        if op.type not in LIGHT_OPS or op.name in pinned or _is_tied(view, op):
            continue
        here = view.side(op)
        sides = {view.input_side(t) for t in op.inputs} | {s for t in op.outputs for s in view.consumer_sides(t)}
        for there in sorted(sides - {here}):
            now, then = _crossing(view, op, here), _crossing(view, op, there)
            if now is not None and then is not None and then < now:
                device = WORKER_DEVICE if there == WORKER else there
                view.move(op, device)
                placed.append((op.name, device))
                break
    return placed


def _is_tied(view, op):
    """Ops TF places with a variable (they read its handle or ref, or are colocated with it) cannot move."""
    target = graph_utils.colocation_target(op)
    if target is not None and view.graph.get_operation_by_name(target).type in graph_utils.VARIABLE_OP_TYPES:
        return True
    return any(t.dtype.name == "resource" or t.dtype._is_ref_dtype for t in op.inputs)


def _crossing(view, op, side):
    """Bytes that cross between processes for `op`'s inputs and outputs if it ran on `side`; None if unknown."""
    total = 0
    for t in op.inputs:
        if view.input_side(t) != side:
            n = _bytes(t)
            if n is None:
                return None
            total += n
    for t in op.outputs:
        if any(s != side for s in view.consumer_sides(t)):
            n = _bytes(t)
            if n is None:
                return None
            total += n
    return total


def _bytes(t):
    n = t.shape.num_elements()
    return None if n is None else n * t.dtype.size


def server_reads(graph, plan):
    """{dense variable or state held on servers: (tensors, bytes)} its servers send a worker in one training step,
    read off the graph as the rewrite will leave it (the placements applied). Each read that a worker consumes is
    its own transfer: a variable read twice (forward, and a weight decay) is sent twice; a light op the placement
    moved onto the server sends its output instead (an L2Loss: a scalar). bytes is None when a crossing tensor's
    shape is not static. The step is what the updates need (the ancestors of the update ops): a read that only a
    fetched loss needs is not counted, and a read inside a loop counts once. The cost model charges these rather
    than one copy per variable."""
    view = _View(graph, plan)
    for _, moves in decide_placements(graph, plan):
        for name, device in moves:
            view.move(graph.get_operation_by_name(name), device)
    step = graph_utils.ancestors([graph.get_operation_by_name(n) for n in plan.update_ops])
    held = [(v.name, [(p.name, p.device) for p in v.parts]) for v in plan.variables
            if v.kind == "dense" and v.method == Method.PS]
    held += [(s.name, [(s.name, s.device)]) for s in plan.state if s.ps_task is not None]
    out = {}
    for name, parts in held:
        tensors, nbytes = 0, 0
        for op_name, device in parts:
            crossing = _crossing_from(view, graph.get_operation_by_name(op_name), device, step)
            tensors += len(crossing)
            sizes = [_bytes(t) for t in crossing]
            nbytes = None if nbytes is None or None in sizes else nbytes + sum(sizes)
        out[name] = (tensors, nbytes)
    return out


def _crossing_from(view, variable_op, device, step):
    """The tensors of the ops on `device` that hang off `variable_op` (its reads, and what runs there on them)
    which ops of the step on a worker consume."""
    region, todo, crossing = {variable_op}, [variable_op], set()
    while todo:
        op = todo.pop()
        for t in op.outputs:
            for c in t.consumers():
                if c not in step or c in region:
                    continue
                if view.side(c) == device:
                    region.add(c)
                    todo.append(c)
                elif view.side(c) == WORKER:
                    crossing.add(t)
    return crossing
