"""The cheap path cannot pass where the real one fails: a sample of graphs, in every mode, run both as a thread job
(the warm case host, as the rest of the suite runs) and as a real job of one process per worker and server
(get_runner's self-launch), both on TF's collectives. The two must make the same plan (its JSON, byte for byte), and
each must equal one process with the total batch within the suite's tolerance, and the other within it too. The
sample: every mode at 2 workers on two hosts, and at 4; dense, sparse, partitioned and paired rows, a while loop,
batch norm, a v1 loop with padded inputs, a mixed plan with ref variables, a random graph."""
import numpy as np
import pytest

from tests.equivalence.harness import assert_equivalent, reference, run_case, two_hosts
from tests.equivalence.run_case import case_builder

SAMPLE = [("lstm_lm", "MPI", 2), ("embedding_clip_adam_partitioned", "MPI", 4), ("batch_norm", "PS", 2),
          ("random:42", "PS", 2), ("grad_accumulation", "PS", 4), ("mixed_methods", "HYBRID", 4),
          ("in_batch_negatives_sharded", "HYBRID", 2), ("padded_v1_loop_lookups", "HYBRID", 2)]


def paths_agree(threads, processes, reference, float32):
    """(thread job's values and plan, real job's values and plan, the reference): raises AssertionError naming what
    differs."""
    (thread_values, thread_plan), (process_values, process_plan) = threads, processes
    assert thread_plan == process_plan, "the thread job and the real job made different plans"
    assert_equivalent(reference, process_values, float32)
    assert_equivalent(reference, thread_values, float32)
    return assert_equivalent(process_values, thread_values, float32)


@pytest.mark.parametrize("case, mode, workers", SAMPLE)
def test_a_thread_job_computes_what_a_real_job_computes(tmp_path_factory, case, mode, workers):
    out, spec = tmp_path_factory.mktemp("eq"), two_hosts(workers)
    runs = {}
    for processes in (False, True):
        plan = out / f"plan-{processes}.json"
        values = run_case(out, case, "parallax", workers, run_option=mode, spec=spec, processes=processes,
                          plan_out=str(plan))
        runs[processes] = (values, plan.read_text())
    expected = reference(out, case, workers)
    diffs = paths_agree(runs[False], runs[True], expected, case_builder(case)(1, 1, 1, 1).float32)
    print(f"{mode} {case} N={workers}: thread job against real job, max abs diff {max(diffs.values()):.3g}")


def test_the_check_fails_when_the_paths_differ():
    """The comparison itself can fail: a plan that differs, or a thread job off by more than the tolerance."""
    values = {"w": np.array([1.0, 2.0])}
    off = {"w": np.array([1.0, 2.0 + 1e-6])}
    with pytest.raises(AssertionError, match="different plans"):
        paths_agree((values, '{"plan": 1}'), (values, '{"plan": 2}'), values, False)
    with pytest.raises(AssertionError, match="max abs diff"):
        paths_agree((off, "{}"), (values, "{}"), values, False)
