"""The cost model's measured inputs (`parallax-calibrate` writes them, run_option="AUTO" reads them), and how the
calibration job's timings become per-byte and per-message CPU costs. Imports no TensorFlow.

calibration.json: {"machine": cost_model.Machine fields, "workload": {"compute_seconds", "compute_cpu",
"alpha": {variable: a}}, "hosts": number of spec hosts, "samples": the raw timings, "in_job": {mode: each worker's
report of the script's steps in a real job of that mode (step_measure.py), or null}}.
"""
import dataclasses
import json
import math
import os
import statistics
from typing import Optional

from parallax.plan import cost_model, plan_search
from parallax.errors import ConfigError

FILE = "calibration.json"
LOOPBACK_BANDWIDTH = 1e10  # bytes/s, for a single-host job: no link to measure, nothing crosses one


@dataclasses.dataclass(frozen=True)
class Calibration:
    machine: cost_model.Machine
    compute_seconds: float
    compute_cpu: float
    alpha: dict
    hosts: int
    samples: dict = dataclasses.field(default_factory=dict)
    in_job: Optional[dict] = None

    def to_data(self):
        return {"machine": dataclasses.asdict(self.machine), "hosts": self.hosts, "samples": self.samples,
                "in_job": self.in_job,
                "workload": {"compute_seconds": self.compute_seconds, "compute_cpu": self.compute_cpu,
                             "alpha": self.alpha}}

    def save(self, directory):
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, FILE)
        with open(path, "w") as f:
            json.dump(self.to_data(), f, indent=1, sort_keys=True)
        return path


def path_for(config):
    """Where run_option="AUTO" finds the calibration: Config.calibration, or <log_dir>/calibration.json."""
    if config.calibration:
        return config.calibration
    if config.log_dir:
        return os.path.join(config.log_dir, FILE)
    return None


def load(path):
    hint = ("run `parallax-calibrate --resource-spec SPEC --out DIR -- python train.py ...` on the job's hosts, then "
            "pass Config(calibration='DIR/calibration.json') (or log_dir=DIR)")
    if not path:
        raise ConfigError(f"run_option='AUTO' chooses each variable's method from measurements of the job's hosts, "
                          f"and none were given: {hint}")
    try:
        with open(path) as f:
            data = json.load(f)
        machine = data["machine"]
        machine["machine_of_host"] = tuple(machine.get("machine_of_host", ()))
        workload = data["workload"]
        return Calibration(cost_model.Machine(**machine), float(workload["compute_seconds"]),
                           float(workload["compute_cpu"]), dict(workload.get("alpha", {})), int(data["hosts"]),
                           data.get("samples", {}), data.get("in_job"))
    except FileNotFoundError:
        raise ConfigError(f"run_option='AUTO': no calibration at {path}: {hint}") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"run_option='AUTO': {path} is not a calibration parallax-calibrate wrote "
                          f"({type(e).__name__}: {e}); {hint}") from None


def median_wall(reports):
    return statistics.median(r["wall"] for r in reports)


def measured_seconds(calibrated, workers_per_host):
    """{mode: step seconds measured in a real job of the script} for the jobs that had this shape."""
    return {mode: median_wall(reports) for mode, reports in (calibrated.in_job or {}).items()
            if reports and tuple(reports[0]["workers_per_host"]) == tuple(workers_per_host)}


def compute_cpu_in_job(calibrated, workload, machine=None):
    """One worker's compute CPU per step as the script's real jobs showed it: each machine's CPU per step, less
    what the model (on `machine`, by default the calibrated one) charges for that job's communication there, over
    its workers; the median over the jobs. At least the one-process figure; that figure alone without in-job
    reports."""
    machine = machine or calibrated.machine
    found = [_compute_cpu(calibrated, workload, reports, machine) for reports in _in_job(calibrated)]
    return max(statistics.median(found), calibrated.compute_cpu) if found else calibrated.compute_cpu


