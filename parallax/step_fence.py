"""Fenced steps: a step that runs collectives and also ops placed on a named task (a parameter server, the release
queues, a host's local aggregation) ends, with a backend that needs it (collectives.step_fence_for), with one
scalar collective that waits for all of this worker's work in the step. Every worker passes it only when
every worker's part of the step has run, so no worker ends the step (and TF cleans its step id up on the tasks it
touched) while another's part still runs there. Every value the step returns is received on the worker's own task
before the fence; after it, only copies of those local values remain. A v1 cond's branch not taken is dead, and so
is an op that waits for it, but its ops still run on their tasks (passing deadness on): the fence waits for them
through a ControlTrigger, which fires, live, once all its inputs have, dead or alive.
"""
import tensorflow as tf
from tensorflow.python.ops import gen_control_flow_ops

from parallax import graph_utils

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
        settled = _branches_settled(ran + list(variant.branch_targets))
        with tf.control_dependencies(ran + [t.op for t in here.values()] + settled):
            done = fence_op(variant.digest, "fence")
        with tf.control_dependencies([done]):
            variant.leaves = [tf.identity(here[x.ref()]) if isinstance(x, tf.Tensor) else x for x in variant.leaves]
            if variant.released is not None:
                variant.released = [tf.identity(here[x.ref()]) for x in variant.released]
    variant.targets = list(variant.targets) + [done]
    return variant


def _branches_settled(ran):
    """[a ControlTrigger after every op of a v1 cond's branch among `ran`'s ancestors], or [] when there is none.
    The cond's join (Merge) fires on its first live input, so a branch not taken may still be passing its deadness
    between tasks (a server's Send) when the join has fired: a fence that waited only for the join let another
    worker end the step and clean its id up on that server first (Aborted: Cleanup <step id>; 2 runs in 16 of
    loss_scaled_finite_check_v1_cond in HYBRID, 0 in 20 since). The trigger waits for the branch's last ops, which
    wait for the rest."""
    if not ran:
        return []
    graph = ran[0].graph
    in_branches = (graph_utils.v1_cond_ops(graph) - graph_utils.v1_loop_ops(graph)) & graph_utils.ancestors(ran)
    last = sorted((op for op in in_branches if not any(c in in_branches for c in graph_utils.consumers(op))),
                  key=lambda op: op.name)
    if not last:
        return []
    with tf.control_dependencies(last):
        return [gen_control_flow_ops.control_trigger(name="branches_settled")]


def _run_elements(variant):
    return [x for x in variant.leaves if x is not None] + list(variant.targets) + list(variant.released or [])


def _elsewhere(device):
    return "/job:" in device


def _op_of(x):
    op = getattr(x, "op", x)
    return op if isinstance(op, tf.Operation) else None
