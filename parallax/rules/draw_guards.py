"""Random draws parallax cannot split that run only in some branches of a cond: dropout under a `training` flag
(`tf1.layers.dropout(h, training=is_training)` draws inside `dropout/cond`). Such a draw makes a step inexact only
when the step runs it, so the planner does not warn of it at start; the runner fetches the cond's predicate with
each step that runs the cond, and warns once, at the first step whose cond takes a branch that draws.

A guard is (the draw as the plan lists it, the op whose run decides it: the cond op calling the branch functions,
or the draw itself in a v1 cond's branch, the predicate or branch-index tensor, "if" or "case", the branches that
run the draw, how many the cond has). Branch k of an "if" is its then-branch for k = 0 and its else-branch for
k = 1; a "case" runs its last branch for an index out of range, as TF does. Only conds outside every other control
flow get a guard: a nested one's predicate may not run in a step.
"""
import sys

IF, CASE = "if", "case"


def function_guard(entry, caller, draw_node, nodes_in):
    """The guard of `draw_node` (a node name found in functions `caller` runs, listed as `entry`), or None when
    `caller` is no cond outside control flow, or every branch of it draws."""
    attrs = caller.node_def.attr
    if "then_branch" in attrs and "else_branch" in attrs:
        kind, branches = IF, [attrs["then_branch"].func.name, attrs["else_branch"].func.name]
    elif "branches" in attrs:
        kind, branches = CASE, [f.name for f in attrs["branches"].list.func]
    else:
        return None
    running = tuple(k for k, name in enumerate(branches) if draw_node in nodes_in(name))
    if len(running) == len(branches) or not _outside_control_flow(caller, caller.inputs[0].op):
        return None
    return entry, caller.name, caller.inputs[0].name, kind, running, len(branches)


def v1_cond_guard(draw):
    """The guard of a draw in a v1 cond's branch (tf1.cond with v2 control flow off), or None."""
    context = draw._get_control_flow_context()
    pred = getattr(context, "pred", None)
    if pred is None or context.outer_context is not None or not _outside_control_flow(pred.op):
        return None
    return draw.name, draw.name, pred.name, IF, ((0,) if context.branch == 1 else (1,)), 2


def _outside_control_flow(*ops):
    return all(op._get_control_flow_context() is None for op in ops)


def taken_branch(kind, value, count):
    if kind == IF:
        return 0 if bool(value) else 1
    index = int(value)
    return index if 0 <= index < count else count - 1


class DrawWatch:
    """A runner's watch over its plan's guarded draws: which predicates a step fetches, and the warning once."""

    def __init__(self, graph, guards, worker_id):
        self._guards = [(entry, graph.get_operation_by_name(runs), graph.get_tensor_by_name(pred), kind,
                         frozenset(branches), count) for entry, runs, pred, kind, branches, count in guards]
        self._worker_id = worker_id
        self.warned = set()

    def predicates(self, ancestors):
        """The guards a step whose ops are `ancestors` runs, and not yet warned of (empty: nothing to fetch)."""
        return [g for g in self._guards if g[0] not in self.warned and g[1] in ancestors]

    def check(self, guards, values, step):
        """Warn of each guarded draw the step ran (`step`: which step, for the message)."""
        for (entry, _, pred, kind, branches, count), value in zip(guards, values):
            if entry not in self.warned and taken_branch(kind, value, count) in branches:
                self.warned.add(entry)
                value = value.item() if hasattr(value, "item") else value  # a numpy scalar, as the user wrote it
                print(f"parallax: warning: worker {self._worker_id}: {step} ran random draw "
                      f"{entry} (its cond's {pred.name} is {value!r}): it depends on the batch in a way parallax "
                      f"cannot split, so the workers drew other values than one device, and the step is not "
                      f"exact there", file=sys.stderr, flush=True)
