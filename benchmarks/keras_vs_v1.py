"""The TF2 path against the v1 path, side by side on the shaped test bed (2 hosts x 2 workers, one server per
host; testbed.py): models/<model>/train_keras_distributed.py (the model as a Keras model, trained by its own
Model.fit after parallax.get_runner(model)) against models/<model>/train_distributed.py (the v1 graph), with the
same settings as paper_tables.py's (the LM: 100k-word vocabulary, sampled softmax, Adagrad, batch 32 per worker;
the ResNet: batch 32 per worker), in PS, MPI and HYBRID at --rate. Throughput, CPU seconds per step and bytes per
worker-step. Writes results/keras_lm.md (--model LM) or keras_resnet.md.

Each round runs every mode once with both scripts back to back, the script that goes first alternating by round,
so that drift on this shared machine hits both alike. A configuration's figure is the median over its rounds; the
ratio is Keras / v1 of those medians. The target (issue 59): the TF2 path within 10% of the v1 script's.

    python benchmarks/keras_vs_v1.py [--model LM] [--repeats 3] [--rate 1gbit] [--modes PS,MPI,HYBRID]
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
from paper_tables import ALL, MODELS, make_data  # noqa: E402

from parallax.launcher.local_cluster import LocalCluster  # noqa: E402

SCRIPTS = {"v1": "train_distributed.py", "keras": "train_keras_distributed.py"}


def run_rounds(cluster, work, model, data_dir, modes, repeats, runs):
    script, _, args, (steps, every) = MODELS[model]
    data = ["--data-dir", data_dir] if data_dir else []
    testbed.progress(f"{cluster}: {len(modes)} modes x {len(SCRIPTS)} scripts x {repeats} rounds")
    for round_ in range(repeats):
        order = list(SCRIPTS) if round_ % 2 == 0 else list(SCRIPTS)[::-1]
        for mode in modes:
            for path in order:
                m = testbed.run_job(cluster, work, os.path.join(os.path.dirname(script), SCRIPTS[path]),
                                    [*data, *args, "--optimizations", ALL], mode, steps, every, every)
                runs.setdefault((mode, path), []).append(m)
                testbed.progress(f"round {round_ + 1}/{repeats} {model} {mode} {path}: {m.rate:.0f} {m.unit}/s, "
                                 f"{m.cpu_seconds:.2f} CPU s/step, {m.wire_bytes / 1e6:.2f} MB wire + "
                                 f"{m.local_bytes / 1e6:.2f} MB local")


def tables(runs, modes):
    def med(key, attr):
        return common.median([getattr(m, attr) for m in runs[key]])

    unit = next(iter(runs.values()))[0].unit  # the model's: words, images
    lines = ["## Throughput, CPU and bytes", "",
             f"{unit.capitalize()} per second of the whole job, median over the rounds; CPU: seconds of CPU time of "
             "every process on the hosts per step; bytes: per worker-step, wire + local (testbed.py).", "",
             f"| mode | v1 {unit}/s | Keras fit {unit}/s | Keras / v1 | CPU s/step v1 | CPU s/step Keras | "
             "MB/step v1 | MB/step Keras |", "|---|---|---|---|---|---|---|---|"]
    for mode in modes:
        v1, keras = (mode, "v1"), (mode, "keras")
        lines.append(f"| {mode} | {med(v1, 'rate'):,.0f} | {med(keras, 'rate'):,.0f} | "
                     f"{med(keras, 'rate') / med(v1, 'rate'):.3f} | {med(v1, 'cpu_seconds'):.2f} | "
                     f"{med(keras, 'cpu_seconds'):.2f} | {med(v1, 'total_bytes') / 1e6:.2f} | "
                     f"{med(keras, 'total_bytes') / 1e6:.2f} |")
    lines += ["", "## Every run", "", f"| mode | script | {unit}/s per run | CPU s/step per run |", "|---|---|---|---|"]
    for (mode, path), ms in runs.items():
        lines.append(f"| {mode} | {path} | {', '.join(f'{m.rate:.0f}' for m in ms)} | "
                     f"{', '.join(f'{m.cpu_seconds:.2f}' for m in ms)} |")
    return lines


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: each job and the test bed are taken down
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="LM", choices=("LM", "ResNet"))
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--rate", default="1gbit")
    p.add_argument("--modes", default="PS,MPI,HYBRID")
    bench = p.parse_args()
    modes = bench.modes.split(",")
    unknown = set(modes) - {"PS", "MPI", "HYBRID", "AUTO"}
    if unknown:
        p.error(f"unknown mode(s) {', '.join(sorted(unknown))}: choose from PS, MPI, HYBRID, AUTO")
    _, generator, args, (steps, every) = MODELS[bench.model]
    data = f"{' '.join(generator[1:])}, " if generator else ""
    lines = common.header(f"The {bench.model}: Keras Model.fit (TF2 path) against the v1 script, side by side", {
        "hosts": "2 (network namespaces)", "workers per host": 2, "servers": "1 per host (PS, HYBRID)",
        "rate": bench.rate, "rounds": bench.repeats, "optimizations": ALL,
        bench.model: f"{data}{' '.join(args)}, {steps} steps, the first {every} for warm-up"})
    runs = {}
    with tempfile.TemporaryDirectory(prefix="parallax-keras-") as work:
        data_dir = make_data([bench.model], work).get(bench.model)
        with LocalCluster(2, 2, rate=bench.rate) as cluster:
            run_rounds(cluster, work, bench.model, data_dir, modes, bench.repeats, runs)
    lines += tables(runs, modes)
    print("\n".join(lines[len(lines) - len(runs) - 4:]))
    common.write(f"keras_{bench.model.lower()}.md", lines)


if __name__ == "__main__":
    main()
