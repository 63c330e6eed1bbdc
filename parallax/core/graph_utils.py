"""Small questions about v1 graphs that several stages ask: which variable does this op read or write?"""
import tensorflow as tf
from tensorflow.core.framework import types_pb2
from tensorflow.python.framework import op_def_registry

VARIABLE_OP_TYPES = ("VariableV2", "Variable", "VarHandleOp")
# Ops whose kernel keeps its resource in the step's own container (TF's per-step ResourceMgr container): a v1
# loop gradient's stacks, TensorArrays, temporary variables. They live for one step on one device, with the ops that
# use them: a colocation hint that ties one to an op on a server variable (a loop gradient's stack saves the
# variable's read) would put it on the server, where the step's pops failed to find it ("Container __per_step_...
# does not exist").
PER_STEP_RESOURCE_OPS = {"StackV2", "Stack", "TensorArrayV3", "TensorArrayV2", "TensorArray", "TensorArrayGradV3",
                         "TensorArrayGradWithShape", "TensorArrayGrad", "TemporaryVariable"}
# Ops that take a variable by reference (a ref, or a resource handle) and only read it, or pass the reference on.
PURE_READS = {"ReadVariableOp", "ResourceGather", "ResourceGatherNd", "VariableShape", "VarIsInitializedOp",
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
    op = reference_origin(t)
    return op if op.type in VARIABLE_OP_TYPES else None


def reference_origin(t):
    """The op that made the ref or resource `t` refers to, through identities and control-flow forwarding (a v2
    While passes a loop variable's handle from its input to its output of the same index)."""
    seen = set()
    while t.op not in seen:
        op = t.op
        seen.add(op)
        if op.type in _FORWARDS and op.inputs:
            t = next((i for i in op.inputs if _is_reference(i)), op.inputs[0])
        elif op.type in ("While", "StatelessWhile") and t.value_index < len(op.inputs):
            t = op.inputs[t.value_index]
        else:
            break
    return t.op


def carries_step_state(op):
    """Whether `op` makes a resource of the step's own container (PER_STEP_RESOURCE_OPS: a stack, a TensorArray) or
    takes its handle, also as a control-flow op passing it on (a loop in a v1 cond reaches its gradient's stacks
    through a Switch and an Enter). TF places every op that takes a resource beside the op that made it."""
    return op.type in PER_STEP_RESOURCE_OPS or any(
        _is_reference(t) and reference_origin(t).type in PER_STEP_RESOURCE_OPS for t in op.inputs)


def written_variables(op):
    """Names of the variable ops whose value `op` modifies: every variable it takes by reference, unless it is one
    of the pure reads, or it calls functions (If, While, PartitionedCall) none of which writes anything. General on
    purpose: optimizers' Apply ops, Assign*, Scatter*, CountUpTo, user kernels."""
    if op.type in PURE_READS or not op.inputs:
        return ()
    functions = called_functions(op.node_def)
    if functions and not any(_function_writes(op.graph, f, set()) for f in functions):
        return ()
    return referenced_variables(op)


def called_functions(node_def):
    """Names of the graph functions a node's attributes name (a v2 loop's body and condition, a call's function)."""
    return [node_def.attr[k].func.name for k in node_def.attr if node_def.attr[k].HasField("func")]


def _function_writes(graph, name, seen):
    """Does the graph function `name` (or one it calls) contain an op that takes a resource and is not a read?"""
    return _function_has(graph, name, seen, lambda op_def: any(a.type == types_pb2.DT_RESOURCE
                                                              for a in op_def.input_arg))


def _function_has(graph, name, seen, stateful_op_that):
    """Does the graph function `name` (or one it calls) contain a stateful op, not a read of a variable, for which
    `stateful_op_that(its op def)` holds? A function or op not known here may."""
    if name in seen:
        return False
    seen.add(name)
    fn = graph._get_function(name)
    if fn is None:
        return True  # not in this graph's library: assume it may
    with graph.as_default():  # outside any graph, reading a definition registers it in the eager context, where the
        definition = fn.definition  # source graph's and the rewritten graph's versions of one name then collide
    for node in definition.node_def:
        calls = called_functions(node)
        if calls:
            if any(_function_has(graph, f, seen, stateful_op_that) for f in calls):
                return True
            continue
        op_def = op_def_registry.get(node.op)
        if op_def is None or (node.op not in PURE_READS and op_def.is_stateful and stateful_op_that(op_def)):
            return True
    return False


def runs_stateless_functions(op):
    """Whether `op` runs graph functions (a v2 loop's body, a call) and none of them, or the functions they call,
    has a stateful op but reads of variables: the values it computes are the same on every run, whatever the
    While op's own stateful flag says (a tf.map_fn's loop is stateful because its body reads variables)."""
    functions = called_functions(op.node_def)
    return bool(functions) and not any(_function_has(op.graph, f, set(), lambda op_def: True) for f in functions)


def read_variables(op):
    """Names of the variables whose value `op` reads when it runs: those it takes by reference, and those it reads
    through a ref variable's snapshot (its `read`: an Identity of the ref, waiting for nothing), which on the
    variable's device aliases the variable's buffer, so an op that waits for a write of the variable reads the
    written value through it, as through the ref itself."""
    out = list(referenced_variables(op))
    for t in op.inputs:
        variable = snapshot_source(t.op)
        if variable is not None and variable.name not in out:
            out.append(variable.name)
    return tuple(out)


def snapshot_source(op):
    """The ref variable op whose snapshot `op` is (its `read`: an Identity of the ref that waits for nothing, and
    on the variable's device aliases its buffer), or None."""
    if op.type == "Identity" and not op.control_inputs and op.inputs and op.inputs[0].dtype._is_ref_dtype:
        return _reference_source(op.inputs[0])
    return None


def referenced_variables(op):
    """Names of the variable ops `op` takes by reference (a ref or a resource handle), to read or to write."""
    out = []
    for t in op.inputs:
        if _is_reference(t):
            source = _reference_source(t)
            if source is not None and source.name not in out:
                out.append(source.name)
    return tuple(out)


def is_writer(op):
    return bool(written_variables(op))


def step_writes(graph):
    """The ops of a training step that write state: every writer but the initializers and restores, and parallax's
    own (its counters and queues)."""
    excluded = initialization_ops(graph)
    return [op for op in graph.get_operations() if op.name not in excluded and not op.name.startswith("parallax_")
            and is_writer(op)]


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


def initialization_ops(graph):
    """Names of the ops that initialize or restore variables (an EMA shadow's initializer reads its variable
    through a cond): these write state, but not in a training step."""
    initializers = [v.initializer for v in variables_by_op_name(graph).values()
                    if getattr(v, "initializer", None) is not None]
    return {op.name for op in ancestors(initializers)} | \
        {op.name for op in graph.get_operations() if is_writer(op) and is_restore(op)}


def local_variable_writes(graph):
    """The ops that write the script's local variables in a step (a streaming metric's total and count, tf1.metrics):
    not their initializers, nor parallax's own counters."""
    local = {v.op.name for v in graph.get_collection(tf.compat.v1.GraphKeys.LOCAL_VARIABLES) if hasattr(v, "op")}
    if not local:
        return []
    initialization = initialization_ops(graph)
    return [op for op in graph.get_operations() if op.name not in initialization and not op.name.startswith("parallax")
            and is_writer(op) and local & set(written_variables(op))]


def variables_by_op_name(graph):
    """Every Variable object the graph's collections know, keyed by its op name."""
    found = {}
    for key in (tf.compat.v1.GraphKeys.GLOBAL_VARIABLES, tf.compat.v1.GraphKeys.LOCAL_VARIABLES,
                tf.compat.v1.GraphKeys.TRAINABLE_VARIABLES, tf.compat.v1.GraphKeys.MODEL_VARIABLES):
        for v in graph.get_collection(key):
            if getattr(v, "op", None) is not None:
                found.setdefault(v.op.name, v)
    return found


def holds(graph, name):
    """Whether `name` is a tensor or op of `graph`."""
    try:
        graph.as_graph_element(name, allow_tensor=True, allow_operation=True)
        return True
    except (KeyError, ValueError):
        return False


def consumers(op):
    """Ops that read an output of `op` or wait for it (control edge)."""
    return [c for t in op.outputs for c in t.consumers()] + list(op._control_outputs)


def ancestors(ops, include_control=True):
    """All ops that `ops` depend on (including themselves)."""
    return closure(ops, lambda op: [t.op for t in op.inputs] + (list(op.control_inputs) if include_control else []))


def descendants(ops):
    """All ops that depend on `ops` (including themselves), through data and control edges."""
    return closure(ops, consumers)


def topological(ops, include_control=False):
    """`ops` in an order where each comes after those of its inputs (and control inputs) that are in `ops`;
    deterministic (started from names in order)."""
    ops = set(ops)
    order, seen = [], set()
    for start in sorted(ops, key=lambda o: o.name):
        stack = [(start, False)]
        while stack:
            node, done = stack.pop()
            if done:
                order.append(node)
                continue
            if node in seen:
                continue
            seen.add(node)
            stack.append((node, True))
            before = [t.op for t in node.inputs] + (list(node.control_inputs) if include_control else [])
            stack.extend((i, False) for i in before if i in ops and i not in seen)
    return order


def closure(ops, neighbours):
    """`ops` and everything reached from them through `neighbours(op)`."""
    seen, stack = set(), list(ops)
    while stack:
        op = stack.pop()
        if op not in seen:
            seen.add(op)
            stack.extend(neighbours(op))
    return seen


class ops_added_after_run:
    """Opens a finalized graph, which a session has already run, for the ops a new fetch set needs (built once, the
    first time it runs), and finalizes it again. Inside, `tf.control_dependencies` leaves the ops it waits for as
    they are: TF marks each control input with an attribute (`_has_manual_control_dependencies`, a statistic for
    its MLIR bridge), and setting an attribute on an op a session ran has no effect and makes TF's C API warn, in
    every worker, that the mutation "will trigger an error in the future". The new ops get their control inputs
    as usual."""

    def __init__(self, graph):
        self._g = graph
        self._ctx = None

    def _control_dependencies(self, control_inputs):
        if control_inputs is None:
            return type(self._g).control_dependencies(self._g, None)
        current = self._g._current_control_dependencies()
        ops = []
        for c in control_inputs:
            if isinstance(c, tf.IndexedSlices) or (hasattr(c, "_handle") and hasattr(c, "op")):
                c = c.op
            c = self._g.as_graph_element(c)
            c = c.op if isinstance(c, tf.Tensor) else c
            if not isinstance(c, tf.Operation):
                raise TypeError(f"Control input must be Operation or Tensor: {c}")
            if c not in current:
                ops.append(c)
                current.add(c)
        return self._g._ControlDependenciesController(self._g, ops)

    def __enter__(self):
        self._g._unsafe_unfinalize()
        self._g.control_dependencies = self._control_dependencies  # shadows the method for this graph alone
        self._ctx = self._g.as_default()
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc):
        self._ctx.__exit__(*exc)
        del self._g.control_dependencies
        self._g.finalize()
        return False
