"""Every plan the AUTO planner could choose, as the cost model ranks them (no job runs).

For the LM, NMT and ResNet at each rate of the saved predictions run (results/predictions.json and its
calibrations).

A plan gives each variable AR or PS (dense) or AG or PS (sparse), with local aggregation on or off (where it takes
effect: a sparse variable on a server, and not with TF's collectives in the step). Where a model
has at most 4,096 plans, every one is predicted; otherwise the plan the planner's own search ends on
(plan_search.search, from every fixed mode's plan) and every plan one variable's method away from it. The table
sets the best plan no fixed mode makes (a *mixed* plan) beside the best fixed mode, and beside the model's error
on the fixed modes' real jobs at the same point: a mixed plan predicted faster by less than that error is not a
gain the test bed could confirm.

    python benchmarks/plan_space.py [--out results/plan_space.md]
"""
import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..")]

import common  # noqa: E402
from paper_tables import ALL, script_args  # noqa: E402
from predictions import SAVED, saved_points  # noqa: E402

FIXED = ("PS", "MPI", "HYBRID")


def plan_space(graph, analysis, spec, config):
    """For the graph explain built: {"plans": how many there are, "searched": which of them were predicted,
    "rows": each predicted plan's step and methods, "fixed": each fixed mode's predicted step, "fixed_methods" and
    "fixed_la": the fixed modes' methods and local aggregation}."""
    from parallax.plan import auto_plan, cost_model as cm, plan_search
    auto = auto_plan.choose(graph, analysis, spec, config)
    w, machine = auto.workload, auto.machine
    per_host, backend, hosts = auto_plan.workers_per_host(spec), auto_plan.backend_for(config), spec.num_hosts
    names = [v.name for v in w.variables]
    fixed_methods, fixed_la, fixed, fixed_plans = {}, {}, {}, {}
    for mode in FIXED:
        choices = plan_search.fixed_choices(w, mode, hosts, config.local_aggregation)
        fixed_methods[mode] = tuple(choices[n].method for n in names)
        fixed_la[mode] = cm.aggregates_locally(w, choices, backend)  # where it takes effect
        fixed_plans.setdefault((fixed_methods[mode], fixed_la[mode]), mode)
        fixed[mode] = cm.predict(w, choices, per_host, machine, backend).seconds
    options = [plan_search.default_methods(v) for v in w.variables]
    count = 2 * 2 ** len(names)
    if count <= plan_search.EXHAUSTIVE_PLANS:
        combos = [(m, la) for m in itertools.product(*options) for la in (True, False)]
        searched = "every plan"
    else:
        best, _ = plan_search.search(w, per_host, machine, backend)
        start = tuple(best[n].method for n in names)
        moves = [start] + [start[:i] + (o[0] if m == cm.PS else cm.PS,) + start[i + 1:]
                           for i, (m, o) in enumerate(zip(start, options))]
        combos = [(m, la) for m in moves for la in (True, False)]
        searched = "the search's end and each one-variable move from it"
    rows = []
    for methods, la in combos:
        choices = plan_search.assign_servers(w, dict(zip(names, methods)), hosts, la)
        seconds = cm.predict(w, choices, per_host, machine, backend).seconds
        in_effect = cm.aggregates_locally(w, choices, backend)
        mode = fixed_plans.get((methods, in_effect))  # a fixed mode's plan, in effect
        rows.append({"seconds": seconds, "fixed": mode, "la": in_effect,
                     "methods": {n: m for n, m in zip(names, methods)}})
    return {"plans": count, "searched": searched, "fixed": fixed, "rows": rows,
            "fixed_methods": {m: dict(zip(names, fixed_methods[m])) for m in FIXED},
            "fixed_la": fixed_la}


def child(script, args, spec_path, calibration_path, out, compute):
    """Run the script in the explain role: at its get_runner call, `compute(graph, analysis, spec, config)`, whose
    result it writes to `out` as JSON, takes explain's place."""
    import tensorflow as tf
    tf.compat.v1.disable_eager_execution()
    from parallax.analysis.graph_analysis import analyze
    from parallax.process import protocol
    from parallax.process.resource_spec import ResourceSpec
    from parallax.process.script_roles import run_script_in_role

    def computed(graph, spec, config):
        with open(out, "w") as f:
            json.dump(compute(graph, analyze(graph), spec, config), f)

    role = {protocol.ENV_ROLE: "explain", protocol.ENV_RESOURCE_SPEC: str(ResourceSpec.load(spec_path))}
    with open(os.devnull, "w") as sink:
        stdout, sys.stdout = sys.stdout, sink
        try:
            ran = run_script_in_role(script, [*args, "--run-option", "AUTO", "--calibration", calibration_path,
                                              "--collective-backend", "tf"], role, computed)
        finally:
            sys.stdout = stdout
    return 0 if ran and os.path.exists(out) else 1


