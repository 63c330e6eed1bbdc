"""benchmarks/versus_peers.py's results: saved as JSON (every measurement), and rendered as results/peers.md (the
table per model and rate, the ratios, every run) and results/peers.png."""
import dataclasses
import json
import os

import common
import testbed

PEER_PREFIXES = ("Horovod", "TF1 ", "TF2 ")
EXACT = 1e-9  # the largest max abs diff from one device (float64) that is summation order, not another computation
ANALYSIS = "## Why"  # results/peers.md's hand-written part from this heading on survives a rerun


TITLE = "Against what users would pick instead: parallax and its peers"


def save(path, header, rates, models, labels, runs, diffs, failures):
    """Every measurement as JSON at `path`, under `header` (the report's first lines, common.header's)."""
    data = {"header": header, "rates": rates, "models": models, "labels": labels,
            "runs": [{"rate": r, "model": m, "label": lab, "measurements": [dataclasses.asdict(x) for x in ms]}
                     for (r, m, lab), ms in runs.items()],
            "exactness": [{"model": m, "label": lab, "diff": d} for (m, lab), d in diffs.items()],
            "failures": failures}
    with open(path, "w") as f:
        json.dump(data, f, indent=1)
    return path


def merge(path, header, rates, models, runs, diffs, failures):
    """load(`path`) with the rates and models just measured (`runs`...) in place of their saved rows; the saved
    header gains a line saying which rows were measured again, on what, and how (from `header`)."""
    old_header, old_rates, old_models, labels, old_runs, old_diffs, old_failures = load(path)
    again = {(rate, model) for rate in rates for model in models}
    runs = {**{k: v for k, v in old_runs.items() if k[:2] not in again}, **runs}
    failures = [f for f in old_failures if (f["rate"], f["model"]) not in again] + failures
    machine, settings = (line for line in header if line.startswith(("Machine:", "Settings:")))
    line = (f"Measured again: {', '.join(models)} at {', '.join(rates)} ({machine[len('Machine: '):]}; "
            f"{settings[len('Settings: '):]}); the other rows are the run above's.")
    return ([*old_header, line, ""], old_rates, old_models, labels, runs, {**old_diffs, **diffs}, failures)


def load(path):
    with open(path) as f:
        data = json.load(f)
    runs = {(r["rate"], r["model"], r["label"]): [testbed.Measurement(**x) for x in r["measurements"]]
            for r in data["runs"]}
    diffs = {(e["model"], e["label"]): e["diff"] for e in data["exactness"]}
    return data["header"], data["rates"], data["models"], data["labels"], runs, diffs, data["failures"]


def is_peer(label):
    return label.startswith(PEER_PREFIXES)


def _median(runs, key, attr="rate"):
    return common.median([getattr(m, attr) for m in runs[key]]) if key in runs else None


def ratios(rates, models, labels, runs, diffs=None):
    """[(rate, model, best peer, its rate, best parallax mode, its rate, AUTO's rate, best exact peer, its rate)]:
    an exact peer's max abs diff from one device (`diffs`) is at most EXACT."""
    diffs, rows = diffs or {}, []
    for rate in rates:
        for model in models:
            def best(chosen):
                measured = [(lab, _median(runs, (rate, model, lab))) for lab in chosen]
                return max(((lab, r) for lab, r in measured if r), key=lambda x: x[1], default=(None, None))
            peers = [lab for lab in labels[model] if is_peer(lab)]
            peer = best(peers)
            exact = best([lab for lab in peers if diffs.get((model, lab), EXACT + 1) <= EXACT])
            mode = best([lab for lab in labels[model] if lab.startswith("parallax ") and lab != "parallax AUTO"])
            rows.append((rate, model, *peer, *mode, _median(runs, (rate, model, "parallax AUTO")), *exact))
    return rows


def _x(a, b):
    return f"{a / b:.2f}x" if a and b else "-"