def _in_job(calibrated):
    return [reports for reports in (calibrated.in_job or {}).values()
            if reports and all(r.get("machine_cpu") is not None for r in reports)]


def method_groups(backend):
    """The cost keys whose CPU costs move together in a real job: the servers', and one backend's collectives."""
    return {"ps": ("ps",), f"collectives/{backend}": (f"allreduce/{backend}", f"allgather/{backend}")}


def keys_of_group(group):
    """The cost keys of a group that method_groups names."""
    return method_groups(group.split("/")[-1])[group]


@dataclasses.dataclass(frozen=True)
class InJobFit:
    compute_cpu: float  # one worker's compute CPU per step (compute_cpu_in_job)
    machine: cost_model.Machine  # the calibrated machine, each method group's CPU costs times its scale
    scales: dict  # {method group: scale}, for the groups the real jobs used
    overlap_exponent: Optional[float] = None  # the machine's, fitted to the real jobs' step times (fit_overlap)


def fit_in_job(calibrated, workload):
    """The workers' compute CPU, and each method's CPU scale, as the script's real jobs showed them.

    The calibration job's probes fix how a method's CPU grows with bytes and messages, from a few synthetic
    messages; a script moves its own mix (many small reads, say), and the probes' per-message figure is the
    noisiest. The in-job reports measure the machine's CPU of the script's own step in each fixed mode. The
    compute is the median over the jobs of what the probes' communication leaves (compute_cpu_in_job); each
    method's scale is then the non-negative least-squares fit of what that compute leaves to the model's CPU of
    the method in those jobs. (Fitting the two in turn to a fixed point drifts: compute and communication trade
    off, and the test bed's LM ended with free collectives.) A method no job used keeps its probe costs, and so
    does every method of a calibration without in-job reports. Last, the jobs' step times give the exponent that
    combines the model's two bounds (fit_overlap)."""
    compute = compute_cpu_in_job(calibrated, workload)
    scales = _scales(calibrated, workload, compute)
    machine = _scaled(calibrated.machine, scales)
    exponent = fit_overlap(calibrated, dataclasses.replace(workload, compute_cpu=compute), machine)
    return InJobFit(compute, dataclasses.replace(machine, overlap_exponent=exponent),
                    {group: scale for group, (_, scale) in scales.items()}, exponent)


# From no overlap (1: the bounds add) to the max (None); the jobs are few and short, so a coarse grid is enough
OVERLAP_EXPONENTS = (None, 16.0, 8.0, 6.0, 4.0, 3.0, 2.5, 2.0, 1.5, 1.25, 1.0)


def fit_overlap(calibrated, workload, machine):
    """cost_model.Machine.overlap_exponent from the real jobs: the exponent of OVERLAP_EXPONENTS whose predicted
    step times are nearest the jobs' measured ones (the least squares of log(predicted / measured)); the max
    (None) unless another is nearer. It measures how far the CPU and the links of the user's hosts overlap, which
    neither the probes (one method at a time, no compute) nor the CPU fit sees."""
    jobs = [(reports[0], median_wall(reports)) for reports in (calibrated.in_job or {}).values()
            if reports and all(r.get("wall") for r in reports)]
    if not jobs:
        return None
    bounds = []
    for first, wall in jobs:
        per_host, choices = _job_plan(workload, first)
        p = cost_model.predict(workload, choices, per_host, machine, first["backend"])
        bounds.append((p.critical_path, p.cpu_bound, wall))

    def error(exponent):
        return sum(math.log(max(cost_model.combine_bounds(c, b, exponent), 1e-12) / wall) ** 2
                   for c, b, wall in bounds)
    best = OVERLAP_EXPONENTS[0]
    for exponent in OVERLAP_EXPONENTS[1:]:
        if error(exponent) < error(best) * (1 - 1e-9):
            best = exponent
    return best


