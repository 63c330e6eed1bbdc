"""A TF2 training step as a v1 graph: the same graph parallax plans, rewrites and runs for a v1 script.

A step is a `tf.function` (or a Python function, made one here) that takes a batch, takes gradients with
`tf.GradientTape` and applies them with an optimizer. It is traced once, with each argument's first axis unknown,
so that one graph runs batches of any size (an epoch's last). Its concrete function's graph is imported into a new
`tf.Graph`:
- each argument becomes a placeholder of the same name;
- each variable the step captures (the model's, the optimizer's slots, its iteration counter) becomes a resource
  variable of the eager variable's name and shape, initialized to zeros: the runner that runs the graph loads the
  eager values into the job (runtime/eager_values.py), so that no value becomes a constant of the graph;
- a captured eager tensor (a constant the step reads) becomes a constant;
- the tape's records (capture/tape.py: the losses, their default seeds, each gradient's forward op) and each
  gradient taken of a captured variable are carried over to the new graph's ops.
The step's stateful ops (its control outputs: the optimizer's writes) and its return value run as one training op.
Nested functions (a Keras layer's call, a while loop, a GRU) stay functions of the graph's library: taken whole.
Other captured resources (a lookup table, a dataset iterator) are refused before anything runs, naming them, and
so is a call of Python (tf.py_function, tf.numpy_function): what it computes over the batch cannot be read.
"""
import inspect
import json
from typing import Any, Dict, NamedTuple, Tuple

import numpy as np
import tensorflow as tf

from parallax.capture import gradients as capture
from parallax.errors import UnsupportedError

tf1 = tf.compat.v1
SCOPE = "step"  # the name scope of the imported step's ops


class LiftedVariable(NamedTuple):
    eager: Any  # the user's tf.Variable
    graph: Any  # its resource variable in the lifted graph


class _Reachable(NamedTuple):
    variable: Any  # a tf.Variable the step can capture
    name: str  # its lifted variable's name: a Keras 3 variable's path (its tf.Variable's name is the last part)


class LiftedFunction(NamedTuple):
    inputs: Tuple[Any, ...]  # a placeholder per flat argument, in tf.nest order
    outputs: Any  # the function's return value: its structure, of the lifted graph's tensors
    op: Any  # runs every stateful op of the function, after its outputs


class LiftedStep(NamedTuple):
    graph: Any  # tf.Graph
    inputs: Tuple[Any, ...]  # a placeholder per flat argument, in tf.nest order
    outputs: Any  # the step's return value: its structure, of the lifted graph's tensors
    train_op: Any  # runs every stateful op of the step, after its outputs
    variables: Tuple[LiftedVariable, ...]


class LiftedFunctions(NamedTuple):
    graph: Any  # tf.Graph
    functions: Dict[str, LiftedFunction]  # by the name scope each function's ops are imported under
    variables: Tuple[LiftedVariable, ...]  # one per eager variable, whichever functions capture it


def lift(step, args):
    """The step, traced for arguments like `args` (a tuple of tensors, arrays or nests of them), as a LiftedStep."""
    lifted = lift_functions({SCOPE: (step, args)})
    function = lifted.functions[SCOPE]
    return LiftedStep(lifted.graph, function.inputs, function.outputs, function.op, lifted.variables)


def lift_functions(entries):
    """Several functions of one model, {scope: (function, args)} (a Keras model's train, test and predict steps),
    lifted into one graph, in which they share the variables they capture: one job runs them all."""
    traced = {scope: _traced(function, args) for scope, (function, args) in entries.items()}
    graph, made, functions = tf.Graph(), {}, {}
    with graph.as_default():
        for scope, (concrete, variables) in traced.items():
            functions[scope] = _imported(scope, concrete, variables, made)
    return LiftedFunctions(graph, functions, tuple(made.values()))


def _traced(step, args):
    """(the concrete function for `args`, {handle id: _Reachable it can capture})."""
    function = step if hasattr(step, "get_concrete_function") else tf.function(step)
    specs = tf.nest.map_structure(_batch_spec, tuple(args))
    concrete = function.get_concrete_function(*specs)
    return concrete, {id(r.variable.handle): r for r in _reachable_variables(function, concrete)}


