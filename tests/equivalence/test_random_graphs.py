"""The randomized equivalence suite's fixed seeds (random_graphs.py), each in MPI, PS and HYBRID with 2 workers on
two loopback hosts, against one process with the total batch (float64, 1e-9). Any number of seeds:
`make fuzz SEEDS=0-199`."""
import os

import pytest

from tests.equivalence.harness import check_random, two_hosts

# 0, 21, 42, 103, 162 together draw every value of every feature (chosen greedily over seeds 0-299); 1, 2 and 4
# found bugs (minimal regressions in user_graphs.py).
SEEDS = (0, 1, 2, 4, 21, 42, 103, 162)
# `make test TF=2.21` runs HYBRID only, to keep CI within its time; the default environment runs every mode.
MODES = tuple(os.environ.get("PARALLAX_RANDOM_GRAPH_MODES", "MPI,PS,HYBRID").split(","))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("seed", SEEDS)
def test_random_graph_is_exact(tmp_path_factory, seed, mode):
    diff = check_random(tmp_path_factory.mktemp("eq"), seed, 2, mode, spec=two_hosts(2))
    print(f"{mode} random:{seed}: max abs diff {diff:.3g}")
