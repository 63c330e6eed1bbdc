"""The equivalence promise on Horovod's collectives (Config.collective_backend="horovod"), which need one MPI process
per worker: real jobs through get_runner's self-launch (mpirun), in MPI and HYBRID, on two loopback hosts, against one
process with the total batch. The rest of the suite runs on TF's collectives in thread jobs; this sample holds every
kind of graph whose collectives differ by backend, one graph each: dense only; sparse rows (allgathered in MPI, on
servers in HYBRID) read through a SparseTensor and clipped by the global norm; a partitioned embedding; a mixed plan
with ref variables and a v1 cond; a v1 while loop; a v2 while loop (a Keras GRU); EMA of server and replicated
variables with a v2 cond; batch statistics; TF's fused batch norm; rows paired across the batch; inputs padded to
the longest; random draws split over the batch; gradient accumulation; a random graph. Each runs in MPI and in
HYBRID, but for the graphs whose two plans are one (SAME_PLAN, checked). Horovod does not build for TF >= 2.19: the
Makefile runs this file on TF 2.15 alone (it fails with the install hint where Horovod is missing)."""
import pytest

from parallax import collectives
from tests.equivalence.harness import check_case, two_hosts

SAMPLE = ("linear", "sparse_input_clip", "embedding_clip_adam_partitioned", "mixed_methods",
          "while_loop_gradients_with_embedding_ref", "keras_gru", "ema_of_server_and_replicated_variables",
          "batch_norm_moments", "batch_norm_fused_conv", "in_batch_negatives_sharded", "padded_v1_loop_lookups",
          "dropout_sharded", "grad_accumulation", "random:42")


@pytest.fixture(scope="module", autouse=True)
def _horovod_built():
    problem = collectives.horovod_problem()
    assert problem is None, f"{problem}; install it: {collectives.HOROVOD_INSTALL}"


# Graphs whose HYBRID plan is their MPI plan (no variable on a server: HYBRID of dense variables is MPI; a mixed
# plan's methods are its own): one run covers both, and test_one_run_covers_both_modes_of_these checks the plans.
SAME_PLAN = ("linear", "mixed_methods", "batch_norm_moments", "batch_norm_fused_conv", "dropout_sharded")
RUNS = [(case, mode) for case in SAMPLE for mode in ("MPI", "HYBRID") if not (case in SAME_PLAN and mode == "HYBRID")]


def test_one_run_covers_both_modes_of_these():
    import json

    import parallax
    from parallax.plan import plan_json
    from parallax.plan.planning import plan_job
    from tests.equivalence.run_case import case_builder
    spec = parallax.ResourceSpec.parse(two_hosts(2))
    for name in SAME_PLAN:
        case = case_builder(name)(2, 4, 2, 4, 1.0)
        plans = []
        for mode in ("MPI", "HYBRID"):
            config = parallax.Config(run_option=mode, collective_backend=collectives.HOROVOD, methods=case.methods or {})
            data = json.loads(plan_json.dumps(plan_job(case.graph, parallax.analyze(case.graph), spec, config)))
            data.pop("run_option")
            plans.append(data)
        assert plans[0] == plans[1], f"{name}: HYBRID plans otherwise than MPI; run it in both"


@pytest.mark.parametrize("case, mode", RUNS)
def test_horovod_collectives_are_exact(tmp_path_factory, case, mode):
    diff = check_case(tmp_path_factory.mktemp("eq"), case, 2, mode, spec=two_hosts(2), backend=collectives.HOROVOD)
    print(f"horovod {mode} {case} N=2: max abs diff {diff:.3g}")


def test_horovod_collectives_are_exact_with_four_workers(tmp_path_factory):
    """Two workers on each host: Horovod's ranks span hosts, and HYBRID's local aggregation groups them."""
    diff = check_case(tmp_path_factory.mktemp("eq"), "mixed_methods", 4, "HYBRID", spec=two_hosts(4),
                      backend=collectives.HOROVOD)
    print(f"horovod HYBRID mixed_methods N=4: max abs diff {diff:.3g}")


def test_the_check_gathers_the_workers_batches_through_horovod():
    """Config.check_steps on Horovod's collectives without servers (MPI): the records reach the chief by an
    allgather (step_check.horovod_gather); a planted difference (gradients summed) is warned of, with the flag."""
    import os
    import sys

    from tests.launched import ROOT, run_script
    script = os.path.join(ROOT, "tests", "launcher_scripts", "checked_job.py")
    proc = run_script(["-m", "parallax.launcher.cli", "-H", "localhost:2", "--check-steps", "3", "--check-warns",
                       "--", sys.executable, script, "MPI", "planted", "horovod"], timeout=240)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    assert "parallax: warning: check of the first 3 training steps of 2 workers" in output and \
        "w/Adam (max abs diff" in output and "worker 1 done" in output, output[-3000:]
