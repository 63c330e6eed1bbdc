"""Calibration (parallax/plan/calibration.py): the fit of the calibration job's timings, and the file AUTO reads."""
import dataclasses

import pytest

from parallax.plan import calibration, cost_model, plan_search
from parallax.errors import ConfigError

N = 4
COMPUTE = 0.001  # CPU and wall seconds of the bare compute probe, per worker
SIZES = {"dense_small": 1024, "dense_large": 8 << 20}
ROWS = {"sparse_few": 64, "sparse_many": 4096}
SERVERS = {"small": [1], "large": [1], **{f"small_{i}": [i % 2] for i in range(16)}, "embedding": [0, 1]}


def _probe(name, mode):
    """The probe's variables and their choices, written out here as the calibration job builds and plans them."""
    if name.startswith("sparse"):
        loads = [cost_model.VariableLoad("embedding", "sparse", 50_000 * 256, ROWS[name] / 50_000, 2)]
    else:
        names = [f"small_{i}" for i in range(16)] if name == "dense_many" else [name.split("_")[1]]
        loads = [cost_model.VariableLoad(n, "dense", SIZES.get(name, 1024)) for n in names]
    if mode == "PS":
        return loads, {v.name: cost_model.Choice(cost_model.PS, tuple(SERVERS[v.name])) for v in loads}
    return loads, {v.name: cost_model.Choice(cost_model.AG if v.kind == "sparse" else cost_model.AR) for v in loads}


def _run(mode, backend, truth, boot_of_host=("a", "a"), reads=None):
    """A calibration job's results that the cost model with the costs of `truth` explains exactly."""
    per_host, machine_of = (2, 2), tuple({b: i for i, b in enumerate(dict.fromkeys(boot_of_host))}[b]
                                         for b in boot_of_host)
    probes = {"compute": {"cpu": COMPUTE, "wall": COMPUTE}}
    for name in ("dense_small", "dense_large", "dense_many", "sparse_few", "sparse_many"):
        loads, choices = _probe(name, mode)
        p = cost_model.predict(cost_model.Workload(0, 0, tuple(loads)), choices, per_host, truth, backend)
        probes[name] = {"wall": COMPUTE + p.critical_path, "cpu": 0.0,
                        "machine_cpu": [sum(c for c, m in zip(p.host_cpu, machine_of) if m == k) +
                                        COMPUTE * sum(w for w, m in zip(per_host, machine_of) if m == k)
                                        for k in range(max(machine_of) + 1)]}
    out = []
    for w in range(N):
        host = w // 2
        mine = {k: dict(v, machine_cpu=v["machine_cpu"][machine_of[host]]) if "machine_cpu" in v else v
                for k, v in probes.items()}
        if w == 0 and reads:
            mine.update(reads)
        out.append({"worker": w, "workers": N, "mode": mode, "backend": backend, "cores": 2,
                    "boot_id": boot_of_host[host], "host": host, "bytes": {**SIZES, "row": 256}, "rows": ROWS,
                    "variables": {"dense_many": 16}, "embedding_rows": 50_000, "workers_per_host": list(per_host),
                    "servers": SERVERS if mode == "PS" else {k: [] for k in SERVERS},
                    "local_aggregation": {k: False for k in SERVERS}, "probes": mine})
    return out


TRUTH = cost_model.Machine(1e8, 0.0, 2, {"ps": 2e-10, "allreduce/tf": 1e-9, "allgather/tf": 3e-9},
                           {"ps": 5e-4, "allreduce/tf": 2e-3, "allgather/tf": 4e-3}, cpu_per_step={"ps": 3e-3},
                           round_seconds={"ps": 1e-3, "allreduce/tf": 2e-4, "allgather/tf": 2e-4})


