"""`parallax.analyze(graph)`: what the user's graph trains, and how, as plain printable records.

Gradients and updates come from capture/gradients.py's records when the graph was built after `import parallax`.
Otherwise each variable's update scope (`<optimizer>/update_<var>/`, which every tf.compat.v1.train optimizer
creates) is walked back to the tensors that feed it; those are then the gradients as the optimizer saw them,
that is after any user clipping.
"""
import dataclasses
from typing import Optional, Tuple

import tensorflow as tf

from parallax.capture import gradients as capture
from parallax.core import graph_utils
from parallax.analysis.optimizer_slots import slots_from_updates
from parallax.analysis import row_keys
from parallax.errors import GraphAnalysisError
from parallax.core.text_table import format_table

GraphKeys = tf.compat.v1.GraphKeys


@dataclasses.dataclass(frozen=True)
class Gradient:
    values: str
    indices: Optional[str] = None
    dense_shape: Optional[str] = None
    merge_rows: bool = False  # some rows are one row on one device (row_keys.py): merged across workers

    @property
    def is_sparse(self):
        return self.indices is not None

    def __str__(self):
        return f"IndexedSlices({self.values}, {self.indices})" if self.is_sparse else self.values


@dataclasses.dataclass(frozen=True)
class VariablePart:
    """One variable op: a shard of a partitioned variable, or a whole unpartitioned one."""
    name: str
    shape: Tuple[int, ...]
    offset: Tuple[int, ...]
    gradients: Tuple[Gradient, ...]  # every gradient taken of it (several optimizers, several losses); each aggregated
    update_ops: Tuple[str, ...]
    slots: Tuple[Tuple[str, str], ...]  # (slot name, slot variable op name)

    @property
    def gradient(self):
        """The gradient its (last) update consumes, else the first one taken; None when none was."""
        return self.gradients[0] if self.gradients else None


@dataclasses.dataclass(frozen=True)
class VariableRecord:
    """A trainable variable as the user sees it (partitioned variables are one record with several parts)."""
    name: str
    shape: Tuple[Optional[int], ...]
    dtype: str
    bytes: Optional[int]
    kind: str  # "dense" | "sparse"
    parts: Tuple[VariablePart, ...]
    optimizer: Optional[str] = None

    @property
    def is_partitioned(self):
        return len(self.parts) > 1 or self.parts[0].name != self.name

    @property
    def gradients(self):
        return tuple(g for p in self.parts for g in p.gradients)

    @property
    def update_ops(self):
        return tuple(op for p in self.parts for op in p.update_ops)

    @property
    def slots(self):
        return tuple(s for p in self.parts for _, s in p.slots)

    @property
    def is_trained(self):
        return bool(self.update_ops)


@dataclasses.dataclass(frozen=True)
class StateRecord:
    """Non-trainable state that training updates."""
    name: str
    kind: str  # "global_step" | "optimizer" | "update_ops" (e.g. batch-norm statistics) | "ema" | "other"
    shape: Tuple[Optional[int], ...]
    dtype: str
    written_by: Tuple[str, ...]
    colocated_with: Optional[str] = None  # a variable this one must live with (EMA shadows, Adam's beta powers)
    bytes: Optional[int] = None
    # Variables (op names) that a step writes from this state's value read back after the step wrote it: a
    # hand-written momentum buffer and its variable, the global step and the moving averages whose decay reads it.
    read_back_by: Tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class GraphAnalysis:
    variables: Tuple[VariableRecord, ...]
    state: Tuple[StateRecord, ...]
    captured: bool  # True when gradients came from capture records (raw, before clipping)

    def variable(self, name):
        for v in self.variables:
            if v.name == name:
                return v
        raise KeyError(name)

    @property
    def trained_variables(self):
        return tuple(v for v in self.variables if v.is_trained)

    def __str__(self):
        rows = [("variable", "kind", "shape", "dtype", "bytes", "optimizer", "gradient", "update ops", "slots")]
        for v in self.variables:
            rows.append((v.name + (f" [{len(v.parts)} shards]" if v.is_partitioned else ""), v.kind,
                         _shape_str(v.shape), v.dtype, str(v.bytes), v.optimizer or "-",
                         "; ".join(map(str, v.gradients)) or "-", ", ".join(v.update_ops) or "-",
                         ", ".join(v.slots) or "-"))
        out = [format_table(rows)]
        if self.state:
            rows = [("state", "kind", "shape", "dtype", "written by")]
            rows += [(s.name, s.kind, _shape_str(s.shape), s.dtype, ", ".join(s.written_by)) for s in self.state]
            out.append(format_table(rows))
        out.append("gradients: " + ("captured raw, before clipping" if self.captured
                                    else "recovered from update ops (graph built before `import parallax`)"))
        return "\n\n".join(out)


