"""The Parallax paper's Tables 1, 3 and 4 on the shaped test bed: 2 hosts x 2 workers (network namespaces, one
parameter server per host, links shaped with tc), the LM, NMT and ResNet of models/.

- Table 1: throughput of PS, MPI and HYBRID for each model, at --rate (1gbit) and at --second-rate.
- Table 3: bytes per worker per step, measured on the hosts' interfaces (testbed.py), against `parallax.explain`'s
  prediction (`--measure-sparsity`); from the Table 1 runs at --rate.
- Table 4: LM and NMT throughput with HYBRID's optimizations added one by one (BASE = PS without any), at --rate.

Every configuration runs --repeats times at --rate (once at --second-rate), in rounds that visit every
configuration once, so that drift on this shared machine hits them all alike. A run's throughput is the median
over its log windows after warm-up; a configuration's is the median over its runs; ratios are of those medians.

    python benchmarks/paper_tables.py [--repeats 2] [--rate 1gbit] [--second-rate 100mbit] [--trace-dir D]
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..")]

import common  # noqa: E402
import testbed  # noqa: E402

from parallax.launcher.local_cluster import LocalCluster  # noqa: E402

# Adagrad, as LM-1B trains: its sparse update touches only the rows in the batch. TF's Adam updates every row of
# its slots on every step, which made the servers' update of the 100k-row embedding and softmax the largest item of
# a traced step (250 ms of 540 on server 0; benchmarks/README.md).
LM_ARGS = ["--embedding-size", "256", "--hidden-size", "256", "--num-sampled", "512", "--batch-size", "32",
           "--optimizer", "adagrad", "--learning-rate", "0.2"]
MODELS = {  # name: (training script, data generator and its arguments, script arguments, (steps, log every))
    "LM": ("models/lm/train_distributed.py", ["models/lm/make_data.py", "--synthetic-vocab", "100000"], LM_ARGS,
           (50, 10)),
    "NMT": ("models/nmt/train_distributed.py", ["models/nmt/make_data.py"], ["--batch-size", "32"], (300, 50)),
    "ResNet": ("models/resnet/train_distributed.py", None, ["--batch-size", "32"], (600, 100)),
}
MODES = ("PS", "MPI", "HYBRID")
ABLATION = (("BASE", "PS", "none"), ("+HYB", "HYBRID", "none"), ("+LA", "HYBRID", "LA"),
            ("+OPAU", "HYBRID", "LA,OPAU"), ("+OPSW", "HYBRID", "LA,OPAU,OPSW"))
ALL = "LA,OPAU,OPSW"


def configurations(second_rate):
    """(rate key, model, run option, optimizations) for every distinct run; Table 1's PS and HYBRID have all
    optimizations on (the defaults), so HYBRID is also Table 4's last row."""
    table1 = [(model, mode, ALL) for model in MODELS for mode in MODES]
    table4 = [(model, mode, opts) for model in ("LM", "NMT") if model in MODELS for _, mode, opts in ABLATION]
    first = list(dict.fromkeys(table1 + table4))
    return [("rate", *c) for c in first] + ([("second", *c) for c in table1] if second_rate else [])


def make_data(models, work):
    """Write each model's data under `work`; {model: data directory} for the models that read one."""
    data_dirs = {}
    for model in models:
        generator = MODELS[model][1]
        if generator:
            data_dirs[model] = os.path.join(work, model)
            subprocess.run([sys.executable, os.path.join(common.ROOT, generator[0]), "--out", data_dirs[model],
                            *generator[1:]], check=True, capture_output=True)
    return data_dirs


def add_rate_arguments(parser, repeats_help=None):
    """The test-bed benchmarks' common options: rounds, the two link rates, and which models."""
    parser.add_argument("--repeats", type=int, default=2, help=repeats_help)
    parser.add_argument("--rate", default="1gbit")
    parser.add_argument("--second-rate", default="100mbit", help="'' to skip")
    parser.add_argument("--only", help="comma-separated models (default: all)")


def chosen_models(parser, names):
    """The models that `names` lists (comma-separated; None: all of MODELS); a parser error names unknown ones."""
    models = names.split(",") if names else list(MODELS)
    unknown = set(models) - set(MODELS)
    if unknown:
        parser.error(f"unknown model(s) {', '.join(sorted(unknown))}: choose from {', '.join(MODELS)}")
    return models


def script_args(model, data_dirs, opts):
    script, _, extra, _ = MODELS[model]
    data = ["--data-dir", data_dirs[model]] if model in data_dirs else []
    return script, [*data, *extra, "--optimizations", opts]


