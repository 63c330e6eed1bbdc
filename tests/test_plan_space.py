"""benchmarks/plan_space.py: a mixed plan is named by what it moves from the nearest fixed mode's plan, and a
space whose best plans are all fixed modes' says so."""
import importlib.util
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path[:0] = [os.path.join(ROOT, "benchmarks"), ROOT]
spec = importlib.util.spec_from_file_location("plan_space", os.path.join(ROOT, "benchmarks", "plan_space.py"))
plan_space = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plan_space)

FIXED_METHODS = {"PS": {"emb": "PS", "kernel": "PS"}, "MPI": {"emb": "AG", "kernel": "AR"},
                 "HYBRID": {"emb": "PS", "kernel": "AR"}}


def space(rows):
    return {"plans": 8, "searched": "every plan", "fixed": {"PS": 0.2, "MPI": 0.25, "HYBRID": 0.3},
            "fixed_methods": FIXED_METHODS, "fixed_la": {"PS": True, "MPI": False, "HYBRID": False}, "rows": rows}


def test_a_mixed_plan_is_named_by_its_moves_from_the_nearest_fixed_plan_and_its_gain_is_over_the_best_fixed():
    mixed = {"seconds": 0.16, "fixed": None, "la": False, "methods": {"emb": "AG", "kernel": "PS"}}
    row = plan_space.row_of("M", "1gbit", space([mixed]), {"PS": 1.01})
    assert "PS (200.0)" in row
    assert "MPI's with kernel PS" in row  # one move from MPI's plan; two from PS's (its local aggregation)
    assert "| 160.0 | 1.250 |" in row
    assert row.endswith("| PS 1.01 |")


def test_a_space_of_fixed_plans_only_has_no_mixed_row():
    fixed_only = [{"seconds": 0.2, "fixed": "PS", "la": True, "methods": FIXED_METHODS["PS"]}]
    assert "none: the search ends on a fixed mode's plan" in plan_space.row_of("M", "1gbit", space(fixed_only), {})