def analyze(graph):
    """Analyze a v1-style tf.Graph. Raises GraphAnalysisError when the graph has no trainable variables."""
    if not isinstance(graph, tf.Graph):
        raise GraphAnalysisError(f"analyze() needs a tf.Graph, not {type(graph).__name__}")
    trainable = [v for v in graph.get_collection(GraphKeys.TRAINABLE_VARIABLES) if getattr(v, "op", None) is not None]
    if not trainable:
        raise GraphAnalysisError("the graph has no trainable variables; build the model (variables, loss and "
                                 "opt.minimize(loss)) in the graph you pass")
    ops = graph.get_operations()
    writers = _writers_by_variable(ops)
    grad_records, apply_records = capture.grad_records(graph), capture.apply_records(graph)
    grad_records = _step_gradients(graph, grad_records)
    applies = _merged_applies(apply_records)
    scopes = _update_scopes(ops, [v.op.name for v in trainable])
    parts = {}
    optimizers = {}
    initialization = None
    for v in trainable:
        name = v.op.name
        if name in applies:
            rec = applies[name]
            update_ops = tuple(rec["update_ops"])
            slots = tuple(sorted(rec["slots"].items(), key=lambda kv: kv[1]))
            optimizers[name] = rec["optimizer"]
        else:
            update_ops, slots = _updates_from_scope(scopes.get(name, ()), name)
        if not update_ops and any(r["var"] == name for r in grad_records):
            # Updated by the user's own ops (tf.gradients, then assign_sub or scatter_sub), or by an optimizer
            # inside a function (apply_gradients in a v2 tf.cond, as loss scaling does): every write of it in this
            # graph outside initialization is an update.
            initialization = initialization if initialization is not None else \
                graph_utils.initialization_ops(graph)
            update_ops = tuple(op.name for op in writers.get(name, []) if op.name not in initialization)
        gradients = _captured_gradients(graph, name, grad_records, update_ops)
        if not gradients and not any(r["var"] == name for r in grad_records):
            gradients = tuple(g for g in [_gradient_from_scope(v, scopes.get(name, ()))] if g is not None)
        info = getattr(v, "_save_slice_info", None)
        parts[name] = VariablePart(name, _shape(v), tuple(info.var_offset) if info else (0,) * len(_shape(v)),
                                   gradients, update_ops, slots)
    parts = slots_from_updates(graph, parts, {v.op.name for v in trainable}, set(applies))
    records = _group_partitions(trainable, parts, optimizers)
    slot_names = {s for r in records for s in r.slots}
    state = _state_records(graph, trainable, slot_names, writers, apply_records, records)
    return GraphAnalysis(tuple(records), tuple(state), captured=bool(grad_records))


# ---- gradients and updates ---------------------------------------------------------------------------------
def _merged_applies(apply_records):
    """One record per variable: several optimizers (two train ops) may update the same variable, each with its own
    update ops and slots; the variable is updated by all of them."""
    merged = {}
    for r in apply_records:
        m = merged.setdefault(r["var"], {"update_ops": [], "slots": {}, "optimizers": []})
        m["update_ops"] += [u for u in r["update_ops"] if u not in m["update_ops"]]
        m["slots"].update({f"{r['optimizer']}/{k}" if k in m["slots"] else k: v for k, v in r["slots"].items()})
        if r["optimizer"] not in m["optimizers"]:
            m["optimizers"].append(r["optimizer"])
    return {var: {**m, "optimizer": "+".join(m["optimizers"])} for var, m in merged.items()}


