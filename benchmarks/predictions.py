"""The cost model against measurement on the shaped test bed (2 hosts x 2 workers, one server per host;
testbed.py): for the LM, NMT and ResNet at --rate and --second-rate, the step time parallax.explain predicts for
PS, MPI, HYBRID and AUTO, from a calibration made the way `parallax-calibrate` makes it (the script's step timed in
one process, then the calibration job on the test bed at that rate), next to the measured step time of each.

Each round runs every mode of a model back to back; a configuration's figure is the median over its rounds.

    python benchmarks/predictions.py [--repeats 2] [--rate 1gbit] [--second-rate 100mbit] [--only LM,NMT]
    python benchmarks/predictions.py --from-saved   # the saved measurements and calibrations, the current model

Every run saves what it measured (results/predictions.json) and each calibration (results/predictions/<rate>/
<model>/calibration.json), so that a change to the cost model can be checked against the same measurements. A run
of some models (--only) keeps the others' saved measurements (each model's rows come from one run, whose commit
predictions.json records), and the table then predicts every model with the current model.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..")]

import common  # noqa: E402
import dataclasses  # noqa: E402
import testbed  # noqa: E402
from paper_tables import ALL, MODELS, add_rate_arguments, chosen_models, make_data, script_args  # noqa: E402

from parallax.plan import calibration
from parallax.tools import calibrate# noqa: E402
from parallax.launcher.local_cluster import LocalCluster  # noqa: E402

MODES = ("PS", "MPI", "HYBRID", "AUTO")
SAVED = os.path.join(common.RESULTS, "predictions.json")
CALIBRATIONS = os.path.join(common.RESULTS, "predictions")
WITHIN = 0.2  # the bound on predicted / measured - 1
DRIFT_SPREAD = 1.2  # rounds of one point further apart than this flag the machine, not the model (drift_line)


def predicted(model, data_dirs, spec, path, backend):
    """parallax.explain's predicted step seconds per mode for `model`, from the calibration at `path`."""
    script, args = script_args(model, data_dirs, ALL)
    out = subprocess.run([sys.executable, "-m", "parallax.explain", "--resource-spec", spec, "--json",
                          os.path.join(common.ROOT, script), *args, "--run-option", "AUTO", "--calibration", path,
                          "--collective-backend", backend],
                         cwd=common.ROOT, capture_output=True, text=True,
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=common.ROOT))
    lines = out.stdout.splitlines()
    start = lines.index("{") if "{" in lines else -1  # the JSON document (the script may print before it)
    if out.returncode != 0 or start < 0:
        raise RuntimeError(f"parallax.explain {model} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    data = json.loads("\n".join(lines[start:]))
    return data["predicted_seconds"], {"methods": {v["name"]: v["method"] for v in data["plan"]["variables"]},
                                       "basis": data.get("auto_basis") or "model",
                                       "cpu_scales": data.get("cpu_scales") or {},
                                       "overlap_exponent": data.get("overlap_exponent"),
                                       "measured": data.get("measured_seconds") or {},
                                       "kinds": {v["name"]: v["kind"] for v in data["plan"]["variables"]},
                                       "local_aggregation": {v["name"]: v["local_aggregation"]
                                                             for v in data["plan"]["variables"]},
                                       "backend": backend}


def fixed_modes_of(plan):
    """The fixed modes whose rule gives `plan`: its methods (dense AR or PS, sparse AG or PS; a plan of dense
    variables alone on AllReduce is both MPI's and HYBRID's) and, where the plan records it, its local aggregation
    (a fixed mode aggregates every sparse variable on servers on the test bed's hosts of two workers). None: a plan
    no fixed mode makes."""
    rules = {"PS": {"dense": "PS", "sparse": "PS"}, "MPI": {"dense": "AR", "sparse": "AG"},
             "HYBRID": {"dense": "AR", "sparse": "PS"}}
    return [mode for mode, rule in rules.items()
            if all(rule[plan["kinds"][name]] == method for name, method in plan["methods"].items())
            and plan.get("local_aggregation", {}) in ({}, fixed_local_aggregation(plan))]


def fixed_local_aggregation(plan):
    """{variable: aggregated locally} as a fixed mode with `plan`'s methods has it (Config's default, sync)."""
    return {name: method == "PS" and plan["kinds"][name] == "sparse"
            for name, method in plan["methods"].items()}


def describe(plan):
    """`plan`'s variables per method, and local aggregation where a fixed mode with its methods would differ."""
    counts = {}
    for method in plan["methods"].values():
        counts[method] = counts.get(method, 0) + 1
    text = ", ".join(f"{m} {k}" for m, k in sorted(counts.items()))
    mine, fixed = plan.get("local_aggregation"), fixed_local_aggregation(plan)
    if mine and mine != fixed:
        on = sorted(n for n, la in mine.items() if la)
        text += f"; local aggregation: {', '.join(on) if on else 'none'} (a fixed mode: " + \
            f"{', '.join(sorted(n for n, la in fixed.items() if la)) or 'none'})"
    return text


def same_plan(a, b):
    return a["methods"] == b["methods"] and a.get("local_aggregation") == b.get("local_aggregation")


def fixed_mode_of(plan):
    """The first of fixed_modes_of(plan), or None."""
    return next(iter(fixed_modes_of(plan)), None)


def calibrate_rate(cluster, rate, models, data_dirs, workloads, backend):
    """The machine's calibration at `rate`, and each model's (its in-job half too), saved under CALIBRATIONS."""
    runs_ = calibrate.measure_machine(sys.executable, cluster.launch_options(), testbed.environment(cluster))
    machine = calibration.fit_machine(runs_)
    for model in models:
        w = workloads[model]
        script, args = script_args(model, data_dirs, ALL)
        testbed.progress(f"{rate}: {model} in real jobs (the in-job half of the calibration)")
        in_job = calibrate.measure_in_jobs(sys.executable, cluster.launch_options(), testbed.environment(cluster),
                                           ["python", os.path.join(common.ROOT, script), *args,
                                            "--collective-backend", backend])
        calibration.Calibration(machine, w["compute_seconds"], w["compute_cpu"], w["alpha"], cluster.num_hosts,
                                {f"{run[0]['mode']}/{run[0]['backend']}": run for run in runs_}, in_job,
                                ).save(os.path.join(CALIBRATIONS, rate, model))


def run_rate(rate, models, data_dirs, workloads, work, repeats, backend, runs, predictions, plans, machines, specs,
             reuse=False):
    with LocalCluster(2, 2, rate=rate) as cluster:
        spec, specs[rate] = cluster.spec_file(), cluster.spec_text()
        saved = {model: os.path.join(CALIBRATIONS, rate, model, calibration.FILE) for model in models}
        if reuse and all(os.path.exists(path) for path in saved.values()):
            testbed.progress(f"{cluster}: the calibrations of an earlier run at {rate}, as saved")
        else:
            testbed.progress(f"{cluster}: calibrating the machine")
            calibrate_rate(cluster, rate, models, data_dirs, workloads, backend)
        for model in models:
            machines[(rate, model)] = calibration.load(saved[model]).machine
            predictions[(rate, model)], plans[(rate, model)] = predicted(model, data_dirs, spec, saved[model], backend)
        testbed.progress(f"{rate}: {len(models)} models x {len(MODES)} modes x {repeats} rounds")
        for round_ in range(repeats):
            for model in models:
                script, args = script_args(model, data_dirs, ALL)
                steps, every = MODELS[model][3]
                # each round starts one mode later, so no mode always runs after the same one
                for mode in MODES[round_ % len(MODES):] + MODES[:round_ % len(MODES)]:
                    extra = ["--calibration", saved[model]] if mode == "AUTO" else []
                    m = testbed.run_job(cluster, work, script, [*args, *extra, "--collective-backend", backend],
                                        mode, steps, every, every)
                    runs.setdefault((rate, model, mode), []).append(m)
                    p = predictions[(rate, model)][mode]
                    testbed.progress(f"{rate} round {round_ + 1}/{repeats} {model} {mode}: {m.step_seconds * 1000:.0f} "
                                     f"ms/step measured, {p * 1000:.0f} predicted; {m.rate:.0f} {m.unit}/s, "
                                     f"{m.cpu_seconds:.2f} CPU s/step")


def tables(runs, predictions, plans, rates, models, now=None):
    """`now`: the plans the current code's AUTO makes from the saved calibrations (--from-saved), set beside the
    plans AUTO ran: where one is a fixed mode's plan, that mode's rounds in the same run measured it."""
    def med(key, attr):
        return common.median([getattr(m, attr) for m in runs[key]])

    lines = ["## Predicted against measured step time", "",
             "Milliseconds per step, median over the rounds; ratio = predicted / measured. AUTO / best: AUTO's "
             "measured throughput over the best fixed mode's. Each round's step is listed in the order of the "
             "rounds: a machine whose speed drifts during the run (a shared host) shows there.", "",
             "| model | rate | mode | predicted ms | measured ms | predicted / measured | units/s | CPU s/step | "
             "each round's ms |",
             "|---|---|---|---|---|---|---|---|---|"]
    for model in models:
        for rate in rates:
            for mode in MODES:
                key, p = (rate, model, mode), predictions[(rate, model)][mode]
                measured = med(key, 'step_seconds')
                predicted_cells = f"- | {measured * 1000:.0f} | - |" if p is None else \
                    f"{p * 1000:.0f} | {measured * 1000:.0f} | {p / measured:.2f} |"
                lines.append(f"| {model} | {rate} | {mode} | {predicted_cells} {med(key, 'rate'):,.0f} | "
                             f"{med(key, 'cpu_seconds'):.2f} | "
                             f"{', '.join(f'{m.step_seconds * 1000:.0f}' for m in runs[key])} |")
    ratios = [predictions[(rate, model)][mode] / med((rate, model, mode), "step_seconds")
              for model in models for rate in rates for mode in MODES if predictions[(rate, model)][mode]]
    within = sum(1 for r in ratios if abs(r - 1) <= WITHIN)
    lines += ["", f"Within 20%: {within} of {len(ratios)} points (predicted / measured from {min(ratios):.2f} to "
              f"{max(ratios):.2f})."]
    lines += ["", drift_line(runs, predictions, rates, models)]
    lines += ["", "## AUTO against the best fixed mode", "",
              "AUTO / best: the medians' ratio; per round: the median of each round's AUTO over the same round's "
              "best fixed mode (the modes of a round run back to back, so a machine's drift between rounds "
              "cancels).",
              "",
              "| model | rate | best fixed (measured) | AUTO / best | per round | AUTO's plan (variables per method; "
              "local aggregation where a fixed mode's differs) | chosen by | calibration's in-job step ms (PS, MPI, HYBRID) |"
              + (" AUTO's plan now: the rounds of the mode that ran it / best |" if now else ""),
              "|---|---|---|---|---|---|---|---|" + ("---|" if now else "")]
    for model in models:
        for rate in rates:
            fixed = {mode: med((rate, model, mode), "rate") for mode in MODES[:3]}
            best = max(fixed, key=fixed.get)
            plan = plans[(rate, model)]
            in_job = ", ".join(f"{plan['measured'][m] * 1000:.0f}" if m in plan["measured"] else "-"
                               for m in MODES[:3])
            auto = med((rate, model, "AUTO"), "rate")
            now_cell = f" {_now_cell(now[(rate, model)], plan, fixed, best, auto)} |" if now else ""
            per_round = common.median([a.rate / b.rate for a, b in zip(runs[(rate, model, "AUTO")],
                                                                        runs[(rate, model, best)])])
            lines.append(f"| {model} | {rate} | {best} | {auto / fixed[best]:.2f}x | {per_round:.2f}x | "
                         f"{describe(plan)} | {plan['basis']} | {in_job} |{now_cell}")
    inferred = sorted({p["local_aggregation_from"] for p in plans.values() if "local_aggregation_from" in p})
    if inferred:
        lines += ["", f"Where a run recorded its plan's methods only (before local aggregation was recorded), the "
                      f"plan's local aggregation is {inferred[0]}'s for the same methods."]
    return lines


def drift_line(runs, predictions, rates, models, spread=DRIFT_SPREAD):
    """The points whose rounds disagree by more than `spread` (slowest over fastest round), and how many of them
    the model misses by more than 20%: a miss at such a point may be the machine's, not the model's."""
    drifted, missed = [], 0
    for model in models:
        for rate in rates:
            for mode in MODES:
                steps = [m.step_seconds for m in runs[(rate, model, mode)]]
                if len(steps) > 1 and max(steps) > spread * min(steps):
                    drifted.append(f"{model} {rate} {mode} ({max(steps) / min(steps):.2f}x)")
                    p = predictions[(rate, model)][mode]
                    missed += bool(p) and abs(p / common.median(steps) - 1) > WITHIN
    if not drifted:
        return f"Every point's rounds are within {spread:g}x of each other."
    return (f"Rounds more than {spread:g}x apart (slowest over fastest): {len(drifted)} points, {', '.join(drifted)}; "
            f"{missed} of them outside 20%.")


def _now_cell(plan, ran, fixed, best, auto):
    modes = fixed_modes_of(plan)
    if not modes:
        return (f"a plan no fixed mode makes: AUTO's rounds {auto / fixed[best]:.2f}x" if same_plan(plan, ran) else
                "a plan no fixed mode makes (not measured)")
    return f"{' and '.join(modes)}'s plan ({plan['basis']}): " + ", ".join(f"{fixed[m] / fixed[best]:.2f}x"
                                                                            for m in modes)


def inputs(machines, workloads, rates, plans):
    """The measured inputs of the predictions, so that a wrong one can be found. `machines`: {(rate, model): the
    machine its calibration fitted}; `plans`: {(rate, model): what explain said: "cpu_scales" ({method group: the
    in-job scale of its CPU costs}), "overlap_exponent"}."""
    lines = ["", "## The model's inputs, as measured", "",
             "Each model's calibration at each rate: the calibration job's fit, the factor the model's own real "
             "jobs (in-job) scaled each method's CPU costs by, and the exponent p of the p-norm that combines the "
             "critical path and the CPU bound, fitted to the same jobs' step times (calibration.fit_in_job; "
             "max: p -> inf, 1 adds them).", "",
             "| model | rate | link Gbit/s | latency ms | cores | method | CPU s per GB | ms CPU per message | "
             "ms CPU per step | ms per round | in-job CPU scale | in-job p |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (rate, model), m in sorted(machines.items(), key=lambda item: (list(workloads).index(item[0][1]),
                                                                         rates.index(item[0][0]))):
        said = plans.get((rate, model)) or {}
        scale_of = {key: f"{scale:.2f}" for group, scale in (said.get("cpu_scales") or {}).items()
                    for key in calibration.keys_of_group(group)}
        exponent = said.get("overlap_exponent")
        exponent = "max" if exponent is None else f"{exponent:g}"
        for key in sorted(m.cpu_per_byte):
            lines.append(f"| {model} | {rate} | {m.bandwidth * 8 / 1e9:.2f} | {m.latency * 1000:.2f} | {m.cores:g} | "
                         f"{key} | {m.cpu_per_byte[key] * 1e9:.2f} | {m.cpu_per_message.get(key, 0) * 1000:.2f} | "
                         f"{m.cpu_per_step.get(key, 0) * 1000:.2f} | "
                         f"{m.round_seconds.get(key, m.latency) * 1000:.2f} | {scale_of.get(key, '-')} | "
                         f"{exponent} |")
    lines += ["", "One worker's step: timed alone in one process, and in the calibration's real jobs (ms per step: the "
              "wall time, and the machine's CPU over its workers, communication included).", "",
              "| model | rate | one process: wall, CPU | PS job: wall, CPU / worker | MPI job | HYBRID job |",
              "|---|---|---|---|---|---|"]
    for model, w in workloads.items():
        for rate in rates:
            path = os.path.join(CALIBRATIONS, rate, model, calibration.FILE)
            in_job = calibration.load(path).in_job or {} if os.path.exists(path) else {}
            cells = []
            for mode in MODES[:3]:
                reports = in_job.get(mode)
                cells.append("-" if not reports else
                             f"{calibration.median_wall(reports) * 1000:.1f}, "
                             f"{common.median([r['machine_cpu'] for r in reports]) / len(reports) * 1000:.1f}")
            lines.append(f"| {model} | {rate} | {w['compute_seconds'] * 1000:.1f}, {w['compute_cpu'] * 1000:.1f} | "
                         + " | ".join(cells) + " |")
    return lines


