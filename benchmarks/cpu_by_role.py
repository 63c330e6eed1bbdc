"""Where a step's CPU goes, per kind of process, for one model in several modes side by side on the test bed.

The kinds: the workers, the parameter servers, MPI's daemons and the test bed's sshd; the modes run in rounds on
the shaped test bed (testbed.py).

    python benchmarks/cpu_by_role.py [--model LM] [--rate 1gbit] [--modes PS,HYBRID] [--repeats 5]

A mode may name its optimizations after a colon, with + between them (PS:OPAU+OPSW is PS without local
aggregation); the default is all of them. It may name its collective backend after an @ (HYBRID@horovod); the
default is --backend. Each process's CPU time (user + system, /proc/<pid>/stat) is read when
worker 0 logs the end of the warm-up and the last step, as testbed.run_job reads the total.
"""
import argparse
import collections
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..")]

import common  # noqa: E402
import testbed  # noqa: E402
from paper_tables import ALL, MODELS, make_data, script_args  # noqa: E402

from parallax.launcher.local_cluster import LocalCluster  # noqa: E402

ROLES = ("worker", "server", "MPI", "sshd", "other")


def role_of(pid):
    try:
        with open(f"/proc/{pid}/cmdline") as f:
            argv = f.read().split("\0")
    except OSError:
        return None
    line = " ".join(argv)
    if "parallax.runtime.ps_server" in line:
        return "server"
    if "train_distributed.py" in line:
        return "worker"
    if os.path.basename(argv[0]) in ("orted", "mpirun", "prted"):
        return "MPI"
    return "sshd" if "sshd" in os.path.basename(argv[0]) else "other"


def cpu_by_role(cluster):
    """{role: CPU seconds so far} over every process on the cluster's hosts."""
    out = collections.Counter()
    for host in range(cluster.num_hosts):
        for pid in cluster.namespace_pids(host):
            role, seconds = role_of(pid), testbed.process_cpu_seconds(pid)
            if role and seconds is not None:  # else it ended in between
                out[role] += seconds
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="LM", choices=sorted(MODELS))
    parser.add_argument("--rate", default="1gbit")
    parser.add_argument("--modes", default="PS,HYBRID")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--backend", default="tf")
    parser.add_argument("--out", default="cpu_by_role.md", help="file name under benchmarks/results")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    configs = args.modes.split(",")
    steps, every = MODELS[args.model][3]
    runs = collections.defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="parallax-cpu-by-role-") as work:
        data_dirs = make_data([args.model], work)
        with LocalCluster(2, 2, rate=args.rate) as cluster:
            for round_ in range(args.repeats):
                for config in configs:
                    config_, _, backend = config.partition("@")
                    mode, _, opts = config_.partition(":")
                    script, script_arguments = script_args(args.model, data_dirs, opts.replace("+", ",") or ALL)
                    seen = {}
                    backend_arguments = ["--collective-backend", backend or args.backend]
                    m = testbed.run_job(cluster, work, script, [*script_arguments, *backend_arguments], mode, steps,
                                        every, every,
                                        at_snapshot=lambda step: seen.__setitem__(step, cpu_by_role(cluster)))
                    per_step = {r: (seen[steps][r] - seen[every][r]) / (steps - every) for r in ROLES}
                    runs[config].append((m, per_step))
                    testbed.progress(f"round {round_ + 1}/{args.repeats} {config}: {m.step_seconds * 1000:.0f} ms/step, "
                                     f"{m.cpu_seconds:.3f} CPU s/step; " +
                                     ", ".join(f"{r} {v:.3f}" for r, v in per_step.items() if v))
    lines = common.header(f"CPU per step by kind of process: {args.model} at {args.rate}", {
        "hosts": "2 (network namespaces)", "workers per host": 2, "servers": "1 per host where the mode has servers",
        "collective backend": f"{args.backend} (where a configuration names none after @)",
        "steps": f"{steps}, the first {every} for warm-up",
        "rounds": f"{args.repeats}, each round every configuration once"})
    lines += ["Medians over the rounds. CPU: user + system time of every process on the hosts, per step.", "",
              "| configuration | ms/step | CPU s/step, all | " + " | ".join(ROLES) + " | CPU s/step per round |",
              "|---|---|---|" + "---|" * len(ROLES) + "---|"]
    for config in configs:
        got = runs[config]
        lines.append(f"| {config} | {common.median(m.step_seconds for m, _ in got) * 1000:.0f} | "
                     f"{common.median(m.cpu_seconds for m, _ in got):.3f} | " +
                     " | ".join(f"{common.median(p[r] for _, p in got):.3f}" for r in ROLES) + " | " +
                     ", ".join(f"{m.cpu_seconds:.3f}" for m, _ in got) + " |")
    print("\n".join(lines[-len(configs) - 2:]))
    common.write(args.out, lines)


if __name__ == "__main__":
    main()
