"""`make convergence`: the longer convergence runs. For each model, train on one device with batch B and with
parallax (HYBRID, 2 workers of B/2 on localhost), evaluate both checkpoints in the single-device graph, and write
the training-loss curves to docs/convergence-<model>.png and the results to docs/convergence-results.md.

    python scripts/convergence.py [--models lm,nmt,resnet] [--scale 1.0]
"""
import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
MODELS = {
    # name: (steps, total batch, data script or None, metric regex, metric name, higher is better)
    "lm": (2000, 32, "make_data.py", r"held-out perplexity ([0-9.]+)", "held-out perplexity", False),
    "nmt": (1000, 64, "make_data.py", r"test BLEU ([0-9.]+)", "test BLEU", True),
    "resnet": (600, 64, None, r"test accuracy ([0-9.]+)%", "test accuracy (%)", True),
}
_LOSS = re.compile(r"worker 0 step (\d+) \S+/s \d+ loss ([0-9.]+)")


def run(args):
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result.stdout


def one_model(name, work, scale):
    steps, batch, make_data, metric_re, metric_name, _ = MODELS[name]
    steps = max(10, int(steps * scale))
    folder = os.path.join(ROOT, "models", name)
    data = ["--data-dir", os.path.join(work, f"{name}-data")] if make_data else []
    if make_data:
        run([os.path.join(folder, make_data), "--out", data[1]])
    common = [*data, "--steps", str(steps), "--log-every", str(max(1, steps // 40))]
    results = {}
    for label, script, extra in (("single device", "train.py", ["--batch-size", str(batch)]),
                                 ("parallax, 2 HYBRID workers", "train_distributed.py",
                                  ["--batch-size", str(batch // 2), "--resource-spec", "localhost:2"])):
        ckpt = os.path.join(work, f"{name}-{script}-ckpt")
        started = time.time()
        out = run([os.path.join(folder, script), *common, *extra, "--checkpoint-dir", ckpt])
        seconds = time.time() - started
        curve = [(int(s), float(v)) for s, v in _LOSS.findall(out)]
        metric = float(re.search(metric_re, run([os.path.join(folder, "eval.py"), *data, "--checkpoint-dir",
                                                 ckpt])).group(1))
        results[label] = (curve, metric, seconds)
        print(f"{name}: {label}: {metric_name} {metric:.2f} after {steps} steps ({seconds:.0f} s)", flush=True)
    return steps, batch, metric_name, results


def plot(name, steps, batch, metric_name, results):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for label, (curve, metric, _) in results.items():
        ax.plot([s for s, _ in curve], [v for _, v in curve], label=f"{label} ({metric_name} {metric:.2f})")
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (worker 0's batch)")
    ax.set_yscale("log")
    ax.set_title(f"{name}: total batch {batch}, {steps} steps")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(ROOT, "docs", f"convergence-{name}.png")
    fig.savefig(path, dpi=100)
    return path


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="lm,nmt,resnet")
    p.add_argument("--scale", type=float, default=1.0, help="multiply every model's step count")
    args = p.parse_args()
    names = [m for m in args.models.split(",") if m]
    unknown = set(names) - set(MODELS)
    if unknown:
        sys.exit(f"unknown models {sorted(unknown)}; choose from {sorted(MODELS)}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="parallax-convergence-") as work:
        for name in names:
            steps, batch, metric_name, results = one_model(name, work, args.scale)
            plot(name, steps, batch, metric_name, results)
            for label, (_, metric, seconds) in results.items():
                rows.append(f"| {name} | {label} | {steps} | {metric_name} | {metric:.2f} | {seconds:.0f} |")
    with open(os.path.join(ROOT, "docs", "convergence-results.md"), "w") as f:
        f.write(f"# Convergence runs (`make convergence`)\n\nMachine: {platform.machine()}, {os.cpu_count()} "
                f"cores, Python {platform.python_version()}; written by scripts/convergence.py.\n\n"
                "| model | run | steps | metric | value | seconds |\n|---|---|---|---|---|---|\n"
                + "\n".join(rows) + "\n")
    print("wrote docs/convergence-results.md and docs/convergence-*.png")


if __name__ == "__main__":
    main()