def plot(runs, predictions, rates, models, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 6))
    markers = dict(zip(MODES, "osD*"))
    for (rate, model, mode), ms in runs.items():
        if predictions[(rate, model)][mode] is None:
            continue  # a mixed AUTO plan that ran, which the current code does not make
        measured = common.median([m.step_seconds for m in ms]) * 1000
        ax.scatter(measured, predictions[(rate, model)][mode] * 1000, marker=markers[mode],
                   color={"LM": "C0", "NMT": "C1", "ResNet": "C2"}.get(model, "C3"),
                   facecolors="none" if rate != rates[0] else None, label=f"{model} {mode}" if rate == rates[0]
                   else None)
    low, high = ax.get_xlim()
    for factor, style in ((1, "-"), (1.2, ":"), (1 / 1.2, ":")):
        ax.plot([low, high], [low * factor, high * factor], "k" + style, linewidth=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured ms per step")
    ax.set_ylabel("predicted ms per step")
    ax.set_title(f"cost model on the test bed (filled: {rates[0]}; hollow: {', '.join(rates[1:]) or '-'})")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def save(runs, predictions, plans, rates, models, workloads, specs, repeats):
    """Write what this run measured to SAVED. A run of some models (--only) at the saved rates keeps the other
    models' saved measurements, each model's rows from one run: returns the models kept that way."""
    data = {"repeats": {m: repeats for m in models}, "rates": rates, "models": models, "workloads": workloads,
            "specs": specs,
            "runs": [{"rate": r, "model": m, "mode": mode, "measurements": [dataclasses.asdict(x) for x in xs],
                      "measured_at": common.commit(), "measured_on": common.machine(with_commit=False)}
                     for (r, m, mode), xs in runs.items()],
            "predictions": [{"rate": r, "model": m, "seconds": p, "plan": plans[(r, m)]}
                            for (r, m), p in predictions.items()]}
    kept = []
    if os.path.exists(SAVED):
        with open(SAVED) as f:
            old = json.load(f)
        kept = [m for m in old["models"] if m not in models] if old["rates"] == rates else []
        data["models"] = [m for m in old["models"] if m in models or m in kept] + \
            [m for m in models if m not in old["models"]]
        data["workloads"] = {**{m: old["workloads"][m] for m in kept}, **workloads}
        data["repeats"] = {**{m: rounds_of(old, m) for m in kept}, **data["repeats"]}
        data["runs"] += [r for r in old["runs"] if r["model"] in kept]
        data["predictions"] += [p for p in old["predictions"] if p["model"] in kept]
    with open(SAVED, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    return kept


def rounds_of(data, model):
    """How many rounds the saved run measured `model` in (older runs recorded one count for every model)."""
    repeats = data["repeats"]
    return repeats[model] if isinstance(repeats, dict) else repeats


def rounds_cell(data):
    """The header's rounds: one count, or each model's where they differ."""
    counts = {m: rounds_of(data, m) for m in data["models"]}
    if len(set(counts.values())) == 1:
        return next(iter(counts.values()))
    return ", ".join(f"{m} {n}" for m, n in counts.items())


def saved_points(data, work):
    """(rate, model, spec file, calibration path, data dirs) for each point of a saved run (predictions.json's
    `data`), with the models' data and each rate's spec written under `work`."""
    data_dirs = make_data(data["models"], work)
    for rate in data["rates"]:
        spec = os.path.join(work, f"{rate}.txt")
        with open(spec, "w") as f:
            f.write(data["specs"][rate])
        for model in data["models"]:
            yield rate, model, spec, os.path.join(CALIBRATIONS, rate, model, calibration.FILE), data_dirs


def from_saved():
    """(runs, predictions made by the current model, plans as run, rates, models, workloads, machines, repeats,
    the plans the current code's AUTO makes)."""
    with open(SAVED) as f:
        data = json.load(f)
    runs = {(r["rate"], r["model"], r["mode"]): [testbed.Measurement(**x) for x in r["measurements"]]
            for r in data["runs"]}
    plans = {(p["rate"], p["model"]): p["plan"] for p in data["predictions"]}
    predictions, machines, now = {}, {}, {}
    with tempfile.TemporaryDirectory(prefix="parallax-predictions-") as work:
        for rate, model, spec, path, data_dirs in saved_points(data, work):
            machines[(rate, model)] = calibration.load(path).machine
            predictions[(rate, model)], now[(rate, model)] = predicted(model, data_dirs, spec, path, "tf")
            plan = now[(rate, model)]
            ran = plans[(rate, model)]
            if plan["methods"] == ran["methods"] and "local_aggregation" not in ran:
                ran["local_aggregation"] = plan["local_aggregation"]  # runs before 2026-11-25 kept methods only
                ran["local_aggregation_from"] = "the current code's AUTO"
            if not same_plan(plan, ran):
                # The AUTO row sets the plan that ran beside its measurement: a fixed mode's plan is predicted
                # as that mode is; a mixed one cannot be predicted again here.
                ran_mode = fixed_mode_of(dict(ran, kinds=plan["kinds"]))
                predictions[(rate, model)]["AUTO"] = predictions[(rate, model)][ran_mode] if ran_mode else None
                testbed.progress(f"{rate} {model}: the current code's AUTO would run "
                                 f"{fixed_mode_of(plan) or 'a mixed'} plan; the AUTO row is the plan that ran "
                                 f"({ran_mode or 'mixed'})")
    machines_of = {}
    for r in data["runs"]:
        machines_of.setdefault(r.get("measured_on", "not recorded"), set()).add(r["model"])
    measured_on = [f"{', '.join(m for m in data['models'] if m in models_)} on {where}"
                   for where, models_ in sorted(machines_of.items())]
    return (runs, predictions, plans, data["rates"], data["models"], data["workloads"], machines, rounds_cell(data),
            now, measured_on)


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: each job and the test bed are taken down
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_rate_arguments(p)
    p.add_argument("--backend", default="tf", help="Config.collective_backend of every job")
    p.add_argument("--reuse-calibrations", action="store_true",
                   help="where every model's calibration at a rate is saved (results/predictions/), take it rather "
                        "than calibrate again")
    p.add_argument("--from-saved", action="store_true",
                   help="run no job: predict again with the current model from the saved calibrations, and set "
                        "the predictions beside the saved measurements")
    bench = p.parse_args()
    if bench.from_saved:
        runs, predictions, plans, rates, models, workloads, machines, bench.repeats, now, measured_on = from_saved()
        settings = {"source": f"{os.path.relpath(SAVED, common.ROOT)} (measured earlier), predicted again now"}
    else:
        models = chosen_models(p, bench.only)
        rates = [r for r in (bench.rate, bench.second_rate) if r]
        settings = {}
    lines = common.header("The cost model against measurement", {
        **settings, "hosts": "2 (network namespaces)", "workers per host": 2, "servers": "1 per host",
        "rates": ", ".join(rates), "rounds": bench.repeats, "collective backend": bench.backend, "optimizations": ALL,
        "MPI": "TCP (btl tcp,self), mpi_yield_when_idle 1",
        **{m: f"{' '.join(MODELS[m][2])}, {MODELS[m][3][0]} steps, the first {MODELS[m][3][1]} for warm-up"
           for m in models}})
    if not bench.from_saved:
        runs, predictions, plans, machines, specs, now = {}, {}, {}, {}, {}, None
        with tempfile.TemporaryDirectory(prefix="parallax-predictions-") as work:
            data_dirs = make_data(models, work)
            workloads = {}
            for model in models:
                testbed.progress(f"timing one {model} step in one process")
                script, args = script_args(model, data_dirs, ALL)
                workloads[model] = calibrate.measure_workload(sys.executable, ["python", os.path.join(common.ROOT,
                                                                                                     script), *args])
            for rate in rates:
                run_rate(rate, models, data_dirs, workloads, work, bench.repeats, bench.backend, runs, predictions,
                         plans, machines, specs, bench.reuse_calibrations)
        kept = save(runs, predictions, plans, rates, models, workloads, specs, bench.repeats)
        if kept:  # one table of every saved model, each predicted by the current model
            runs, predictions, plans, rates, models, workloads, machines, bench.repeats, now, measured_on = \
                from_saved()
            lines[2:2] = [f"Measured now: {', '.join(m for m in models if m not in kept)}; measured by an earlier "
                          f"run and kept: {', '.join(kept)} (predictions.json records each run's commit)", ""]
    if bench.from_saved or now is not None:  # the header's machine is the one predicting; say where it was measured
        lines[2:2] = ["Measured (the machine below predicted from those measurements):", "",
                      *[f"- {line}" for line in measured_on], ""]
    lines += tables(runs, predictions, plans, rates, models, now) + inputs(machines, workloads, rates, now or plans)
    print("\n".join(lines), flush=True)
    common.write("predictions.md", lines)
    plot(runs, predictions, rates, models, os.path.join(common.RESULTS, "predictions.png"))


if __name__ == "__main__":
    main()
