"""The equivalence oracle: run a case as one process with batch N*b and as N workers of batch b, then compare
every global variable (trainables, slots, EMA shadows, batch-norm statistics, global step).

A parallax run is a thread job in this pytest process's warm case host (case_hosts.py, parallax/thread_job.py:
the same plan, rewrite, runner and synchronization, on TF's collectives and in-process servers), or, with
`processes=True`, a real job of one process per worker and server through get_runner's self-launch (Horovod's
collectives need that; test_paths_agree.py checks that the two agree). Single-process references are cached per
pytest session, so PS and HYBRID tests reuse MPI's; the first parallax run of a case makes its reference where it
runs (the host, or the launching process).
"""
import os
import subprocess
import sys
import warnings

import numpy as np

from parallax import collectives

SCRIPT = os.path.join(os.path.dirname(__file__), "run_case.py")
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
F64_TOLERANCE = 1e-9  # max abs diff
F32_TOLERANCE = 1e-5  # relative to the variable's largest magnitude
STEPS, BATCH = 6, 4
TIMEOUT = 300
# Config.collective_backend of every run that does not name one: TF's own collectives, which a thread job runs
# (Horovod needs one MPI process per worker: test_horovod.py runs its sample with processes=True).
BACKEND = collectives.TF
GRAPH_MODES = ("MPI", "PS", "HYBRID")

_references = {}

# Variables each case must have, so that a comparison cannot pass by comparing too little.
MUST_HAVE = {
    "linear": ["linear/kernel", "global_step"],
    "mlp_optimizers": ["adam/adam/hidden/kernel/Adam_1", "momentum/momentum/out/bias/Momentum",
                       "adagrad/adagrad/hidden/kernel/Adagrad", "rmsprop/rmsprop/hidden/kernel/RMSProp_1",
                       "ftrl/ftrl/out/kernel/Ftrl_1", "adam/beta2_power"],
    "embedding_clip_adam": ["embedding", "embedding/Adam", "embedding/Adam_1", "hidden/kernel/Adam"],
    "embedding_clip_adam_partitioned": ["embedding/part_0", "embedding/part_1", "embedding/part_0/Adam",
                                        "embedding/part_1/Adam_1"],
    "ema": ["hidden/kernel/ExponentialMovingAverage", "out/bias/ExponentialMovingAverage", "hidden/kernel/Momentum"],
    "batch_norm": ["bn/moving_mean", "bn/moving_variance", "bn/gamma"],
    "lstm_lm": ["embedding", "rnn/lstm/kernel", "rnn/lstm/bias/Adam_1", "softmax/kernel/Adam"],
}


def two_hosts(workers):
    """Two loopback "hosts" on this machine, workers split evenly: two parameter servers in PS mode."""
    half = workers // 2
    return "\n".join(f"127.0.0.{h + 1}: {','.join(str(i) for i in range(half))}" for h in range(2))


def run_case(out_dir, case, mode, workers, batch=BATCH, steps=STEPS, run_option="MPI", lr_scale=1.0,
             no_average=False, sync=True, spec=None, switches="LA,OPAU,OPSW", backend=BACKEND, calibration=None,
             reference_out=None, processes=False, plan_out=None):
    name = case.replace(":", "_").replace(",", "+").replace("=", "")
    tag = (f"{name}-{mode}-{run_option}-n{workers}-b{batch}-k{steps}-lr{lr_scale}-avg{not no_average}"
           f"-sync{sync}-{'2hosts' if spec else '1host'}-{switches.replace(',', '+') or 'none'}-{backend}"
           f"{'-' + os.path.basename(os.path.dirname(calibration)) if calibration else ''}"
           f"{'-processes' if processes else ''}")
    out = os.path.join(str(out_dir), tag + ".npz")
    cmd = [sys.executable, SCRIPT, "--case", case, "--mode", mode, "--workers", str(workers), "--batch", str(batch),
           "--steps", str(steps), "--out", out, "--run-option", run_option, "--lr-scale", str(lr_scale)]
    if no_average:
        cmd.append("--no-average")
    if not sync:
        cmd.append("--async")
    if spec:
        cmd += ["--spec", spec]
    cmd += ["--switches", switches or "none", "--backend", backend]
    if calibration:
        cmd += ["--calibration", calibration]
    if reference_out:
        cmd += ["--reference-out", reference_out]
    if plan_out:
        cmd += ["--plan-out", plan_out]
    if not processes and backend != collectives.HOROVOD:
        from tests.equivalence import case_hosts
        from tests.equivalence.run_case import KEEPS_EAGER
        try:
            case_hosts.host(eager=case in KEEPS_EAGER).run(cmd[2:], TIMEOUT)
        except case_hosts.CaseHostError as e:
            if not case_hosts.hung_before_any_step(str(e)):
                raise
            # Seen about once in 2,500 jobs, never in a real job: every worker waits in the job's first collective
            # on the pool's reused servers. The host has left; the case runs once more on new servers, and says so.
            warnings.warn(f"{case} ({run_option}, {workers} workers): the thread job hung before its first "
                          f"synchronized step; it ran again on a new case host")
            case_hosts.host(eager=case in KEEPS_EAGER).run(cmd[2:], TIMEOUT)
        return dict(np.load(out))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT)
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        output, _ = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.terminate()  # SIGTERM: the launcher tears its whole job down (SIGKILL would orphan nothing either,
        output, _ = proc.communicate(timeout=60)  # children die with it, but this way its report is printed)
        raise AssertionError(f"{' '.join(cmd)} timed out after {TIMEOUT} s\n--- output (tail) ---\n{output[-6000:]}")
    if proc.returncode != 0 or not os.path.exists(out):
        raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}\n--- output (tail) ---\n{output[-6000:]}")
    return dict(np.load(out))


