"""The slots of a variable that no optimizer record names (analysis/graph_analysis.py): a Keras optimizer's in a
lifted TF2 step, hand-written momentum."""
import dataclasses

from parallax.core import graph_utils


def slots_from_updates(graph, parts, trainable_names, recorded):
    """`parts` with the slots of variables no optimizer record names (a Keras optimizer's in a lifted TF2 step,
    hand-written momentum): a variable that is not trained, is written from the variable's gradient among the
    ancestors of its update ops, and among no other variable's, is its slot (an Adagrad accumulator, Adam's
    moments; not the iteration counter, written after the updates, nor state written from the batch, such as a
    count of ids). Planned as slots, they stay on their variable's server, as a v1 optimizer's do."""
    owners = {}  # written variable -> the variables whose updates write it
    written_by = {}  # op -> the variable it writes, or None: each op looked at once, however many parts reach it
    for name, part in parts.items():
        updates = [graph.get_operation_by_name(u) for u in part.update_ops]
        gradient_ops = {graph.get_tensor_by_name(g.values).op for g in part.gradients}
        reached = graph_utils.ancestors(updates) if updates else set()
        from_gradient = None if name in recorded else _downstream_within(gradient_ops & reached, reached)
        for op in reached:
            if op not in written_by:
                written_by[op] = graph_utils.written_variable(op)
            written = written_by[op]
            if written is not None and written not in trainable_names and (
                    from_gradient is None or op in from_gradient):
                owners.setdefault(written, set()).add(name)
    found = {}
    for slot, names in sorted(owners.items()):
        name = next(iter(names))
        if len(names) == 1 and name not in recorded and not parts[name].slots:
            found.setdefault(name, []).append((slot, slot))
    return {name: dataclasses.replace(part, slots=tuple(found[name])) if name in found else part
            for name, part in parts.items()}


def _downstream_within(starts, within):
    """The ops of `within` that have one of `starts` among their ancestors (themselves included), for `within`
    closed under ancestors: every path from a start to such an op lies in `within`. One walk, where asking each
    op for its ancestors walked the graph once per op."""
    return graph_utils.closure(starts, lambda op: [c for c in graph_utils.consumers(op) if c in within])
