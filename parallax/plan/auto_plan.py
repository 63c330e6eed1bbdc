"""run_option="AUTO": each variable's method (AR, AG or PS), local aggregation and servers chosen by minimizing the
cost model's predicted step time (plan_search.search) on the calibration of the job's own hosts. The choice becomes
Config.methods of an ordinary plan, so AUTO runs on exactly the passes every fixed mode runs."""
import collections
import dataclasses
import json
import os
import statistics
from typing import Optional

from parallax.plan import calibration, cost_model, placement, plan_search
from parallax.config import Config
from parallax.errors import ParallaxError
from parallax.plan.variable_decisions import decide_variables
from parallax.rules import batch_statistics
from parallax.capture.partitioner import COLLECTION


REPARTITION_GAIN = 0.01  # a shard count other than the graph's must be predicted at least 1% faster


def workers_per_host(spec):
    counts = collections.Counter(spec.host_of_worker(w) for w in range(spec.num_workers))
    return tuple(counts.get(h, 0) for h in range(spec.num_hosts))


def workload_of(graph, analysis, calibrated, spec=None, config=None, statistics=None):
    """The cost model's workload: the analysis' variables with the calibration's a (or the static estimate from
    the gradient's shape, parallax.explain's, or 1 when neither is known), the state its steps write, what a
    worker's step reads of each on a server (read off the graph of the PS plan on `spec`, when given), its step
    time, the step's CPU as the script's real jobs showed it (calibration.compute_cpu_in_job, which fit_in_job
    takes as it is), and what it gathers for the statistics of the batch (`statistics`:
    batch_statistics.statistics_of_the_batch's, found here when None)."""
    reads = _server_reads(graph, analysis, spec, config) if spec is not None and spec.num_workers > 1 else {}
    loads = []
    for v in sorted(analysis.trained_variables, key=lambda r: r.name):
        alpha = 1.0
        if v.kind == "sparse":
            alpha = calibrated.alpha.get(v.name)
            alpha = static_sparsity(graph, v) if alpha is None else alpha
            alpha = 1.0 if alpha is None else alpha
        loads.append(cost_model.VariableLoad(v.name, v.kind, v.bytes or 0, alpha, len(v.parts),
                                             _known(reads.get(v.name), v.bytes)))
    state = tuple(cost_model.StateLoad(s.name, s.bytes or 0, s.kind == "update_ops", s.colocated_with,
                                       s.kind == "optimizer", _known(reads.get(s.name), s.bytes) or (0, 0.0))
                  for s in analysis.state)
    if statistics is None and spec is not None and spec.num_workers > 1 and (config or Config()).sync:
        statistics = batch_statistics.statistics_of_the_batch(graph, analysis)
    gathered = statistic_bytes(graph, statistics) if statistics is not None else ()
    workload = cost_model.Workload(calibrated.compute_seconds, calibrated.compute_cpu, tuple(loads), state, gathered)
    return dataclasses.replace(workload, compute_cpu=calibration.compute_cpu_in_job(calibrated, workload))


def statistic_bytes(graph, found):
    """Bytes of each value a step gathers for the statistics of the batch `found`
    (batch_statistics.statistics_of_the_batch): each combined statistic (and gradient of one), and a fused batch
    norm's mean and variance (one gather) and its gradient's two means (one gather)."""
    sizes = [graph.get_tensor_by_name(name) for name, _, _ in found.combined]
    sizes = [(t.shape.num_elements() or 0) * t.dtype.size for t in sizes]
    for name, _ in found.fused:
        scale = graph.get_operation_by_name(name).inputs[1]
        channels = (scale.shape.num_elements() or 0) * scale.dtype.size
        sizes += [2 * channels, 2 * channels]
    return tuple(sizes)


def _server_reads(graph, analysis, spec, config):
    """placement.server_reads of the plan that holds every variable on servers: where a variable is held does
    not change what a worker's step reads of it. A graph that plan cannot hold gets {}: one copy per variable."""
    ps_config = (config or Config()).replace(run_option="PS", methods={}, sync=True)
    try:
        plan = decide_variables(analysis, spec, ps_config)
    except ParallaxError:
        return {}
    return placement.server_reads(graph, plan)


