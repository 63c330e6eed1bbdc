"""benchmarks/testbed.py's measurement of a job from its workers' log lines, with a stand-in cluster (this process's
own interface counters, no namespaces) and jobs that only print; and benchmarks/peers/tasks.py, which runs a job's
tasks as one such process."""
import json
import os
import sys
import textwrap

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path[:0] = [os.path.join(ROOT, "benchmarks"), os.path.join(ROOT, "benchmarks", "peers")]
import tasks  # noqa: E402
import testbed  # noqa: E402


class StandInCluster:
    num_hosts, slots = 1, 2
    sshd_pids = [os.getpid()]

    def namespace_pids(self, index):
        return []


def printing(lines):
    """A command that prints `lines` (worker, step, rate), one per line, as models/training.py would."""
    text = "\\n".join(f"worker {w} step {s} examples/s {r} loss 1.0" for w, s, r in lines)
    return [sys.executable, "-c", f"print('{text}')"]


def test_a_run_is_measured_from_worker_0s_warm_up_step():
    lines = [(0, 10, 1), (1, 10, 1), (0, 20, 100), (1, 20, 50), (0, 30, 300), (1, 30, 200), (0, 40, 110),
             (1, 40, 40)]
    m = testbed.measure(StandInCluster(), printing(lines), dict(os.environ), "job", steps=40, warmup_steps=10)
    assert m.windows == 3 and m.rate == 150  # the median of the windows' sums 150, 500, 150


def test_a_worker_that_joins_late_moves_the_warm_up_only_when_told():
    lines = [(0, 10, 1), (0, 20, 7), (1, 20, 3), (0, 30, 100), (1, 30, 100), (0, 40, 60), (1, 40, 60)]
    late = testbed.measure(StandInCluster(), printing(lines), dict(os.environ), "job", steps=40, warmup_steps=10,
                           late_workers=True)
    # Worker 0 logged step 20 before worker 1 had logged at all: the measurement starts at its step 30.
    assert late.windows == 1 and late.rate == 120
    on_time = testbed.measure(StandInCluster(), printing(lines), dict(os.environ), "job", steps=40,
                              warmup_steps=10)
    assert on_time.windows == 3 and on_time.rate == 120  # windows 20, 30, 40: 10, 200, 120


def test_a_coordinators_lines_alone_measure_the_whole_job_per_n_of_its_steps():
    """ParameterServerStrategy: only worker 0 (the coordinator) logs, its steps are single workers' steps and its
    rate the job's; the CPU and bytes per step are per N (2 here) of its steps, as a synchronous job's step is."""
    lines = [(0, 20, 1), (0, 40, 300), (0, 60, 100), (0, 80, 200)]
    m = testbed.measure(StandInCluster(), printing(lines), dict(os.environ), "job", steps=80, warmup_steps=20,
                        coordinator=True)
    assert m.windows == 3 and m.rate == 200
    with pytest.raises(RuntimeError, match="no window"):  # without it, every window lacks worker 1
        testbed.measure(StandInCluster(), printing(lines), dict(os.environ), "job", steps=80, warmup_steps=20)


def test_a_job_that_never_reaches_its_last_step_fails_with_its_output():
    with pytest.raises(RuntimeError, match="step 20 examples/s"):
        testbed.measure(StandInCluster(), printing([(0, 10, 1), (1, 10, 1), (0, 20, 5)]), dict(os.environ), "job",
                        steps=40, warmup_steps=10)


def _tasks_file(tmp_path, tasks_):
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps(tasks_))
    return str(path)


def test_tasks_prefix_their_lines_and_the_tasks_not_waited_for_are_ended(tmp_path, capfd):
    pid_file = tmp_path / "server.pid"
    server = textwrap.dedent(f"""
        import os, time
        open({str(pid_file)!r}, "w").write(str(os.getpid()))
        time.sleep(600)""")
    worker = "import time; time.sleep(0.5); print('step 1 words/s 5')"
    status = tasks.run([{"argv": [sys.executable, "-c", server], "prefix": "[ps/0] "},
                        {"argv": [sys.executable, "-c", worker], "prefix": "[worker/0] ", "waited": True}])
    assert status == 0
    assert "[worker/0] step 1 words/s 5" in capfd.readouterr().out
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)


def test_a_failed_task_fails_the_job_with_its_status(tmp_path):
    status = tasks.run([{"argv": [sys.executable, "-c", "import time; time.sleep(600)"]},
                        {"argv": [sys.executable, "-c", "raise SystemExit(3)"], "waited": True}])
    assert status == 3
