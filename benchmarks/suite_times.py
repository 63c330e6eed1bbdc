"""Where the test suite's minutes go: per phase, per file, the slowest tests, from the JSON lines that
benchmarks/suite_timing/timing_plugin.py writes (one per test: wall and CPU seconds, its xdist worker, its TF).

    PYTHONPATH=benchmarks/suite_timing TIMING_OUT=after.jsonl make test PYTEST="-q -p timing_plugin"
    python benchmarks/suite_times.py --before before.jsonl --after after.jsonl --out benchmarks/results/suite_times.md

A test's CPU is its pytest process's and the children it reaped (a real job's processes); a warm case host's
(tests/equivalence/case_host.py) is not reaped per test, so a thread job's CPU shows in the phase's total only.
"""
import argparse
import collections
import json


def load(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    return [r for r in rows if "id" in r], [r for r in rows if "session_end" in r]


def phase(r):
    if r["id"].startswith("tests/cluster/"):
        return "test bed"
    return f"TF {r.get('tf', '2.15')}, {'alone' if r.get('alone') else 'two at a time'}"


def group(test_id):
    path = test_id.split("::")[0]
    if path.endswith("test_user_graphs.py"):
        return "user graphs (thread jobs)"
    return path


def phase_table(tests):
    by = collections.defaultdict(lambda: [0, 0.0])
    for r in tests:
        by[phase(r)][0] += 1
        by[phase(r)][1] += r["wall"]
    lines = ["| phase | tests | summed test wall s |", "|---|---|---|"]
    lines += [f"| {p} | {n} | {w:.0f} |" for p, (n, w) in sorted(by.items())]
    return lines


def file_table(tests, top):
    by = collections.defaultdict(lambda: [0, 0.0])
    for r in tests:
        key = (phase(r), group(r["id"]))
        by[key][0] += 1
        by[key][1] += r["wall"]
    lines = ["| phase | file | tests | summed wall s |", "|---|---|---|---|"]
    for (p, g), (n, w) in sorted(by.items(), key=lambda kv: -kv[1][1])[:top]:
        lines.append(f"| {p} | {g} | {n} | {w:.0f} |")
    return lines


def slowest(tests, top):
    lines = ["| wall s | phase | test |", "|---|---|---|"]
    for r in sorted(tests, key=lambda r: -r["wall"])[:top]:
        lines.append(f"| {r['wall']:.1f} | {phase(r)} | `{r['id']}` |")
    return lines


def section(title, path, top):
    tests, _ = load(path)
    return [f"## {title} ({path})", "", *phase_table(tests), "", f"The {top} files that took longest:", "",
            *file_table(tests, top), "", f"The {top} slowest tests:", "", *slowest(tests, top), ""]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--before")
    p.add_argument("--after", required=True)
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--out")
    args = p.parse_args()
    lines = ["# Where the test suite's minutes go", ""]
    if args.before:
        lines += section("Before", args.before, args.top)
    lines += section("After", args.after, args.top)
    text = "\n".join(lines) + "\n"
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
