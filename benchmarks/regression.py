"""LM throughput of each mode, this tree against an earlier commit, side by side on the shaped test bed (2 hosts x 2
workers, one server per host; testbed.py). The earlier commit is checked out into a temporary git worktree; each
round runs every mode once in both trees, alternating which tree goes first, so that drift on this shared machine
hits both alike. A configuration's rate is the median over its rounds.

    python benchmarks/regression.py --before 3d8365e [--repeats 3] [--rate 1gbit] [--modes PS,MPI,HYBRID]
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..")]

import common  # noqa: E402
import testbed  # noqa: E402
from paper_tables import LM_ARGS, MODELS, make_data  # noqa: E402

from parallax.launcher.local_cluster import LocalCluster  # noqa: E402


def git(*args, cwd=common.ROOT):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def checked_out(root):
    """The parallax that a job started with PYTHONPATH=root imports must be root's own, not the installed one."""
    found = subprocess.run([sys.executable, "-c", "import parallax; print(parallax.__file__)"], cwd=root,
                           env=dict(os.environ, PYTHONPATH=root), capture_output=True, text=True, check=True)
    path = os.path.realpath(found.stdout.strip())
    if not path.startswith(os.path.realpath(root) + os.sep):
        raise RuntimeError(f"a job in {root} would import parallax from {path}")


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: the jobs, the test bed and the worktree go
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", required=True, help="git revision to compare with")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--rate", default="1gbit")
    p.add_argument("--modes", default="PS,MPI,HYBRID")
    bench = p.parse_args()
    modes = bench.modes.split(",")
    before = git("rev-parse", "--short", bench.before)
    after = git("rev-parse", "--short", "HEAD") + ("+changes" if git("status", "--porcelain", "--", "parallax")
                                                   else "")
    script, _, _, (steps, every) = MODELS["LM"]
    lines = common.header("LM throughput before and after, side by side", {
        "hosts": "2 (network namespaces)", "workers per host": 2, "servers": "1 per host (PS, HYBRID)",
        "rate": bench.rate, "rounds": bench.repeats, "before": before, "after": after,
        "LM": f"{' '.join(LM_ARGS)} (vocab 100,000), {steps} steps, the first {every} for warm-up",
        "MPI": "TCP (btl tcp,self), mpi_yield_when_idle 1"})
    runs = {}
    with tempfile.TemporaryDirectory(prefix="parallax-regression-") as work:
        tree = os.path.join(work, "before")
        git("worktree", "add", "--detach", tree, bench.before)
        try:
            checked_out(tree)
            roots = {"before": tree, "after": common.ROOT}
            data_dirs = make_data(["LM"], work)
            args = ["--data-dir", data_dirs["LM"], *LM_ARGS, "--optimizations", "LA,OPAU,OPSW"]
            with LocalCluster(2, 2, rate=bench.rate) as cluster:
                testbed.progress(f"{cluster}: {len(modes)} modes x 2 trees x {bench.repeats} rounds")
                for round_ in range(bench.repeats):
                    order = ("before", "after") if round_ % 2 == 0 else ("after", "before")
                    for mode in modes:
                        for version in order:
                            m = testbed.run_job(cluster, work, script, args, mode, steps, every, every,
                                                root=roots[version])
                            runs.setdefault((mode, version), []).append(m)
                            testbed.progress(f"round {round_ + 1}/{bench.repeats} LM {mode} {version}: "
                                             f"{m.rate:.0f} {m.unit}/s, {m.cpu_seconds:.2f} CPU s/step")
        finally:
            git("worktree", "remove", "--force", tree)
    lines += ["| mode | before words/s | after words/s | after/before | CPU s/step before | after | runs before |"
              " runs after |", "|---|---|---|---|---|---|---|---|"]
    for mode in modes:
        b, a = (common.median([m.rate for m in runs[(mode, v)]]) for v in ("before", "after"))
        cb, ca = (common.median([m.cpu_seconds for m in runs[(mode, v)]]) for v in ("before", "after"))
        listed = [", ".join(f"{m.rate:,.0f}" for m in runs[(mode, v)]) for v in ("before", "after")]
        lines.append(f"| {mode} | {b:,.0f} | {a:,.0f} | {a / b:.3f} | {cb:.2f} | {ca:.2f} | {listed[0]} | "
                     f"{listed[1]} |")
    print("\n".join(lines[-len(modes) - 2:]))
    common.write("regression.md", lines)


if __name__ == "__main__":
    main()
