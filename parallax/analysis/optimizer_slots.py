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
    for name, part in parts.items():
        updates = [graph.get_operation_by_name(u) for u in part.update_ops]
        gradient_ops = {graph.get_tensor_by_name(g.values).op for g in part.gradients}
        for op in graph_utils.ancestors(updates) if updates else ():
            written = graph_utils.written_variable(op) if graph_utils.is_writer(op) else None
            if written is not None and written not in trainable_names and (
                    name in recorded or gradient_ops & graph_utils.ancestors([op])):
                owners.setdefault(written, set()).add(name)
    found = {}
    for slot, names in sorted(owners.items()):
        name = next(iter(names))
        if len(names) == 1 and name not in recorded and not parts[name].slots:
            found.setdefault(name, []).append((slot, slot))
    return {name: dataclasses.replace(part, slots=tuple(found[name])) if name in found else part
            for name, part in parts.items()}