def _scales(calibrated, workload, compute):
    bare = dataclasses.replace(workload, compute_cpu=0.0)
    members, rows = {}, []
    for reports in _in_job(calibrated):
        first = reports[0]
        (per_host, choices), backend = _job_plan(workload, first), first["backend"]
        groups = method_groups(backend)
        members.update(groups)
        machine_of_host = calibrated.machine.machines_of(len(per_host))

        def cpu(machine):
            return cost_model.per_machine(cost_model.predict(bare, choices, per_host, machine, backend).host_cpu,
                                          machine_of_host)
        unscaled = cpu(_only(calibrated.machine, (), keep_updates=True))  # applying rows: not a method's transport
        coefficients = {g: cpu(_only(calibrated.machine, keys)) for g, keys in groups.items()}
        for k in sorted(set(machine_of_host)):
            here = [r for r in reports if machine_of_host[r["host"]] == k]
            if here:
                workers = sum(w for w, m in zip(per_host, machine_of_host) if m == k)
                spent = statistics.median(r["machine_cpu"] for r in here) - compute * workers - unscaled[k]
                rows.append(({g: c[k] for g, c in coefficients.items()}, spent))
    names = [g for g in members if any(c.get(g, 0.0) > 0 for c, _ in rows)]
    if not names:
        return {}
    fitted = _nonnegative_fit([([c.get(g, 0.0) for g in names], y) for c, y in rows])
    return {g: (members[g], float(x)) for g, x in zip(names, fitted)}


def _only(machine, keys, keep_updates=False):
    """`machine` with every CPU cost but those of `keys` (and the updates' if `keep_updates`) set to 0."""
    kept = {f: {k: v for k, v in getattr(machine, f).items() if k in keys}
            for f in ("cpu_per_byte", "cpu_per_message", "cpu_per_step")}
    return dataclasses.replace(machine, update_cpu_per_byte=machine.update_cpu_per_byte if keep_updates else 0.0,
                               **kept)


def _scaled(machine, scales):
    """`machine` with the CPU costs of each group of `scales` ({group: (its keys, scale)}) times its scale."""
    factor = {key: scale for keys, scale in scales.values() for key in keys}
    return dataclasses.replace(machine, **{f: {k: v * factor.get(k, 1.0) for k, v in getattr(machine, f).items()}
                                           for f in ("cpu_per_byte", "cpu_per_message", "cpu_per_step")})


def _job_plan(workload, report):
    """(workers per host, the model's choices) of the real job that `report` (one worker's) comes from."""
    per_host = tuple(report["workers_per_host"])
    return per_host, plan_search.fixed_choices(workload, report["mode"], len(per_host))


def _compute_cpu(calibrated, workload, reports, machine):
    first = reports[0]
    per_host, choices = _job_plan(workload, first)
    comm = cost_model.predict(dataclasses.replace(workload, compute_cpu=0.0), choices, per_host, machine,
                              first["backend"]).host_cpu
    machine_of_host = calibrated.machine.machines_of(len(per_host))
    spent = workers = 0.0
    for k, comm_here in cost_model.per_machine(comm, machine_of_host).items():
        here = [r for r in reports if machine_of_host[r["host"]] == k]
        if here:
            spent += statistics.median(r["machine_cpu"] for r in here) - comm_here
            workers += len(here)
    return spent / workers


# ---- fitting the calibration job's timings -------------------------------------------------------------------
# The fit inverts the cost model itself: the model's CPU of a probe's step on a machine is linear in the costs, so
# each cost's coefficient is the model's prediction with that cost alone set to 1. The measured side is the whole
# machine's CPU per step (every worker and server there) above what its workers spend on the bare compute probe.
PROBES = ("dense_small", "dense_large", "dense_many", "sparse_few", "sparse_many")


