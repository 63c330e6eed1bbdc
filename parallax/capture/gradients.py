"""Records every (variable, raw gradient) pair while the user's graph is built, before any clipping.

TensorFlow's core is not patched. Importing parallax wraps the Python entry points that create gradients
(`tf.compat.v1.gradients`, `tf.gradients`, `Optimizer.compute_gradients`) and the one that creates updates
(`Optimizer.apply_gradients`). Records are JSON strings in a graph collection, so they survive
`export_meta_graph` / `import_meta_graph`. Graphs built before the hooks existed are handled by analysis/graph_analysis.py,
which walks update ops back to their gradient inputs instead.
"""
import functools
import json
import re
import sys

import tensorflow as tf
from tensorflow.python.ops import gradients_impl
from tensorflow.python.training import optimizer as optimizer_lib

from parallax.core import graph_utils
from parallax.capture import tape as tape_capture

GRAD_COLLECTION = "parallax_grad_records"
LOSS_COLLECTION = "parallax_loss_records"  # the tensors gradients were taken of (batch_statistics.py)
GIVEN_SEED_COLLECTION = "parallax_given_seed_records"  # losses whose gradients started from the user's grad_ys
SEED_COLLECTION = "parallax_seed_records"  # {"seed": a default seed op, "loss": the tensor it starts the gradient of}
APPLY_COLLECTION = "parallax_apply_records"
# {"capture": a function graph's placeholder of an eager variable's handle, "grad": its gradient's tensors}: a
# tape's gradient of a variable the traced step captures (capture/function_step.py records it against its variable)
CAPTURED_GRAD_COLLECTION = "parallax_captured_grad_records"

_installed = False


def install():
    """Install the hooks once. Safe to call repeatedly."""
    global _installed
    if _installed:
        return
    _installed = True
    for name in ("gradients", "gradients_v2"):
        original = getattr(gradients_impl, name)
        _replace_everywhere(original, _wrap_gradients(original))
    optimizer_lib.Optimizer.compute_gradients = _wrap_compute_gradients(optimizer_lib.Optimizer.compute_gradients)
    optimizer_lib.Optimizer.apply_gradients = _wrap_apply_gradients(optimizer_lib.Optimizer.apply_gradients)
    tape_capture.install(_record_losses, _record_seeds, _record_pairs)


def _replace_everywhere(original, wrapper):
    # tf.compat.v1.gradients, tf.gradients and tensorflow.python.ops.gradients all bind the same function
    # object; Optimizer.compute_gradients reaches it through a module attribute. Rebind every loaded alias.
    for module in list(sys.modules.values()):
        if module is None or not getattr(module, "__name__", "").startswith("tensorflow"):
            continue
        for attr, value in list(vars(module).items()):
            if value is original:
                setattr(module, attr, wrapper)


def _wrap_gradients(original):
    @functools.wraps(original)
    def gradients(ys, xs, *args, **kwargs):
        ys_list = ys if isinstance(ys, (list, tuple)) else [ys]
        graph = next((y.graph for y in ys_list if isinstance(y, tf.Tensor)), None)
        known = len(graph.get_operations()) if graph is not None and not tf.executing_eagerly() else None
        grads = original(ys, xs, *args, **kwargs)
        # Gradients taken inside a graph function (a tf.map_fn's body: DP-SGD's per-example gradients) are values
        # of the function, not the step's; its graph shares the outer graph's collections, where their names
        # would name the outer graph's tensors of the same names (its `Sum:0`, taken for the loss).
        if not tf.executing_eagerly() and not getattr(graph, "building_function", False):
            if known is not None:
                _record_seeds(graph, graph.get_operations()[known:], ys_list)
            given = kwargs.get("grad_ys", args[0] if args else None)
            _record_losses(ys_list, given if isinstance(given, (list, tuple)) else [given] * len(ys_list))
            _record_pairs(xs if isinstance(xs, (list, tuple)) else [xs],
                          grads if isinstance(grads, (list, tuple)) else [grads])
        return grads
    return gradients


def _record_pairs(xs, grads):
    """Each gradient in `grads` of the variable at the same place in `xs` (other xs are not variables)."""
    for x, g in zip(xs, grads):
        var_op = graph_utils.variable_op_of(x)
        if var_op is not None and g is not None:
            _record_gradient(var_op, g)
        elif g is not None and getattr(x, "handle", None) is not None:
            _record_captured_gradient(x.handle, g)


