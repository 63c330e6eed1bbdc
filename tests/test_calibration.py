"""Calibration (parallax/calibration.py): the fit of the calibration job's timings, and the file AUTO reads."""
import pytest

from parallax import calibration, cost_model
from parallax.errors import ConfigError

N = 4


def _worker(mode, backend, per_byte, per_message, worker=0, host=0, boot="a", reads=None, per_step=0.0):
    """A calibration job result whose CPU per step is exactly the model's: compute + per byte * moved + messages
    (+ once per step, in PS)."""
    method = {"PS": "ps"}.get(mode)
    probes = {"compute": {"cpu": 0.001, "wall": 0.001}}
    sizes = {"dense_small": 1024, "dense_large": 8 << 20}
    rows = {"sparse_few": 64, "sparse_many": 4096}
    for name, nbytes, variables in [*((k, b, 1) for k, b in sizes.items()), ("dense_many", 16 * 1024, 16),
                                    *((k, r * 256, 1) for k, r in rows.items())]:
        m = method or ("allreduce" if name.startswith("dense") else "allgather")
        messages = 2 * variables if m == "ps" else 1  # the collectives are fused: one for any number of variables
        cpu = 0.001 + per_byte * calibration.moved_per_worker(m, nbytes, N) + per_message * messages + \
            (per_step if m == "ps" else 0)
        probes[name] = {"cpu": cpu, "wall": cpu}
    probes.update(reads or {})
    return {"worker": worker, "workers": N, "mode": mode, "backend": backend, "cores": 2, "boot_id": boot,
            "host": host, "bytes": {**sizes, "row": 256}, "rows": rows, "variables": {"dense_many": 16}, "embedding_rows": 50000, "probes": probes}


def test_the_fit_recovers_per_byte_and_per_message_costs_link_and_shared_machines():
    reads = {"read_small": {"wall": 0.002, "cpu": 0.001}, "read_large": {"wall": 0.002 + (8 << 20) / 1e8, "cpu": 0}}
    ps = [_worker("PS", "tf", 2e-10, 5e-4, w, w // 2, reads=reads if w == 0 else None, per_step=3e-3)
          for w in range(N)]
    mpi = [_worker("MPI", "tf", 1e-9, 2e-3, w, w // 2) for w in range(N)]
    m = calibration.fit_machine([ps, mpi])
    assert m.cpu_per_byte == pytest.approx({"ps": 2e-10, "allreduce/tf": 1e-9, "allgather/tf": 1e-9})
    assert m.cpu_per_message == pytest.approx({"ps": 5e-4, "allreduce/tf": 2e-3, "allgather/tf": 2e-3})
    assert m.cpu_per_step == pytest.approx({"ps": 3e-3})  # apart from the messages: 16 variables cost 15 more
    assert m.bandwidth == pytest.approx(((8 << 20) - 1024) / ((8 << 20) / 1e8)) and m.latency == 0.002
    assert m.machine_of_host == (0, 0) and m.cores == 2  # two hosts, one kernel: the test bed


def test_a_single_host_has_no_link_and_separate_machines_share_nothing():
    m = calibration.fit_machine([[_worker("MPI", "tf", 1e-9, 1e-3, w, w, boot=str(w)) for w in range(N)]])
    assert m.bandwidth == calibration.LOOPBACK_BANDWIDTH and m.latency == 0 and m.machine_of_host == ()


def test_a_saved_calibration_loads_back(tmp_path):
    machine = cost_model.Machine(1e9, 1e-4, 2, {"ps": 1e-10}, {"ps": 1e-3}, machine_of_host=(0, 0))
    path = calibration.Calibration(machine, 0.1, 0.2, {"emb": 0.01}, 2).save(str(tmp_path))
    loaded = calibration.load(path)
    assert loaded.machine == machine and (loaded.compute_seconds, loaded.compute_cpu, loaded.alpha) == \
        (0.1, 0.2, {"emb": 0.01})
    with pytest.raises(ConfigError, match="parallax-calibrate"):
        calibration.load(None)