def _probe_workload(run, probe):
    """(cost_model.Workload of the probe's variables, their choices), as the calibration job built and planned
    them."""
    r = run[0]
    mode, backend = r["mode"], r["backend"]
    if probe.startswith("sparse"):
        rows = r["embedding_rows"]
        names = ["embedding"]
        loads = [cost_model.VariableLoad("embedding", "sparse", rows * r["bytes"]["row"], r["rows"][probe] / rows,
                                         max(len(r["servers"]["embedding"]), 1))]
    else:
        names = {"dense_small": ["small"], "dense_large": ["large"],
                 "dense_many": [f"small_{i}" for i in range(r["variables"]["dense_many"])]}[probe]
        size = r["bytes"]["dense_large"] if probe == "dense_large" else r["bytes"]["dense_small"]
        loads = [cost_model.VariableLoad(n, "dense", size) for n in names]
    if mode == "PS":
        choices = {n: cost_model.Choice(cost_model.PS, tuple(r["servers"][n]), r["local_aggregation"][n])
                   for n in names}
    else:
        choices = {v.name: cost_model.Choice(cost_model.AG if v.kind == "sparse" else cost_model.AR) for v in loads}
    return cost_model.Workload(0.0, 0.0, tuple(loads)), choices, backend


def _parameters(run):
    """The costs a run measures: (field, key) pairs of cost_model.Machine."""
    r = run[0]
    if r["mode"] == "PS":
        return [("cpu_per_byte", "ps"), ("cpu_per_message", "ps"), ("cpu_per_step", "ps")]
    b = r["backend"]
    return [(f, f"{m}/{b}") for m in ("allreduce", "allgather") for f in ("cpu_per_byte", "cpu_per_message")]


def _unit_machine(field, key):
    """A machine whose only cost is 1 CPU second per unit of `field`[`key`]."""
    costs = {"cpu_per_byte": {}, "cpu_per_message": {}, "cpu_per_step": {}}
    costs[field] = {key: 1.0}
    return cost_model.Machine(LOOPBACK_BANDWIDTH, 0.0, 1.0, **costs)


def _machine_rows(run, machine_of_host, per_host):
    """Per (probe, machine): the model's coefficient of each parameter and the measured CPU, both per step."""
    parameters = _parameters(run)
    rows = []
    for probe in PROBES:
        workload, choices, backend = _probe_workload(run, probe)
        coefficients = []
        for field, key in parameters:
            p = cost_model.predict(workload, choices, per_host, _unit_machine(field, key), backend)
            coefficients.append(cost_model.per_machine(p.host_cpu, machine_of_host))
        for k in sorted(set(machine_of_host)):
            here = [r for r in run if machine_of_host[r["host"]] == k]
            measured = [r["probes"][probe].get("machine_cpu") for r in here]
            if any(x is None for x in measured):
                raise ConfigError("the calibration job measured no machine CPU (/proc/stat): parallax-calibrate "
                                  "needs Linux hosts")
            compute = sum(r["probes"]["compute"]["cpu"] for r in here)
            rows.append(([c[k] for c in coefficients], statistics.median(measured) - compute))
    return parameters, rows


def _nonnegative_fit(rows):
    """Least squares of the relative error, the costs kept >= 0 (a cost that would go negative is dropped)."""
    import numpy as np
    a = np.array([c for c, _ in rows], float)
    y = np.array([m for _, m in rows], float)
    weight = 1.0 / np.maximum(np.abs(y), 1e-4)
    free = [j for j in range(a.shape[1]) if a[:, j].any()]
    x = np.zeros(a.shape[1])
    while free:
        solution = np.linalg.lstsq(a[:, free] * weight[:, None], y * weight, rcond=None)[0]
        if (solution >= 0).all():
            x[free] = solution
            break
        free = [j for j, v in zip(free, solution) if v > min(solution)]
    return x