def _record_captured_gradient(handle, grad):
    """A gradient of an eager variable taken in a function's graph, against the placeholder it captures the
    variable's handle as."""
    tensors = _gradient_tensors(grad)
    if tensors is None or not tf.is_symbolic_tensor(grad.values if isinstance(grad, tf.IndexedSlices) else grad):
        return
    graph = grad.graph
    internal = next((i for e, i in getattr(graph, "captures", ()) if e is handle), None)
    if internal is not None:
        record = json.dumps({"capture": internal.op.name, "grad": tensors}, sort_keys=True)
        if record not in graph.get_collection(CAPTURED_GRAD_COLLECTION):
            graph.add_to_collection(CAPTURED_GRAD_COLLECTION, record)


def _gradient_tensors(grad):
    """{"values", "indices", "dense_shape": tensor names} of a gradient, or None where it is neither kind."""
    if isinstance(grad, tf.IndexedSlices):
        tensors = {"values": grad.values.name, "indices": grad.indices.name}
        if grad.dense_shape is not None:
            tensors["dense_shape"] = grad.dense_shape.name
        return tensors
    return {"values": grad.name} if isinstance(grad, tf.Tensor) else None


def _record_losses(ys, given):
    """Each of `ys` is a loss; one whose `given` seed is not None started from the user's own."""
    for y, seed in zip(ys, given):
        if isinstance(y, tf.Tensor) and y.name not in y.graph.get_collection(LOSS_COLLECTION):
            y.graph.add_to_collection(LOSS_COLLECTION, y.name)
        if isinstance(y, tf.Tensor) and seed is not None and \
                y.name not in y.graph.get_collection(GIVEN_SEED_COLLECTION):
            y.graph.add_to_collection(GIVEN_SEED_COLLECTION, y.name)


def _record_seeds(graph, new_ops, ys):
    """Which loss each default seed the call made starts the gradient of: its `grad_ys_<i>` is ys[i]'s."""
    for op in filter(_is_default_seed, new_ops):
        index = int(_SEED.match(op.name).group(1))
        if index < len(ys) and isinstance(ys[index], tf.Tensor):
            record = json.dumps({"seed": op.name, "loss": ys[index].name}, sort_keys=True)
            if record not in graph.get_collection(SEED_COLLECTION):
                graph.add_to_collection(SEED_COLLECTION, record)


def _wrap_compute_gradients(original):
    @functools.wraps(original)
    def compute_gradients(self, *args, **kwargs):
        grads_and_vars = original(self, *args, **kwargs)
        if not tf.executing_eagerly():
            for g, v in grads_and_vars:
                if g is not None and getattr(v, "op", None) is not None:
                    _record_gradient(v.op, g)
        return grads_and_vars
    return compute_gradients


def _wrap_apply_gradients(original):
    @functools.wraps(original)
    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        if tf.executing_eagerly():
            return original(self, grads_and_vars, global_step=global_step, name=name)
        grads_and_vars = tuple(grads_and_vars)
        graph = tf.compat.v1.get_default_graph()
        first_new = len(graph.get_operations())
        result = original(self, grads_and_vars, global_step=global_step, name=name)
        new_ops = graph.get_operations()[first_new:]
        _record_apply(self, grads_and_vars, global_step, result, new_ops)
        return result
    return apply_gradients


def _record_gradient(var_op, grad):
    graph = var_op.graph
    if getattr(grad, "graph", graph) is not graph:  # taken inside a graph function (compute_gradients there)
        return
    tensors = _gradient_tensors(grad)
    if tensors is None:
        return
    record = json.dumps({"var": var_op.name, "grad": tensors}, sort_keys=True)
    if record not in graph.get_collection(GRAD_COLLECTION):
        graph.add_to_collection(GRAD_COLLECTION, record)


def _record_apply(opt, grads_and_vars, global_step, result, new_ops):
    graph = result.graph
    slot_names = sorted(opt.get_slot_names())
    # Slots are created inside apply_gradients; their initializers write them but are not updates.
    initializers = {v.initializer.name for v in graph_utils.variables_by_op_name(graph).values()
                    if getattr(v, "initializer", None) is not None}
    non_slot = sorted(v.op.name for v in getattr(opt, "_non_slot_dict", {}).values() if hasattr(v, "op"))
    # What each new op writes, found once: a model's every variable is matched against them (ResNet-50's 160
    # variables against its optimizer's thousands of ops)
    writes = [(op.name, graph_utils.written_variable(op)) for op in new_ops if op.name not in initializers]
    for g, v in grads_and_vars:
        if g is None or getattr(v, "op", None) is None:
            continue
        slots = {}
        for s in slot_names:
            slot_var = opt.get_slot(v, s)
            if slot_var is not None:
                slots[s] = slot_var.op.name
        targets = {v.op.name, *slots.values()}
        update_ops = [name for name, written in writes if written is not None and written in targets]
        record = {"var": v.op.name, "optimizer": type(opt).__name__, "slots": slots, "update_ops": update_ops,
                  "non_slot_vars": non_slot, "apply_op": result.name,
                  "global_step": global_step.op.name if global_step is not None else None}
        graph.add_to_collection(APPLY_COLLECTION, json.dumps(record, sort_keys=True))


