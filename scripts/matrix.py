"""`make matrix`: parallax on every TensorFlow minor release from 2.15 to 2.21 that the package index has, on Python
3.10, 3.12 and 3.13 where that release has wheels. Each cell is a fresh virtualenv with `pip install -e ".[test]"`
and that TF (with its tf_keras from 2.16 on), then a smoke suite: `import parallax`, explain's plan executed, and one
equivalence case per mode (MPI, PS, HYBRID) on 2 workers with TF's collectives. The table goes to
docs/compatibility.md, each failure with its first line. Not part of CI: it downloads about 15 TensorFlows.

    python scripts/matrix.py [--tf 2.15,2.21] [--python 3.12] [--keep]

A cell's virtualenv is removed after it (--keep leaves them in /tmp/parallax-matrix). Plain Python."""
import argparse
import datetime
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
WORK = "/tmp/parallax-matrix"
OUT = os.path.join(ROOT, "docs", "compatibility.md")
# The Pythons each TF minor release publishes wheels for (pypi.org/project/tensorflow, "Download files").
PYTHONS = {"2.15": "3.9-3.11", "2.16": "3.9-3.12", "2.17": "3.9-3.12", "2.18": "3.9-3.12", "2.19": "3.9-3.12",
           "2.20": "3.9-3.13", "2.21": "3.10-3.13"}
WANTED_PYTHONS = ("3.10", "3.12", "3.13")
SMOKE = ["tests/test_explain.py::test_explained_plan_is_the_plan_executed",
         "tests/equivalence/test_mpi.py::test_mpi_equivalence[linear-2]",
         "tests/equivalence/test_ps.py::test_ps_equivalence[linear-2]",
         "tests/equivalence/test_hybrid.py::test_hybrid_equivalence[linear-2]"]


def supports(tf_minor, python):
    low, high = PYTHONS[tf_minor].split("-")
    key = lambda v: tuple(map(int, v.split(".")))  # noqa: E731
    return key(low) <= key(python) <= key(high)


def _version(cell):
    return tuple(tuple(map(int, v.split("."))) for v in cell)


def find_python(version):
    """pythonX.Y on PATH if it runs, else pyenv's own build (as scripts/install.sh finds it)."""
    found = shutil.which(f"python{version}")
    if found and subprocess.run([found, "-c", ""], capture_output=True).returncode == 0:
        return found
    versions = os.path.join(os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv")), "versions")
    builds = sorted((v for v in os.listdir(versions) if v.startswith(version + ".")),
                    key=lambda v: tuple(map(int, v.split(".")))) if os.path.isdir(versions) else []
    return os.path.join(versions, builds[-1], "bin", f"python{version}") if builds else None


def run(cmd, log, env=None, timeout=1800):
    """Run `cmd`, its output appended to `log`; (ok, the first line that says what failed)."""
    with open(log, "a") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        try:
            done = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=ROOT, timeout=timeout)
        except subprocess.TimeoutExpired:
            return False, f"{cmd[2] if len(cmd) > 2 else cmd[0]} did not end within {timeout} s"
    return done.returncode == 0, None if done.returncode == 0 else _first_failure(log)


def _first_failure(log):
    lines = open(log).read().splitlines()
    for pattern in (r"^E\s+\S*(Error|Exception)\b.*", r"^ERROR: .*", r"^\w+(Error|Exception): .*", r"^FAILED .*"):
        found = next((line for line in lines if re.match(pattern, line)), None)
        if found:
            return re.sub(r"\s+", " ", re.sub(r"^E\s+", "", found)).strip()[:200]
    return (lines[-1] if lines else "no output")[:200]