def test_the_fit_inverts_the_cost_model_on_the_machines_cpu_and_the_walls():
    reads = {"read_small": {"wall": 0.002, "cpu": 0.001}, "read_large": {"wall": 0.002 + (8 << 20) / 1e8, "cpu": 0}}
    m = calibration.fit_machine([_run("PS", "none", TRUTH, reads=reads), _run("MPI", "tf", TRUTH)])
    assert m.cpu_per_byte == pytest.approx(TRUTH.cpu_per_byte)
    assert m.cpu_per_message == pytest.approx(TRUTH.cpu_per_message)
    assert m.cpu_per_step == pytest.approx(TRUTH.cpu_per_step)
    assert m.round_seconds == pytest.approx(TRUTH.round_seconds, rel=1e-4)  # the fitted link differs by 1 KB
    assert m.bandwidth == pytest.approx(((8 << 20) - 1024) / ((8 << 20) / 1e8)) and m.latency == 0.002
    assert m.machine_of_host == (0, 0) and m.cores == 2  # two hosts, one kernel: the test bed


def _with_burst_read(results, wall):
    for r in results:
        r["bytes"]["burst"] = 1 << 20
        if r["worker"] == 0:
            r["probes"]["read_burst"] = {"wall": wall, "idle": 0.02}
    return results


def test_the_links_burst_is_what_the_read_after_idling_moved_beyond_the_links_rate():
    reads = {"read_small": {"wall": 0.002, "cpu": 0.001}, "read_large": {"wall": 0.002 + (8 << 20) / 1e8, "cpu": 0}}

    def runs(wall):
        return [_with_burst_read(_run("PS", "none", TRUTH, reads=reads), wall), _run("MPI", "tf", TRUTH)]
    m = calibration.fit_machine(runs(0.002 + (768 << 10) / 1e8))  # 1 MB in the time 768 KB take at the rate
    assert m.link_burst == pytest.approx(256 << 10, rel=1e-3)
    assert calibration.fit_machine(runs(0.002 + (2 << 20) / 1e8)).link_burst == 0.0  # slower than the rate: none
    assert calibration.fit_machine(runs(0.0)).link_burst == 1 << 20  # at most what the probe moved
    without = calibration.fit_machine([_run("PS", "none", TRUTH, reads=reads), _run("MPI", "tf", TRUTH)])
    assert without.link_burst == 0.0  # a job without the probe (an older calibration's): no burst


def test_the_latency_and_the_burst_come_from_the_fastest_reads_where_the_probes_kept_them():
    """A loaded machine delays some reads; the link's latency is the uncontended read's, and the burst read's
    fastest time is set against it, so a typical read's delay moves neither into the burst."""
    delayed = 0.006  # a typical read's scheduling delay, on top of the link's
    reads = {"read_small": {"wall": 0.002 + delayed, "min_wall": 0.002, "cpu": 0.001},
             "read_large": {"wall": 0.002 + delayed + (8 << 20) / 1e8, "min_wall": 0.002 + (8 << 20) / 1e8, "cpu": 0}}
    results = _with_burst_read(_run("PS", "none", TRUTH, reads=reads), 0.002 + delayed + (768 << 10) / 1e8)
    for r in results:
        if "read_burst" in r["probes"]:
            r["probes"]["read_burst"]["min_wall"] = 0.002 + (768 << 10) / 1e8
    m = calibration.fit_machine([results, _run("MPI", "tf", TRUTH)])
    assert m.latency == pytest.approx(0.002)
    assert m.bandwidth == pytest.approx(((8 << 20) - 1024) / ((8 << 20) / 1e8))
    assert m.link_burst == pytest.approx(256 << 10, rel=1e-3)
    # the medians alone (an older calibration's probes) put the delay into the latency
    for r in results:
        for probe in r["probes"].values():
            probe.pop("min_wall", None)
    assert calibration.fit_machine([results, _run("MPI", "tf", TRUTH)]).latency == pytest.approx(0.002 + delayed)


def test_the_fit_keeps_costs_non_negative():
    noisy = _run("MPI", "tf", TRUTH)
    for r in noisy:  # the large allreduce cheaper than the small one: no positive per-byte cost explains it
        r["probes"]["dense_large"]["machine_cpu"] = r["probes"]["compute"]["cpu"] * 2
    m = calibration.fit_machine([noisy])
    assert all(v >= 0 for v in [*m.cpu_per_byte.values(), *m.cpu_per_message.values()])


