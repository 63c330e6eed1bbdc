"""Rule 4 of the synchronization rule (tests/equivalence/write_order.py), checked on the rewritten graph of the random
training graphs without running them, in PS and HYBRID: every op only the chief runs that waited for a write of
server-held state in the user's graph still waits for it. The user graphs are checked by their own jobs: in
test_user_graphs.py every PS and HYBRID job's chief checks its rewritten graph (run_case.py), and the one graph PS
refuses to run (NOT_IN_PS) is checked here."""
import pytest
import tensorflow as tf

import parallax
from parallax.plan.planning import plan_job
from parallax.rewrite.pipeline import rewrite
from tests.equivalence.run_case import case_builder
from tests.equivalence.test_user_graphs import NOT_IN_PS
from tests.equivalence.write_order import lost_orderings

pytestmark = pytest.mark.slow  # plans and rewrites every graph: minutes


tf1 = tf.compat.v1
TWO_HOSTS = parallax.ResourceSpec.parse("127.0.0.1: 0\n127.0.0.2: 0")
CASES = [f"random:{seed}" for seed in range(40)]


def _check(name, mode):
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


@pytest.mark.parametrize("mode", ("PS", "HYBRID"))
@pytest.mark.parametrize("name", CASES)
def test_chief_only_work_still_waits_for_the_server_writes_it_waited_for(name, mode):
    _check(name, mode)


@pytest.mark.parametrize("name", NOT_IN_PS)
def test_a_graph_ps_refuses_to_run_keeps_its_orderings_in_the_rewrite(name):
    _check(name, "PS")