def add_child_arguments(parser):
    """The hidden arguments each_saved_point gives a benchmark's child."""
    parser.add_argument("--child", nargs=4, metavar=("MODEL", "SPEC", "CALIBRATION", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", help=argparse.SUPPRESS)


def child_of(args, compute):
    """child() for the point `args` name (add_child_arguments)."""
    model, spec, calibration_path, out = args.child
    script, script_arguments = script_args(model, {model: args.data_dir} if args.data_dir else {}, ALL)
    return child(os.path.join(common.ROOT, script), script_arguments, spec, calibration_path, out, compute)


def each_saved_point(data, benchmark):
    """(rate, model, what `benchmark`'s child wrote) for each point of the saved predictions run `data`: the child
    (`python benchmark --child MODEL SPEC CALIBRATION OUT [--data-dir DIR]`) builds the model's graph in the
    explain role, in a process of its own, one point at a time."""
    name = os.path.splitext(os.path.basename(benchmark))[0]
    with tempfile.TemporaryDirectory(prefix=f"parallax-{name}-") as work:
        for rate, model, spec, calibration_path, data_dirs in saved_points(data, work):
            out = os.path.join(work, f"{rate}-{model}.json")
            cmd = [sys.executable, os.path.abspath(benchmark), "--child", model, spec, calibration_path, out]
            if model in data_dirs:
                cmd += ["--data-dir", data_dirs[model]]
            done = subprocess.run(cmd, cwd=common.ROOT, capture_output=True, text=True,
                                  env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=common.ROOT))
            if done.returncode != 0:
                raise RuntimeError(f"{name} {model} {rate} failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
            with open(out) as f:
                yield rate, model, json.load(f)


def measured_error(data, rate, model, fixed):
    """The model's predicted / measured step of each fixed mode at this point (the saved run's medians)."""
    out = {}
    for r in data["runs"]:
        if r["rate"] == rate and r["model"] == model and r["mode"] in fixed:
            measured = statistics.median(m["step_seconds"] for m in r["measurements"])
            out[r["mode"]] = fixed[r["mode"]] / measured
    return out


def describe(row, fixed_methods, fixed_la):
    """A mixed plan as its difference from the fixed mode it is closest to."""
    nearest = min(fixed_methods, key=lambda m: sum(row["methods"][n] != x for n, x in fixed_methods[m].items())
                  + (row["la"] != fixed_la[m]))
    moved = [f"{n} {row['methods'][n]}" for n, x in fixed_methods[nearest].items() if row["methods"][n] != x]
    if row["la"] != fixed_la[nearest]:
        moved.append("local aggregation " + ("on" if row["la"] else "off"))
    return f"{nearest}'s with " + ", ".join(moved)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(common.RESULTS, "plan_space.md"))
    add_child_arguments(parser)
    args = parser.parse_args()
    if args.child:
        return child_of(args, plan_space)
    with open(SAVED) as f:
        data = json.load(f)
    lines = ["# The plans AUTO chooses from, as the cost model ranks them", "", __doc__.split("\n\n")[2], "",
             f"From the saved predictions run (results/predictions.json; measured at "
             f"{', '.join(sorted({r['measured_at'] for r in data['runs']}))}), the current model.", "",
             "| model | rate | plans | ranked | best fixed (predicted ms) | best mixed plan | predicted ms | "
             "best fixed / mixed | the model's predicted / measured, fixed modes here |",
             "|---|---|---|---|---|---|---|---|---|"]
    for rate, model, space in each_saved_point(data, __file__):
        lines.append(row_of(model, rate, space, measured_error(data, rate, model, space["fixed"])))
        print(lines[-1], flush=True)
    lines += ["", "Predicted / measured: the fixed modes' predictions at that point over their measured medians; "
              "a mixed plan's predicted gain smaller than their spread is within the model's error."]
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {os.path.relpath(args.out)}", file=sys.stderr)
    return 0


def row_of(model, rate, space, errors):
    fixed = space["fixed"]
    best_fixed = min(fixed, key=fixed.get)
    mixed = sorted((r for r in space["rows"] if r["fixed"] is None), key=lambda r: r["seconds"])
    if mixed:
        m = mixed[0]
        cells = [describe(m, space["fixed_methods"], space["fixed_la"]), f"{m['seconds'] * 1000:.1f}",
                 f"{fixed[best_fixed] / m['seconds']:.3f}"]
    else:
        cells = ["none: the search ends on a fixed mode's plan", "-", "-"]
    err = ", ".join(f"{mode} {errors[mode]:.2f}" for mode in FIXED if mode in errors) or "-"
    return (f"| {model} | {rate} | {space['plans']:,} | {space['searched']} | {best_fixed} "
            f"({fixed[best_fixed] * 1000:.1f}) | " + " | ".join(cells) + f" | {err} |")


if __name__ == "__main__":
    sys.exit(main())
