"""What every benchmark prints first and how it reports: the machine, the settings, medians and ratios."""
import os
import platform
import statistics
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
RESULTS = os.path.join(ROOT, "benchmarks", "results")


def machine(with_commit=True):
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    import tensorflow as tf
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
    return (f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB; Linux {platform.release()}; Python "
            f"{platform.python_version()}; TensorFlow {tf.__version__}" + (f"; parallax at {commit()}" if with_commit
                                                                           else ""))


def commit():
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    return git.strip() or "?"


def header(title, settings):
    lines = [f"# {title}", "", f"Machine: {machine()}", "", "Settings: " + ", ".join(f"{k}={v}" for k, v in
                                                                                  settings.items()), ""]
    print("\n".join(lines), flush=True)
    return lines


def median(values):
    return statistics.median(values)


def kept_section(name, heading):
    """The lines of results/`name` from the line `heading` on (a blank line first), or none: the hand-written
    analysis a benchmark's rerun keeps below its new tables."""
    path = os.path.join(RESULTS, name)
    text = open(path).read() if os.path.exists(path) else ""
    at = text.find("\n" + heading + "\n")
    return ["", *text[at + 1:].rstrip("\n").split("\n")] if at >= 0 else []


def write(name, lines):
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, name)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {os.path.relpath(path, ROOT)}", file=sys.stderr)
    return path
