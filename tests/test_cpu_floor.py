"""benchmarks/cpu_floor.py: HYBRID's floor is its CPU without the collectives' fixed costs, and the break-even
allreduce cost per byte puts that floor exactly at PS's CPU."""
import dataclasses
import importlib.util
import os
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path[:0] = [os.path.join(ROOT, "benchmarks"), ROOT]
spec = importlib.util.spec_from_file_location("cpu_floor", os.path.join(ROOT, "benchmarks", "cpu_floor.py"))
cpu_floor = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cpu_floor)

from parallax.plan import cost_model as cm, plan_search# noqa: E402

MB = 1 << 20
PER_HOST = (2, 2)
MACHINE = cm.Machine(bandwidth=125e6, latency=1e-4, cores=2.0,
                     cpu_per_byte={"allreduce/tf": 1.2e-9, "allgather/tf": 1e-9, "ps": 0.3e-9},
                     cpu_per_message={"allreduce/tf": 1e-3, "allgather/tf": 1e-3, "ps": 1e-4},
                     cpu_per_step={"ps": 1.5e-3})
WORKLOAD = cm.Workload(0.05, 0.05, (cm.VariableLoad("K", "dense", 2 * MB, 1.0, 1, (1, 2 * MB)),
                                    cm.VariableLoad("E", "sparse", 32 * MB, 0.01, 2)))


def plans(workload):
    return {mode: plan_search.fixed_choices(workload, mode, len(PER_HOST)) for mode in cpu_floor.MODES}


def all_hosts_cpu(workload, choices, machine):
    return sum(cm.predict(workload, choices, PER_HOST, machine, "tf").host_cpu)


def test_the_floor_drops_exactly_the_collectives_fixed_cpu():
    floor = cpu_floor.floor_of(WORKLOAD, plans(WORKLOAD), PER_HOST, MACHINE, "tf")
    hybrid = floor["cpu"]["HYBRID"]
    # a HYBRID step runs two collectives per worker with `tf`: the fused allreduce and the fence's gather
    assert hybrid - floor["floor"] == pytest.approx(2 * sum(PER_HOST) * 1e-3)
    assert floor["cpu"]["PS"] == pytest.approx(all_hosts_cpu(WORKLOAD, plans(WORKLOAD)["PS"], MACHINE))
    assert floor["per_gb"] == pytest.approx(1.2)


def test_at_the_break_even_cost_per_byte_the_floor_equals_ps():
    floor = cpu_floor.floor_of(WORKLOAD, plans(WORKLOAD), PER_HOST, MACHINE, "tf")
    assert floor["floor"] > floor["cpu"]["PS"]  # this machine's allreduce bytes cost 4x a server's
    even = floor["break_even"]
    assert 0 < even < floor["per_gb"]
    bare = cpu_floor.with_cpu_per_byte(cpu_floor.without_collective_fixed_cpu(MACHINE), "allreduce/tf",
                                                 even / 1e9)
    assert all_hosts_cpu(WORKLOAD, plans(WORKLOAD)["HYBRID"], bare) == pytest.approx(floor["cpu"]["PS"])


def test_a_floor_above_the_compared_plan_even_with_free_allreduce_bytes_has_no_break_even():
    # compared with a plan of no servers (MPI's) on a machine whose collectives cost nothing but whose servers do,
    # HYBRID's sparse table on the servers keeps its floor above at any allreduce cost per byte
    costly_servers = dataclasses.replace(MACHINE, cpu_per_byte={"allreduce/tf": 1e-12, "allgather/tf": 0.0,
                                                                "ps": 1e-9},
                                         cpu_per_message={"allreduce/tf": 0.0, "allgather/tf": 0.0, "ps": 1e-4})
    compared = {"PS": plan_search.fixed_choices(WORKLOAD, "MPI", 2), "HYBRID": plans(WORKLOAD)["HYBRID"]}
    floor = cpu_floor.floor_of(WORKLOAD, compared, PER_HOST, costly_servers, "tf")
    assert floor["floor"] > floor["cpu"]["PS"]
    assert floor["break_even"] is None
    assert row_cells(cpu_floor.row_of("M", "1gbit", floor, {}))[-1] == "none: above PS's even at 0"


def row_cells(row):
    return [c.strip() for c in row.strip("|").split("|")]


def test_the_row_sets_measured_beside_predicted():
    floor = {"cpu": {"PS": 0.2, "HYBRID": 0.22}, "floor": 0.21, "per_gb": 0.6, "break_even": 0.4}
    row = cpu_floor.row_of("LM", "1gbit", floor, {"PS": 0.25, "HYBRID": 0.275})
    assert row == "| LM | 1gbit | 250 | 200 | 275 | 220 | 1.10 | 1.10 | 210 | 1.05 | 0.60 | 0.40 |"