def test_a_single_host_has_no_link_and_separate_machines_share_nothing():
    m = calibration.fit_machine([_run("MPI", "tf", TRUTH, boot_of_host=("a", "b"))])
    assert m.bandwidth == calibration.LOOPBACK_BANDWIDTH and m.latency == 0 and m.machine_of_host == ()
    assert m.cpu_per_message == pytest.approx({"allreduce/tf": 2e-3, "allgather/tf": 4e-3})


def test_a_job_without_machine_cpu_is_refused():
    run = _run("MPI", "tf", TRUTH)
    for r in run:
        del r["probes"]["dense_small"]["machine_cpu"]
    with pytest.raises(ConfigError, match="/proc/stat"):
        calibration.fit_machine([run])


def _reports(mode, wall, machine_cpu, backend="tf"):
    return [{"worker": w, "workers": N, "mode": mode, "backend": backend, "host": w // 2, "workers_per_host": [2, 2],
             "wall": wall, "cpu": 0.0, "machine_cpu": machine_cpu, "steps": 20} for w in range(N)]


def test_the_in_job_compute_is_what_the_job_spent_beyond_the_models_communication():
    workload = cost_model.Workload(0.01, 0.01, (cost_model.VariableLoad("d", "dense", 1 << 20),))
    comm = cost_model.predict(workload, plan_search.fixed_choices(workload, "MPI", 2), (2, 2), TRUTH, "tf")
    spent = sum(comm.host_cpu) - 4 * 0.01  # the communication of all four workers, on the one machine
    cal = calibration.Calibration(dataclasses.replace(TRUTH, machine_of_host=(0, 0)), 0.01, 0.01, {}, 2,
                                  in_job={"MPI": _reports("MPI", 0.05, spent + 4 * 0.03), "PS": None})
    assert calibration.compute_cpu_in_job(cal, workload) == pytest.approx(0.03)
    assert calibration.measured_seconds(cal, (2, 2)) == {"MPI": 0.05}
    assert calibration.measured_seconds(cal, (4,)) == {}  # measured with another shape of job: not this one's
    quiet = dataclasses.replace(cal, in_job={"MPI": _reports("MPI", 0.05, 0.0)})
    assert calibration.compute_cpu_in_job(quiet, workload) == 0.01  # never below the one-process figure


def _scaled_truth(machine, factors):
    """`machine` with each key's CPU costs times factors[key]."""
    return dataclasses.replace(machine, **{f: {k: v * factors.get(k, 1.0) for k, v in getattr(machine, f).items()}
                                           for f in ("cpu_per_byte", "cpu_per_message", "cpu_per_step")})


def _machine_cpu(workload, mode, machine):
    """The one machine's CPU per step that `machine` predicts for `mode`'s job of `workload` (2 x 2 workers)."""
    return sum(cost_model.predict(workload, plan_search.fixed_choices(workload, mode, 2), (2, 2), machine,
                                  "tf").host_cpu)


