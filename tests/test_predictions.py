"""benchmarks/predictions.py: the report flags the points whose rounds disagree, so that a miss the machine's drift
explains is told apart from the model's."""
import importlib.util
import os
import sys
from types import SimpleNamespace

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path[:0] = [os.path.join(ROOT, "benchmarks"), ROOT]
spec = importlib.util.spec_from_file_location("predictions", os.path.join(ROOT, "benchmarks", "predictions.py"))
predictions = importlib.util.module_from_spec(spec)
spec.loader.exec_module(predictions)


def _runs(steps_of):
    return {("1gbit", "LM", mode): [SimpleNamespace(step_seconds=s) for s in steps_of.get(mode, (0.1, 0.1))]
            for mode in predictions.MODES}


def test_points_whose_rounds_spread_are_listed_with_the_misses_among_them():
    runs = _runs({"PS": (0.100, 0.150), "MPI": (0.100, 0.119), "AUTO": (0.100, 0.130)})
    # PS: median 0.125, predicted 0.11 (0.88: within); AUTO: median 0.115, predicted 0.09 (0.78: a miss)
    predicted = {("1gbit", "LM"): {"PS": 0.11, "MPI": 0.11, "HYBRID": 0.1, "AUTO": 0.09}}
    line = predictions.drift_line(runs, predicted, ["1gbit"], ["LM"])
    assert line == ("Rounds more than 1.2x apart (slowest over fastest): 2 points, LM 1gbit PS (1.50x), "
                    "LM 1gbit AUTO (1.30x); 1 of them outside 20%.")


def test_steady_rounds_and_single_rounds_flag_nothing():
    runs = _runs({"PS": (0.1,), "MPI": (0.100, 0.110)})
    predicted = {("1gbit", "LM"): dict.fromkeys(predictions.MODES, 0.05)}
    assert predictions.drift_line(runs, predicted, ["1gbit"], ["LM"]) == \
        "Every point's rounds are within 1.2x of each other."
