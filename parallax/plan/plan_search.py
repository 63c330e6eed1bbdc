"""The plans a cost model chooses among: the fixed modes' (as plan/records.py decides them), every plan of a workload, and
the search that run_option AUTO runs (auto_plan.py) over cost_model.predict's step times. Imports no TensorFlow."""
import itertools
import math

from parallax.plan import cost_model as cm

EXHAUSTIVE_PLANS = 1 << 12  # search predicts every plan up to this many (methods x local aggregation)


def fixed_choices(workload, run_option, hosts, local_aggregation=True):
    """The choices of run option PS, MPI or HYBRID, with parts spread over the hosts' servers the way plan/records.py's
    greedy balance does (largest first, least loaded)."""
    methods = {v.name: (cm.AG if v.kind == "sparse" else cm.AR) if run_option == "MPI" else
               cm.PS if run_option == "PS" or v.kind == "sparse" else cm.AR for v in workload.variables}
    return assign_servers(workload, methods, hosts, local_aggregation)


def assign_servers(workload, methods, hosts, local_aggregation=True):
    server_load = [0.0] * hosts
    choices = {}
    for v in sorted(workload.variables, key=lambda v: (-v.bytes, v.name)):
        if methods[v.name] != cm.PS:
            choices[v.name] = cm.Choice(methods[v.name])
            continue
        tasks = []
        for _ in range(v.parts):
            task = min(range(hosts), key=lambda t: (t in tasks, server_load[t], t))
            server_load[task] += v.bytes / v.parts
            tasks.append(task)
        choices[v.name] = cm.Choice(cm.PS, tuple(tasks), local_aggregation and v.kind == "sparse")
    return choices


def default_methods(variable):
    """The methods a variable may take: AR or PS (dense), AG or PS (sparse)."""
    return (cm.AG, cm.PS) if variable.kind == "sparse" else (cm.AR, cm.PS)


def every_plan(workload, hosts, allowed=default_methods):
    """The choices of every plan: each variable with each of `allowed(variable)`, local aggregation on and off."""
    names = [v.name for v in workload.variables]
    for methods in itertools.product(*(allowed(v) for v in workload.variables)):
        for la in (True, False):
            yield assign_servers(workload, dict(zip(names, methods)), hosts, la)


def search(workload, workers_per_host, machine, backend="tf", allowed=None):
    """The choices that minimize the predicted step time: from the best fixed mode, move one variable at a time to
    its other method (largest variables first) while that helps, and try local aggregation on and off. Where there
    are at most EXHAUSTIVE_PLANS plans, every one is predicted too, and a plan faster than the moves' end wins: a
    move can pay only together with another (the test bed's machine had workloads the moves missed by 0.8%,
    benchmarks/mixed_plans.py). `allowed(variable) -> methods` restricts a variable's methods (default: AR or PS
    for dense, AG or PS for sparse). Returns (choices, prediction)."""
    hosts = len(workers_per_host)
    allowed = allowed or default_methods
    starts = [fixed_choices(workload, o, hosts, la) for o in ("PS", "MPI", "HYBRID") for la in (True, False)]
    best, best_time = None, math.inf
    for start in starts:
        methods = {v.name: start[v.name].method if start[v.name].method in allowed(v) else allowed(v)[0]
                   for v in workload.variables}
        la = any(c.local_aggregation for c in start.values())
        current = assign_servers(workload, methods, hosts, la)
        current_time = cm.predict(workload, current, workers_per_host, machine, backend).seconds
        improved = True
        while improved:
            improved = False
            for v in sorted(workload.variables, key=lambda v: (-v.bytes, v.name)):
                for m in allowed(v):
                    if m == methods[v.name]:
                        continue
                    trial = dict(methods, **{v.name: m})
                    choices = assign_servers(workload, trial, hosts, la)
                    t = cm.predict(workload, choices, workers_per_host, machine, backend).seconds
                    if t < current_time * (1 - 1e-9):
                        methods, current, current_time, improved = trial, choices, t, True
        if current_time < best_time:
            best, best_time = current, current_time
    if 2 * math.prod(len(allowed(v)) for v in workload.variables) <= EXHAUSTIVE_PLANS:
        for choices in every_plan(workload, hosts, allowed):
            t = cm.predict(workload, choices, workers_per_host, machine, backend).seconds
            if t < best_time * (1 - 1e-9):
                best, best_time = choices, t
    return best, cm.predict(workload, best, workers_per_host, machine, backend)


def reasons(workload, choices, workers_per_host, machine, backend="tf"):
    """{variable: why it got its method}: the predicted step time if it alone took its other method."""
    hosts = len(workers_per_host)
    la = any(c.local_aggregation for c in choices.values())
    methods = {name: c.method for name, c in choices.items()}
    base = cm.predict(workload, choices, workers_per_host, machine, backend).seconds
    out = {}
    for v in workload.variables:
        other = {cm.AR: cm.PS, cm.AG: cm.PS, cm.PS: cm.AG if v.kind == "sparse" else cm.AR}[methods[v.name]]
        t = cm.predict(workload, assign_servers(workload, dict(methods, **{v.name: other}), hosts, la),
                       workers_per_host, machine, backend).seconds
        out[v.name] = (f"{other} would take {1000 * (t - base):+.1f} ms per step" if abs(t - base) >= 5e-5 else
                       f"{other} would take the same time (tie: the run option's rule)")
    return out
