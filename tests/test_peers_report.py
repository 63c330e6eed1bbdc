"""benchmarks/peers_report.py: which run is the best peer and the best parallax mode, the ratios, and what the
tables show for runs that failed or did not run, from stand-in measurements (saved and loaded back)."""
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import peers_report  # noqa: E402
import testbed  # noqa: E402

LABELS = {"LM": ["parallax PS", "parallax MPI", "parallax AUTO", "Horovod", "TF1 PS + SyncReplicasOptimizer"]}


def _m(rate):
    return testbed.Measurement(rate, "words", 1e6, 2e6, 3, 0.5, 0.1)


def _saved(tmp_path, runs, failures=()):
    path = peers_report.save(str(tmp_path / "peers.json"), {"rounds": 2}, ["1gbit"], ["LM"], LABELS, runs,
                             {("LM", "Horovod"): 1e-16, ("LM", "TF1 PS + SyncReplicasOptimizer"): 0.03},
                             list(failures))
    return peers_report.load(path)


def test_the_ratios_are_of_the_medians_of_the_best_mode_and_of_auto_over_the_best_peer_and_best_exact_peer(
        tmp_path):
    runs = {("1gbit", "LM", "parallax PS"): [_m(90), _m(110)], ("1gbit", "LM", "parallax MPI"): [_m(150)],
            ("1gbit", "LM", "parallax AUTO"): [_m(140)], ("1gbit", "LM", "Horovod"): [_m(100), _m(120)],
            ("1gbit", "LM", "TF1 PS + SyncReplicasOptimizer"): [_m(200)]}
    _, rates, models, labels, loaded, diffs, failures = _saved(tmp_path, runs)
    assert peers_report.ratios(rates, models, labels, loaded, diffs) == [
        ("1gbit", "LM", "TF1 PS + SyncReplicasOptimizer", 200, "parallax MPI", 150, 140, "Horovod", 110)]
    text = "\n".join(peers_report.tables(rates, models, labels, loaded, diffs, failures))
    assert "| LM | 1gbit | TF1 PS + SyncReplicasOptimizer | 200 | parallax MPI | 0.75x | 0.70x | Horovod | 1.27x |" \
        in text
    assert "| TF1 PS + SyncReplicasOptimizer | 200 | 0.50 | 3.00 | 0.03 |" in text


def test_a_failed_run_shows_as_missing_and_is_listed_with_its_error(tmp_path):
    runs = {("1gbit", "LM", "parallax MPI"): [_m(150)]}
    failures = [{"rate": "1gbit", "model": "LM", "label": "Horovod", "round": 1, "error": "job failed\nmpirun: no"}]
    _, rates, models, labels, loaded, diffs, failed = _saved(tmp_path, runs, failures)
    text = "\n".join(peers_report.tables(rates, models, labels, loaded, diffs, failed))
    assert "| LM | 1gbit | - | - | parallax MPI | - | - | - | - |" in text
    assert "| Horovod | - | - | - | 1e-16 |" in text
    assert "- 1gbit LM Horovod, round 1:" in text and "  mpirun: no" in text
