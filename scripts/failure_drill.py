"""The failure drill behind the table in docs/launching.md: every way a job can stop making progress, in every
mode, on localhost and on a 2x2 test bed; how long the launcher takes to exit, with which status, naming whom,
and whether anything is left.

    python scripts/failure_drill.py [--where localhost,testbed] [--stall-warning 10] [--stall-timeout 30]
                                    [--out-dir D]

Scenarios (the job is tests/launcher_scripts/job.py, training in a loop):
  stopped worker   SIGSTOP to worker 1           stopped server   SIGSTOP to server 0 (PS; HYBRID with an
  early exit       worker 1 ends after 5 steps                     embedding, JOB_SPARSE)
  chief death      SIGKILL to worker 0           SIGTERM          to the launcher
Needs root for the test bed (network namespaces); run it alone on the machine.
"""
import argparse
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)
from parallax.launcher.processes import alive  # noqa: E402 (after the path is set)

JOB = os.path.join(ROOT, "tests", "launcher_scripts", "job.py")
LAUNCH = [sys.executable, "-m", "parallax.launcher.cli"]
MODES = ("MPI", "PS", "HYBRID")
SCENARIOS = [("stopped worker", m) for m in MODES] + [("stopped server", m) for m in ("PS", "HYBRID")] + \
            [(s, m) for s in ("early exit", "chief death", "SIGTERM") for m in MODES]
TWO_LOOPBACK_HOSTS = "127.0.0.1: 0\n127.0.0.2: 0\n"
LOCAL_SPECS = {"MPI": "localhost slots=2\n", "PS": TWO_LOOPBACK_HOSTS, "HYBRID": TWO_LOOPBACK_HOSTS}


def _pids(jobs):
    found = {}
    for path in glob.glob(os.path.join(jobs, "parallax-job-*", "pid.*")):
        try:
            found[os.path.basename(path)[4:]] = int(open(path).read().split()[1])
        except (OSError, ValueError, IndexError):
            pass
    return found


def _keep(out_dir, scenario, mode, output):
    """Each scenario's whole output, to read what a row's figures came from."""
    path = os.path.join(out_dir, f"{scenario.replace(' ', '_')}-{mode}-{time.strftime('%H%M%S')}.log")
    with open(path, "w") as f:
        f.write(output)


def drill(scenario, mode, spec_args, env_extra, args):
    jobs = tempfile.mkdtemp(prefix="parallax-drill-")
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2", TMPDIR=jobs, JOB_LOOP="1",
               JOB_RUN_OPTION=mode, **env_extra)
    forwarded = ["JOB_LOOP", "JOB_RUN_OPTION"]
    if scenario == "stopped server":
        env["JOB_SPARSE"] = "1"  # so that HYBRID has a parameter server
        forwarded.append("JOB_SPARSE")
    if scenario == "early exit":
        env["JOB_STEPS_RANK"] = "1,5"
        forwarded.append("JOB_STEPS_RANK")
    cmd = [*LAUNCH, *spec_args, "--stall-warning", str(args.stall_warning), "--stall-timeout",
           str(args.stall_timeout), *(w for n in forwarded for w in ("-x", n)), "--", sys.executable, JOB]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if "is training" in line or "job failed" in line:
            break
    if "job failed" in lines[-1]:  # it failed by itself, before the drill did anything: say so, not a timing
        rest, _ = proc.communicate(timeout=120)
        _keep(args.out_dir, scenario, mode, "".join(lines) + rest)
        shutil.rmtree(jobs, ignore_errors=True)
        return [scenario, mode, "-", str(proc.returncode), "failed before the drill acted: " +
                lines[-1].split("job failed: ", 1)[1][:80].strip(), "-", "-"]
    time.sleep(1)
    pids = _pids(jobs)
    acted = time.time()
    victim = {"stopped worker": "worker.1", "stopped server": "ps.0", "chief death": "worker.0"}.get(scenario)
    if victim:
        os.kill(pids[victim], signal.SIGKILL if scenario == "chief death" else signal.SIGSTOP)
    elif scenario == "SIGTERM":
        os.kill(proc.pid, signal.SIGTERM)
    try:
        rest, _ = proc.communicate(timeout=args.stall_timeout + 120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        rest, _ = proc.communicate()
    took = time.time() - acted
    output = "".join(lines) + rest
    _keep(args.out_dir, scenario, mode, output)
    time.sleep(0.5)
    left = [n for n, p in pids.items() if alive(p)]
    named = re.search(r"job failed: (\S+)", output)
    stall = re.search(r"parallax: stall: (\S+ has sent nothing)", output)
    what = named.group(1) if named else ("stopped by signal" if "stopped by signal" in output else "-")
    shutil.rmtree(jobs, ignore_errors=True)
    return [scenario, mode, f"{took:.1f}", str(proc.returncode), what, "yes" if stall else "-",
            ", ".join(left) or "nothing"]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--where", default="localhost,testbed")
    p.add_argument("--stall-warning", type=float, default=10)
    p.add_argument("--stall-timeout", type=float, default=30)
    p.add_argument("--out-dir", help="where each scenario's output goes (default: a new temporary directory)")
    args = p.parse_args()
    args.out_dir = args.out_dir or tempfile.mkdtemp(prefix="parallax-drill-logs-")
    os.makedirs(args.out_dir, exist_ok=True)
    print(f"each scenario's output goes to {args.out_dir}", file=sys.stderr, flush=True)
    from parallax.core.text_table import format_table
    rows = []
    for where in args.where.split(","):
        if where == "localhost":
            for scenario, mode in SCENARIOS:
                spec = os.path.join(args.out_dir, f"spec-{mode}.txt")
                with open(spec, "w") as f:
                    f.write(LOCAL_SPECS[mode])
                rows.append(["localhost", *drill(scenario, mode, ["--resource-spec", spec], {}, args)])
                print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
        else:
            from parallax.launcher.local_cluster import LocalCluster
            with LocalCluster(2, 2, rate="1gbit") as c:
                spec = os.path.join(c.dir, "hosts.txt")
                with open(spec, "w") as f:
                    f.write(c.spec_text())
                ssh = ["--resource-spec", spec, "--ssh-identity-file", c.client_key, "--ssh-option",
                       f"UserKnownHostsFile={c.known_hosts}", "--ssh-option", "StrictHostKeyChecking=yes"]
                for scenario, mode in SCENARIOS:
                    rows.append(["test bed 2x2", *drill(scenario, mode, ssh, {}, args)])
                    print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    print(f"stall_warning_s={args.stall_warning:g}, stall_timeout_s={args.stall_timeout:g}\n")
    print(format_table([["where", "scenario", "mode", "s to exit", "status", "named", "warned", "left"], *rows]))


if __name__ == "__main__":
    main()
