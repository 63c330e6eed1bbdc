"""Graphs as users write them (user_graphs.py: the rows of the equivalence issue's table, and minimal regressions
of what the random suite found), exact in every mode: two loopback hosts, so PS and HYBRID have two parameter
servers; at N=4 each host runs two workers, so local aggregation groups them. Each run is a thread job
(harness.py); test_horovod.py and test_paths_agree.py run samples of them as real processes."""
import os

import pytest

from tests.equivalence.harness import GRAPH_MODES, assert_equivalent, reference_and_distributed, two_hosts
from tests.equivalence.run_case import case_builder
from tests.equivalence.user_graphs import USER_GRAPHS

# At N=4 (the full matrix: make fuzz CASES=all WORKERS=4), the rows that mix servers, collectives and local state.
FOUR_WORKERS = ("mixed_methods", "two_train_ops_ref", "grad_accumulation", "partitioned_ema_rmsprop_ref",
                "tied_embedding_two_optimizers_clip", "ema_of_global_step_decay_ref", "dlrm_model")


def _check(out, case, workers, mode):
    expected, got = reference_and_distributed(out, case, workers, run_option=mode, spec=two_hosts(workers))
    diffs = assert_equivalent(expected, got, float32=case_builder(case)(1, 1, 1, 1).float32)
    assert int(got["global_step"]) == int(expected["global_step"]) > 0
    print(f"{mode} {case} N={workers}: max abs diff over {len(diffs)} variables = {max(diffs.values()):.3g}")


# Refused in PS, with a message naming the variable (tests/test_read_back.py): the generator's gradients read the
# discriminator as its update in the same step wrote it, which only the chief makes there.
NOT_IN_PS = ("gan_discriminator_then_generator",)


# PARALLAX_USER_GRAPH_MODES: "all" (the default, and make test's first TF): every graph in every mode. "rotate"
# (make test's second TF, docs/testing.md): every graph in one mode, the modes taken in turn down the sorted graphs, so
# that each mode runs a third of them; the FOUR_WORKERS runs as in "all".
USER_GRAPH_MODES = os.environ.get("PARALLAX_USER_GRAPH_MODES", "all")
if USER_GRAPH_MODES not in ("all", "rotate"):
    raise ValueError(f"PARALLAX_USER_GRAPH_MODES={USER_GRAPH_MODES!r}: give all (every graph in every mode) or rotate "
                     f"(every graph in one mode, the modes in turn)")


def runs(choice):
    """(case, mode, workers): N=2 in every mode ("all") or in one, in turn ("rotate"), and N=4 (two workers on each
    host, so local aggregation groups them) for FOUR_WORKERS in HYBRID."""
    out = []
    for i, case in enumerate(sorted(USER_GRAPHS)):
        modes = [mode for mode in GRAPH_MODES if not (mode == "PS" and case in NOT_IN_PS)]
        out += [(case, mode, 2) for mode in (modes if choice == "all" else [modes[i % len(modes)]])]
    return out + [(case, "HYBRID", 4) for case in FOUR_WORKERS]


RUNS = runs(USER_GRAPH_MODES)


def test_rotated_modes_run_every_graph_once_and_each_mode_a_third():
    rotated, every = runs("rotate"), runs("all")
    assert set(rotated) <= set(every)
    two = [(case, mode) for case, mode, n in rotated if n == 2]
    assert sorted(case for case, _ in two) == sorted(USER_GRAPHS)
    for mode in GRAPH_MODES:
        assert abs(sum(m == mode for _, m in two) - len(two) / 3) <= 2, (mode, len(two))
    assert all(mode != "PS" for case, mode in two if case in NOT_IN_PS)


@pytest.mark.parametrize("case, mode, workers", RUNS)
def test_user_graph_is_exact(tmp_path_factory, case, mode, workers):
    _check(tmp_path_factory.mktemp("eq"), case, workers, mode)
