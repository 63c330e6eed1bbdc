"""`parallax-calibrate`: measure what the cost model needs (parallax/plan/cost_model.py) on the job's own hosts, and write
DIR/calibration.json for run_option="AUTO". Imports no TensorFlow.

    parallax-calibrate --out DIR [host options as parallax-launch] [--compute-seconds S] -- python train.py [args]

1. the workload: the training script's own step, timed on this machine in one process (parallax.tools.workload_probe),
   and the fraction a of each sparse variable's rows a step touches;
2. the machine: the calibration job (parallax.tools.calibration_job), launched by parallax-launch on the spec's hosts
   once per mode and backend (PS; MPI with TF's collectives; MPI with Horovod where it loads): CPU per byte and
   per message of each method, the link's bandwidth and latency, the cores, which hosts share a machine;
3. the script in real jobs: launched in each fixed mode (PS, MPI, HYBRID) for IN_JOB_STEPS steps
   (parallax/runtime/step_measure.py): the step time of each, and what one worker's step costs there. Skipped with
   --compute-seconds.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile

from parallax.plan import calibration
from parallax.errors import ParallaxError
from parallax.launcher import cli, local_cluster
from parallax.launcher.processes import signal_group
from parallax.runtime.step_measure import ENV, MARKER as STEP_MARKER

MARKER = "parallax-calibration: "  # calibration_job.MARKER (that module imports TensorFlow)
IN_JOB_STEPS = (10, 30)  # warm-up steps, then the last measured step
IN_JOB_MODES = ("PS", "MPI", "HYBRID")
JOB_TIMEOUT = 900  # seconds for each calibration job and each short job of the script, start-up included
TEARDOWN_SECONDS = 30  # after SIGTERM, for the launcher to stop its job on every host, before SIGKILL


def parser():
    p = cli.parser()
    p.prog = "parallax-calibrate"
    p.description = ("Measure the job's hosts and the training script's step for run_option='AUTO' (the cost "
                     "model's inputs): the calibration job in each mode, and the script itself as short jobs in PS, "
                     "MPI and HYBRID (each ends after 30 steps). Write them to DIR/calibration.json.")
    p.epilog = "example: parallax-calibrate -H node1:2,node2:2 --out calib -- python train.py --batch-size 64"
    p.add_argument("--out", required=True, metavar="DIR", help="where to write calibration.json")
    p.add_argument("--compute-seconds", type=float, metavar="S",
                   help="one worker step's time, when the script's step cannot be run here (feed_dict input); "
                        "the script's short jobs are then skipped too")
    return p


def main(argv=None):
    p = parser()
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    ignored = [flag for flag, value in (("--run-option", args.run_option), ("--log-dir", args.log_dir),
                                        ("--dry-run", args.dry_run)) if value]
    if ignored:  # options of parallax-launch's parser that calibration jobs cannot honour
        p.error(f"{', '.join(ignored)}: parallax-calibrate runs its calibration jobs in every mode itself, and "
                f"keeps no job logs; leave {'them' if len(ignored) > 1 else 'it'} out")
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    try:
        if not command or not os.path.basename(command[0]).startswith("python") or len(command) < 2:
            raise ParallaxError("give the training command after `--`, e.g. -- python train.py --steps 10")
        python = os.path.abspath(args.python or sys.executable)
        workload = measure_workload(python, command, args.compute_seconds)
        if args.local_cluster:
            hosts, slots, rate = local_cluster.parse_shape(args.local_cluster)
            with local_cluster.LocalCluster(hosts, slots, rate=rate) as cluster:
                runs, in_job = _measure(python, cluster.launch_options() + _launch_options(args),
                                        dict(os.environ, **cluster.mpi_environment()), command, args.compute_seconds)
        else:
            runs, in_job = _measure(python, _where(args) + _launch_options(args), dict(os.environ), command,
                                    args.compute_seconds)
        machine = calibration.fit_machine(runs)
        result = calibration.Calibration(machine, workload["compute_seconds"], workload["compute_cpu"],
                                         workload.get("alpha", {}), len({r["host"] for run in runs for r in run}),
                                         {f"{run[0]['mode']}/{run[0]['backend']}": run for run in runs}, in_job)
        path = result.save(args.out)
    except ParallaxError as e:
        print(f"parallax-calibrate: error: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    _summary(result, path)
    return 0


def _measure(python, where, env, command, compute_seconds):
    """Steps 2 and 3 on the hosts `where` names: the calibration jobs' results, and the script's short jobs'
    reports (None with --compute-seconds)."""
    runs = measure_machine(python, where, env)
    return runs, None if compute_seconds else measure_in_jobs(python, where, env, command)


def _where(args):
    """The launcher's options naming the hosts. A spec or hostfile that is a file is passed as an absolute path
    (the jobs run elsewhere); a spec given as text (`localhost:2`, as get_runner takes it) is passed as it is."""
    if args.resource_spec:
        spec = args.resource_spec
        return ["--resource-spec", os.path.abspath(spec) if os.path.isfile(spec) else spec]
    if args.hostfile:
        return ["--hostfile", os.path.abspath(args.hostfile)]
    return ["-H", args.hosts]


def _launch_options(args):
    out = []
    if args.num_workers:
        out += ["-np", str(args.num_workers)]
    if args.ssh_port:
        out += ["--ssh-port", str(args.ssh_port)]
    if args.ssh_identity_file:
        out += ["--ssh-identity-file", os.path.abspath(args.ssh_identity_file)]
    for opt in args.ssh_option:
        out += ["--ssh-option", opt]
    for item in args.env:
        out += ["-x", item]
    return out + ["--start-timeout", str(args.start_timeout)]


def measure_workload(python, command, compute_seconds=None):
    """The script's step time and sparsity (workload_probe.py), or the step time given by hand."""
    if compute_seconds is not None:
        if compute_seconds <= 0:
            raise ParallaxError(f"--compute-seconds {compute_seconds}: give the step time in seconds, > 0")
        return {"compute_seconds": compute_seconds, "compute_cpu": compute_seconds, "alpha": {}}
    _progress("timing one step of the training script on this machine")
    with tempfile.TemporaryDirectory(prefix="parallax-calibrate-") as work:
        out = os.path.join(work, "workload.json")
        done = subprocess.run([python, "-m", "parallax.tools.workload_probe", out, *command[1:]],
                              env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
        if done.returncode != 0 or not os.path.exists(out):
            raise ParallaxError(f"timing the training script's step failed (exit status {done.returncode}; its "
                                f"output is above)")
        with open(out) as f:
            return json.load(f)


def measure_machine(python, where, env, timeout=JOB_TIMEOUT, runs=None):
    """The calibration job's results, one list per (mode, backend) run, on the hosts that `where` (parallax-launch
    arguments) names. `runs`: those (mode, backend) pairs only (default: PS, MPI with tf, MPI with Horovod where it
    loads)."""
    runs = _default_runs(python, env, timeout) if runs is None else runs
    return [_calibration_job(python, where, env, timeout, mode, backend, i, len(runs))
            for i, (mode, backend) in enumerate(runs, start=1)]


def _default_runs(python, env, timeout):
    runs = [("PS", "tf"), ("MPI", "tf")]
    try:
        probe = subprocess.run([python, "-c", "from parallax.collectives import horovod_problem as p; "
                                "print(p() or '')"], capture_output=True, text=True, env=env, timeout=timeout)
        if probe.returncode == 0 and not probe.stdout.strip():
            runs.append(("MPI", "horovod"))
    except subprocess.TimeoutExpired:
        _progress(f"loading Horovod did not end within {timeout:g} s: it is left out of the calibration")
    return runs


def _calibration_job(python, where, env, timeout, mode, backend, i, count):
    _progress(f"[{i}/{count}] the calibration job in {mode} with backend {backend}")
    cmd = [python, "-m", "parallax.launcher.cli", *where, "--run-option", mode, "--",
           python, "-m", "parallax.tools.calibration_job", mode, backend]
    code, out = _run_job(cmd, env, timeout)
    found = [json.loads(line.split(MARKER, 1)[1]) for line in out.splitlines() if MARKER in line]
    if code != 0 or not found:
        tail = "\n".join(out.strip().splitlines()[-15:])
        what = f"did not end within {timeout:g} s (stopped)" if code is None else f"failed (exit status {code})"
        raise ParallaxError(f"the calibration job in {mode}/{backend} {what}; its output ends:\n{tail}")
    return sorted(found, key=lambda r: r["worker"])


def _run_job(cmd, env, timeout):
    """Run a parallax-launch command to its end, or stop it after `timeout` s: its process group gets SIGTERM,
    and the launcher tears its job down on every host. Returns (exit status, or None when stopped; its output)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(env, TF_CPP_MIN_LOG_LEVEL="2"), start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        signal_group(proc.pid, signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=TEARDOWN_SECONDS)
        except subprocess.TimeoutExpired:
            signal_group(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
        return None, out



def measure_in_jobs(python, where, env, command, modes=IN_JOB_MODES):
    """{mode: each worker's report, or None} of the training script run as a real job in each of `modes`."""
    return {mode: measure_in_job(python, where, env, command, mode) for mode in modes}


def measure_in_job(python, where, env, command, mode, steps=IN_JOB_STEPS, timeout=JOB_TIMEOUT):
    """The training script as a real job in `mode` that ends after `steps[1]` steps: each worker's report
    (step_measure.py), or None, said why, when the script ran fewer steps or failed (AUTO then has only the
    model for that mode)."""
    _progress(f"[in job] the training script in {mode} mode, steps {steps[0] + 1}-{steps[1]} measured")
    cmd = [python, "-m", "parallax.launcher.cli", *where, "--run-option", mode, "-x",
           f"{ENV}={steps[0]},{steps[1]}", "--", python, *command[1:]]
    code, out = _run_job(cmd, env, timeout)
    if code is None:
        _progress(f"[in job] {mode}: no report within {timeout:g} s; AUTO will have only the model for it")
        return None
    found = [json.loads(line.split(STEP_MARKER, 1)[1]) for line in out.splitlines() if STEP_MARKER in line]
    if code != 0 or not found or len(found) != found[0]["workers"]:
        tail = "\n".join(out.strip().splitlines()[-10:])
        _progress(f"[in job] the script did not run {steps[1]} steps in {mode} mode (exit status "
                  f"{code}); AUTO will have only the model for it. Its output ends:\n{tail}")
        return None
    return sorted(found, key=lambda r: r["worker"])


def _summary(result, path):
    m = result.machine
    lines = [f"parallax-calibrate: wrote {path}",
             f"  one worker step: {result.compute_seconds * 1000:.1f} ms ({result.compute_cpu * 1000:.1f} ms CPU)",
             ("  one host: no link between hosts" if m.bandwidth == calibration.LOOPBACK_BANDWIDTH else
              f"  link: {m.bandwidth * 8 / 1e9:.2f} Gbit/s, latency {m.latency * 1000:.2f} ms, "
              f"burst {m.link_burst / 1024:.0f} KB")
             + f"; {m.cores:g} cores per machine"
             + (f"; machine of each host: {list(m.machine_of_host)}" if m.machine_of_host else "")]
    for key in sorted(m.cpu_per_byte):
        lines.append(f"  {key}: {m.cpu_per_byte[key] * 1e9:.2f} CPU s per GB moved, "
                     f"{m.cpu_per_message.get(key, 0) * 1000:.2f} ms CPU per message"
                     + (f", {m.cpu_per_step[key] * 1000:.2f} ms CPU per step" if key in m.cpu_per_step else ""))
    lines += [f"  a({name}) = {a:.4g}" for name, a in sorted(result.alpha.items())]
    for mode, reports in sorted((result.in_job or {}).items()):
        lines.append(f"  in a {mode} job: " + ("no measurement (see above)" if not reports else
                                              f"{calibration.median_wall(reports) * 1000:.1f} ms per step"))
    print("\n".join(lines), flush=True)


def _progress(text):
    print(f"parallax-calibrate: {text}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