def test_the_in_job_fit_scales_each_methods_cpu_to_what_the_script_spent():
    workload = cost_model.Workload(0.01, 0.01, (cost_model.VariableLoad("d", "dense", 1 << 20),
                                                cost_model.VariableLoad("e", "sparse", 4 << 20, 0.01, 2)))
    probed = dataclasses.replace(TRUTH, machine_of_host=(0, 0))
    # The script's own messages cost the servers half again what the probes showed, the collectives a fifth less
    truth = _scaled_truth(probed, {"ps": 1.5, "allreduce/tf": 0.8, "allgather/tf": 0.8})
    measured = {mode: _machine_cpu(workload, mode, truth) for mode in ("PS", "MPI")}
    cal = calibration.Calibration(probed, 0.01, 0.01, {}, 2,
                                  in_job={m: _reports(m, 0.05, cpu) for m, cpu in measured.items()})
    fit = calibration.fit_in_job(cal, workload)
    assert set(fit.scales) == {"ps", "collectives/tf"}
    assert fit.scales["ps"] > 1.2 and fit.scales["collectives/tf"] < 1.0
    fitted = dataclasses.replace(workload, compute_cpu=fit.compute_cpu)
    for mode, cpu in measured.items():  # the fitted model accounts for each job's CPU
        assert _machine_cpu(fitted, mode, fit.machine) == pytest.approx(cpu, rel=1e-6)
    # Jobs that spent what the probes predict leave the probes' costs as they are
    honest = dataclasses.replace(cal, in_job={m: _reports(m, 0.05, _machine_cpu(workload, m, probed))
                                              for m in ("PS", "MPI", "HYBRID")})
    fit = calibration.fit_in_job(honest, workload)
    assert fit.scales == pytest.approx({"ps": 1.0, "collectives/tf": 1.0}) and fit.compute_cpu == pytest.approx(0.01)
    # Only a PS job: the collectives keep their probe costs; no job at all: nothing changes
    only_ps = dataclasses.replace(cal, in_job={"PS": _reports("PS", 0.05, measured["PS"]), "MPI": None})
    fit = calibration.fit_in_job(only_ps, workload)
    assert set(fit.scales) == {"ps"} and fit.machine.cpu_per_byte["allreduce/tf"] == probed.cpu_per_byte[
        "allreduce/tf"]
    bare = calibration.fit_in_job(dataclasses.replace(cal, in_job=None), workload)
    assert (bare.machine, bare.scales, bare.compute_cpu) == (probed, {}, 0.01)


def test_the_in_job_fit_measures_how_the_two_bounds_overlap_from_the_jobs_step_times():
    workload = cost_model.Workload(0.01, 0.01, (cost_model.VariableLoad("d", "dense", 1 << 20),
                                                cost_model.VariableLoad("e", "sparse", 4 << 20, 0.01, 2)))
    probed = dataclasses.replace(TRUTH, machine_of_host=(0, 0))
    cpu = {m: _machine_cpu(workload, m, probed) for m in ("PS", "MPI", "HYBRID")}

    def jobs(exponent):
        """Real jobs whose step times the model explains with `exponent` (and their CPU, with the probes' costs)."""
        machine = dataclasses.replace(probed, overlap_exponent=exponent)
        return {m: _reports(m, cost_model.predict(workload, plan_search.fixed_choices(workload, m, 2), (2, 2),
                                                  machine, "tf").seconds, cpu[m]) for m in cpu}
    for exponent in (2.0, 1.25, None):
        cal = calibration.Calibration(probed, 0.01, 0.01, {}, 2, in_job=jobs(exponent))
        fit = calibration.fit_in_job(cal, workload)
        assert fit.overlap_exponent == exponent and fit.machine.overlap_exponent == exponent
    # Jobs faster than either bound (the model overcharges): the max, the nearest the model can come
    cal = calibration.Calibration(probed, 0.01, 0.01, {}, 2,
                                  in_job={m: [dict(r, wall=r["wall"] / 2) for r in reports]
                                          for m, reports in jobs(None).items()})
    assert calibration.fit_in_job(cal, workload).overlap_exponent is None
    # No real job, or none with step times: the max, as before any job ran
    assert calibration.fit_in_job(dataclasses.replace(cal, in_job=None), workload).overlap_exponent is None
    timeless = {m: [dict(r, wall=0.0) for r in reports] for m, reports in jobs(2.0).items()}
    assert calibration.fit_in_job(dataclasses.replace(cal, in_job=timeless), workload).overlap_exponent is None


def test_a_saved_calibration_loads_back(tmp_path):
    machine = cost_model.Machine(1e9, 1e-4, 2, {"ps": 1e-10}, {"ps": 1e-3}, machine_of_host=(0, 0))
    path = calibration.Calibration(machine, 0.1, 0.2, {"emb": 0.01}, 2).save(str(tmp_path))
    loaded = calibration.load(path)
    assert loaded.machine == machine and (loaded.compute_seconds, loaded.compute_cpu, loaded.alpha) == \
        (0.1, 0.2, {"emb": 0.01})
    with pytest.raises(ConfigError, match="parallax-calibrate"):
        calibration.load(None)