def _imported(scope, concrete, variables, made):
    """The traced function imported into the default graph under `scope`, as a LiftedFunction; `made`: {handle id:
    LiftedVariable} of the variables lifted so far, which this function's captures reuse or add to."""
    traced = concrete.graph
    inputs = tuple(tf1.placeholder(t.dtype, t.shape, name=f"{scope}_{_plain_name(t.name)}" if scope != SCOPE
                                   else _plain_name(t.name))
                   for t in traced.inputs[:len(traced.inputs) - len(traced.captures)])
    input_map = {t.name: placeholder for t, placeholder in zip(traced.inputs, inputs)}
    by_capture = _captures(traced, variables, input_map, made)
    returned = [t.name for t in traced.outputs]
    controls = sorted(op.name for op in traced.control_outputs)
    graph_def, input_map = _captures_renamed(traced.as_graph_def(), traced, input_map)
    _refuse_python_calls(scope, graph_def)
    imported = tf.import_graph_def(graph_def, input_map=input_map, name=scope,
                                   return_elements=returned + controls)
    outputs = imported[:len(returned)]
    with tf1.control_dependencies(imported[len(returned):] + [t.op for t in outputs]):
        op = tf.no_op(name="train_step" if scope == SCOPE else f"{scope}_run")
    _carry_records(scope, traced, tf1.get_default_graph(), by_capture)
    structured = tf.nest.pack_sequence_as(concrete.structured_outputs, outputs) if outputs else None
    return LiftedFunction(inputs, structured, op)


def _captures_renamed(graph_def, traced, input_map):
    """`graph_def` and `input_map` with each capture's placeholder named by its place among the captures. A trace
    names some by a counter of the whole process (an embedding lookup's capture of its variable), and a worker
    whose process made more objects before the trace (the chief, whose TensorBoard callback runs) would build a
    graph of other names than the other workers'. The captures are fed through `input_map`: only their names change."""
    names = {internal.op.name: f"parallax_capture_{i}" for i, (_, internal) in enumerate(traced.captures)}

    def renamed(reference):
        control, name = ("^", reference[1:]) if reference.startswith("^") else ("", reference)
        op, colon, index = name.partition(":")
        return control + names.get(op, op) + colon + index

    for node in graph_def.node:
        if node.name in names:
            node.name = names[node.name]
            del node.attr["_user_specified_name"]  # the name the trace gave, counter and all
        node.input[:] = [renamed(reference) for reference in node.input]
        if "_class" in node.attr:  # colocation with a capture: "loc:@<op name>"
            node.attr["_class"].list.s[:] = [b"loc:@" + renamed(c.decode()[5:]).encode() if c.startswith(b"loc:@")
                                             else c for c in node.attr["_class"].list.s]
    return graph_def, {renamed(key): value for key, value in input_map.items()}


PYTHON_CALLS = ("EagerPyFunc", "PyFunc", "PyFuncStateless")  # tf.py_function, tf.numpy_function, tf1.py_func


def _refuse_python_calls(scope, graph_def):
    """UnsupportedError for a function that calls Python from its graph (or from a function it nests)."""
    nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
    called = sorted({n.name for n in nodes if n.op in PYTHON_CALLS})
    if called:
        raise UnsupportedError(
            f"the {'training step' if scope == SCOPE else scope.replace('_', ' ')} calls Python through "
            f"tf.py_function or tf.numpy_function ({', '.join(called)}): parallax cannot see what that Python "
            f"computes over the batch, so it cannot make the workers' steps one device's step, and the op is bound "
            f"to the process that traced it. Do that work in the input pipeline (dataset.map, before the batches "
            f"reach the step), or write it with TensorFlow ops")


def _reachable_variables(function, concrete):
    """The variables the step can capture: the concrete function's own (made or read while it was traced), and
    those of the objects its Python function names (a model, an optimizer: their slots, which the trace does not
    list where the optimizer made them outside it)."""
    found = [_Reachable(v, _plain_name(v.name)) for v in concrete.variables]
    python_function = getattr(function, "python_function", function)
    names = inspect.getclosurevars(inspect.unwrap(python_function))
    roots = [*names.nonlocals.values(), *names.globals.values(), getattr(python_function, "__self__", None)]
    for root in roots:
        found += _variables_of(root, depth=2)
    return found


