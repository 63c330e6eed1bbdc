"""Where a plan that mixes methods pays on the test bed, as the cost model sees it (no job runs).

AUTO beats every fixed mode only with a plan no fixed mode makes (a *mixed* plan). Whether one exists depends
on the workload and on the machine. This sweeps synthetic workloads over the test bed's calibrated machine at
each rate (the saved calibration of the predictions run), and predicts every plan of each. Each workload has:
- a dense variable read once by a step (D MB, 2 parts), and one read R times (K MB): on a server, each read
  is a transfer;
- optionally a sparse table (E MB, 2 parts, a worker's step touching the share alpha of its rows);
- one worker's compute per step (its CPU the same).
A plan gives each variable AR or PS (dense) or AG or PS (sparse), with local aggregation on or off: every one
is predicted. A workload's gain is the best fixed mode's predicted step over the best mixed plan's; below 1, every
mixed plan is slower. The last column checks the planner's own search (plan_search.search, which AUTO runs): the
workloads where it ends on a plan slower than the best one.

To see which term stands in the way, the same sweep runs on the machine with parts of its measured costs set
to zero: a collective's fixed CPU (per collective, per process), and a server's fixed costs (its CPU per step
and per message).

    python benchmarks/mixed_plans.py [--out results/mixed_plans.md]
"""
import argparse
import dataclasses
import itertools
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..")]

import common  # noqa: E402
from parallax.plan import calibration, cost_model as cm, plan_search# noqa: E402

MB = 1 << 20
PER_HOST = (2, 2)  # the predictions run's test bed: 2 hosts x 2 workers
RATES = ("1gbit", "100mbit")
CALIBRATION = os.path.join(common.RESULTS, "predictions", "{rate}", "ResNet", calibration.FILE)
BACKENDS = ("tf", "horovod")
GRID = {"D": (1, 4, 16), "R": (1, 4, 16), "K": (0.25, 1, 4), "E": (0, 4, 32, 128), "alpha": (0.001, 0.01, 0.1, 0.5),
        "compute": (0.01, 0.03, 0.1)}
GAINS = (1.01, 1.05)
SEARCH_SLACK = 0.001


def workloads():
    """(description, cost_model.Workload) for each point of GRID (a table-less workload once per alpha's
    place: alpha means nothing without E)."""
    seen = set()
    for d, r, k, e, alpha, compute in itertools.product(*GRID.values()):
        alpha = alpha if e else None
        if (d, r, k, e, alpha, compute) in seen:
            continue
        seen.add((d, r, k, e, alpha, compute))
        variables = [cm.VariableLoad("D", "dense", int(d * MB), 1.0, 2, (1, d * MB)),
                     cm.VariableLoad("K", "dense", int(k * MB), 1.0, 1, (r, r * k * MB))]
        if e:
            variables.append(cm.VariableLoad("E", "sparse", int(e * MB), alpha, 2))
        table = f", E {e} MB at alpha {alpha}" if e else ""
        yield (f"D {d} MB, K {k} MB read {r}x{table}, compute {compute * 1000:.0f} ms",
               cm.Workload(compute, compute, tuple(variables)))


def fixed_plans(workload, hosts, backend):
    """{(methods, local aggregation in effect): mode} of the fixed modes, with local aggregation on or off."""
    plans = {}
    for mode in ("PS", "MPI", "HYBRID"):
        for la in (True, False):
            choices = plan_search.fixed_choices(workload, mode, hosts, la)
            plans.setdefault(_key(workload, choices, backend), mode)
    return plans


def _key(workload, choices, backend):
    """(methods, whether local aggregation takes effect)."""
    return tuple(sorted((n, c.method) for n, c in choices.items())), cm.aggregates_locally(workload, choices, backend)


