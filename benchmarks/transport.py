"""The cost of `--transport ssh` (docs/security.md): the default transport and ssh side by side on the shaped test
bed (2 hosts x 2 workers; testbed.py), for the LM and ResNet of models/ in PS and HYBRID at --rate. Throughput,
and CPU seconds per step of every process on the hosts *and* of the launcher's process tree here (where the ssh
tunnels' clients run), so that ssh's encryption is counted on both ends.

Both transports use collective_backend "tf" (ssh cannot carry Horovod), so the only difference is the transport.
Each round runs every configuration once, the two transports back to back, the one that goes first alternating by
round; a configuration's figure is the median over its rounds.

    python benchmarks/transport.py [--repeats 2] [--rate 1gbit] [--only LM,ResNet]
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

MODES = ("PS", "HYBRID")
TRANSPORTS = ("direct", "ssh")


def run_rounds(cluster, work, data_dirs, models, repeats):
    runs = {}
    todo = [(model, mode) for model in models for mode in MODES]
    testbed.progress(f"{cluster}: {len(todo)} configurations x {len(TRANSPORTS)} transports x {repeats} rounds")
    for round_ in range(repeats):
        order = TRANSPORTS if round_ % 2 == 0 else TRANSPORTS[::-1]
        for i, (model, mode) in enumerate(todo):
            for transport in order:
                script, args = script_args(model, data_dirs, ALL)
                steps, every = MODELS[model][3]
                m = testbed.run_job(cluster, work, script, [*args, "--collective-backend", "tf"], mode, steps,
                                    every, every, launch_args=("--transport", transport), count_launcher=True)
                runs.setdefault((model, mode, transport), []).append(m)
                testbed.progress(f"round {round_ + 1}/{repeats} [{i + 1}/{len(todo)}] {model} {mode} {transport}: "
                                 f"{m.rate:.0f} {m.unit}/s, {m.cpu_seconds:.2f} CPU s/step")
    return runs


def tables(runs, models, rate):
    def med(key, attr):
        return common.median([getattr(m, attr) for m in runs[key]])

    lines = ["## Throughput and CPU", "", f"At {rate}. Units per second of the whole job (LM: words; ResNet: "
             "images), median over the rounds; CPU: seconds of CPU time per step of every process on the hosts "
             "and of the launcher's process tree.", "",
             "| model | mode | direct | ssh | ssh / direct | CPU s/step direct | CPU s/step ssh | CPU ssh / direct |",
             "|---|---|---|---|---|---|---|---|"]
    for model in models:
        for mode in MODES:
            d, s = (model, mode, "direct"), (model, mode, "ssh")
            lines.append(f"| {model} | {mode} | {med(d, 'rate'):,.0f} | {med(s, 'rate'):,.0f} | "
                         f"{med(s, 'rate') / med(d, 'rate'):.2f}x | {med(d, 'cpu_seconds'):.3f} | "
                         f"{med(s, 'cpu_seconds'):.3f} | {med(s, 'cpu_seconds') / med(d, 'cpu_seconds'):.2f}x |")
    lines += ["", "## Every run", "", "| model | mode | transport | units/s per run | CPU s/step per run | "
              "wire MB per worker-step |", "|---|---|---|---|---|---|"]
    for (model, mode, transport), ms in runs.items():
        lines.append(f"| {model} | {mode} | {transport} | {', '.join(f'{m.rate:.0f}' for m in ms)} | "
                     f"{', '.join(f'{m.cpu_seconds:.3f}' for m in ms)} | "
                     f"{', '.join(f'{m.wire_bytes / 1e6:.2f}' for m in ms)} |")
    return lines


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: each job and the test bed are taken down
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--rate", default="1gbit")
    p.add_argument("--only", default="LM,ResNet", help="comma-separated models (default: LM,ResNet)")
    bench = p.parse_args()
    models = chosen_models(p, bench.only)
    lines = common.header("Transports side by side: direct (the default) and ssh", {
        "hosts": "2 (network namespaces)", "workers per host": 2, "rate": bench.rate, "rounds": bench.repeats,
        "collective backend": "tf (both)", "optimizations": ALL,
        "ssh": "one connection per host from the launcher (outside the hosts), forwards -L/-R; OpenSSH defaults",
        **{m: f"{' '.join(MODELS[m][2])}, {MODELS[m][3][0]} steps, the first {MODELS[m][3][1]} for warm-up"
           for m in models}})
    with tempfile.TemporaryDirectory(prefix="parallax-transport-") as work:
        data_dirs = make_data(models, work)
        with LocalCluster(2, 2, rate=bench.rate) as cluster:
            runs = run_rounds(cluster, work, data_dirs, models, bench.repeats)
    lines += tables(runs, models, bench.rate)
    print("\n".join(lines[-(len(runs) + 12):]))
    common.write("transport.md", lines)


if __name__ == "__main__":
    main()
