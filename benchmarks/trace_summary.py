"""Where a traced step's time went: per device lane of a Chrome trace written by Config.profile_steps, the time
its ops kept it busy and its largest ops (by op type, and by op name).

    python benchmarks/trace_summary.py TRACE.json [--top 8]
"""
import argparse
import collections
import json


def busy_time(intervals):
    """Length of the union of [start, end) intervals."""
    total, end = 0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total, end = total + (e - s), e
        elif e > end:
            total, end = total + (e - end), e
    return total


def summarize(path, top=8):
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    lanes = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    ops = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and lanes.get(e["pid"], "").endswith("Compute"):
            ops[lanes[e["pid"]]].append(e)
    start = min(e["ts"] for lane in ops.values() for e in lane)
    end = max(e["ts"] + e["dur"] for lane in ops.values() for e in lane)
    lines = [f"Step span {(end - start) / 1e3:.1f} ms ({path.rsplit('/', 1)[-1]}).", "",
             "| lane | busy ms | largest op types (ms) | largest ops (ms) |", "|---|---|---|---|"]
    for lane in sorted(ops):
        events_ = ops[lane]
        by_type, by_name = collections.Counter(), collections.Counter()
        for e in events_:
            by_type[e["args"].get("op", e["name"])] += e["dur"]
            by_name[e["args"].get("name", e["name"])] += e["dur"]
        busy = busy_time([(e["ts"], e["ts"] + e["dur"]) for e in events_])
        fmt = lambda counter: ", ".join(f"{k} {v / 1e3:.1f}" for k, v in counter.most_common(top))  # noqa: E731
        lines.append(f"| {lane.replace(' Compute', '')} | {busy / 1e3:.1f} | {fmt(by_type)} | {fmt(by_name)} |")
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace")
    p.add_argument("--top", type=int, default=8)
    args = p.parse_args()
    print("\n".join(summarize(args.trace, args.top)))


if __name__ == "__main__":
    main()
