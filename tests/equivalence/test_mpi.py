"""MPI mode (Horovod AllReduce/AllGather) is equivalent to one process with the total batch, on real processes."""
import pytest

from tests.equivalence.cases import CASES
from tests.equivalence.harness import STEPS, assert_equivalent, max_differences, reference, run_case

# Variables each case must have, so that a comparison cannot pass by comparing too little.
MUST_HAVE = {
    "linear": ["linear/kernel", "global_step"],
    "mlp_optimizers": ["adam/adam/hidden/kernel/Adam_1", "momentum/momentum/out/bias/Momentum",
                       "adagrad/adagrad/hidden/kernel/Adagrad", "rmsprop/rmsprop/hidden/kernel/RMSProp_1",
                       "ftrl/ftrl/out/kernel/Ftrl_1", "adam/beta2_power"],
    "embedding_clip_adam": ["embedding", "embedding/Adam", "embedding/Adam_1", "hidden/kernel/Adam"],
    "ema": ["hidden/kernel/ExponentialMovingAverage", "out/bias/ExponentialMovingAverage", "hidden/kernel/Momentum"],
    "batch_norm": ["bn/moving_mean", "bn/moving_variance", "bn/gamma"],
    "lstm_lm": ["embedding", "rnn/lstm/kernel", "rnn/lstm/bias/Adam_1", "softmax/kernel/Adam"],
}


@pytest.mark.parametrize("case, workers", [(c, 2) for c in MUST_HAVE] + [("embedding_clip_adam", 4), ("lstm_lm", 4)])
def test_mpi_equivalence(tmp_path_factory, case, workers):
    out = tmp_path_factory.mktemp("eq")
    expected = reference(out, case, workers)
    got = run_case(out, case, "parallax", workers, run_option="MPI")
    for name in MUST_HAVE[case]:
        assert name in expected, f"{case} lacks {name}: {sorted(expected)}"
    assert int(got["global_step"]) == STEPS
    float32 = CASES[case](1, 1, 1, 1).float32
    diffs = assert_equivalent(expected, got, float32=float32)
    print(f"{case} N={workers}: max abs diff over {len(diffs)} variables = {max(diffs.values()):.3g}")


def test_summed_gradients_follow_the_formula(tmp_path_factory):
    """average_dense=average_sparse=False sums over N workers: with plain SGD that is one process with N x lr."""
    out = tmp_path_factory.mktemp("eq")
    workers = 2
    summed = run_case(out, "summed_sgd", "parallax", workers, run_option="MPI", no_average=True)
    diffs = assert_equivalent(reference(out, "summed_sgd", workers, lr_scale=float(workers)), summed)
    print(f"summed_sgd N={workers}: max abs diff over {len(diffs)} variables = {max(diffs.values()):.3g}")
    # The oracle can fail: the summed run is far from the averaged single-process run.
    assert max(max_differences(reference(out, "summed_sgd", workers), summed).values()) > 1e-4