def grad_records(graph):
    return [json.loads(r if isinstance(r, str) else r.decode()) for r in graph.get_collection(GRAD_COLLECTION)]


def captured_grad_records(graph):
    return [json.loads(r) for r in graph.get_collection(CAPTURED_GRAD_COLLECTION)]


def loss_records(graph):
    """Names of the tensors the graph's gradients were taken of: its losses. For a graph built before the hooks,
    the tensors whose gradient op takes tf.gradients' default seed (a `grad_ys_<i>` fill of ones). A loss whose
    every default seed is inner (inner_seeds) is left out: its gradients are a value of another loss's forward
    pass, not the step's."""
    losses = _all_losses(graph)
    inner = inner_seeds(graph, losses)
    if not inner:
        return losses
    seeds_of = {}
    for seed, loss in default_seeds(graph).items():
        seeds_of.setdefault(loss, []).append(seed)
    return [loss for loss in losses if not seeds_of.get(loss) or not all(s in inner for s in seeds_of[loss])]


def inner_seeds(graph, losses=None):
    """The default seeds whose gradients feed the value of a loss (`losses`: the recorded ones): MAML's inner step
    (the weights less a step along the support loss's gradient, which the query loss reads), a penalty on a
    gradient's norm. What those gradients compute is part of that loss's forward pass: its statistics of the batch
    are combined as the forward pass's are (batch_statistics.py), and its seed is not a loss's to scale
    (loss_seeds.py: scaled by 1/N, the inner gradient the workers' mean was 1/N of one device's)."""
    ops = loss_ops(graph, _all_losses(graph) if losses is None else losses)
    return {op.name for op in graph_utils.ancestors(ops, False) if _is_default_seed(op)} if ops else set()


def loss_ops(graph, losses=None):
    """The ops of the losses (`losses`, tensor names; loss_records' by default) that are in `graph` (a loss of the
    graph the records were copied from may not be)."""
    names = {op.name for op in graph.get_operations()}
    return [graph.get_operation_by_name(op_name) for op_name in
            (name.rsplit(":", 1)[0] for name in (loss_records(graph) if losses is None else losses))
            if op_name in names]


def _all_losses(graph):
    recorded = [r if isinstance(r, str) else r.decode() for r in graph.get_collection(LOSS_COLLECTION)]
    return recorded or _seeded_losses(graph)


_SEED = re.compile(r"^(?:.*/)?gradients(?:_\d+)?/grad_ys_(\d+)$")


def _is_default_seed(op):
    """tf.gradients' default seed of its i-th loss: a fill of ones named `grad_ys_<i>` in its gradients scope."""
    return op.type == "Fill" and _SEED.match(op.name) is not None


def default_seeds(graph):
    """{seed op name: its loss tensor's name, or None where it cannot be told} of the graph's default seeds: each
    `grad_ys_<i>`, a fill of ones shaped like its loss. The hooks record the loss; in a graph built before them, it
    is the Shape the fill reads, or the output of the op whose gradient reads the fill that is shaped like it."""
    recorded = {r["seed"]: r["loss"] for r in (json.loads(r if isinstance(r, str) else r.decode())
                                               for r in graph.get_collection(SEED_COLLECTION))}
    seeds = {}
    for seed in filter(_is_default_seed, graph.get_operations()):
        if seed.inputs[1].op.type != "Const":
            continue
        shape = seed.inputs[0].op
        origins = {t.name for reader in seed.outputs[0].consumers()
                   for t in getattr(getattr(reader, "_original_op", None), "outputs", ())
                   if t.dtype == seed.outputs[0].dtype and str(t.shape) == str(seed.outputs[0].shape)}
        seeds[seed.name] = recorded.get(seed.name) or (shape.inputs[0].name if shape.type == "Shape" else None) or \
            (origins.pop() if len(origins) == 1 else None)
    return seeds


def given_seed_losses(graph):
    """The losses whose gradients some tf.gradients call started from the user's own grad_ys (recorded by the
    hooks; unknown for a graph built before them)."""
    return sorted(r if isinstance(r, str) else r.decode() for r in graph.get_collection(GIVEN_SEED_COLLECTION))


def _seeded_losses(graph):
    losses = set()
    for seed in filter(_is_default_seed, graph.get_operations()):
        for reader in seed.outputs[0].consumers():
            origin = getattr(reader, "_original_op", None)
            if origin is not None:
                losses.update(t.name for t in origin.outputs if t.dtype == seed.outputs[0].dtype)
    return sorted(losses)


def apply_records(graph):
    return [json.loads(r if isinstance(r, str) else r.decode()) for r in graph.get_collection(APPLY_COLLECTION)]