def best_plans(workload, machine, backend):
    """((best fixed mode's seconds, the mode), (best mixed plan's seconds, its methods, its local aggregation))
    over every plan."""
    hosts = len(PER_HOST)
    fixed = fixed_plans(workload, hosts, backend)
    best_fixed, best_mixed = (float("inf"), None), (float("inf"), None, False)
    for choices in plan_search.every_plan(workload, hosts):
        seconds = cm.predict(workload, choices, PER_HOST, machine, backend).seconds
        key = _key(workload, choices, backend)
        mode = fixed.get(key)
        if mode and seconds < best_fixed[0]:
            best_fixed = (seconds, mode)
        elif mode is None and seconds < best_mixed[0]:
            best_mixed = (seconds, {v.name: choices[v.name].method for v in workload.variables}, key[1])
    return best_fixed, best_mixed


def variants(machine, backend):
    """(name, machine): as calibrated, and with fixed costs set to zero."""
    collective = [f"allreduce/{backend}", f"allgather/{backend}"]
    no_collective = dataclasses.replace(machine, cpu_per_message={
        k: 0.0 if k in collective else v for k, v in machine.cpu_per_message.items()})
    no_server = dataclasses.replace(machine, cpu_per_step={}, cpu_per_message={
        k: 0.0 if k == "ps" else v for k, v in machine.cpu_per_message.items()})
    neither = dataclasses.replace(no_collective, cpu_per_step={}, cpu_per_message={
        k: 0.0 if k == "ps" else v for k, v in no_collective.cpu_per_message.items()})
    return (("as calibrated", machine), ("a collective's fixed CPU 0", no_collective),
            ("a server's fixed CPU 0", no_server), ("both 0", neither))


def sweep(machine, backend):
    """{"count", "gains" (count at or above each of GAINS), "best" (gain, workload, plan), "missed" (workloads
    where the planner's own search, plan_search.search, ends more than SEARCH_SLACK slower than the best plan)}."""
    count, at_least, best, missed = 0, [0] * len(GAINS), (-1.0, None, None), 0
    for description, workload in workloads():
        (fixed, mode), (mixed, methods, la) = best_plans(workload, machine, backend)
        count += 1
        searched = plan_search.search(workload, PER_HOST, machine, backend)[1].seconds
        missed += searched > min(fixed, mixed) * (1 + SEARCH_SLACK)
        gain = fixed / mixed if methods else 0.0
        at_least = [n + (gain >= g) for n, g in zip(at_least, GAINS)]
        if gain > best[0]:
            plan = ", ".join(f"{n} {m}" for n, m in methods.items()) + (", local aggregation" if la else "")
            best = (gain, description, f"{plan} (best fixed: {mode}, {fixed * 1000:.1f} ms; mixed "
                                       f"{mixed * 1000:.1f} ms)")
    return {"count": count, "gains": at_least, "best": best, "missed": missed}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(common.RESULTS, "mixed_plans.md"))
    args = parser.parse_args()
    lines = ["# Where a mixed plan pays on the test bed, as the cost model sees it", "",
             __doc__.split("\n\n", 1)[1].rsplit("\n\n", 1)[0], "",
             "| rate | backend | machine | workloads | mixed >= 1% faster | >= 5% | largest gain | its workload | "
             "its plan | search ended > 0.1% slower |", "|---|---|---|---|---|---|---|---|---|---|"]
    for rate in RATES:
        path = CALIBRATION.format(rate=rate)
        machine = calibration.load(path).machine
        for backend in BACKENDS:
            for name, variant in variants(machine, backend):
                found = sweep(variant, backend)
                gain, description, plan = found["best"]
                lines.append(f"| {rate} | {backend} | {name} | {found['count']} | {found['gains'][0]} | "
                             f"{found['gains'][1]} | {gain:.3f} | {description or '-'} | {plan or '-'} | "
                             f"{found['missed']} |")
                print(lines[-1], flush=True)
    lines += ["", f"Machines: {', '.join(os.path.relpath(CALIBRATION.format(rate=r), common.ROOT) for r in RATES)} "
                  "(the probes' figures, before a script's in-job fit)."]
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {os.path.relpath(args.out)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
