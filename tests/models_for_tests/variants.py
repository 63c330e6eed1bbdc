"""Each worker's variant of a fetch in a rewritten graph, derived as the Runner does, without starting processes."""
from parallax.runtime.sync_step import SyncSteps


def variants(out, fetch, num_workers):
    """[Variant of worker 0 (the chief), worker 1, ...] for `fetch` (an element or name of the rewritten graph)."""
    g = out.graph
    element = g.as_graph_element(fetch if isinstance(fetch, str) else fetch.name)
    return [SyncSteps(g, out.sync, w, num_workers).variant((element.name,), [element]) for w in range(num_workers)]


def runs(variant):
    """Every op the variant's Session.run executes (what its leaves and targets need, fed tensors cut)."""
    fed = {t.op for t in variant.feeds}
    seen, stack = set(), [getattr(x, "op", x) for x in variant.leaves if x is not None] + list(variant.targets)
    stack += [t.op for t in variant.released or []]
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        if op in fed:
            continue
        stack.extend([t.op for t in op.inputs] + list(op.control_inputs))
    return seen


def names(ops):
    return {op.name for op in ops}

