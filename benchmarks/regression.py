"""Throughput and CPU per step of each model and mode, this tree against earlier commits, side by side on the shaped
test bed (2 hosts x 2 workers, one server per host; testbed.py). Each earlier commit is checked out into a temporary
git worktree; each round runs every mode once in every tree, rotating which tree goes first, so that drift on this
shared machine hits all alike. A configuration's rate is the median over its rounds.

    python benchmarks/regression.py --before 3d8365e[,5e4aaff] [--repeats 3] [--rate 1gbit] [--modes PS,MPI,HYBRID]
        [--models LM,ResNet] [--backend tf] [--out regression.md]
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
from paper_tables import ALL, MODELS, chosen_models, make_data, script_args  # noqa: E402

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
    p.add_argument("--before", required=True, help="git revisions to compare with, comma-separated")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--rate", default="1gbit")
    p.add_argument("--modes", default="PS,MPI,HYBRID")
    p.add_argument("--models", default="LM", help=f"comma-separated, of {', '.join(MODELS)}")
    p.add_argument("--backend", default="auto", help="Config.collective_backend of every job")
    p.add_argument("--out", default="regression.md", help="file name under benchmarks/results/")
    bench = p.parse_args()
    modes, models = bench.modes.split(","), chosen_models(p, bench.models)
    befores = [git("rev-parse", "--short", rev) for rev in bench.before.split(",")]
    after = git("rev-parse", "--short", "HEAD") + ("+changes" if git("status", "--porcelain", "--", "parallax")
                                                   else "")
    lines = common.header("Before and after, side by side", {
        "hosts": "2 (network namespaces)", "workers per host": 2, "servers": "as each version starts them",
        "rate": bench.rate, "rounds": bench.repeats, "before": ", ".join(befores), "after": after,
        "collective backend": bench.backend, "optimizations": ALL,
        **{m: f"{' '.join(MODELS[m][2])}, {MODELS[m][3][0]} steps, the first {MODELS[m][3][1]} for warm-up"
           for m in models},
        "MPI": "TCP (btl tcp,self), mpi_yield_when_idle 1"})
    versions = befores + ["after"]
    runs = {}
    with tempfile.TemporaryDirectory(prefix="parallax-regression-") as work:
        roots = {"after": common.ROOT}
        try:
            for rev in befores:
                roots[rev] = os.path.join(work, rev)
                git("worktree", "add", "--detach", roots[rev], rev)
                # The bind shim is a build output, where that tree's setup.py puts it (its package moved once).
                subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=roots[rev],
                               check=True, capture_output=True)
                checked_out(roots[rev])
            data_dirs = make_data(models, work)
            todo = [(model, mode) for model in models for mode in modes]
            with LocalCluster(2, 2, rate=bench.rate) as cluster:
                testbed.progress(f"{cluster}: {len(todo)} configurations x {len(versions)} trees x {bench.repeats} "
                                 f"rounds")
                for round_ in range(bench.repeats):
                    order = versions[round_ % len(versions):] + versions[:round_ % len(versions)]
                    for model, mode in todo:
                        script, args = script_args(model, data_dirs, ALL)
                        steps, every = MODELS[model][3]
                        for version in order:
                            m = testbed.run_job(cluster, work, script, [*args, "--collective-backend", bench.backend],
                                                mode, steps, every, every, root=roots[version])
                            runs.setdefault((model, mode, version), []).append(m)
                            testbed.progress(f"round {round_ + 1}/{bench.repeats} {model} {mode} {version}: "
                                             f"{m.rate:.0f} {m.unit}/s, {m.cpu_seconds:.2f} CPU s/step")
        finally:
            for rev in befores:
                if rev in roots:
                    subprocess.run(["git", "worktree", "remove", "--force", roots[rev]], cwd=common.ROOT)
    rate = {k: common.median([m.rate for m in v]) for k, v in runs.items()}
    cpu = {k: common.median([m.cpu_seconds for m in v]) for k, v in runs.items()}
    lines += ["| model | mode | " + " | ".join(f"{v} units/s" for v in versions) + " | " +
              " | ".join(f"after/{v}" for v in befores) + " | CPU s/step (" + ", ".join(versions) + ") | runs |",
              "|---|---|" + "---|" * (len(versions) + len(befores) + 2)]
    for key in todo:
        listed = "; ".join(f"{v}: " + ", ".join(f"{m.rate:,.0f}" for m in runs[(*key, v)]) for v in versions)
        lines.append(f"| {key[0]} | {key[1]} | " + " | ".join(f"{rate[(*key, v)]:,.0f}" for v in versions) + " | " +
                     " | ".join(f"{rate[(*key, 'after')] / rate[(*key, v)]:.3f}" for v in befores) + " | " +
                     ", ".join(f"{cpu[(*key, v)]:.2f}" for v in versions) + f" | {listed} |")
    print("\n".join(lines[-len(todo) - 2:]))
    common.write(bench.out, lines)


if __name__ == "__main__":
    main()
