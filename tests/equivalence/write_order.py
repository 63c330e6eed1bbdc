"""Rule 4 of the synchronization rule, checked on a job's rewritten graph: every op only the chief runs that waited
for a write of server-held state in the user's graph still waits for it (an EMA of a server variable after that
variable's update, behind the train op's group that every worker runs). A lost edge is a race that shows only under
load, so a run cannot be relied on to find it: run_case.py's chief checks its own rewritten graph in every job with
servers (every user graph in PS and HYBRID), and tests/test_write_order.py the random graphs without running them."""
from parallax.runtime.sync_step import SyncSteps


def _writes_before(graph, writes):
    """op name -> bit set of the `writes` it waits for (data or control edges, through v1 loops too: iterated to
    a fixpoint because of their back edges)."""
    bit = {w: 1 << i for i, w in enumerate(writes)}
    before = {op.name: bit.get(op.name, 0) for op in graph.get_operations()}
    changed = True
    while changed:
        changed = False
        for op in graph.get_operations():
            mask = before[op.name]
            for parent in [t.op for t in op.inputs] + list(op.control_inputs):
                mask |= before[parent.name]
            if mask != before[op.name]:
                before[op.name], changed = mask, True
    return before


def lost_orderings(source, rewritten):
    """(chief-only op, server write) pairs ordered in `source` but not in the rewritten graph."""
    names = {op.name for op in source.get_operations()}
    writes = sorted(w for w in rewritten.sync.gated_writes if w in names)
    was, now = _writes_before(source, writes), _writes_before(rewritten.graph, writes)
    chief_only = SyncSteps(rewritten.graph, rewritten.sync, 0, 2).chief_only
    return sorted((op.name, w) for op in chief_only if op.name in was
                  for i, w in enumerate(writes) if was[op.name] >> i & 1 and not now[op.name] >> i & 1)


def check(source, rewritten):
    """Raise AssertionError naming the orderings the rewrite lost (none without synchronized servers)."""
    if rewritten.sync is None:
        return
    lost = lost_orderings(source, rewritten)
    assert not lost, f"chief-only ops no longer wait for the server writes they waited for: {lost}"
