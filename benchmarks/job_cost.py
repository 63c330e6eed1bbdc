"""Where an equivalence job's seconds go: one typical case in each mode, run as the test suite runs it (a thread job
in a warm case host, tests/equivalence/case_hosts.py) and as a real job (one process per worker and server,
get_runner's self-launch: what every equivalence job was before the thread jobs), side by side in rotated order.
Every process of a job records its stages (benchmarks/job_stages/sitecustomize.py): its start, TensorFlow's import,
graph building, the reference run, analysis and planning, server start, the rewrite, the graph check, the session
and initial values, the steps, closing. Writes benchmarks/results/job_cost.md.

    python benchmarks/job_cost.py [--case embedding_clip_adam] [--rounds 3]
"""
import argparse
import collections
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import common  # noqa: E402

sys.path.insert(0, common.ROOT)
from tests.equivalence import case_hosts, harness  # noqa: E402

STAGES_PATH = os.path.join(common.ROOT, "benchmarks", "job_stages")
MODES = ("MPI", "PS", "HYBRID")
ORDER = ("python start", "import tensorflow", "start server pool", "graph build", "reference run", "analysis",
         "planning", "planning (planner role)", "server start", "rewrite", "graph check",
         "session and initial values", "steps", "close", "reset servers")


def argv_of(case, mode, out, reference_out):
    return ["--case", case, "--mode", "parallax", "--workers", "2", "--batch", str(harness.BATCH), "--steps",
            str(harness.STEPS), "--out", out, "--run-option", mode, "--spec", harness.two_hosts(2), "--backend", "tf",
            "--reference-out", reference_out]


def real_job(case, mode, work, stages):
    """(wall, CPU of the job's processes) of one real job, its processes' stages in `stages`."""
    env = dict(os.environ, PYTHONPATH=f"{common.ROOT}:{STAGES_PATH}", JOB_STAGES_DIR=stages, TF_CPP_MIN_LOG_LEVEL="2")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    subprocess.run([sys.executable, harness.SCRIPT, *argv_of(case, mode, f"{work}/out.npz", f"{work}/ref.npz")],
                   env=env, cwd=common.ROOT, check=True, capture_output=True, timeout=harness.TIMEOUT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.time() - start, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def thread_job(host, case, mode, work):
    """(wall, CPU of the host) of one case in the warm host."""
    cpu = _cpu_of(host.pid)
    start = time.time()
    host.run(argv_of(case, mode, f"{work}/out.npz", f"{work}/ref.npz"), harness.TIMEOUT)
    return time.time() - start, _cpu_of(host.pid) - cpu


def _cpu_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def records(directory):
    out = []
    for name in os.listdir(directory):
        with open(os.path.join(directory, name)) as f:
            out += [json.loads(line) for line in f]
    return out


def role(record, by_pid):
    if "ps_server" in record["argv"]:
        return "server"
    if "case_host" in record["argv"]:
        return "host"
    return "launcher" if any(r["stage"] == "launch and wait for the job" for r in by_pid[record["pid"]]) \
        else "worker"


def breakdown(recs, since=0.0):
    """{(role, stage): [wall summed, CPU summed, count]} of the stages that started at `since` or later."""
    by_pid = collections.defaultdict(list)
    for r in recs:
        by_pid[r["pid"]].append(r)
    table = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for r in recs:
        if r["stage"] in ORDER and r["start"] >= since:
            row = table[(role(r, by_pid), r["stage"])]
            row[0] += r["end"] - r["start"]
            row[1] += r["cpu"]
            row[2] += 1
    return table


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", default="embedding_clip_adam")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    lines = common.header("Where an equivalence job's seconds go", {"case": args.case, "workers": 2,
                                                                      "hosts": "2 (loopback)", "backend": "tf",
                                                                      "rounds": args.rounds})
    totals = collections.defaultdict(list)
    stage_dir = tempfile.mkdtemp(prefix="parallax-job-stages-")
    real_stages, host_stages = os.path.join(stage_dir, "real"), os.path.join(stage_dir, "host")
    os.makedirs(real_stages), os.makedirs(host_stages)
    host = case_hosts.CaseHost(env={"PYTHONPATH": f"{common.ROOT}:{STAGES_PATH}", "JOB_STAGES_DIR": host_stages})
    with tempfile.TemporaryDirectory() as work:
        start = time.time()
        thread_job(host, args.case, "MPI", work)  # the host's start: TF's import and its servers, once
        host_start = time.time() - start
        measured_from = time.time()
        runs = [(mode, path) for mode in MODES for path in ("thread job", "real job")]
        for k in range(args.rounds):
            for mode, path in runs[k % len(runs):] + runs[:k % len(runs)]:
                wall, cpu = thread_job(host, args.case, mode, work) if path == "thread job" else \
                    real_job(args.case, mode, work, real_stages)
                totals[(mode, path)].append((wall, cpu))
                print(f"round {k + 1} {mode:6} {path:10}: {wall:6.2f} s, {cpu:6.2f} CPU s", flush=True)
    host.stop()
    lines += _report(totals, records(real_stages), records(host_stages), host_start, measured_from, args.rounds)
    common.write("job_cost.md", lines)


def _report(totals, real, hosted, host_start, measured_from, rounds):
    lines = ["## One job, each way (medians over the rounds)", "",
             "| mode | thread job: wall s | CPU s | real job: wall s | CPU s | wall ratio | CPU ratio |",
             "|---|---|---|---|---|---|---|"]
    for mode in MODES:
        t, r = totals[(mode, "thread job")], totals[(mode, "real job")]
        tw, tc = common.median([w for w, _ in t]), common.median([c for _, c in t])
        rw, rc = common.median([w for w, _ in r]), common.median([c for _, c in r])
        lines.append(f"| {mode} | {tw:.2f} | {tc:.2f} | {rw:.2f} | {rc:.2f} | {rw / tw:.1f}x | {rc / tc:.1f}x |")
    lines += ["", f"The host's own start (TensorFlow's import and six in-process servers), once per pytest process: "
                  f"{host_start:.1f} s wall, for its first case included.", ""]
    for title, recs, since in (("a real job", real, 0.0), ("a thread job", hosted, measured_from)):
        table = breakdown(recs, since)
        runs = rounds * len(MODES)
        lines += [f"## Where {title}'s seconds go (per job: summed over its processes or threads, averaged over "
                  f"{runs} jobs)", "", "| process | stage | wall s | CPU s | times |", "|---|---|---|---|---|"]
        for (who, stage), (wall, cpu, count) in sorted(table.items(), key=lambda kv: (kv[0][0],
                                                                                      ORDER.index(kv[0][1]))):
            lines.append(f"| {who} | {stage} | {wall / runs:.2f} | {cpu / runs:.2f} | {count / runs:g} |")
        lines.append("")
    lines += ["A thread job's CPU per stage is its process's CPU while the stage ran, which other threads' stages "
              "share; its total is the host's CPU over the case. A real job's CPU total is every process's (waited "
              "for by the launcher); its launcher's `launch and wait for the job` spans the workers' stages.", ""]
    return lines


if __name__ == "__main__":
    main()
