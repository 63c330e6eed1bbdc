"""Small questions about v1 graphs that several stages ask: which variable does this op read or write?"""
import tensorflow as tf

VARIABLE_OP_TYPES = ("VariableV2", "Variable", "VarHandleOp")
# Ops that take a variable by reference (a ref, or a resource handle) and only read it, or pass the reference on.
_READS = {"ReadVariableOp", "ResourceGather", "ResourceGatherNd", "VariableShape", "VarIsInitializedOp",
          "IsVariableInitialized", "Identity", "IdentityN", "RefIdentity", "Enter", "RefEnter", "Switch",
          "RefSwitch", "Merge", "RefMerge", "Exit", "RefExit", "NextIteration", "RefNextIteration", "_ReadVariablesOp",
          "Snapshot", "DestroyTemporaryVariable"}
# Ops that forward a reference: a write through their output writes the variable behind their input.
_FORWARDS = {"Identity", "RefIdentity", "Enter", "RefEnter", "Switch", "RefSwitch", "Merge", "RefMerge", "Exit",
             "RefExit", "NextIteration", "RefNextIteration"}


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


def _is_reference(t):
    return t.dtype == tf.resource or t.dtype._is_ref_dtype


def _reference_source(t):
    """The variable op a ref or resource tensor refers to (through identities and control-flow forwarding)."""
    op = t.op
    seen = set()
    while op.type in _FORWARDS and op.inputs and op not in seen:
        seen.add(op)
        op = next((i.op for i in op.inputs if _is_reference(i)), op.inputs[0].op)
    return op if op.type in VARIABLE_OP_TYPES else None


def written_variables(op):
    """Names of the variable ops whose value `op` modifies: every variable it takes by reference, unless it is one
    of the pure reads. General on purpose: optimizers' Apply ops, Assign*, Scatter*, CountUpTo, user kernels."""
    if op.type in _READS or not op.inputs:
        return ()
    out = []
    for t in op.inputs:
        if _is_reference(t):
            source = _reference_source(t)
            if source is not None and source.name not in out:
                out.append(source.name)
    return tuple(out)


def is_writer(op):
    return bool(written_variables(op))


def written_variable(op):
    """Name of the (first) variable op whose value `op` modifies, or None."""
    written = written_variables(op)
    return written[0] if written else None


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