def _known(reads, size):
    """(tensors, bytes) of a worker's reads; bytes not static: a copy of the variable per read."""
    if reads is None:
        return None
    tensors, nbytes = reads
    return (tensors, float(nbytes if nbytes is not None else tensors * (size or 0)))


def backend_for(config):
    return "horovod" if config.collective_backend == "horovod" else "tf"


@dataclasses.dataclass(frozen=True)
class AutoChoice:
    config: object  # the user's Config with the chosen methods and local aggregation
    choices: dict  # variable -> cost_model.Choice
    prediction: cost_model.Prediction
    workload: cost_model.Workload
    calibration: calibration.Calibration
    partitions: Optional[int] = None  # shards of the variables get_partitioner split; None: none did
    basis: str = "model"  # "model", or "measured <MODE>" when a fixed mode's real job was faster (calibration)
    machine: Optional[cost_model.Machine] = None  # the calibration's, its CPU costs fitted to the real jobs
    cpu_scales: Optional[dict] = None  # {method group: how much its CPU costs were scaled} (fit_in_job)
    overlap_exponent: Optional[float] = None  # how the model's two bounds combine on these hosts (fit_in_job)


def choose(graph, analysis, spec, config, statistics=None):
    """AUTO's choice for `graph` on `spec`: each variable's method and local aggregation, and the number of shards
    of the variables parallax.get_partitioner split (the paper's partition search: every count from 1 to twice the
    servers, by predicted step time; the graph's own count stays unless another is predicted REPARTITION_GAIN
    faster, since a new count means running the script again and the model is no finer than that). `statistics`:
    the graph's batch_statistics.statistics_of_the_batch, when the caller has it (else found here)."""
    calibrated = calibration.load(calibration.path_for(config))
    workload = workload_of(graph, analysis, calibrated, spec, config, statistics)
    in_job = calibration.fit_in_job(calibrated, workload)
    machine, scales = in_job.machine, in_job.scales
    fixed = dict(config.methods)  # the user's own choices stay

    def allowed(v):
        if v.name in fixed:
            return (fixed[v.name],)
        if not config.sync:  # collectives are synchronous: asynchronous training keeps every variable on servers
            return (cost_model.PS,)
        return (cost_model.AG, cost_model.PS) if v.kind == "sparse" else (cost_model.AR, cost_model.PS)
    split, built = partitioned_variables(graph, analysis)
    counts = sorted(set(range(1, 2 * spec.num_hosts + 1)) | {built}) if split and spec.num_hosts > 1 else [None]
    per_host, backend = workers_per_host(spec), backend_for(config)
    best = None
    for parts in sorted(counts, key=lambda p: p != built):  # the graph's own count first
        trial = workload if parts is None else dataclasses.replace(workload, variables=tuple(
            dataclasses.replace(v, parts=parts) if v.name in split else v for v in workload.variables))
        choices, prediction = plan_search.search(trial, per_host, machine, backend, allowed)
        if best is None or prediction.seconds < best[2].seconds * (1 - REPARTITION_GAIN):
            best = (parts, choices, prediction, trial)
    parts, choices, prediction, trial = best
    basis = "model"
    measured = calibration.measured_seconds(calibrated, per_host)
    if measured and config.sync and not fixed:  # a fixed mode's plan would override the user's own choices
        plans = {mode: _fixed(workload, mode, spec, config) for mode in measured}
        expected, scale = expected_seconds(measured, {m: cost_model.predict(
            workload, plans[m], per_host, machine, backend).seconds for m in measured})
        same = [m for m in measured if {n: c.method for n, c in plans[m].items()} ==
                {n: c.method for n, c in choices.items()}]
        mine = expected[same[0]] if same and parts == built else prediction.seconds * scale
        fastest = min(expected, key=expected.get)
        if expected[fastest] < mine * (1 - 1e-9):
            parts, trial, basis = built, workload, f"measured {fastest}"
            choices = plans[fastest]
            prediction = cost_model.predict(workload, choices, per_host, machine, backend)
    la = any(c.local_aggregation for c in choices.values())
    chosen = config.replace(methods={name: c.method for name, c in choices.items()},
                            local_aggregation=config.local_aggregation and la)
    return AutoChoice(chosen, choices, prediction, trial, calibrated, parts, basis, machine, scales,
                      in_job.overlap_exponent)


