"""scripts/ci_totals.py: .ci/run's closing line adds up pytest's summary lines, and nothing else."""
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def totals_of(text, tmp_path):
    log = tmp_path / "ci.log"
    log.write_text(text)
    done = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "ci_totals.py"), str(log)],
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_every_pytest_summary_counts_and_errors_count_as_failures(tmp_path):
    text = ("....s\n1211 passed, 685 warnings in 2665.67s (0:44:25)\n"
            "90 passed, 1215 deselected, 4 warnings in 846.97s (0:14:06)\n"
            "==== 2 failed, 66 passed, 87 skipped, 1 error in 335.20s ====\n"
            "28 skipped, 165 deselected in 0.89s\n")
    assert totals_of(text, tmp_path) == "ci: 1367 passed, 3 failed, 115 skipped"


def test_lines_that_are_not_a_summary_do_not_count(tmp_path):
    text = ("a test printed: 5 passed in its own words\n"
            "E   assert '1 passed' in out\n"
            "3 passed in 1.00s\n")
    assert totals_of(text, tmp_path) == "ci: 3 passed, 0 failed, 0 skipped"
