"""MPI mode (AllReduce/AllGather on TF's collectives; test_horovod.py runs a sample on Horovod's) is equivalent to
one process with the total batch."""
import pytest

from tests.equivalence.harness import (MUST_HAVE, assert_equivalent, check_equivalence, max_differences,
                                       reference, run_case)

# N=4: rows of changing count cut back across 4 workers (the partitioned embedding: its two parts' rows in one
# grouped allgather), and a while loop's.
MPI_CASES = [(c, 2) for c in MUST_HAVE] + \
    [("embedding_clip_adam", 4), ("lstm_lm", 4), ("embedding_clip_adam_partitioned", 4)]


@pytest.mark.parametrize("case, workers", MPI_CASES)
def test_mpi_equivalence(tmp_path_factory, case, workers):
    check_equivalence(tmp_path_factory.mktemp("eq"), case, workers, "MPI")


def test_summed_gradients_follow_the_formula(tmp_path_factory):
    """average_dense=average_sparse=False sums over N workers: with plain SGD that is one process with N x lr."""
    out = tmp_path_factory.mktemp("eq")
    workers = 2
    summed = run_case(out, "summed_sgd", "parallax", workers, run_option="MPI", no_average=True)
    diffs = assert_equivalent(reference(out, "summed_sgd", workers, lr_scale=float(workers)), summed)
    print(f"summed_sgd N={workers}: max abs diff over {len(diffs)} variables = {max(diffs.values()):.3g}")
    # The oracle can fail: the summed run is far from the averaged single-process run.
    assert max(max_differences(reference(out, "summed_sgd", workers), summed).values()) > 1e-4