def tables(rates, models, labels, runs, diffs, failures):
    lines = ["## Ratios", "", "Throughput of parallax's best fixed mode and of AUTO over the best peer's, per model "
             f"and rate (medians over the rounds); and AUTO's over the best peer's that computes one device's result "
             f"(max abs diff at most {EXACT:g} below).", "",
             "| model | rate | best peer | its units/s | best parallax mode | best mode / best peer | "
             "AUTO / best peer | best exact peer | AUTO / best exact peer |", "|---|---|---|---|---|---|---|---|---|"]
    for rate, model, peer, peer_rate, mode, mode_rate, auto_rate, exact, exact_rate in ratios(
            rates, models, labels, runs, diffs):
        lines.append(f"| {model} | {rate} | {peer or '-'} | {f'{peer_rate:,.0f}' if peer_rate else '-'} | "
                     f"{mode or '-'} | {_x(mode_rate, peer_rate)} | {_x(auto_rate, peer_rate)} | "
                     f"{exact or '-'} | {_x(auto_rate, exact_rate)} |")
    for model in models:
        lines += ["", f"## {model}", "", "Units/s of the whole job; CPU: seconds of CPU time of every process on the "
                  "hosts per step; MB: per worker-step, wire + local (testbed.py); exact: the max abs diff of every "
                  "variable from one device's after 20 steps in float64 (benchmarks/peers/exactness.py).", "",
                  "| run | " + " | ".join(f"{r} units/s | {r} CPU s/step | {r} MB/step" for r in rates)
                  + " | max abs diff from one device |", "|---|" + "---|---|---|" * len(rates) + "---|"]
        for label in labels[model]:
            cells = []
            for rate in rates:
                key = (rate, model, label)
                cells += [f"{_median(runs, key):,.0f}", f"{_median(runs, key, 'cpu_seconds'):.2f}",
                          f"{_median(runs, key, 'total_bytes') / 1e6:.2f}"] if key in runs else ["-"] * 3
            diff = diffs.get((model, label))
            lines.append(f"| {label} | " + " | ".join(cells) + f" | {'-' if diff is None else f'{diff:.2g}'} |")
    lines += ["", "## Every run", "", "| rate | model | run | units/s per round | windows |", "|---|---|---|---|---|"]
    for (rate, model, label), ms in runs.items():
        lines.append(f"| {rate} | {model} | {label} | {', '.join(f'{m.rate:,.0f}' for m in ms)} | "
                     f"{', '.join(str(m.windows) for m in ms)} |")
    if failures:
        lines += ["", "## Runs that failed", ""]
        for f in failures:
            lines += [f"- {f['rate']} {f['model']} {f['label']}, round {f['round']}:", "  ```",
                      *("  " + line for line in f["error"].splitlines()[-12:]), "  ```"]
    return lines


def plot(rates, models, labels, runs, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(len(rates), len(models), figsize=(4.5 * len(models), 3.6 * len(rates)), squeeze=False)
    for row, rate in zip(axes, rates):
        for ax, model in zip(row, models):
            names = labels[model]
            values = [_median(runs, (rate, model, lab)) or 0 for lab in names]
            ax.barh(range(len(names)), values, color=["C1" if is_peer(lab) else "C0" for lab in names])
            ax.set_yticks(range(len(names)), [lab.replace(" + SyncReplicasOptimizer", "").replace(
                " (asynchronous)", " (async)") for lab in names], fontsize=7)
            ax.invert_yaxis()
            unit = next((ms[0].unit for (r, m, _), ms in runs.items() if (r, m) == (rate, model)), "units")
            ax.set_title(f"{model}, {rate}", fontsize=9)
            ax.set_xlabel(f"{unit}/s", fontsize=8)
    fig.suptitle("parallax (blue) and its peers (orange), 2 hosts x 2 workers")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def write(header, rates, models, labels, runs, diffs, failures):
    lines = header + tables(rates, models, labels, runs, diffs, failures)
    common.write("peers.md", lines + common.kept_section("peers.md", ANALYSIS))
    plot(rates, models, labels, runs, os.path.join(common.RESULTS, "peers.png"))
