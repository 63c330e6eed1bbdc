"""Randomized equivalence: each seed's random training graph (tests/equivalence/random_graphs.py) runs in each mode
with N workers and as one process with the total batch; prints seed, features, mode, max diff and verdict.

  python scripts/fuzz.py --seeds 0-49 --modes MPI,PS,HYBRID --workers 2
  python scripts/fuzz.py --cases all --workers 4       (the named user graphs, tests/equivalence/user_graphs.py)
  make fuzz SEEDS=0-49 [CASES=all|name,...] [MODES=MPI,PS,HYBRID] [WORKERS=2]   (WORKERS=4: two workers per host)

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
from tests.equivalence.user_graphs import USER_GRAPHS  # noqa: E402


def seeds(text):
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi) + 1)) if hi else [int(lo)]
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="", help="e.g. 0-49 or 3,7,12")
    p.add_argument("--cases", default="", help="named user graphs: all, or name,name")
    p.add_argument("--modes", default="MPI,PS,HYBRID")
    p.add_argument("--workers", type=int, default=2, help="2 (two loopback hosts, one worker each) or 4 (two each)")
    p.add_argument("--backend", default=harness.BACKEND, help="Config.collective_backend: auto, horovod or tf")
    args = p.parse_args()
    if not args.seeds and not args.cases:
        p.error("give --seeds, --cases or both")
    names = sorted(USER_GRAPHS) if args.cases == "all" else [c for c in args.cases.split(",") if c]
    unknown = sorted(set(names) - set(USER_GRAPHS))
    if unknown:
        p.error(f"unknown cases {unknown}; known: {sorted(USER_GRAPHS)}")
    runs = [(f"random:{s}", describe(draw(s))) for s in (seeds(args.seeds) if args.seeds else [])]
    runs += [(name, "user graph") for name in names]
    modes = args.modes.split(",")
    rows, failures = [], []
    started = time.time()
    print(f"{'case':>12} | {'mode':6} | N | {'max diff':>9} | verdict | features", flush=True)
    with tempfile.TemporaryDirectory(prefix="parallax-fuzz-") as out:
        for case, features in runs:
            for mode in modes:
                try:
                    diff = harness.check_case(out, case, args.workers, mode, spec=harness.two_hosts(args.workers),
                                              backend=args.backend)
                    verdict, shown = "EXACT", f"{diff:.2g}"
                except AssertionError as e:
                    first = str(e).splitlines()[0]
                    verdict, shown = ("WRONG", first.split("max abs diff ")[1].split(" ")[0]) \
                        if "max abs diff" in first else ("ERROR", "-")
                    failures.append((case, mode, str(e)))
                rows.append(verdict)
                print(f"{case:>12} | {mode:6} | {args.workers} | {shown:>9} | {verdict:7} | {features}", flush=True)
    print(f"\n{rows.count('EXACT')} of {len(rows)} case x mode runs exact in {time.time() - started:.0f} s")
    for case, mode, message in failures:
        print(f"\n--- {case} {mode} ---\n{message[-3000:]}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
