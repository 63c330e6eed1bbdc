"""Rule 4 of the synchronization rule, checked on the rewritten graph of random training graphs without running
them: every op only the chief runs that waited for a write of server-held state in the user's graph still waits
for it (an EMA of a server variable after that variable's update, behind the train op's group that every worker
runs). A lost edge is a race that shows only under load, so a run cannot be relied on to find it."""
import pytest
import tensorflow as tf

import parallax
from parallax.planning import plan_job
from parallax.rewrite.pipeline import rewrite
from parallax.sync_step import SyncSteps
from tests.equivalence.run_case import case_builder
from tests.equivalence.user_graphs import USER_GRAPHS

pytestmark = pytest.mark.slow  # plans and rewrites every graph: minutes


tf1 = tf.compat.v1
TWO_HOSTS = parallax.ResourceSpec.parse("127.0.0.1: 0\n127.0.0.2: 0")
CASES = [f"random:{seed}" for seed in range(40)] + sorted(USER_GRAPHS)


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


@pytest.mark.parametrize("mode", ("PS", "HYBRID"))
@pytest.mark.parametrize("name", CASES)
def test_chief_only_work_still_waits_for_the_server_writes_it_waited_for(name, mode):
    v2_control_flow = tf1.control_flow_v2_enabled()
    try:
        case = case_builder(name)(2, 2, 6, 2)
        config = parallax.Config(run_option=mode, methods=case.methods or {})
        plan = plan_job(case.graph, parallax.analyze(case.graph), TWO_HOSTS, config)
        rewritten = rewrite(case.graph, plan, config)
    finally:
        if v2_control_flow:
            tf1.enable_control_flow_v2()  # a ref-variable case turns it off, as a TF1 script would
    if not plan.uses_servers:  # HYBRID with only dense variables runs as MPI: no server state
        assert mode == "HYBRID" and rewritten.sync is None
        return
    assert lost_orderings(case.graph, rewritten) == []
