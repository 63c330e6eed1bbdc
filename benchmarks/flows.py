"""Who sends how many bytes to whom: per-connection accounting of a job on the test bed, per worker per step.

The hosts' interface counters (testbed.py) say how much a job moves; this says between which processes. At
worker 0's warm-up and last log lines it reads every TCP connection's `bytes_sent` (`ss -ti` in each host's
namespace) and the process at each end (worker rank, server task, or the program's name), then sums the
difference per (sender, receiver). This is how the clip multiply placed on the wrong server was found
(benchmarks/README.md).

    python benchmarks/flows.py --model LM --run-option HYBRID [--rate 1gbit]    # -> results/flows.LM.HYBRID.md
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..")]

import common  # noqa: E402
import paper_tables  # noqa: E402
import testbed  # noqa: E402

from parallax.launcher.local_cluster import LocalCluster  # noqa: E402


def process_name(pid):
    """`worker<rank>`, `ps<task>`, or the program's name."""
    try:
        with open(f"/proc/{pid}/cmdline") as f:
            cmd = f.read().split("\0")
        with open(f"/proc/{pid}/environ") as f:
            env = dict(item.split("=", 1) for item in f.read().split("\0") if "=" in item)
    except OSError:
        return "?"
    if any("ps_server" in word for word in cmd):
        return f"ps{env.get('PARALLAX_PS_TASK', '?')}"
    if "OMPI_COMM_WORLD_RANK" in env:
        return f"worker{env['OMPI_COMM_WORLD_RANK']}"
    return os.path.basename(cmd[0])


def connections(cluster):
    """{(namespace, local address, peer address): (pid, bytes sent)} for every TCP connection on the hosts."""
    out = {}
    for ns in cluster.namespaces:
        text = subprocess.run(["ip", "netns", "exec", ns, "ss", "-tinpH"], capture_output=True, text=True).stdout
        key = pid = None
        for line in text.splitlines():
            if not line[:1].isspace():
                fields = line.split()
                m = re.search(r"pid=(\d+)", line)
                key, pid = (ns, fields[3], fields[4]), (int(m[1]) if m else None)
            elif key and (m := re.search(r"bytes_sent:(\d+)", line)):
                out[key] = (pid, int(m[1]))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="LM", choices=sorted(paper_tables.MODELS))
    p.add_argument("--run-option", default="HYBRID", choices=paper_tables.MODES)
    p.add_argument("--optimizations", default=paper_tables.ALL)
    p.add_argument("--rate", default="1gbit")
    args = p.parse_args()
    lines = common.header("Bytes per worker per step between processes",
                  {"model": args.model, "run option": args.run_option, "optimizations": args.optimizations,
                   "rate": args.rate})
    steps, every = paper_tables.MODELS[args.model][3]
    with tempfile.TemporaryDirectory(prefix="parallax-flows-") as work, \
            LocalCluster(2, 2, rate=args.rate) as cluster:
        data_dirs = paper_tables.make_data([args.model], work)
        snapshots, names = {}, {}

        def snapshot(step):
            snapshots[step] = connections(cluster)
            for (_, local, _), (pid, _) in snapshots[step].items():
                if pid and local not in names:
                    names[local] = process_name(pid)  # now, while the process is alive

        script, script_args = paper_tables.script_args(args.model, data_dirs, args.optimizations)
        m = testbed.run_job(cluster, work, script, script_args, args.run_option, steps, every, every,
                            at_snapshot=snapshot)
    flows = collections.Counter()
    for key, (_, sent) in snapshots[steps].items():
        flows[(names.get(key[1], "?"), names.get(key[2], "?"))] += sent - snapshots[every].get(key, (None, 0))[1]
    per = (steps - every) * cluster.num_hosts * cluster.slots
    table = [f"The hosts' interfaces counted {m.total_bytes / 1e6:.3f} MB per worker-step "
             f"({m.wire_bytes / 1e6:.3f} MB on the wire). Sums are of bytes sent, between the warm-up's last log "
             f"line and the last step.", "", "| from | to | MB per worker-step |", "|---|---|---|"]
    table += [f"| {src} | {dst} | {sent / per / 1e6:.3f} |"
              for (src, dst), sent in sorted(flows.items(), key=lambda kv: -kv[1]) if sent / per >= 1000]
    table.append(f"| all connections | | {sum(flows.values()) / per / 1e6:.3f} |")
    print("\n".join(table))
    common.write(f"flows.{args.model}.{args.run_option}.md", lines + table)


if __name__ == "__main__":
    main()
