"""Horovod's polling period (HOROVOD_CYCLE_TIME, ms: how often its background thread looks for ready tensors) on the
shaped test bed (2 hosts x 2 workers; testbed.py): throughput and CPU per step of jobs whose collectives are Horovod's
(MPI mode, collective_backend="horovod") at each setting, side by side in rounds, median over the rounds.

    python benchmarks/horovod_cycle.py [--cycles default,1,5,10] [--only ResNet,LM] [--repeats 2] [--rate 1gbit]
"""
import argparse
import os
import signal
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..")]

import common  # noqa: E402
import testbed  # noqa: E402
from paper_tables import ALL, MODELS, chosen_models, make_data, script_args  # noqa: E402

from parallax.launcher.local_cluster import LocalCluster  # noqa: E402


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: each job and the test bed are taken down
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cycles", default="default,1,5,10", help="HOROVOD_CYCLE_TIME values; default = unset")
    p.add_argument("--only", default="ResNet,LM")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--rate", default="1gbit")
    bench = p.parse_args()
    models, cycles = chosen_models(p, bench.only), bench.cycles.split(",")
    from parallax import collectives
    if collectives.horovod_problem():
        p.error(f"Horovod cannot be used here: {collectives.horovod_problem()}")
    lines = common.header("Horovod's cycle time", {
        "hosts": "2 (network namespaces)", "workers per host": 2, "mode": "MPI, collective_backend=horovod",
        "rate": bench.rate, "rounds": bench.repeats, "MPI": "TCP (btl tcp,self), mpi_yield_when_idle 1",
        **{m: f"{' '.join(MODELS[m][2])}, {MODELS[m][3][0]} steps, the first {MODELS[m][3][1]} for warm-up"
           for m in models}})
    runs = {}
    with tempfile.TemporaryDirectory(prefix="parallax-cycle-") as work:
        data_dirs = make_data(models, work)
        with LocalCluster(2, 2, rate=bench.rate) as cluster:
            for round_ in range(bench.repeats):
                order = cycles if round_ % 2 == 0 else cycles[::-1]
                for model in models:
                    script, args = script_args(model, data_dirs, ALL)
                    steps, every = MODELS[model][3]
                    for cycle in order:
                        env = () if cycle == "default" else (f"HOROVOD_CYCLE_TIME={cycle}",)
                        m = testbed.run_job(cluster, work, script, [*args, "--collective-backend", "horovod"], "MPI",
                                            steps, every, every, launch_env=env)
                        runs.setdefault((model, cycle), []).append(m)
                        testbed.progress(f"round {round_ + 1}/{bench.repeats} {model} cycle {cycle}: {m.rate:.0f} "
                                         f"{m.unit}/s, {m.cpu_seconds:.2f} CPU s/step")
    lines += ["| model | HOROVOD_CYCLE_TIME | units/s | / default | CPU s/step | runs |", "|---|---|---|---|---|---|"]
    for model in models:
        base = common.median([m.rate for m in runs[(model, "default")]]) if "default" in cycles else None
        for cycle in cycles:
            ms = runs[(model, cycle)]
            rate = common.median([m.rate for m in ms])
            lines.append(f"| {model} | {cycle} | {rate:,.0f} | {rate / base:.2f}x | " if base else
                         f"| {model} | {cycle} | {rate:,.0f} | - | ")
            cpu = common.median([m.cpu_seconds for m in ms])
            lines[-1] += f"{cpu:.2f} | {', '.join(f'{m.rate:.0f}' for m in ms)} |"
    print("\n".join(lines[-len(models) * len(cycles) - 2:]), flush=True)
    common.write("horovod_cycle.md", lines)


if __name__ == "__main__":
    main()