def _step_gradients(graph, grad_records):
    """The records of gradients the step applies: a variable's gradient that a loss is computed from (MAML's inner
    step, a penalty on a gradient's norm) is a value of that loss's forward pass, made one device's by the rules
    for the forward pass (a statistic of the batch), not one the step aggregates; but a variable's only gradients
    are kept."""
    losses = capture.loss_ops(graph)
    forward = graph_utils.ancestors(losses, False) if losses else set()

    def in_forward(record):
        return graph.get_tensor_by_name(record["grad"]["values"]).op in forward
    return [r for r in grad_records if not in_forward(r) or
            all(in_forward(o) for o in grad_records if o["var"] == r["var"])]


def _captured_gradients(graph, var_name, grad_records, update_ops):
    """Every gradient taken of the variable, the one its last update consumes first. Two optimizers, or two losses,
    give a variable several gradients: each is a raw gradient that the rewrite aggregates."""
    grads = [_gradient(graph, r["grad"]["values"], r["grad"].get("indices"), r["grad"].get("dense_shape"))
             for r in grad_records if r["var"] == var_name]
    if len(grads) > 1 and update_ops:
        feeding = graph_utils.ancestors([graph.get_operation_by_name(n) for n in update_ops])
        used = [g for g in grads if graph.get_tensor_by_name(g.values).op in feeding]
        if used:
            grads.remove(used[-1])
            grads.insert(0, used[-1])
    return tuple(grads)


def _gradient(graph, values, indices=None, dense_shape=None):
    return Gradient(values, indices, dense_shape, indices is not None and row_keys.needs_merge(graph, indices))


def _update_scopes(ops, var_names):
    """Ops of each variable's `update_<var>/` scope. An op goes to the longest matching variable name.

    Linear in the number of ops: each op's name is split at its `update_` segments, and the prefixes after one are
    looked up in a set (a regex per variable made this quadratic: 24 s at 20k nodes)."""
    names = set(var_names)
    scopes = {}
    for op in ops:
        if "update_" not in op.name:
            continue
        segments = op.name.split("/")
        best = None
        for i, segment in enumerate(segments):
            if not segment.startswith("update_"):
                continue
            rest = [segment[len("update_"):], *segments[i + 1:]]
            for k in range(len(rest) - 1, 0, -1):  # the scope must have something after the variable's name
                candidate = "/".join(rest[:k])
                if candidate in names:
                    if best is None or len(candidate) > len(best):
                        best = candidate
                    break
        if best is not None:
            scopes.setdefault(best, []).append(op)
    return scopes


def _updates_from_scope(scope_ops, var_name):
    update_ops = tuple(op.name for op in scope_ops if graph_utils.is_writer(op)
                       and graph_utils.written_variable(op) is not None)
    slots = set()
    for op in scope_ops:
        if graph_utils.is_writer(op):
            slots.add(graph_utils.written_variable(op))
            for t in op.inputs[1:]:
                var_op = graph_utils.variable_op_of(t)
                if var_op is not None and (t.dtype == tf.resource or t.dtype._is_ref_dtype):
                    slots.add(var_op.name)
    slots.discard(var_name)
    slots.discard(None)
    return update_ops, tuple((s.rsplit("/", 1)[-1], s) for s in sorted(slots))


def _gradient_from_scope(var, scope_ops):
    inside = set(scope_ops)
    outside_inputs = []
    for op in scope_ops:
        for t in op.inputs:
            if t.op not in inside and t not in outside_inputs and _is_computed_value(t):
                outside_inputs.append(t)
    shape = var.shape
    base = var.dtype.base_dtype
    dense = [t for t in outside_inputs if t.dtype == base and t.shape.is_compatible_with(shape)]
    indices = [t for t in outside_inputs if t.dtype in (tf.int32, tf.int64) and t.shape.rank == 1]
    values = [t for t in outside_inputs if t.dtype == base and shape.rank and t.shape.rank == shape.rank
              and t.shape[1:].is_compatible_with(shape[1:]) and t not in dense]
    by_grad_scope = lambda ts: sorted(ts, key=lambda t: "gradients" not in t.name)  # noqa: E731
    if indices and (values or dense):
        return _gradient(var.graph, by_grad_scope(values or dense)[0].name, by_grad_scope(indices)[0].name)
    if dense:
        return Gradient(by_grad_scope(dense)[0].name)
    return None


def _is_computed_value(t):
    """Not a variable handle/ref, a variable read, or a constant: a candidate for the gradient."""
    if t.dtype == tf.resource or t.dtype._is_ref_dtype or t.op.type in ("Const", "ReadVariableOp"):
        return False
    return graph_utils.variable_op_of(t) is None


