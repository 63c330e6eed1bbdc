"""PS mode (parameter servers, synchronous accumulators, a chief) is equivalent to one process with the total
batch: two loopback "hosts", so two parameter servers."""
import numpy as np
import pytest

from tests.equivalence.cases import linear_data
from tests.equivalence.harness import assert_equivalent, check_equivalence, reference, run_case, two_hosts

PS_CASES = [("linear", 2), ("mlp_optimizers", 2), ("ema", 2), ("batch_norm", 2), ("lstm_lm", 2),
            ("embedding_clip_adam_partitioned", 2), ("embedding_clip_adam_partitioned", 4)]


@pytest.mark.parametrize("case, workers", PS_CASES)
def test_ps_equivalence(tmp_path_factory, case, workers):
    check_equivalence(tmp_path_factory.mktemp("eq"), case, workers, "PS", spec=two_hosts(workers))


def test_sync_replicas_semantics_after_one_step(tmp_path_factory):
    """TF's sync_replicas_optimizer_test (test2Workers) in our terms: the averaged gradients, applied once."""
    out = tmp_path_factory.mktemp("eq")
    got = run_case(out, "sync_replicas", "parallax", 2, batch=1, steps=1, run_option="PS", spec=two_hosts(2))
    assert float(got["v0"]) == pytest.approx(0.0 - (0.1 + 0.3) / 2 * 2.0, abs=1e-12)
    assert float(got["v1"]) == pytest.approx(1.0 - (0.9 + 1.1) / 2 * 2.0, abs=1e-12)
    np.testing.assert_allclose(got["v_sparse"], [[3.0], [4.0 - (0.1 + 0.3) / 2 * 2.0]], atol=1e-12)
    assert int(got["global_step"]) == 1  # one update per step, however many workers
    assert_equivalent(reference(out, "sync_replicas", 2, batch=1, steps=1), got)


def test_async_training_converges(tmp_path_factory):
    out = tmp_path_factory.mktemp("eq")
    steps = 40
    got = run_case(out, "linear", "parallax", 2, steps=steps, run_option="PS", sync=False, spec=two_hosts(2))
    start = run_case(out, "linear", "single", 2, steps=0)
    x, y = linear_data(2, 4, steps)

    def mse(v):
        return float(np.mean((x @ v["linear/kernel"] + v["linear/bias"] - y) ** 2))
    print(f"async PS linear: mse {mse(start):.4f} -> {mse(got):.4f}")
    assert mse(got) < 0.05 * mse(start)
    # Each worker applies its own updates; the chief dumps when it is done, the other worker may not be yet.
    assert steps <= int(got["global_step"]) <= 2 * steps
