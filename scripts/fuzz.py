"""Randomized equivalence: each seed's random training graph (tests/equivalence/random_graphs.py) runs in each mode
with N workers and as one process with the total batch; prints seed, features, mode, max diff and verdict.

  python scripts/fuzz.py --seeds 0-49 --modes MPI,PS,HYBRID --workers 2
  make fuzz SEEDS=0-49 [MODES=MPI,PS,HYBRID] [WORKERS=2]   (WORKERS=4: two loopback hosts of 2 workers)

Exits 1 when any run is not exact (float64, 1e-9), and names the failures again at the end.
"""
import argparse
import os
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)

from tests.equivalence import harness  # noqa: E402
from tests.equivalence.random_graphs import describe, draw  # noqa: E402


def seeds(text):
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi) + 1)) if hi else [int(lo)]
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", required=True, help="e.g. 0-49 or 3,7,12")
    p.add_argument("--modes", default="MPI,PS,HYBRID")
    p.add_argument("--workers", type=int, default=2, help="2 (two loopback hosts, one worker each) or 4 (two each)")
    args = p.parse_args()
    modes = args.modes.split(",")
    rows, failures = [], []
    started = time.time()
    print(f"{'seed':>5} | {'mode':6} | N | {'max diff':>9} | verdict | features", flush=True)
    with tempfile.TemporaryDirectory(prefix="parallax-fuzz-") as out:
        for seed in seeds(args.seeds):
            features = describe(draw(seed))
            for mode in modes:
                try:
                    diff = harness.check_random(out, seed, args.workers, mode, spec=harness.two_hosts(args.workers))
                    verdict, shown = "EXACT", f"{diff:.2g}"
                except AssertionError as e:
                    first = str(e).splitlines()[0]
                    verdict, shown = ("WRONG", first.split("max abs diff ")[1].split(" ")[0]) \
                        if "max abs diff" in first else ("ERROR", "-")
                    failures.append((seed, mode, str(e)))
                rows.append(verdict)
                print(f"{seed:>5} | {mode:6} | {args.workers} | {shown:>9} | {verdict:7} | {features}", flush=True)
    print(f"\n{rows.count('EXACT')} of {len(rows)} seed x mode runs exact in {time.time() - started:.0f} s")
    for seed, mode, message in failures:
        print(f"\n--- seed {seed} {mode} ---\n{message[-3000:]}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
