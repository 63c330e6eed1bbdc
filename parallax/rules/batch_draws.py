"""Random draws whose shape follows the batch: dropout's mask, noise added to activations.

One device draws one value per example of the global batch of N*b. A worker runs the same op with the same seed
over its own b examples, so it would draw the values of the global batch's first b examples, whatever its share
is: N workers would drop other units than one device. So each worker draws what one device draws (the same op,
seed and stream, with the batch dimension of its shape made N times larger) and keeps its own examples' values:
examples [i*b, (i+1)*b) of a fed global batch ("blocks"), or every N-th example from the i-th when the input is
sharded element-wise before batching (`parallax.shard`, `ds.shard(N, i)`: "interleaved").

Which dimension of a draw is the batch is found by TF's own shape inference, not by op type: the graph is
imported twice with the first dimension of every per-worker input (placeholders, iterators, queues; their rows
are examples) set to two marker sizes. A dimension that takes the marker each time is the batch; a draw whose
shape does not change and is known does not depend on the batch (a seeded sampler's draw) and needs nothing. Where
shape inference leaves a dimension unknown (a value sets it: the examples a sparse input's dense shape counts), the
graph is run on random batches of known sizes to find it (batch_samples.with_extents_from_runs). A draw that
depends on the batch in any other way (its shape is not known, or holds the batch twice or merged with another
dimension; it has inputs other than its shape that come from the batch, as a multinomial's logits or a shuffle's
values; it is inside a v1 while loop) is *unsplittable*: the plan lists it and `parallax.explain` says that it
differs from one device's draw.
"""
import dataclasses
from typing import Tuple

import tensorflow as tf
from tensorflow.python.framework import op_def_registry

from parallax.analysis import batch_samples
from parallax.rules import draw_guards
from parallax.core import graph_utils, v1_control_flow
from parallax.analysis.batch_samples import draw_as_split, merged_as_split, same_in_every_part
from parallax.analysis.batch_shapes import MARKERS, batch_axis, merged_axis, per_worker_inputs, probed_shapes, shape_subgraph
from parallax.core.graph_surgery import new_ops, reroute_consumers
from parallax.analysis.row_keys import reads_input
from parallax.rules.rule import Rule

tf1 = tf.compat.v1
BLOCKS, INTERLEAVED = "blocks", "interleaved"


@dataclasses.dataclass(frozen=True)
class BatchDraws:
    split: Tuple[Tuple[str, int], ...] = ()  # (random op, the batch's axis in its output)
    unsplittable: Tuple[str, ...] = ()
    layout: str = BLOCKS
    # Those of `unsplittable` that run only in some branches of a cond (draw_guards.py): warned of when they run.
    guarded: Tuple[Tuple[str, str, str, str, Tuple[int, ...], int], ...] = ()


def is_draw(op):
    """A stateful op seeded by `seed`/`seed2` attributes: TF's random ops and candidate samplers."""
    return _kind(op)[0]


def calls_functions(op):
    """An op that runs a graph function: one named by an attribute (a v2 loop's body), or the function itself."""
    return _kind(op)[1] or op.graph._is_function(op.type)


_KINDS = {}  # op type -> (a draw, has function attributes)


def _kind(op):
    if op.type not in _KINDS:
        op_def = op_def_registry.get(op.type) or op.op_def
        attrs = {a.name: a.type for a in op_def.attr}
        _KINDS[op.type] = (op_def.is_stateful and {"seed", "seed2"} <= set(attrs),
                           any(t in ("func", "list(func)") for t in attrs.values()))
    return _KINDS[op.type]


def draws_following_the_batch(graph):
    """The graph's draws that depend on the batch, split or not (module docstring)."""
    initialization = None
    candidates, callers = [], []
    for op in graph.get_operations():
        if op.inputs and (is_draw(op) or calls_functions(op)):
            initialization = graph_utils.initialization_ops(graph) if initialization is None else initialization
            if op.name not in initialization and _from_the_batch(op.inputs):
                (candidates if is_draw(op) else callers).append(op)
    graph_def = graph.as_graph_def()
    if not candidates and not callers:
        return BatchDraws(layout=_layout(graph_def))  # rows gathered by statistics_combined.py follow it too
    in_functions = nodes_in_functions(graph_def, _is_draw_node)
    # A draw in a function (a v2 while loop's body) cannot be probed or rewritten from outside.
    in_callers = [(f"{op.name}: {d}", op, d) for op in callers
                  for d in sorted({d for f in functions_run_by(op) for d in in_functions(f)})]
    unsplittable = [entry for entry, _, _ in in_callers]
    guarded = [draw_guards.function_guard(entry, op, d, in_functions) for entry, op, d in in_callers]
    subgraph = shape_subgraph(graph, graph_def, candidates)
    inputs = per_worker_inputs(graph) if candidates else []
    drawn = [op.outputs[0] for op in candidates]
    first_probe, second_probe = batch_samples.with_extents_from_runs(
        graph, drawn, [probed_shapes(subgraph, inputs, drawn, m) for m in MARKERS], MARKERS)
    in_loops = v1_control_flow.v1_loop_ops(graph) if candidates else set()
    split = []
    for op in candidates:
        first, second = first_probe.get(op.outputs[0].name), second_probe.get(op.outputs[0].name)
        if first is not None and first == second and None not in first:
            continue  # its shape does not follow the batch
        axis = batch_axis(first, second)
        if axis is None or op in in_loops or _other_inputs_from_the_batch(op):
            unsplittable.append(op.name)
            guarded.append(draw_guards.v1_cond_guard(op))
        else:
            split.append((op.name, axis))
    return BatchDraws(tuple(split), tuple(unsplittable), _layout(graph_def), tuple(g for g in guarded if g))


