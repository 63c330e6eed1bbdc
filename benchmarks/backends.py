"""The two collective backends side by side on the shaped test bed (2 hosts x 2 workers, one server per host;
testbed.py): Horovod and TensorFlow's own collectives (Config.collective_backend), for the LM, NMT and ResNet of
models/, in MPI and HYBRID, at --rate and --second-rate. Throughput, CPU seconds per step (every process on the
hosts) and bytes per worker-step against parallax.explain's Table 3 prediction.

Each round runs every configuration once at a rate, the two backends of one model and mode back to back, the
backend that goes first alternating by round, so that drift on this shared machine hits both alike. A
configuration's figure is the median over its rounds.

    python benchmarks/backends.py [--repeats 2] [--rate 1gbit] [--second-rate 100mbit] [--only LM,NMT] \
        [--out backends.md]
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
from paper_tables import (ALL, MODELS, add_rate_arguments, chosen_models, make_data, predicted_bytes,  # noqa: E402
                          script_args)

from parallax.launcher.local_cluster import LocalCluster  # noqa: E402

MODES = ("MPI", "HYBRID")
BACKENDS = ("horovod", "tf")


def run_rounds(cluster, work, data_dirs, models, rate, repeats, runs):
    todo = [(model, mode) for model in models for mode in MODES]
    testbed.progress(f"{cluster}: {len(todo)} configurations x {len(BACKENDS)} backends x {repeats} rounds")
    for round_ in range(repeats):
        order = BACKENDS if round_ % 2 == 0 else BACKENDS[::-1]
        for i, (model, mode) in enumerate(todo):
            for backend in order:
                script, args = script_args(model, data_dirs, ALL)
                steps, every = MODELS[model][3]
                m = testbed.run_job(cluster, work, script, [*args, "--collective-backend", backend], mode, steps,
                                    every, every)
                runs.setdefault((rate, model, mode, backend), []).append(m)
                testbed.progress(f"{rate} round {round_ + 1}/{repeats} [{i + 1}/{len(todo)}] {model} {mode} "
                                 f"{backend}: {m.rate:.0f} {m.unit}/s, {m.cpu_seconds:.2f} CPU s/step, "
                                 f"{m.wire_bytes / 1e6:.2f} MB wire + {m.local_bytes / 1e6:.2f} MB local")


def tables(runs, predicted, rates, models):
    def med(key, attr):
        return common.median([getattr(m, attr) for m in runs[key]])

    lines = ["## Throughput and CPU", "", "Units per second of the whole job (LM, NMT: words; ResNet: images), "
             "median over the rounds; CPU: seconds of CPU time of every process on the hosts per step.", "",
             "| model | mode | rate | horovod | tf | tf / horovod | CPU s/step horovod | CPU s/step tf |",
             "|---|---|---|---|---|---|---|---|"]
    for model in models:
        for mode in MODES:
            for rate in rates:
                h, t = (rate, model, mode, "horovod"), (rate, model, mode, "tf")
                lines.append(f"| {model} | {mode} | {rate} | {med(h, 'rate'):,.0f} | {med(t, 'rate'):,.0f} | "
                             f"{med(t, 'rate') / med(h, 'rate'):.2f}x | {med(h, 'cpu_seconds'):.2f} | "
                             f"{med(t, 'cpu_seconds'):.2f} |")
    lines += ["", f"## Bytes per worker per step at {rates[0]}, against Table 3", "",
              "Measured on the hosts' interfaces (wire + local, testbed.py); predicted by `parallax.explain "
              "--measure-sparsity 5`, which does not depend on the backend.", "",
              "| model | mode | predicted MB | horovod MB | tf MB | horovod / predicted | tf / predicted |",
              "|---|---|---|---|---|---|---|"]
    for model in models:
        for mode in MODES:
            pred = predicted[(model, mode)]
            h, t = (med((rates[0], model, mode, b), "total_bytes") for b in BACKENDS)
            lines.append(f"| {model} | {mode} | {pred / 1e6:.3f} | {h / 1e6:.3f} | {t / 1e6:.3f} | "
                         f"{h / pred:.2f}x | {t / pred:.2f}x |")
    lines += ["", "## Every run", "", "| rate | model | mode | backend | units/s per run | CPU s/step per run |",
              "|---|---|---|---|---|---|"]
    for (rate, model, mode, backend), ms in runs.items():
        lines.append(f"| {rate} | {model} | {mode} | {backend} | {', '.join(f'{m.rate:.0f}' for m in ms)} | "
                     f"{', '.join(f'{m.cpu_seconds:.2f}' for m in ms)} |")
    return lines


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: each job and the test bed are taken down
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_rate_arguments(p, repeats_help="rounds at --rate (one at --second-rate)")
    p.add_argument("--out", default="backends.md", help="the results file's name, under benchmarks/results/")
    bench = p.parse_args()
    models = chosen_models(p, bench.only)
    from parallax import collectives
    if collectives.horovod_problem():
        p.error(f"this benchmark compares with Horovod, which cannot be used here: {collectives.horovod_problem()}")
    rates = [r for r in (bench.rate, bench.second_rate) if r]
    lines = common.header("Collective backends side by side: Horovod and TensorFlow's collectives", {
        "hosts": "2 (network namespaces)", "workers per host": 2, "servers": "1 per host (HYBRID)",
        "rates": ", ".join(rates), "rounds": f"{bench.repeats} at {bench.rate}, 1 at {bench.second_rate or '-'}",
        "MPI": "TCP (btl tcp,self), mpi_yield_when_idle 1", "optimizations": ALL,
        **{m: f"{' '.join(MODELS[m][2])}, {MODELS[m][3][0]} steps, the first {MODELS[m][3][1]} for warm-up"
           for m in models}})
    runs = {}
    with tempfile.TemporaryDirectory(prefix="parallax-backends-") as work:
        data_dirs = make_data(models, work)
        for rate in rates:
            with LocalCluster(2, 2, rate=rate) as cluster:
                run_rounds(cluster, work, data_dirs, models, rate, bench.repeats if rate == rates[0] else 1, runs)
                if rate == rates[0]:
                    spec = cluster.spec_file()
                    predicted = {(model, mode): predicted_bytes(model, mode, data_dirs, spec) for model in models
                                 for mode in MODES}
    lines += tables(runs, predicted, rates, models)
    print("\n".join(lines[len(lines) - len(runs) - 4:]))
    common.write(bench.out, lines)


if __name__ == "__main__":
    main()
