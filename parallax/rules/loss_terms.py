"""A loss whose terms add up to a sum over the batch plus means: `reduce_sum(errors) + l2`, or
`reduce_mean(cross_entropy) + 1e-3 * l2_loss(looked_up_rows)`.

One device's gradient of such a loss is the sum of its examples' gradients for the summed terms, plus the other
terms' gradients once: a term the batch does not change (a weight penalty), or a mean over the examples. A worker's
is its examples' plus its value of those terms: summed over N workers, those count N times; averaged, the summed
terms' examples count 1/N. Neither is one device's. So each such term's own backward pass gets 1/N of the loss's
gradient on each worker: the inputs of its gradient ops that carry the loss's gradient (the edges) are scaled by
1/N, and the workers' gradients are summed, as for a sum. (A term the batch does not change is a mean of its
values on the workers, as a mean over the examples is.)

A loss's terms are the operands of the scalar additions and subtractions at its top (Add, AddV2, AddN, Sub,
Identity); a term is constant when no per-worker input is among its ancestors; which of the others are means is
found by running them (loss_law.py). A term's backward ops are those tf.gradients made for its own forward ops
(those no other term of the loss reads), below the loss's seed, read from each op's `_original_op` in the process
that built the graph; the plan records the edges by name, and every worker's rewrite scales them. A term with no
backward ops of its own (a bare read of a variable) gets its 1/N where the loss's gradient leaves the additions'
gradients for it.
"""
import tensorflow as tf

from parallax.core import graph_utils
from parallax.analysis.batch_shapes import per_worker_inputs

_ADDITIVE = {"Add", "AddV2", "AddN", "Sub", "Identity"}


def split(graph, loss, skeleton=None):
    """([(batch term tensor, sign)], [constant term tensors]) of a scalar loss; ([], []) when it is one term, has
    no batch term, or is not a scalar. `skeleton`, a set, gets the additive ops."""
    inputs = {t.op for t in per_worker_inputs(graph)}
    batch, constant, stack = [], [], [(loss, 1)]
    while stack:
        t, sign = stack.pop()
        if t.shape.rank != 0:
            return [], []
        if t.op.type in _ADDITIVE and t.dtype.is_floating:
            if skeleton is not None:
                skeleton.add(t.op)
            stack.extend((i, -sign if t.op.type == "Sub" and k == 1 else sign) for k, i in enumerate(t.op.inputs))
        elif graph_utils.ancestors([t.op], False) & inputs:
            batch.append((t, sign))
        else:
            constant.append(t)
    return (batch, constant) if batch and len(batch) + len(constant) > 1 else ([], [])


def edges(graph, loss, seed, means=()):
    """((gradient op, input index), ...): where the loss's gradient enters the backward ops of its constant terms
    and of its batch terms named in `means` (tensor names: terms found to be means over the batch); None when they
    cannot be told (no op records its forward op, or one runs in a v1 loop or cond)."""
    skeleton = set()
    batch, constant = split(graph, loss, skeleton)
    scaled = constant + [t for t, _ in batch if t.name in means]
    terms = [t for t, _ in batch] + constant
    shared = graph_utils.ancestors([t.op for t, _ in batch], False)
    seed_op = graph.get_operation_by_name(seed)
    below = graph_utils.closure([seed_op], lambda op: [c for t in op.outputs for c in t.consumers()])
    if not any(getattr(op, "_original_op", None) in shared for op in below):
        return None  # no gradient op records its forward op (an imported graph): no term's backward can be told
    reach = [graph_utils.ancestors([t.op], False) for t in terms]
    found, bare = [], False
    for term in scaled:
        # Only what no other term reads: a backward op shared with another term carries its gradient too, which
        # would be scaled here as well as where it enters its own term's ops.
        own = set().union(*(r for t, r in zip(terms, reach) if t is term)) - \
            set().union(*(r for t, r in zip(terms, reach) if t is not term))
        backward = {op for op in below if getattr(op, "_original_op", None) in own}
        if any(op._control_flow_context is not None for op in backward):
            return None
        backward = _with_sums_of_gradients(backward, below)
        bare = bare or not backward
        found += [(op.name, i) for op in backward for i, t in enumerate(op.inputs)
                  if t.op in below and t.op not in backward]
    if bare:
        # A term whose gradient makes no op of its own (a bare read of a variable): the loss's gradient reaches
        # the variable's gradient straight from the additive ops' gradients (`top`). Where one of their outputs
        # enters an op that is no term's backward op (the sum of the variable's gradients, or its update), the
        # edge is the input of that additive op's gradient when it is tf.gradients' tuple Identity (one per
        # term), else the entered op's input.
        top = {op for op in below if getattr(op, "_original_op", None) in skeleton} | {seed_op}
        terms_backward = set().union(*reach)
        for op in top:
            for t in op.outputs:
                for c in t.consumers():
                    if c in top or getattr(c, "_original_op", None) in terms_backward:
                        continue
                    if c._control_flow_context is not None:
                        return None
                    found += [(op.name, 0)] if op.type == "Identity" and op is not seed_op else \
                        [(c.name, i) for i, x in enumerate(c.inputs) if x is t]
    return tuple(sorted(set(found))) if found else None


def _with_sums_of_gradients(backward, below):
    """`backward` and the ops below the seed that record no forward op and read gradients from `backward` alone:
    the AddN tf.gradients (or a tape) makes to add up the gradients of a forward value read twice inside a term.
    (Any other such op, the term's own gradient clipped by the user, only reads the term's gradient, so no edge
    enters it either.)"""
    while True:
        more = {op for op in below - backward if getattr(op, "_original_op", None) is None and
                {t.op for t in op.inputs} & below and all(t.op in backward for t in op.inputs if t.op in below)}
        if not more:
            break
        backward |= more
    return backward


def scale(graph, found, share):
    """Scale each op input of `found` ((op, input index), ...) by `share` (a function of the dtype that makes the
    factor, in `graph`)."""
    for op_name, index in found:
        op = graph.get_operation_by_name(op_name)
        value = op.inputs[index]
        with graph.as_default(), graph.name_scope(None), graph.name_scope(f"{op_name}/parallax_share_{index}"):
            op._update_input(index, tf.multiply(value, share(value.dtype), name="scaled"))


def is_scaled(graph, found, num_workers):
    for op_name, index in found:
        scaled = graph.get_operation_by_name(op_name).inputs[index].op
        factors = [tf.get_static_value(t) for t in scaled.inputs] if scaled.type == "Mul" else []
        if not any(f is not None and abs(float(f) - 1.0 / num_workers) < 1e-6 for f in factors):
            return False
    return True