def held_as_rewritten(graph, tensors, split, merged=None):
    """{draw output: what a part of the batch reads of it} for the draws `tensors` are computed from, as the
    rewrite makes a worker read them (batch_samples.sampled's `held`): a draw of `split` ((op, axis), ...) its
    examples' values of one device's draw; any other draw (a sampler's, whose shape does not follow the batch) the
    whole batch's own values, as every worker draws what one device draws, and of an output of it that follows the
    batch (a sampler's expected counts of the batch's own classes, which its draw's tries set) its examples' rows.
    None when an output's batch axis cannot be told (the parts cannot be made to read what a worker reads). With
    `merged` ("example-major" or "time-major"), an output whose axis merges the batch with k steps of each example
    is read in that layout (batch_samples.merged_as_split), which the caller must check; without, it is not told."""
    axes = dict(split)
    draws = [op for op in graph_utils.ancestors([t.op for t in tensors], False) if is_draw(op)]
    held = {op.outputs[0].name: draw_as_split(axes[op.name]) for op in draws if op.name in axes}
    outputs = [t for op in draws if op.name not in axes for t in op.outputs]
    held.update({t.name: same_in_every_part for t in outputs if t.shape.is_fully_defined()})
    others = [t for t in outputs if not t.shape.is_fully_defined()]
    if others:
        subgraph = shape_subgraph(graph, graph.as_graph_def(), sorted({t.op for t in others}, key=lambda o: o.name))
        first, second = (probed_shapes(subgraph, per_worker_inputs(graph), others, m) for m in MARKERS)
        for t in others:
            axis = batch_axis(first.get(t.name), second.get(t.name))
            steps = merged_axis(first.get(t.name), second.get(t.name)) if axis is None and merged else None
            if axis is None and steps is None:
                return None
            held[t.name] = draw_as_split(axis) if steps is None else \
                merged_as_split(steps, time_major=merged == "time-major")
    return held


def functions_run_by(op):
    named = [f for a in op.node_def.attr.values() for f in _called(a)]
    return named + ([op.type] if op.graph._is_function(op.type) else [])


def _called(attr):
    """The functions an op's attribute names."""
    return [attr.func.name] if attr.HasField("func") else [f.name for f in attr.list.func]


def _is_draw_node(node):
    op_def = op_def_registry.get(node.op)
    return op_def is not None and op_def.is_stateful and "seed" in node.attr and "seed2" in node.attr


def nodes_in_functions(graph_def, wanted):
    """`found(function name)`: the nodes (names) of that function and of the functions it calls for which
    `wanted(node_def)` holds."""
    library = {f.signature.name: f for f in graph_def.library.function}
    memo = {}

    def found(name):
        if name not in memo:
            memo[name] = ()  # a recursive call adds nothing new
            nodes = []
            for node in library[name].node_def if name in library else ():
                for called in (f for a in node.attr.values() for f in _called(a)):
                    nodes += found(called)
                if wanted(node):
                    nodes.append(node.name)
            memo[name] = tuple(nodes)
        return memo[name]
    return found


def shape_input(op):
    """The index of the draw's `shape` input, or None."""
    names = [arg.name for arg in op.op_def.input_arg]
    return names.index("shape") if "shape" in names else None


def _from_the_batch(tensors):
    return any(reads_input(a) for a in graph_utils.ancestors([t.op for t in tensors]))


def _other_inputs_from_the_batch(op):
    index = shape_input(op)
    return index is None or _from_the_batch([t for i, t in enumerate(op.inputs) if i != index])


def _layout(graph_def):
    """Element-wise sharding (a ShardDataset over examples, in the graph or in a dataset's function) gives each
    worker every N-th example; otherwise each worker's examples are a block of the global batch: fed rows, or a
    shard over batches (`parallax.shard(ds.batch(b))`: worker i's k-th batch is one device's batch kN+i of b, so
    its rows are block i of one device's k-th batch of N*b)."""
    shards = [over for nodes in [graph_def.node] + [f.node_def for f in graph_def.library.function]
              for over in _what_shards_cut(nodes)]
    return INTERLEAVED if "examples" in shards else BLOCKS


def _is_batching(op_type):
    return ("Batch" in op_type and "Unbatch" not in op_type) or op_type == "GroupByWindowDataset"