# Where single-process references are kept for every pytest process of the session (conftest.py sets it; pytest-xdist
# runs the jobs in two processes, and a reference is made once for both). None: per process, under the test's dir.
REFERENCE_DIR = None


def reference(out_dir, case, workers, **kw):
    key = (case, workers, tuple(sorted(kw.items())))
    if key not in _references:
        _references[key] = _shared_reference(case, workers, kw) if REFERENCE_DIR else \
            run_case(out_dir, case, "single", workers, **kw)
    return _references[key]


def reference_and_distributed(out_dir, case, workers, **parallax_kw):
    """(the one-process run, the parallax run) of `case` at the default batch and steps. A reference no test of the
    session has made yet is made by the parallax run's launching process, before it launches: TF is loaded there
    already, and a process of its own would load it again (a TF import is most of a short run's CPU). Two tests
    that need it at once each make it, and the file is replaced whole."""
    key = (case, workers, ())
    os.makedirs(REFERENCE_DIR or str(out_dir), exist_ok=True)
    path = _reference_path(REFERENCE_DIR or str(out_dir), case, workers, {})
    made_here = key not in _references and not os.path.exists(path)
    got = run_case(out_dir, case, "parallax", workers, reference_out=path if made_here else None, **parallax_kw)
    if key not in _references:
        _references[key] = dict(np.load(path))
    return _references[key], got


def _reference_path(directory, case, workers, kw):
    name = "".join(c if c.isalnum() else "_" for c in f"{case}-{workers}-{sorted(kw.items())}")
    return os.path.join(directory, name + ".npz")


def _shared_reference(case, workers, kw):
    """Made by the first process that asks (under a lock per reference), loaded by the others."""
    import fcntl
    os.makedirs(REFERENCE_DIR, exist_ok=True)
    done = _reference_path(REFERENCE_DIR, case, workers, kw)
    with open(done[:-len(".npz")] + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(done):
            return dict(np.load(done))
        values = run_case(REFERENCE_DIR, case, "single", workers, **kw)
        np.savez(done + ".part.npz", **values)
        os.replace(done + ".part.npz", done)
        return values


def max_differences(expected, got):
    assert sorted(got) == sorted(expected), f"variables differ: {sorted(set(got) ^ set(expected))}"
    return {k: float(np.max(np.abs(np.asarray(got[k], np.float64) - np.asarray(expected[k], np.float64))))
            if np.size(expected[k]) else 0.0 for k in expected}


def assert_equivalent(expected, got, float32=False):
    diffs = max_differences(expected, got)
    for name, diff in diffs.items():
        scale = max(1.0, float(np.max(np.abs(expected[name])))) if np.size(expected[name]) else 1.0
        limit = F32_TOLERANCE * scale if float32 else F64_TOLERANCE
        assert diff <= limit, f"{name}: max abs diff {diff:.3g} > {limit:.3g}; all diffs: {diffs}"
    return diffs


def check_random(out_dir, seed, workers, run_option, spec=None, backend=BACKEND):
    return check_case(out_dir, f"random:{seed}", workers, run_option, spec, backend)


def check_case(out_dir, case, workers, run_option, spec=None, backend=BACKEND, calibration=None):
    """A case (a name, or random:<seed>) distributed vs one process: every variable within the float64 tolerance.
    Returns the max abs diff over all variables."""
    from tests.equivalence.run_case import case_builder
    expected, got = reference_and_distributed(out_dir, case, workers, run_option=run_option, spec=spec,
                                              backend=backend, calibration=calibration)
    diffs = assert_equivalent(expected, got, float32=case_builder(case)(1, 1, 1, 1).float32)
    return max(diffs.values())


def check_equivalence(out_dir, case, workers, run_option, spec=None, switches="LA,OPAU,OPSW", backend=BACKEND):
    """Run `case` distributed and as one process, check every variable (and that the expected ones exist)."""
    from tests.equivalence.run_case import case_builder
    expected, got = reference_and_distributed(out_dir, case, workers, run_option=run_option, spec=spec,
                                              switches=switches, backend=backend)
    for name in MUST_HAVE[case]:
        assert name in expected, f"{case} lacks {name}: {sorted(expected)}"
    assert int(got["global_step"]) == STEPS
    diffs = assert_equivalent(expected, got, float32=case_builder(case)(1, 1, 1, 1).float32)
    print(f"{run_option} {case} N={workers} switches={switches or 'none'}: max abs diff over {len(diffs)} "
          f"variables = {max(diffs.values()):.3g}")
    return diffs
