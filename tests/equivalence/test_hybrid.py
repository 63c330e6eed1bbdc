"""HYBRID mode (the default): dense variables on AllReduce, sparse ones on parameter servers, each worker both an
MPI rank and a TF worker task. Equivalent to one process with the total batch."""
import pytest

from tests.equivalence.harness import assert_equivalent, check_equivalence, reference, run_case, two_hosts

# N=4 (two workers on each of the two hosts): the ablation's last row below, which is this test's default run.
HYBRID_CASES = [("linear", 2), ("mlp_optimizers", 2), ("embedding_clip_adam", 2), ("ema", 2), ("batch_norm", 2),
                ("lstm_lm", 2), ("embedding_clip_adam_partitioned", 2)]


@pytest.mark.parametrize("case, workers", HYBRID_CASES)
def test_hybrid_equivalence(tmp_path_factory, case, workers):
    check_equivalence(tmp_path_factory.mktemp("eq"), case, workers, "HYBRID", spec=two_hosts(workers))


# The paper's Table 4 ablation, cumulatively, on case 3 with 2 workers on each of 2 hosts (so local aggregation
# really groups workers).
ABLATION = [("BASE", "PS", ""), ("+HYB", "HYBRID", ""), ("+LA", "HYBRID", "LA"), ("+OPAU", "HYBRID", "LA,OPAU"),
            ("+OPSW", "HYBRID", "LA,OPAU,OPSW")]


@pytest.mark.parametrize("label, run_option, switches", ABLATION, ids=[a[0] for a in ABLATION])
def test_every_cumulative_optimization_is_equivalent(tmp_path_factory, label, run_option, switches):
    check_equivalence(tmp_path_factory.mktemp("eq"), "embedding_clip_adam", 4, run_option, spec=two_hosts(4),
                      switches=switches)


def test_summed_gradients_follow_the_formula_in_hybrid(tmp_path_factory):
    """Case 7 in HYBRID: average_*=False sums over workers, dense (allreduce) and sparse (servers) alike: with SGD
    that is one process with N x the learning rate."""
    out = tmp_path_factory.mktemp("eq")
    summed = run_case(out, "summed_sgd", "parallax", 2, run_option="HYBRID", no_average=True, spec=two_hosts(2))
    diffs = assert_equivalent(reference(out, "summed_sgd", 2, lr_scale=2.0), summed)
    print(f"HYBRID summed_sgd N=2: max abs diff {max(diffs.values()):.3g}")