def cell(tf_minor, python, keep):
    """(status, TF version installed, note) of one cell."""
    py = find_python(python)
    if py is None:
        return "not run", "", f"no python{python} here (pyenv install {python})"
    venv = os.path.join(WORK, f"tf{tf_minor}-py{python}")
    log = venv + ".log"
    shutil.rmtree(venv, ignore_errors=True)
    open(log, "w").close()
    pip = [os.path.join(venv, "bin", "python"), "-m", "pip", "install", "-q"]
    wanted = [f"tensorflow=={tf_minor}.*"] + ([f"tf_keras=={tf_minor}.*"] if tf_minor != "2.15" else [])
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TF_USE_LEGACY_KERAS")}
    steps = [[py, "-m", "venv", venv], pip + ["--upgrade", "pip"], pip + wanted + ["-e", ".[test]"],
             [os.path.join(venv, "bin", "python"), "-c", "import parallax"],
             [os.path.join(venv, "bin", "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", *SMOKE]]
    try:
        for step in steps:
            ok, why = run(step, log, env)
            if not ok:
                return "FAIL", _installed_tf(venv), why
        return "pass", _installed_tf(venv), ""
    finally:
        if not keep:
            shutil.rmtree(venv, ignore_errors=True)


def _installed_tf(venv):
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        return ""
    done = subprocess.run([python, "-c", "import tensorflow as tf; print(tf.__version__)"], capture_output=True,
                          text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    return done.stdout.strip().splitlines()[-1] if done.returncode == 0 and done.stdout.strip() else ""


def write_table(results):
    rows = ["| TensorFlow | " + " | ".join(f"Python {p}" for p in WANTED_PYTHONS) + " |",
            "|---|" + "---|" * len(WANTED_PYTHONS)]
    notes = []
    for tf_minor in sorted(PYTHONS, key=lambda v: tuple(map(int, v.split(".")))):
        cells = []
        for python in WANTED_PYTHONS:
            if not supports(tf_minor, python):
                cells.append("no wheels")
                continue
            status, version, why = results.get((tf_minor, python), ("not run", "", "not asked for in this run"))
            label = f"{status} ({version})" if version else status
            if why:
                notes.append(f"- TF {tf_minor}, Python {python}: {why}")
            cells.append(label)
        rows.append(f"| {tf_minor} | " + " | ".join(cells) + " |")
    today = datetime.date.today().isoformat()
    text = [HEADER.format(date=today, smoke="\n".join(f"- `{t}`" for t in SMOKE)), *rows, ""]
    text += ["## Failures and cells not run", "", *(notes or ["None."]), ""]
    with open(OUT, "w") as f:
        f.write("\n".join(text))


HEADER = """# Compatibility: TensorFlow x Python

Measured by `make matrix` (scripts/matrix.py) on {date}, on this repository's machine (Debian, x86-64, CPU only).
Each cell is a fresh virtualenv: `pip install "tensorflow==2.X.*" "tf_keras==2.X.*" -e ".[test]"` (tf_keras from
2.16 on, where TF's own Keras is Keras 3), then `import parallax` and this smoke suite:
{smoke}

"pass" means all of them passed, with the TF version in brackets; "no wheels" that TensorFlow publishes none for that
Python. CI itself runs TF 2.15.1 on Python 3.11 (with Horovod) and TF 2.21.0 on Python 3.12 (the whole suite each).
"""


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tf", default=",".join(PYTHONS), help="TF minor releases, comma-separated")
    parser.add_argument("--python", default=",".join(WANTED_PYTHONS), help="Python versions, comma-separated")
    parser.add_argument("--keep", action="store_true", help="keep each cell's virtualenv in " + WORK)
    args = parser.parse_args(argv)
    os.makedirs(WORK, exist_ok=True)
    unknown = [v for v in args.tf.split(",") if v not in PYTHONS]
    if unknown:
        parser.error(f"--tf {','.join(unknown)}: not among {', '.join(PYTHONS)}")
    cells = [(t, p) for t in args.tf.split(",") for p in args.python.split(",")
             if p in WANTED_PYTHONS and supports(t, p)]
    # every TF release once first (on its newest Python), then the other Pythons: a run cut short covers each TF
    cells.sort(key=lambda c: (c != max(((c[0], p) for p in WANTED_PYTHONS if supports(c[0], p)), key=_version),
                              _version(c)))
    results = {}
    for k, (tf_minor, python) in enumerate(cells, 1):
        start = time.monotonic()
        print(f"[matrix] {k}/{len(cells)}: TF {tf_minor}, Python {python} ...", flush=True)
        results[(tf_minor, python)] = status, version, why = cell(tf_minor, python, args.keep)
        print(f"[matrix] TF {tf_minor} ({version or '?'}), Python {python}: {status} in "
              f"{time.monotonic() - start:.0f} s{': ' + why if why else ''} (log {WORK}/tf{tf_minor}-py{python}.log)",
              flush=True)
        write_table(results)  # after each cell, so that an interrupted run keeps what it measured
    print(f"[matrix] wrote {OUT}")
    return 0 if all(r[0] == "pass" for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
