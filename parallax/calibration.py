"""The cost model's measured inputs (`parallax-calibrate` writes them, run_option="AUTO" reads them), and how the
calibration job's timings become per-byte and per-message CPU costs. Imports no TensorFlow.

calibration.json: {"machine": cost_model.Machine fields, "workload": {"compute_seconds", "compute_cpu",
"alpha": {variable: a}}, "hosts": number of spec hosts, "samples": the raw timings}.
"""
import dataclasses
import json
import os
import statistics

from parallax import cost_model
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

    def to_data(self):
        return {"machine": dataclasses.asdict(self.machine), "hosts": self.hosts, "samples": self.samples,
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
                           data.get("samples", {}))
    except FileNotFoundError:
        raise ConfigError(f"run_option='AUTO': no calibration at {path}: {hint}") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"run_option='AUTO': {path} is not a calibration parallax-calibrate wrote "
                          f"({type(e).__name__}: {e}); {hint}") from None


# ---- fitting the calibration job's timings -------------------------------------------------------------------
def moved_per_worker(method, nbytes, n):
    """Bytes a worker sends plus receives in one collective or server round trip of `nbytes` (Table 3)."""
    if method == "allreduce":
        return 2 * 2 * (n - 1) / n * nbytes
    if method == "allgather":
        return 2 * (n - 1) * nbytes
    return 2 * nbytes  # ps: push and pull


def fit_machine(results):
    """A cost_model.Machine from the calibration job's per-worker results (calibration_job.py), one list per
    (mode, backend) run. Per method: CPU per step above the `compute` probe, against bytes moved, through the
    small and the large point (per byte: the slope; the intercept: what a step with one message costs). For PS the
    `dense_many` probe splits the intercept into a cost per message (push or pull of one variable) and a cost per
    step; a collective runs once per step (fused) or per sparse variable, so its intercept is its cost per message."""
    everything = [r for run in results for r in run]
    if not everything:
        raise ConfigError("the calibration job reported no measurements")
    n = everything[0]["workers"]
    per_byte, intercepts, per_message, per_step = {}, {}, {}, {}
    for run in results:
        mode, backend = run[0]["mode"], run[0]["backend"]
        # (cost key, method, the small and the large probe): PS's dense and sparse probes both fit the "ps" costs
        pairs = [("ps", "ps", "dense_small", "dense_large"), ("ps", "ps", "sparse_few", "sparse_many")] \
            if mode == "PS" else [(f"allreduce/{backend}", "allreduce", "dense_small", "dense_large"),
                                  (f"allgather/{backend}", "allgather", "sparse_few", "sparse_many")]
        for key, method, small, large in pairs:
            (x0, y0), (x1, y1) = _probe_points(run, method, n, (small, large))
            slope = max((y1 - y0) / (x1 - x0), 0.0)
            per_byte.setdefault(key, []).append(slope)
            intercepts.setdefault(key, []).append(max(y0 - slope * x0, 0.0))
        for key in {k for k, _, _, _ in pairs}:
            intercept = statistics.mean(intercepts[key][-2:])
            if mode != "PS":
                per_message.setdefault(key, []).append(intercept)
                continue
            (x0, y0), (xm, ym) = _probe_points(run, "ps", n, ("dense_small", "dense_many"))
            slope, k = statistics.mean(per_byte[key][-2:]), run[0]["variables"]["dense_many"]
            # one push and one pull per variable: the many-variable step has 2(k-1) messages more
            message = max(((ym - slope * xm) - (y0 - slope * x0)) / (2 * (k - 1)), 0.0)
            per_message.setdefault(key, []).append(message)
            per_step.setdefault(key, []).append(max(intercept - 2 * message, 0.0))
    bandwidth, latency = _link(everything)
    boots = {}  # hosts that share a kernel share its cores (the test bed's network namespaces)
    hosts = sorted({r["host"] for r in everything})
    machine_of_host = tuple(boots.setdefault(next(r["boot_id"] for r in everything if r["host"] == h), len(boots))
                            for h in hosts)
    return cost_model.Machine(bandwidth, latency, float(min(r["cores"] for r in everything)),
                              {k: statistics.mean(v) for k, v in per_byte.items()},
                              {k: statistics.mean(v) for k, v in per_message.items()},
                              machine_of_host=machine_of_host if len(set(machine_of_host)) < len(hosts) else (),
                              cpu_per_step={k: statistics.mean(v) for k, v in per_step.items()})


def _probe_points(run, method, n, probes):
    """(bytes moved, CPU above the compute probe) of each probe, the median over the run's workers."""
    points = []
    for r in run:
        base = r["probes"]["compute"]["cpu"]
        def size(p):
            if p.startswith("sparse"):
                return r["rows"][p] * r["bytes"]["row"]
            return r["bytes"]["dense_small"] * r["variables"]["dense_many"] if p == "dense_many" else r["bytes"][p]
        points.append([(moved_per_worker(method, size(p), n), r["probes"][p]["cpu"] - base) for p in probes])
    return [tuple(statistics.median(p[i][j] for p in points) for j in (0, 1)) for i in range(len(probes))]


def _link(results):
    """Bandwidth and latency from the chief's reads of variables on a server on another host (PS run)."""
    reads = [r for r in results if "read_large" in r["probes"] and "read_small" in r["probes"]]
    if not reads:
        return LOOPBACK_BANDWIDTH, 0.0
    r = reads[0]
    small, large = r["probes"]["read_small"]["wall"], r["probes"]["read_large"]["wall"]
    extra = r["bytes"]["dense_large"] - r["bytes"]["dense_small"]
    return extra / max(large - small, 1e-9), small
