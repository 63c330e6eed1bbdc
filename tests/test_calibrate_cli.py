"""parallax-calibrate on localhost: it times the training script's step, runs the calibration job in each mode
and backend and the script itself as a short job in each fixed mode, and writes a calibration that
run_option="AUTO" plans with."""
import importlib.util
import os
import subprocess
import sys
import time

import pytest

import parallax
from parallax.plan import calibration, cost_model
from parallax.plan.planning import plan_job

pytestmark = pytest.mark.slow  # real jobs (what they measure is checked for its kind, not its size)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
DEMO = os.path.join(ROOT, "models", "demo", "train.py")


def _calibrate(out, *command):
    return subprocess.run([sys.executable, "-m", "parallax.tools.calibrate", "-H", "localhost:2", "--out", str(out),
                           "--", sys.executable, *command], cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env=dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2"))


def test_calibrate_writes_what_auto_plans_with(tmp_path):
    done = _calibrate(tmp_path, DEMO, "--resource-spec", "localhost:2")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "[1/" in done.stderr and "wrote" in done.stdout
    cal = calibration.load(os.path.join(tmp_path, calibration.FILE))
    assert {"ps", "allreduce/tf", "allgather/tf"} <= set(cal.machine.cpu_per_byte)
    assert all(v >= 0 for v in [*cal.machine.cpu_per_byte.values(), *cal.machine.cpu_per_message.values()])
    assert 0 < cal.compute_seconds < 10 and 0 < cal.alpha["embedding"] <= 1
    # the script ran as a real job in each fixed mode, and ended after the measured steps
    assert set(cal.in_job) == {"PS", "MPI", "HYBRID"}
    for mode, reports in cal.in_job.items():
        assert [r["worker"] for r in reports] == [0, 1] and all(r["steps"] == 20 and r["wall"] > 0 for r in reports)
        assert all(r["mode"] == mode and r["machine_cpu"] > 0 for r in reports)
    assert "in a PS job:" in done.stdout and "step 200/200" not in done.stdout + done.stderr
    spec = importlib.util.spec_from_file_location("demo_train", DEMO)
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    g = demo.build_graph(32, 0.01)[0]
    config = parallax.Config(run_option="AUTO", log_dir=str(tmp_path))
    plan = plan_job(g, parallax.analyze(g), parallax.ResourceSpec.load("localhost:2"), config)
    assert plan.run_option == "AUTO" and {v.name for v in plan.variables} >= {"embedding", "hidden/kernel"}


def test_a_script_fed_by_placeholders_is_told_to_give_its_step_time(tmp_path):
    done = _calibrate(tmp_path, os.path.join(ROOT, "tests", "launcher_scripts", "job.py"))
    assert done.returncode == 2 and "--compute-seconds" in done.stdout + done.stderr
    assert not os.path.exists(os.path.join(tmp_path, calibration.FILE))


def test_an_auto_job_runs_the_script_again_with_the_shards_it_chose(tmp_path):
    # Serving rows costs CPU: one shard would make one host's server serve every worker (test_auto_plan.py).
    machine = cost_model.Machine(1e12, 0, 1, {"ps": 1e-6}, {})
    path = calibration.Calibration(machine, 0.01, 0.01, {}, 2).save(str(tmp_path))
    out = tmp_path / "parts"
    done = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "launcher_scripts", "auto_partitions.py")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH=ROOT, CALIBRATION=path, OUT=str(out)))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "into 2 shards (the graph has 1); running the script again" in done.stderr
    assert out.read_text() == "2"


def test_launch_options_calibration_cannot_honour_are_refused(capsys):
    from parallax.tools import calibrate
    with pytest.raises(SystemExit) as stopped:
        calibrate.main(["-H", "localhost:2", "--out", "x", "--run-option", "PS", "--dry-run", "--", "python", "t.py"])
    assert stopped.value.code == 2 and "--run-option, --dry-run: parallax-calibrate runs" in capsys.readouterr().err


@pytest.mark.parametrize("given, passed", [("localhost:2", "localhost:2"), ("127.0.0.1:2,127.0.0.2:2", None)])
def test_a_resource_spec_given_as_text_reaches_the_launcher_as_text(given, passed):
    """It was made an absolute path as if it named a file, and every calibration job failed: "resource spec file
    '/cwd/localhost:2' does not exist"."""
    import argparse

    from parallax.tools import calibrate
    args = argparse.Namespace(resource_spec=given, hostfile=None, hosts=None)
    assert calibrate._where(args) == ["--resource-spec", passed or given]


def test_a_resource_spec_file_reaches_the_launcher_as_an_absolute_path(tmp_path, monkeypatch):
    import argparse

    from parallax.tools import calibrate
    (tmp_path / "hosts.spec").write_text("localhost: 0 1\n")
    monkeypatch.chdir(tmp_path)
    args = argparse.Namespace(resource_spec="hosts.spec", hostfile=None, hosts=None)
    assert calibrate._where(args) == ["--resource-spec", str(tmp_path / "hosts.spec")]


@pytest.mark.alone  # it bounds the time a hung job takes to stop
def test_a_calibration_job_that_never_ends_is_stopped_with_its_processes(tmp_path):
    """A hung calibration job ends the calibration with an error after the time limit, and every process the job
    started is stopped (its whole process group), instead of waiting forever."""
    from parallax.errors import ParallaxError
    from parallax.tools import calibrate
    from parallax.launcher.processes import alive
    pid_file = tmp_path / "child.pid"
    fake_python = tmp_path / "python"  # stands in for the launcher: it starts a child and hangs
    fake_python.write_text(f'#!/bin/sh\n[ "$1" = "-c" ] && exit 1\necho started\nsleep 300 &\n'
                           f'echo $! > {pid_file}\nwait\n')
    fake_python.chmod(0o755)
    with pytest.raises(ParallaxError, match=r"the calibration job in PS/tf did not end within 2 s \(stopped\); "
                                            r"its output ends:\nstarted"):
        calibrate.measure_machine(str(fake_python), ["-H", "localhost:1"], dict(os.environ), timeout=2)
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(child)
