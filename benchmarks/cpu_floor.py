"""How far HYBRID's CPU per step could fall below PS's by cutting its collectives' overhead, as the cost model
counts it (no job runs).

For each point of the saved predictions run (results/predictions.json and its calibrations, the in-job fitted
machine AUTO uses): the CPU per step of every process on the hosts, predicted for PS's plan and HYBRID's, beside
the saved run's measured medians; then HYBRID's with every collective's fixed CPU set to 0 (the fused allreduce's
per-collective cost and the step fence's gather: all a fusion or a fence removal could ever save); and the CPU
per GB that TF's ring allreduce would need for that floor to reach PS's, beside the calibrated one. A floor above
PS's means no cut of HYBRID's overhead meets "HYBRID's CPU <= PS's": only a cheaper transport per byte would.

    python benchmarks/cpu_floor.py [--out results/cpu_floor.md]
"""
import argparse
import dataclasses
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..")]

import common  # noqa: E402
from plan_space import add_child_arguments, child_of, each_saved_point  # noqa: E402
from predictions import SAVED  # noqa: E402

MODES = ("PS", "HYBRID")


def without_collective_fixed_cpu(machine):
    """`machine` with every collective's CPU per message (per collective op and process) set to 0."""
    per_message = {k: 0.0 if k.startswith(("allreduce/", "allgather/")) else v
                   for k, v in machine.cpu_per_message.items()}
    return dataclasses.replace(machine, cpu_per_message=per_message)


def with_cpu_per_byte(machine, key, value):
    """`machine` with method `key`'s CPU per byte set to `value`."""
    return dataclasses.replace(machine, cpu_per_byte={**machine.cpu_per_byte, key: value})


def floor_of(workload, plans, per_host, machine, backend):
    """{"cpu": {mode: predicted CPU s per step, all hosts}, "floor": HYBRID's without the collectives' fixed
    CPU, "per_gb": the calibrated allreduce CPU s per GB, "break_even": the allreduce CPU s per GB at which the
    floor equals PS's (None: not even at 0)}."""
    from parallax.plan import cost_model as cm

    def cpu(choices, m):
        return sum(cm.predict(workload, choices, per_host, m, backend).host_cpu)
    key = f"allreduce/{backend}"
    calibrated = machine.cpu_per_byte.get(key, 0.0)
    bare = without_collective_fixed_cpu(machine)
    out = {"cpu": {mode: cpu(plans[mode], machine) for mode in plans}, "floor": cpu(plans["HYBRID"], bare),
           "per_gb": calibrated * 1e9}
    at_zero = cpu(plans["HYBRID"], with_cpu_per_byte(bare, key, 0.0))
    slope = (out["floor"] - at_zero) / calibrated if calibrated > 0 else 0.0
    ps = out["cpu"]["PS"]
    out["break_even"] = None if at_zero > ps else (ps - at_zero) / slope * 1e9 if slope > 0 else float("inf")
    return out


def compute(graph, analysis, spec, config):
    """In the child: floor_of for the model's graph on the saved point's calibration."""
    from parallax.plan import auto_plan, plan_search
    auto = auto_plan.choose(graph, analysis, spec, config)
    plans = {mode: plan_search.fixed_choices(auto.workload, mode, spec.num_hosts, config.local_aggregation)
             for mode in MODES}
    return floor_of(auto.workload, plans, auto_plan.workers_per_host(spec), auto.machine,
                    auto_plan.backend_for(config))


def measured_cpu(data, rate, model):
    """{mode: the saved run's median CPU s per step, all processes on the hosts}."""
    return {r["mode"]: statistics.median(m["cpu_seconds"] for m in r["measurements"])
            for r in data["runs"] if r["rate"] == rate and r["model"] == model and r["mode"] in MODES}


def row_of(model, rate, floor, measured):
    ps, hybrid = floor["cpu"]["PS"], floor["cpu"]["HYBRID"]
    seen = [f"{measured[m] * 1000:.0f}" if m in measured else "-" for m in MODES]
    ratio = (f"{measured['HYBRID'] / measured['PS']:.2f}" if set(MODES) <= set(measured) else "-")
    even = "none: above PS's even at 0" if floor["break_even"] is None else f"{floor['break_even']:.2f}"
    return (f"| {model} | {rate} | {seen[0]} | {ps * 1000:.0f} | {seen[1]} | {hybrid * 1000:.0f} | {ratio} | "
            f"{hybrid / ps:.2f} | {floor['floor'] * 1000:.0f} | {floor['floor'] / ps:.2f} | "
            f"{floor['per_gb']:.2f} | {even} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(common.RESULTS, "cpu_floor.md"))
    add_child_arguments(parser)
    args = parser.parse_args()
    if args.child:
        return child_of(args, compute)
    with open(SAVED) as f:
        data = json.load(f)
    lines = ["# HYBRID's CPU per step against PS's, and its floor without the collectives' fixed CPU", "",
             __doc__.split("\n\n")[1], "",
             f"From the saved predictions run (results/predictions.json; measured at "
             f"{', '.join(sorted({r['measured_at'] for r in data['runs']}))}), the current model. CPU: ms per step, "
             "every process on the hosts.", "",
             "| model | rate | PS measured | PS predicted | HYBRID measured | HYBRID predicted | HYBRID / PS "
             "measured | HYBRID / PS predicted | HYBRID floor | floor / PS | allreduce CPU s per GB | "
             "s per GB for floor = PS |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for rate, model, floor in each_saved_point(data, __file__):
        lines.append(row_of(model, rate, floor, measured_cpu(data, rate, model)))
        print(lines[-1], flush=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {os.path.relpath(args.out)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
