"""Fenced steps: a step that runs collectives and also ops placed on a named task (a parameter server, the release
queues, a host's local aggregation) ends, with a backend that needs it (collectives.step_fence_for), with one
scalar collective that waits for all of this worker's work in the step. Every worker passes it only when
every worker's part of the step has run, so no worker ends the step (and TF cleans its step id up on the tasks it
touched) while another's part still runs there. Every value the step returns is received on the worker's own task
before the fence; after it, only copies of those local values remain. A v1 cond's branch not taken is dead, and so
is an op that waits for it, but its ops still run on their tasks (passing deadness on): the fence waits for them
through a ControlTrigger, which fires, live, once all its inputs have, dead or alive. A v1 loop's last iteration
is dead in the same way after the loop's exit has fired, inside a frame that no op outside can wait in: the fence
waits for a gate that each loop running ops on a named task gets, a loop variable of its own that leaves the
frame after a ControlTrigger over the last iteration's ops.
"""
import hashlib

import tensorflow as tf
from tensorflow.python.ops import gen_control_flow_ops

from parallax.core import graph_utils, v1_control_flow

tf1 = tf.compat.v1

FENCE_SCOPE = "parallax_fence"


def needs_fence(variant, collectives):
    """Whether the ops this variant runs include a collective and an op placed on a named task (the worker's own
    ops carry no device, WORKER_DEVICE, so anything named may be shared)."""
    ran = [op for op in (_op_of(x) for x in _run_elements(variant)) if op is not None]
    ancestors = graph_utils.ancestors(ran + list(variant.branch_targets))
    return bool(ancestors & collectives) and any(_elsewhere(op.device) for op in ancestors)


def fence(variant, fence_op):
    """`variant` ending with `fence_op(digest, name)` after all it runs; its tensors come back as copies made on
    the worker's own task after the fence. Call with the graph open for new ops."""
    ran = [op for op in (_op_of(x) for x in _run_elements(variant)) if op is not None]
    returned = [x for x in variant.leaves + list(variant.released or []) if isinstance(x, tf.Tensor)]
    with tf.name_scope(f"{FENCE_SCOPE}/{variant.digest}/"), tf1.device(None):
        # Every value the client gets is received on this worker's own task *before* the fence: after it, another
        # worker's step may end and clean the step id up on the task that made the value, and a value not yet
        # received from there is lost with it (Aborted: Cleanup).
        here = {x.ref(): tf.identity(x) for x in returned}
        watched = ran + list(variant.branch_targets)
        frames = v1_control_flow.v1_frames(watched[0].graph) if watched else None
        settled = _branches_settled(watched, frames) + _loops_settled(ran, frames)
        with tf.control_dependencies(ran + [t.op for t in here.values()] + settled):
            done = fence_op(variant.digest, "fence")
        with tf.control_dependencies([done]):
            variant.leaves = [tf.identity(here[x.ref()]) if isinstance(x, tf.Tensor) else x for x in variant.leaves]
            if variant.released is not None:
                variant.released = [tf.identity(here[x.ref()]) for x in variant.released]
    variant.targets = list(variant.targets) + [done]
    return variant


def _branches_settled(ran, frames):
    """[a ControlTrigger after every op of a v1 cond's branch among `ran`'s ancestors], or [] when there is none.
    The cond's join (Merge) fires on its first live input, so a branch not taken may still be passing its deadness
    between tasks (a server's Send) when the join has fired: a fence that waited only for the join let another
    worker end the step and clean its id up on that server first (Aborted: Cleanup <step id>; 2 runs in 16 of
    loss_scaled_finite_check_v1_cond in HYBRID, 0 in 20 since). The trigger waits for the branch's last ops, which
    wait for the rest; those outside every loop (a loop in a branch enters its own frame, which a trigger outside
    cannot wait in: _loops_settled waits for it)."""
    if not ran:
        return []
    graph = ran[0].graph
    frame_of, parent = frames  # (v1_control_flow.v1_frames) a trigger outside every loop waits for ops there alone
    in_branches = {op for op in v1_control_flow.v1_cond_ops(graph) & graph_utils.ancestors(ran)
                   if v1_control_flow.output_frame(op, frame_of, parent) == ""}
    last = sorted((op for op in in_branches if not any(c in in_branches for c in graph_utils.consumers(op))),
                  key=lambda op: op.name)
    if not last:
        return []
    with tf.control_dependencies(last):
        return [gen_control_flow_ops.control_trigger(name="branches_settled")]


_FRAME_EDGES = ("Enter", "RefEnter", "NextIteration", "RefNextIteration")


