"""The totals of every pytest run in a log, as one closing line: `ci: N passed, N failed, N skipped`.

`make test` runs pytest several times (each TF, its tests marked alone, the test bed), and each prints its own
summary; this line says what the whole run executed. Only pytest's own summary lines count: counts followed by the run's
duration ("1211 passed, 685 warnings in 2665.67s (0:44:25)").

    python3 scripts/ci_totals.py LOG
"""
import re
import sys

SUMMARY = re.compile(r"^=*\s*(\d+ [a-z]+(, \d+ [a-z]+)*) in [0-9.]+s\b")
COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?)\b")


def totals(lines):
    out = {"passed": 0, "failed": 0, "skipped": 0}
    for line in lines:
        found = SUMMARY.match(line.strip())
        if not found:
            continue
        for n, word in COUNT.findall(found.group(1)):
            out["failed" if word.startswith("error") else word] += int(n)
    return out


def main(path):
    with open(path, errors="replace") as f:
        t = totals(f)
    print(f"ci: {t['passed']} passed, {t['failed']} failed, {t['skipped']} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
