"""Markdown tables and the plot for paper_tables.py, from its runs: {(rate key, model, mode, opts): [Measurement]}."""
import statistics


def _rate(runs, key):
    return statistics.median(m.rate for m in runs[key]) if key in runs else None


def _bytes(runs, key, attr):
    return statistics.median(getattr(m, attr) for m in runs[key])


def _fmt(x, digits=0):
    return "-" if x is None else f"{x:,.{digits}f}"


def _ratio(a, b):
    return "-" if a is None or not b else f"{a / b:.2f}x"


def tables(runs, predicted, bench, models, modes, ablation, all_opts):
    lines = ["## Table 1: throughput of the communication methods", "",
             f"Units per second of the whole job (LM and NMT: words, ResNet: images); median over "
             f"{bench.repeats} runs at {bench.rate}, one run at {bench.second_rate or '-'}.", "",
             "| model | rate | PS | MPI | HYBRID | HYBRID / MPI | HYBRID / PS |", "|---|---|---|---|---|---|---|"]
    for model in models:
        for key, rate in (("rate", bench.rate), ("second", bench.second_rate)):
            r = {mode: _rate(runs, (key, model, mode, all_opts)) for mode in modes}
            if all(v is None for v in r.values()):
                continue
            lines.append(f"| {model} | {rate} | {_fmt(r['PS'])} | {_fmt(r['MPI'])} | {_fmt(r['HYBRID'])} | "
                         f"{_ratio(r['HYBRID'], r['MPI'])} | {_ratio(r['HYBRID'], r['PS'])} |")
    lines += ["", "## Table 3: bytes per worker per step, measured and predicted", "",
              f"Measured at {bench.rate} on the hosts' interfaces between worker 0's warm-up and last log lines, "
              "divided by workers x steps (median over runs): `wire` crossed the network, `local` went between "
              "processes of one host (loopback). Predicted: `python -m parallax.explain --measure-sparsity 5`, "
              "which counts every byte between processes once, wherever they are, so it compares with "
              "wire + local.", "",
              "| model | mode | wire MB | local MB | total MB | predicted MB | measured / predicted |",
              "|---|---|---|---|---|---|---|"]
    for model in models:
        for mode in modes:
            key = ("rate", model, mode, all_opts)
            if key not in runs:
                continue
            wire, local = _bytes(runs, key, "wire_bytes"), _bytes(runs, key, "local_bytes")
            pred = predicted.get((model, mode))
            lines.append(f"| {model} | {mode} | {wire / 1e6:.3f} | {local / 1e6:.3f} | {(wire + local) / 1e6:.3f} | "
                         f"{_fmt(pred and pred / 1e6, 3)} | {_ratio(wire + local, pred)} |")
    lines += ["", "## Table 4: HYBRID's optimizations, added one by one", "",
              f"Words per second at {bench.rate}, median over {bench.repeats} runs; each step's ratio is to the "
              "previous step, the last column is +OPSW / BASE.", "",
              "| model | " + " | ".join(name for name, _, _ in ablation) + " | total |",
              "|---|" + "---|" * (len(ablation) + 1)]
    for model in ("LM", "NMT"):
        r = [_rate(runs, ("rate", model, mode, opts)) for _, mode, opts in ablation]
        if None in r:
            continue
        cells = [_fmt(r[0])] + [f"{_fmt(v)} ({_ratio(v, prev)})" for prev, v in zip(r, r[1:])]
        lines.append(f"| {model} | " + " | ".join(cells) + f" | {_ratio(r[-1], r[0])} |")
    lines += ["", "## Every run", "", "CPU s/step: CPU time of every process on the hosts (workers, servers, MPI, "
              "sshd) per training step, between the same log lines as the bytes.", "",
              "| rate | model | mode | optimizations | units/s per run | windows | CPU s/step |",
              "|---|---|---|---|---|---|---|"]
    for (key, model, mode, opts), ms in runs.items():
        rate = bench.rate if key == "rate" else bench.second_rate
        lines.append(f"| {rate} | {model} | {mode} | {opts} | {', '.join(f'{m.rate:.0f}' for m in ms)} | "
                     f"{', '.join(str(m.windows) for m in ms)} | {', '.join(f'{m.cpu_seconds:.2f}' for m in ms)} |")
    return lines


def plot(runs, bench, models, modes, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    keys = [k for k in (("rate", bench.rate), ("second", bench.second_rate)) if k[1]]
    fig, axes = plt.subplots(1, len(models), figsize=(4 * len(models), 3.4), squeeze=False)
    for ax, model in zip(axes[0], models):
        width = 0.8 / len(modes)
        for j, mode in enumerate(modes):
            values = [_rate(runs, (key, model, mode, "LA,OPAU,OPSW")) or 0 for key, _ in keys]
            ax.bar([i + j * width for i in range(len(keys))], values, width, label=mode)
        ax.set_xticks([i + width for i in range(len(keys))], [rate for _, rate in keys])
        ax.set_title(model)
        ax.set_ylabel("words/s" if model != "ResNet" else "images/s")
    axes[0][0].legend()
    fig.suptitle("Throughput at 2 hosts x 2 workers (test bed, shaped links)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"wrote {path}")
