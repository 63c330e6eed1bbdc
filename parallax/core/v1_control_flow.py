"""The v1 control flow of a graph (tf.compat.v1 while loops and conds, as Enter/Exit and Switch/Merge ops), found
from the graph's structure alone: a graph copied through a MetaGraphDef keeps no Python control-flow context for
the ops of a gradient loop."""
from parallax.core.graph_utils import consumers


def v1_loop_ops(graph):
    """Ops inside a v1 while loop: reached from an Enter before its Exit (nesting counted). Found from the graph's
    structure, since a graph copied through a MetaGraphDef keeps no Python control-flow context for the ops of a
    gradient loop."""
    def arrive(op, depth):  # (inside, the depth its consumers are reached at; <= 0: none)
        return True, depth + (1 if op.type in ("Enter", "RefEnter") else -1 if op.type in ("Exit", "RefExit") else 0)
    return _nesting_walk(graph, ("Enter", "RefEnter"), arrive)


_OPENS = ("Switch", "RefSwitch", "Enter", "RefEnter")
_CLOSES = ("Merge", "RefMerge", "Exit", "RefExit")


def v1_cond_ops(graph):
    """Ops inside a branch of v1 control flow: reached from a Switch before the Merge or Exit that joins it
    (nesting counted). A branch not taken is dead, and so is whatever waits for an op in it, so a step never names
    them as targets of its own. Found from the graph's structure, as v1_loop_ops."""
    def arrive(op, depth):
        depth += 1 if op.type in _OPENS else -1 if op.type in _CLOSES else 0
        return depth > 0, depth  # a join's output is live again
    return _nesting_walk(graph, ("Switch", "RefSwitch"), arrive)


def _nesting_walk(graph, seed_types, arrive):
    """The ops reached from the consumers of `seed_types` ops at depth 1, each op passing on the depth that
    `arrive(op, depth)` gives while it stays above 0, and inside where it says so. One pass in topological order,
    each op reached at the deepest of its inputs' depths (`arrive` is monotone in the depth, so the deepest path
    decides), and the loops' back edges (out of NextIteration) left out, which close no frame a forward path does
    not: linear in the graph's size, where a walk of (op, depth) pairs grew without bound around nested loops whose
    back edges cross frames (a gradient loop's accumulators)."""
    depth_in = {}
    for op in graph.get_operations():
        if op.type in seed_types:
            for c in consumers(op):
                depth_in[c] = max(depth_in.get(c, 0), 1)
    inside = set()
    for op in _forward_order(graph):
        depth = depth_in.get(op, 0)
        if depth <= 0:
            continue
        is_inside, out = arrive(op, depth)
        if is_inside:
            inside.add(op)
        if out > 0 and op.type not in _BACK_EDGES:
            for c in consumers(op):
                if depth_in.get(c, 0) < out:
                    depth_in[c] = out
    return inside


_BACK_EDGES = ("NextIteration", "RefNextIteration")


def v1_frames(graph):
    """({op: the v1 while frame it runs in, '' outside every loop}, {frame: its parent frame}), as TF's executor
    assigns them: an Enter opens the frame its `frame_name` attribute names, the consumers of an Exit run in the
    parent of the Exit's frame, and every other op runs in its inputs' frame (control inputs too)."""
    frame_of, parent = {}, {"": None}
    for op in _forward_order(graph):
        inputs = [t.op for t in op.inputs] + list(op.control_inputs)
        outer = next((output_frame(i, frame_of, parent) for i in inputs if i in frame_of), "")
        if op.type in ("Enter", "RefEnter"):
            name = op.get_attr("frame_name")
            name = name.decode() if isinstance(name, bytes) else name
            parent.setdefault(name, outer)
            frame_of[op] = name
        else:
            frame_of[op] = outer
    return frame_of, parent


def output_frame(op, frame_of, parent):
    """The frame `op`'s consumers run in (v1_frames): an Exit's parent frame, else its own."""
    frame = frame_of[op]
    return parent[frame] if op.type in ("Exit", "RefExit") else frame


def _forward_order(graph):
    """The graph's ops in topological order of its edges but the loops' back edges (Kahn's algorithm); ops on a
    cycle that remains (no valid graph has one) come last, in graph order."""
    ops = graph.get_operations()
    pending = {op: 0 for op in ops}
    for op in ops:
        if op.type not in _BACK_EDGES:
            for c in consumers(op):
                pending[c] += 1
    ready = [op for op in ops if pending[op] == 0]
    order = []
    while ready:
        op = ready.pop()
        order.append(op)
        if op.type in _BACK_EDGES:
            continue
        for c in consumers(op):
            pending[c] -= 1
            if pending[c] == 0:
                ready.append(c)
    if len(order) < len(ops):
        placed = set(order)
        order += [op for op in ops if op not in placed]
    return order