def _what_shards_cut(nodes):
    """For each ShardDataset among `nodes` (one graph's or one function's), "batches" where a batching dataset
    precedes it, through any unary dataset transforms (a map, a prefetch, a shuffle of the batches), else
    "examples"."""
    by_name = {n.name: n for n in nodes}
    for node in nodes:
        if node.op != "ShardDataset":
            continue
        source = by_name.get(node.input[0].split(":")[0]) if node.input else None
        seen = set()
        while source is not None and source.name not in seen and not _is_batching(source.op) \
                and "Dataset" in source.op and source.op != "UnbatchDataset" and source.input:
            seen.add(source.name)
            source = by_name.get(source.input[0].split(":")[0])
        yield "batches" if source is not None and _is_batching(source.op) else "examples"


def node_types(graph_def):
    """The op types of the graph's nodes and of its functions' (a dataset's map or filter)."""
    return {n.op for n in graph_def.node} | {n.op for f in graph_def.library.function for n in f.node_def}


def draw_for_the_whole_batch(graph, op_name, axis, num_workers, worker_id, layout):
    """Rewrite one draw in `graph`: its shape's batch dimension times N, then this worker's examples gathered
    along `axis`. Every consumer of the draw reads the gathered values. The worker's index is a constant in a
    `parallax_shard` scope, whose values the same-graph check leaves out."""
    op = graph.get_operation_by_name(op_name)
    index = shape_input(op)
    shape, drawn = op.inputs[index], op.outputs[0]
    with graph.as_default(), new_ops(graph) as created, graph.name_scope(None), graph.name_scope("parallax_shard"), \
            graph.name_scope(op_name.replace("/", "_")):
        n = tf.constant(num_workers, shape.dtype, name="num_workers")
        i = tf.constant(worker_id, shape.dtype, name="worker_id")
        local = shape[axis]
        op._update_input(index, tf.tensor_scatter_nd_update(shape, [[axis]], [local * n]))
        stride, offset = (n, i) if layout == INTERLEAVED else (tf.ones_like(n), i * local)
        mine = tf.gather(drawn, tf.range(local) * stride + offset, axis=axis)
    reroute_consumers(drawn, mine, keep=created)


def gathered_order(sizes, layout):
    """For each of one device's examples, its row among the workers' rows gathered in worker order, whose numbers
    per worker are `sizes` (int64): with an element-wise sharded input (INTERLEAVED) example p is worker p mod N's
    example p div N (their numbers differ by one at most, at the end of the data); with BLOCKS, the same order."""
    position = tf.range(tf.reduce_sum(sizes))
    if layout != INTERLEAVED:
        return position
    workers = tf.size(sizes, out_type=tf.int64)
    return tf.gather(tf.math.cumsum(sizes, exclusive=True), position % workers) + position // workers


def is_split(graph, op_name):
    """Whether the draw's shape is now the whole batch's (made in a `parallax_shard` scope)."""
    op = graph.get_operation_by_name(op_name)
    return op.inputs[shape_input(op)].op.name.startswith("parallax_shard")


def unsplittable_note(plan):
    """One sentence naming the plan's unsplittable draws that every step running their ops runs, and what that
    costs: for the planner's warning and explain; "" when there are none."""
    guarded = {g[0] for g in plan.guarded_draws}
    always = [name for name in plan.unsplittable_draws if name not in guarded]
    return (f"random draw(s) {', '.join(always)} depend on the batch in a way parallax cannot split (their shape is "
            f"unknown or merges the batch with another dimension, they read the batch's values, or they run in a "
            f"while loop): the workers draw other values than one device, so the job is not exact there") * \
        bool(always)


def guarded_note(plan):
    """One sentence on the unsplittable draws that only some branches of a cond run (dropout under a training
    flag), for explain; "" when there are none."""
    return (f"random draw(s) {', '.join(g[0] for g in plan.guarded_draws)} depend on the batch in a way parallax "
            f"cannot split, but run only when a cond takes their branch (as dropout under a training flag): a step "
            f"that runs one is not exact there, and is warned of when it runs") * bool(plan.guarded_draws)


def apply(site):
    for name, axis in site.plan.batch_draws:
        draw_for_the_whole_batch(site.graph, name, axis, site.plan.num_workers, site.worker_id,
                                 site.plan.batch_layout)


def holds(graph, plan):
    return all(is_split(graph, name) for name, _ in plan.batch_draws)


def find(site):
    """The draws the rewrite splits (synchronous training only), their layout, and the ones it cannot split, as
    planning read them (draws_following_the_batch: the losses' laws read them too)."""
    draws = site.draws
    return {"batch_draws": draws.split if site.plan.sync else (), "batch_layout": draws.layout,
            "unsplittable_draws": draws.unsplittable, "guarded_draws": draws.guarded}


RULE = Rule("split_batch_draws", ("batch_draws",), "draws_split", apply, holds, find,
            records=("batch_layout", "unsplittable_draws", "guarded_draws"),
            doc="each random draw whose shape follows the batch (dropout's mask) draws, as one device does, for the "
                "whole global batch, and this worker keeps its own examples' values")
