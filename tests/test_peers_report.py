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
    path = peers_report.save(str(tmp_path / "peers.json"), ["# peers", "", "Settings: rounds=2", ""], ["1gbit"],
                             ["LM"], LABELS, runs,
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


def test_a_merged_rerun_replaces_only_its_rates_and_models_rows_and_says_so_in_the_header(tmp_path):
    saved = {(rate, "LM", label): [_m(100)] for rate in ("1gbit", "100mbit") for label in LABELS["LM"]}
    failures = [{"rate": r, "model": "LM", "label": "Horovod", "round": 2, "error": "x"} for r in ("1gbit", "100mbit")]
    path = peers_report.save(str(tmp_path / "peers.json"), ["# peers", "", "Settings: rounds=2", ""],
                             ["1gbit", "100mbit"], ["LM"], LABELS, saved, {("LM", "Horovod"): 1e-16}, failures)
    header = ["# peers", "", "Machine: box; parallax at abc1234", "", "Settings: rounds=3", ""]
    again = {("1gbit", "LM", "parallax MPI"): [_m(300)]}
    merged = peers_report.merge(path, header, ["1gbit"], ["LM"], again, {}, [])
    lines, rates, models, labels, runs, diffs, failed = merged
    assert lines[-2] == ("Measured again: LM at 1gbit (box; parallax at abc1234; rounds=3); "
                         "the other rows are the run above's.")
    assert rates == ["1gbit", "100mbit"] and labels == LABELS and diffs == {("LM", "Horovod"): 1e-16}
    assert runs[("1gbit", "LM", "parallax MPI")][0].rate == 300 and ("1gbit", "LM", "Horovod") not in runs
    assert runs[("100mbit", "LM", "Horovod")][0].rate == 100
    assert [f["rate"] for f in failed] == ["100mbit"]
