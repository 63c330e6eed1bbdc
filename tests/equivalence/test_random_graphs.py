"""The randomized equivalence suite's fixed seeds (random_graphs.py), each in MPI, PS and HYBRID (the modes harness.GRAPH_MODES
names) with 2 workers on two loopback hosts, against one process with the total batch (float64, 1e-9). Any number of seeds:
`make fuzz SEEDS=0-199`."""
import pytest

from tests.equivalence.harness import GRAPH_MODES, check_random, two_hosts

# 0, 21, 42, 103, 162 together draw every value of every feature (chosen greedily over seeds 0-299). Seeds 1, 2 and
# 4 found bugs; their minimal regressions are user graphs, and `make fuzz SEEDS=1,2,4` runs the seeds themselves.
SEEDS = (0, 21, 42, 103, 162)


@pytest.mark.parametrize("mode", GRAPH_MODES)
@pytest.mark.parametrize("seed", SEEDS)
def test_random_graph_is_exact(tmp_path_factory, seed, mode):
    diff = check_random(tmp_path_factory.mktemp("eq"), seed, 2, mode, spec=two_hosts(2))
    print(f"{mode} random:{seed}: max abs diff {diff:.3g}")