MEASUREMENT_SPREAD = 0.25  # how far one short job's step may be from the same mode's later runs (test bed: 4-25%)


def expected_seconds(measured, predicted):
    """({mode: expected step seconds}, the model's error) of the fixed modes whose real jobs the calibration ran.

    Two estimates of each mode's step: its short real job, and its prediction scaled by the model's error on those
    jobs (the median of measured / predicted). Where they agree within MEASUREMENT_SPREAD, each is as likely off as
    the other, so their mean counts: a short job measured a few percent fast cannot override a plan the model
    rates well ahead. Where they disagree by more, the model is wrong about that mode, and the job counts alone."""
    scale = statistics.median(measured[m] / predicted[m] for m in measured)
    expected = {}
    for m in measured:
        model = predicted[m] * scale
        agree = 1 - MEASUREMENT_SPREAD <= measured[m] / model <= 1 / (1 - MEASUREMENT_SPREAD)
        expected[m] = (measured[m] + model) / 2 if agree else measured[m]
    return expected, scale


def _fixed(workload, mode, spec, config):
    return plan_search.fixed_choices(workload, mode, spec.num_hosts, config.local_aggregation)


def partitioned_variables(graph, analysis):
    """(names of the variables parallax.get_partitioner split, the shards it made), from its records in the graph."""
    made = {(tuple(e["shape"]), e["parts"]) for e in map(json.loads, graph.get_collection(COLLECTION))}
    split = {v.name: len(v.parts) for v in analysis.trained_variables if (tuple(v.shape), len(v.parts)) in made}
    return set(split), (max(split.values()) if split else None)


def predictions(graph, analysis, spec, config):
    """For parallax.explain: ({"PS"|"MPI"|"HYBRID"|"AUTO": predicted step seconds}, {variable: why its method},
    bound of the AUTO plan, {mode: step seconds measured in the calibration's real jobs}, what AUTO's choice rests
    on, {method group: the scale of its CPU costs from those jobs}, the exponent that combines the model's bounds),
    or None without a calibration."""
    path = calibration.path_for(config)
    if spec.num_workers < 2 or not path or (config.run_option != "AUTO" and not os.path.exists(path)):
        return None
    auto = choose(graph, analysis, spec, config)
    choices, prediction, workload, machine = auto.choices, auto.prediction, auto.workload, auto.machine
    per_host, backend = workers_per_host(spec), backend_for(config)
    seconds = {mode: cost_model.predict(workload, _fixed(workload, mode, spec, config), per_host, machine,
                                        backend).seconds for mode in ("PS", "MPI", "HYBRID")}
    seconds["AUTO"] = prediction.seconds
    return (seconds, plan_search.reasons(workload, choices, per_host, machine, backend), prediction.bound,
            calibration.measured_seconds(auto.calibration, per_host), auto.basis, auto.cpu_scales,
            auto.overlap_exponent)


def static_sparsity(graph, record):
    """A sparse variable's a: rows a step touches / rows, bounded by the number of lookups in the batch (from
    static shapes only; None when they are unknown)."""
    rows = record.shape[0] if record.shape else None
    lookups = 0
    for part in record.parts:
        if part.gradient is None or part.gradient.indices is None:
            return None
        n = graph.get_tensor_by_name(part.gradient.indices).shape.num_elements()
        if n is None or not rows:
            return None
        lookups += n
    return min(1.0, lookups / rows)