def fit_machine(results):
    """A cost_model.Machine from the calibration job's per-worker results (calibration_job.py), one list per
    (mode, backend) run: the CPU costs by the model-inverting fit above, the link from the chief's reads, and each
    method's round time from the wall time of its one-small-variable probe over the compute probe's."""
    everything = [r for run in results for r in run]
    if not everything:
        raise ConfigError("the calibration job reported no measurements")
    hosts = sorted({r["host"] for r in everything})
    boots = {}  # hosts that share a kernel share its cores (the test bed's network namespaces)
    machine_of_host = tuple(boots.setdefault(next(r["boot_id"] for r in everything if r["host"] == h), len(boots))
                            for h in hosts)
    per_host = tuple(everything[0]["workers_per_host"])
    bandwidth, latency = link_of(everything)
    costs = {"cpu_per_byte": {}, "cpu_per_message": {}, "cpu_per_step": {}}
    for run in results:
        parameters, rows = _machine_rows(run, machine_of_host, per_host)
        for (field, key), value in zip(parameters, _nonnegative_fit(rows)):
            costs[field][key] = float(value)
    shared = machine_of_host if len(set(machine_of_host)) < len(hosts) else ()
    machine = cost_model.Machine(bandwidth, latency, float(min(r["cores"] for r in everything)),
                                 machine_of_host=shared, link_burst=_burst(everything, bandwidth, latency), **costs)
    return dataclasses.replace(machine, round_seconds=_round_seconds(results, machine, per_host))


def _round_seconds(results, machine, per_host):
    """{method key: seconds per round}: the small probe's wall above the compute probe's, less the model's
    critical path without waits, over the model's rounds."""
    out = {}
    for run in results:
        workload, choices, backend = _probe_workload(run, "dense_small")
        key = "ps" if run[0]["mode"] == "PS" else f"allreduce/{backend}"
        wall = statistics.median(r["probes"]["dense_small"]["wall"] - r["probes"]["compute"]["wall"] for r in run)
        free = dataclasses.replace(machine, round_seconds={key: 0.0})
        one = dataclasses.replace(machine, round_seconds={key: 1.0})
        base = cost_model.predict(workload, choices, per_host, free, backend).critical_path
        rounds = cost_model.predict(workload, choices, per_host, one, backend).critical_path - base
        if rounds > 0:
            out[key] = max(wall - base, 0.0) / rounds
            if key.startswith("allreduce/"):  # the allgather's rounds are the same ring's
                out[key.replace("allreduce/", "allgather/")] = out[key]
    return out


def _burst(results, bandwidth, latency):
    """Bytes the link passed at once after idling: what of the burst probe's fastest read its time at `bandwidth`
    does not account for (0 to the probe's size; 0 without the probe, as in calibrations made before it)."""
    reads = [r for r in results if "read_burst" in r["probes"]]
    if not reads or bandwidth == LOOPBACK_BANDWIDTH:
        return 0.0
    size = reads[0]["bytes"]["burst"]
    moved_at_rate = max(_fastest(reads[0]["probes"]["read_burst"]) - latency, 0.0) * bandwidth
    return float(min(max(size - moved_at_rate, 0.0), size))


def link_of(results):
    """Bandwidth and latency from the chief's reads of variables on a server on another host (PS run): the rate
    from the median reads' difference; the latency from the small read's fastest time, since a loaded machine's
    scheduling delays are not the link's (a CI run's median small read took 7.9 ms, a quiet run's 1.87 ms)."""
    reads = [r for r in results if "read_large" in r["probes"] and "read_small" in r["probes"]]
    if not reads:
        return LOOPBACK_BANDWIDTH, 0.0
    r = reads[0]
    small, large = r["probes"]["read_small"]["wall"], r["probes"]["read_large"]["wall"]
    extra = r["bytes"]["dense_large"] - r["bytes"]["dense_small"]
    return extra / max(large - small, 1e-9), _fastest(r["probes"]["read_small"])


def _fastest(probe):
    """A probe's least wall time; its median in calibrations made before the probes kept both."""
    return probe.get("min_wall", probe["wall"])