# ---- partitions, state -------------------------------------------------------------------------------------
def _group_partitions(trainable, parts, optimizers):
    groups = {}
    for v in trainable:
        info = getattr(v, "_save_slice_info", None)
        key = info.full_name if info else v.op.name
        full_shape = tuple(info.full_shape) if info else _shape(v)
        groups.setdefault(key, (v, full_shape, []))[2].append(parts[v.op.name])
    records = []
    for key, (v, full_shape, group_parts) in sorted(groups.items()):
        group_parts.sort(key=lambda p: p.offset)
        dtype = v.dtype.base_dtype
        sparse = any(g.is_sparse for p in group_parts for g in p.gradients)
        opt = next((optimizers[p.name] for p in group_parts if p.name in optimizers), None)
        records.append(VariableRecord(key, full_shape, dtype.name, _bytes(full_shape, dtype),
                                      "sparse" if sparse else "dense", tuple(group_parts), opt))
    return records


def _writers_by_variable(ops):
    writers = {}
    for op in ops:
        for target in graph_utils.written_variables(op):  # one op may write several (a v2 cond's If)
            writers.setdefault(target, []).append(op)
    return writers


def _state_records(graph, trainable, slot_names, writers, apply_records, records):
    trainable_names = {v.op.name for v in trainable}
    non_slot = {n for r in apply_records for n in r["non_slot_vars"]}
    steps = {r["global_step"] for r in apply_records if r["global_step"]}
    steps |= {v.op.name for v in graph.get_collection(GraphKeys.GLOBAL_STEP) if hasattr(v, "op")}
    update_op_deps = graph_utils.ancestors(
        [getattr(o, "op", o) for o in graph.get_collection(GraphKeys.UPDATE_OPS)], include_control=False)
    read_by_updates = set()
    for r in records:
        for name in r.update_ops:
            for t in graph.get_operation_by_name(name).inputs:
                src = t.op.inputs[0] if t.op.type == "ReadVariableOp" else t
                var_op = graph_utils.variable_op_of(src)
                if var_op is not None:
                    read_by_updates.add(var_op.name)
    state = []
    for v in graph.get_collection(GraphKeys.GLOBAL_VARIABLES):
        name = getattr(getattr(v, "op", None), "name", None)
        if name is None or name in trainable_names or name in slot_names:
            continue
        init = getattr(getattr(v, "initializer", None), "name", None)
        ops = [op for op in writers.get(name, []) if op.name != init and not graph_utils.is_restore(op)]
        if not ops:
            continue
        if name in steps or name.rsplit("/", 1)[-1] == "global_step":
            kind = "global_step"
        elif name in non_slot or (not apply_records and name in read_by_updates):
            kind = "optimizer"
        elif any(op in update_op_deps for op in ops):
            kind = "update_ops"
        elif "ExponentialMovingAverage" in name or any("AssignMovingAvg" in op.name for op in ops):
            kind = "ema"
        else:
            kind = "other"
        state.append(StateRecord(name, kind, _shape(v), v.dtype.base_dtype.name, tuple(op.name for op in ops),
                                 graph_utils.colocation_target(v.op), _bytes(_shape(v), v.dtype.base_dtype),
                                 _read_back_by(name, ops)))
    return sorted(state, key=lambda s: s.name)


def _read_back_by(variable, writes):
    """The variables written from `variable`'s value as read after one of `writes` wrote it, in the same step:
    the reads are those that wait for a write (data or control edge), by reference, through a ref variable's
    snapshot (graph_utils.read_variables) or through a ref write's output."""
    after = graph_utils.descendants(writes) - set(writes)
    reads = [op for op in after if variable in graph_utils.read_variables(op) or
             any(t.op in writes for t in op.inputs)]
    if not reads:
        return ()
    return tuple(sorted({w for op in graph_utils.descendants(reads) for w in graph_utils.written_variables(op)}
                        - {variable}))


def _bytes(shape, dtype):
    n = 1
    for d in shape:
        if d is None:
            return None
        n *= d
    return n * dtype.size


def _shape(v):
    return tuple(v.shape.as_list()) if v.shape.rank is not None else ()


def _shape_str(shape):
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"