def _loops_settled(ran, frames):
    """[a ControlTrigger after the last iteration of every v1 while loop among `ran`'s ancestors that runs ops on a
    named task, or holds a loop that does], or []. A loop's exit fires on the iteration whose condition is false,
    while that iteration's body, dead, still passes its deadness between tasks (and earlier iterations may still
    run, up to `parallel_iterations` at once): a fence that waited for the exit let another worker end the step
    and clean its id up on the server first (Aborted: Cleanup <step id> at a Recv in the loop; padded_v1_loop_lookups
    in PS, 3 thread jobs in 450 run three at a time). Nothing outside a loop's frame can wait for an op inside it,
    so each such loop gets a gate (_loop_gate), built once per graph, that leaves the frame only once every
    iteration has run to its end."""
    if not ran:
        return []
    graph = ran[0].graph
    frame_of, parent = frames  # v1_control_flow.v1_frames, before any gate of this fence is built
    spanning = set()
    for op, frame in frame_of.items():
        if frame and _elsewhere(op.device):
            spanning |= _with_outer(frame, parent)
    ran_frames = set().union(*(_with_outer(frame_of[op], parent) for op in graph_utils.ancestors(ran)))
    gated = sorted(spanning & ran_frames, key=lambda f: (-len(_with_outer(f, parent)), f))
    gates = {}
    for frame in gated:  # inner loops first: their gates' exits are among the outer loop's last ops
        gates[frame] = _built_gate(graph, frame)
        if gates[frame] is None:
            frame_of, parent = v1_control_flow.v1_frames(graph)  # with the gates built so far
            gates[frame] = _loop_gate(frame, frame_of, parent)
    outermost = sorted((gates[f] for f in gated if not parent[f]), key=lambda op: op.name)
    if not outermost:
        return []
    with tf.control_dependencies(outermost):
        return [gen_control_flow_ops.control_trigger(name="loops_settled")]


def _with_outer(frame, parent):
    """`frame` and every frame around it, '' (outside every loop) left out."""
    out = set()
    while frame:
        out.add(frame)
        frame = parent[frame]
    return out


def _gate_scope(frame):
    return f"{FENCE_SCOPE}/loop_{hashlib.sha1(frame.encode()).hexdigest()[:16]}"


def _built_gate(graph, frame):
    """The Exit of `frame`'s gate, when an earlier fence of this graph built it; else None."""
    try:
        return graph.get_operation_by_name(f"{_gate_scope(frame)}/settled")
    except KeyError:
        return None


def _loop_gate(frame, frame_of, parent):
    """The Exit of a loop variable added to `frame`: each iteration passes it on only after a ControlTrigger that
    waits for that iteration's last ops (live or dead, on any task), and it leaves the frame in the last iteration
    after that iteration's trigger, so once every iteration has run to its end."""
    members = {op for op in frame_of if v1_control_flow.output_frame(op, frame_of, parent) == frame
               and op.type not in _FRAME_EDGES}  # the inner loops' exits included; a back edge's consumer is in
    # the next iteration, so it is not a last op of this one
    last = sorted((op for op in members if not any(c in members for c in graph_utils.consumers(op))),
                  key=lambda op: op.name)
    condition = next(op for op in members if op.type == "LoopCond").outputs[0]
    enter = min((op for op, f in frame_of.items() if f == frame and op.type in ("Enter", "RefEnter")),
                key=lambda op: op.name)
    with tf.name_scope(f"{_gate_scope(frame)}/"), tf1.device(None):
        with tf.control_dependencies([enter.inputs[0].op]):
            start = tf.constant(0)  # in the frame around the loop, as its other entries' inputs are
        entered = gen_control_flow_ops.enter(start, frame_name=frame, is_constant=False,
                                             parallel_iterations=enter.get_attr("parallel_iterations"))
        merged = gen_control_flow_ops.merge([entered, entered]).output
        leaving, staying = gen_control_flow_ops.switch(merged, condition)
        with tf.control_dependencies(last):
            iteration_ended = gen_control_flow_ops.control_trigger()
        with tf.control_dependencies([iteration_ended]):
            carried = gen_control_flow_ops.next_iteration(tf.identity(staying))
            done = gen_control_flow_ops._exit(tf.identity(leaving), name="settled")
        merged.op._update_input(1, carried)  # the back edge, as tf.while_loop closes its own
    return done.op


def _run_elements(variant):
    return [x for x in variant.leaves if x is not None] + list(variant.targets) + list(variant.released or [])


def _elsewhere(device):
    return "/job:" in device


def _op_of(x):
    op = getattr(x, "op", x)
    return op if isinstance(op, tf.Operation) else None
