"""Small questions about v1 graphs that several stages ask: which variable does this op read or write?"""
import re

import tensorflow as tf

VARIABLE_OP_TYPES = ("VariableV2", "Variable", "VarHandleOp")
# Ops whose input 0 is a variable (ref or resource handle) that they modify.
_WRITER_TYPE = re.compile(r"^(Resource)?(Sparse)?Apply|^(Resource)?Scatter|^Assign|^(Resource)?StridedSliceAssign$")


def variable_op_of(x):
    """The VariableV2/VarHandleOp behind a Variable, its ref/handle tensor, or a ref variable's `read` identity."""
    op = getattr(x, "op", None)
    if op is None:
        return None
    if op.type in VARIABLE_OP_TYPES:
        return op
    if op.type == "Identity" and op.inputs and op.inputs[0].op.type in ("VariableV2", "Variable"):
        return op.inputs[0].op
    return None


def is_writer(op):
    return bool(_WRITER_TYPE.match(op.type)) and len(op.inputs) > 0


def written_variable(op):
    """Name of the variable op whose value `op` modifies, or None."""
    if not is_writer(op):
        return None
    source = op.inputs[0].op
    # Ref variables may be reached through an Identity of the ref (e.g. in colocation helpers).
    while source.type == "Identity" and source.inputs and source.inputs[0].dtype._is_ref_dtype:
        source = source.inputs[0].op
    return source.name if source.type in VARIABLE_OP_TYPES else None


def colocation_target(op):
    """The op this op is colocated with by a `_class: loc:@name` attribute (slots, EMA shadows), or None."""
    try:
        groups = op.get_attr("_class")
    except ValueError:
        return None
    for g in groups:
        g = g.decode() if isinstance(g, bytes) else g
        if g.startswith("loc:@") and g[5:] != op.name:
            return g[5:]
    return None


def is_restore(op):
    """A Saver's restore assignment: it writes a variable from a checkpoint, not from training."""
    for t in op.inputs[1:]:
        source = t.op
        while source.type == "Identity" and source.inputs:
            source = source.inputs[0].op
        if source.type in ("RestoreV2", "Restore", "RestoreSlice"):
            return True
    return False


def variables_by_op_name(graph):
    """Every Variable object the graph's collections know, keyed by its op name."""
    found = {}
    for key in (tf.compat.v1.GraphKeys.GLOBAL_VARIABLES, tf.compat.v1.GraphKeys.LOCAL_VARIABLES,
                tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES, tf.compat.v1.GraphKeys.MODEL_VARIABLES):
        for v in graph.get_collection(key):
            if getattr(v, "op", None) is not None:
                found.setdefault(v.op.name, v)
    return found


def consumers(op):
    """Ops that read an output of `op` or wait for it (control edge)."""
    return [c for t in op.outputs for c in t.consumers()] + list(op._control_outputs)


def ancestors(ops, include_control=True):
    """All ops that `ops` depend on (including themselves)."""
    return _closure(ops, lambda op: [t.op for t in op.inputs] + (list(op.control_inputs) if include_control else []))


def descendants(ops):
    """All ops that depend on `ops` (including themselves), through data and control edges."""
    return _closure(ops, consumers)


def _closure(ops, neighbours):
    seen, stack = set(), list(ops)
    while stack:
        op = stack.pop()
        if op not in seen:
            seen.add(op)
            stack.extend(neighbours(op))
    return seen