def predicted_bytes(model, mode, data_dirs, spec):
    """parallax.explain's Table 3 total for this model and mode, with `a` measured over 5 batches."""
    script, args = script_args(model, data_dirs, ALL)
    out = subprocess.run([sys.executable, "-m", "parallax.explain", "--resource-spec", spec, "--measure-sparsity",
                          "5", os.path.join(common.ROOT, script), *args, "--run-option", mode],
                         cwd=common.ROOT, capture_output=True, text=True,
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=common.ROOT))
    m = re.search(r"predicted traffic per worker per step \(Table 3\): ([\d,]+) bytes", out.stdout)
    if not m:
        raise RuntimeError(f"parallax.explain {model} {mode} printed no prediction:\n{out.stdout}\n{out.stderr}")
    return int(m[1].replace(",", ""))


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: each job and the test bed are taken down
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_rate_arguments(p)
    p.add_argument("--trace-dir", help="after the runs at --rate, trace step 30 of the LM in PS and HYBRID (worker 0 "
                                       "and the servers, docs/profiling.md) into this directory")
    bench = p.parse_args()
    for name in set(MODELS) - set(chosen_models(p, bench.only)):
        del MODELS[name]
    settings = {"hosts": "2 (network namespaces)", "workers per host": 2, "servers": "1 per host (PS, HYBRID)",
                "rate": bench.rate, "second rate": bench.second_rate or "-", "repeats": bench.repeats,
                "MPI": "TCP (btl tcp,self), mpi_yield_when_idle 1"}
    for model, (_, _, args, (steps, every)) in MODELS.items():
        vocab = " (vocab 100,000)" if model == "LM" else ""
        settings[model] = f"{' '.join(args)}{vocab}, {steps} steps, the first {every} for warm-up"
    lines = common.header("The paper's Tables 1, 3 and 4 on the shaped test bed", settings)
    runs = {}
    with tempfile.TemporaryDirectory(prefix="parallax-bench-") as work:
        data_dirs = make_data(MODELS, work)
        configs = configurations(bench.second_rate)
        for rate_key, rate in (("rate", bench.rate), ("second", bench.second_rate)):
            todo = [c[1:] for c in configs if c[0] == rate_key]
            if not todo:
                continue
            repeats = bench.repeats if rate_key == "rate" else 1
            with LocalCluster(2, 2, rate=rate) as cluster:
                testbed.progress(f"{cluster}: {len(todo)} configurations x {repeats}")
                for round_ in range(repeats):
                    for i, (model, mode, opts) in enumerate(todo):
                        script, args = script_args(model, data_dirs, opts)
                        steps, every = MODELS[model][3]
                        m = testbed.run_job(cluster, work, script, args, mode, steps, every, every)
                        runs.setdefault((rate_key, model, mode, opts), []).append(m)
                        testbed.progress(f"{rate} round {round_ + 1}/{repeats} [{i + 1}/{len(todo)}] {model} "
                                         f"{mode} {opts}: {m.rate:.0f} {m.unit}/s, {m.wire_bytes / 1e6:.2f} MB "
                                         f"wire + {m.local_bytes / 1e6:.2f} MB local per worker-step")
                spec = cluster.spec_file()
                if rate_key == "rate" and bench.trace_dir and "LM" in MODELS:
                    for mode in ("PS", "HYBRID"):
                        script, args = script_args("LM", data_dirs, ALL)
                        out = os.path.abspath(os.path.join(bench.trace_dir, mode))
                        testbed.run_job(cluster, work, script, [*args, "--profile-steps", "30", "--log-dir", out],
                                        mode, 40, 10, 10)
                        testbed.progress(f"traced LM {mode} step 30 into {out}")
                if rate_key == "rate":
                    predicted = {(model, mode): predicted_bytes(model, mode, data_dirs, spec)
                                 for model in MODELS for mode in MODES}
    import report
    lines += report.tables(runs, predicted, bench, MODELS, MODES, ABLATION, ALL)
    if bench.trace_dir and "LM" in MODELS:
        import trace_summary
        lines += ["", f"## Where an LM step's time goes at {bench.rate} (traces of step 30, worker 0)", ""]
        for mode in ("PS", "HYBRID"):
            lines += [f"### {mode}", ""] + trace_summary.summarize(
                os.path.join(bench.trace_dir, mode, "trace.worker0.step30.json")) + [""]
    common.write("paper_tables.md", lines)
    report.plot(runs, bench, MODELS, MODES, os.path.join(common.RESULTS, "paper_tables.png"))


if __name__ == "__main__":
    main()