def _variables_of(value, depth):
    if isinstance(value, tf.Variable):
        return [_Reachable(value, _plain_name(value.name))]
    if isinstance(getattr(value, "value", None), tf.Variable):  # a Keras 3 variable, which holds a tf.Variable
        return [_Reachable(value.value, getattr(value, "path", None) or _plain_name(value.value.name))]
    if isinstance(value, (list, tuple)) and depth:
        return [v for item in value for v in _variables_of(item, depth - 1)]
    if isinstance(value, dict) and depth:
        return [v for item in value.values() for v in _variables_of(item, depth - 1)]
    held = getattr(value, "variables", None) if not isinstance(value, type) else None
    try:
        held = held() if callable(held) else held
    except (TypeError, ValueError):  # a `variables` of another meaning
        return []
    return [r for v in held for r in _variables_of(v, 0)] if isinstance(held, (list, tuple)) else []


def _batch_spec(value):
    """The spec of one argument, its first axis (the batch's) left unknown."""
    tensor = tf.convert_to_tensor(value)
    shape = tensor.shape.as_list()
    return tf.TensorSpec([None] + shape[1:] if shape else [], tensor.dtype)


def _plain_name(tensor_name):
    return tensor_name.rsplit(":", 1)[0]


def _captures(traced, variables, input_map, made):
    """{capture placeholder op name: its variable's op name}; each capture's placeholder is mapped to its v1
    counterpart in `input_map`; each variable lifted is added to `made` ({handle id: LiftedVariable})."""
    by_capture = {}
    for external, internal in traced.captures:
        if id(external) in variables:
            if id(external) not in made:
                eager, name = variables[id(external)]
                # zeros, a few bytes of GraphDef: the eager value is loaded into the job once it runs
                # (runtime/eager_values.py), not copied into every GraphDef the pipeline makes
                made[id(external)] = LiftedVariable(eager, tf1.Variable(
                    tf.zeros(eager.shape, eager.dtype), name=name, trainable=eager.trainable,
                    dtype=eager.dtype, use_resource=True))
            variable = made[id(external)].graph
            by_capture[internal.op.name] = variable.op.name
            input_map[internal.name] = variable.handle
        elif external.dtype == tf.resource:
            raise UnsupportedError(
                f"the training step reads a resource that is not a variable ({internal.name}: a lookup table, a "
                f"dataset iterator or a tf.py_function's state): parallax makes variables its servers and workers "
                f"hold, not other resources. Create it inside the step's graph, or read its values as the step's "
                f"arguments")
        else:
            input_map[internal.name] = tf.constant(np.asarray(external), name=_plain_name(internal.name))
    return by_capture


def _carry_records(scope, traced, graph, by_capture):
    """The tape's records of the traced graph, for the lifted graph's names; each gradient of a captured variable
    recorded against its v1 variable; each gradient op's forward op (`_original_op`), which no GraphDef holds."""
    renamed = {f"{scope}/{op.name}": op for op in traced.get_operations()}
    for key in (capture.LOSS_COLLECTION, capture.GIVEN_SEED_COLLECTION):
        for name in traced.get_collection(key):
            graph.add_to_collection(key, f"{scope}/{name}")
    for record in traced.get_collection(capture.SEED_COLLECTION):
        seed = json.loads(record)
        graph.add_to_collection(capture.SEED_COLLECTION, json.dumps(
            {"seed": f"{scope}/{seed['seed']}", "loss": f"{scope}/{seed['loss']}"}, sort_keys=True))
    for record in capture.captured_grad_records(traced):
        if record["capture"] in by_capture:
            graph.add_to_collection(capture.GRAD_COLLECTION, json.dumps(
                {"var": by_capture[record["capture"]],
                 "grad": {k: f"{scope}/{name}" for k, name in record["grad"].items()}}, sort_keys=True))
    for name, original in renamed.items():
        forward = getattr(original, "_original_op", None)
        if forward is not None and f"{scope}/{forward.name}" in renamed:
            graph.get_operation_by_name(name)._original_op = graph.get_operation_by_name(f"{scope}/{forward.name}")
