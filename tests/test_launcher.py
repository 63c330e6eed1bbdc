"""get_runner as a launcher: real mpirun jobs on localhost, their identities, output, failures and teardown."""
import glob
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from parallax.errors import UnsupportedError
from parallax.launcher import mpirun, processes, rsh_agent
from parallax.launcher.ssh import SshSettings
from parallax.process.resource_spec import ResourceSpec

pytestmark = pytest.mark.slow  # real jobs (those that time a teardown are marked alone too)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
JOB = os.path.join(ROOT, "tests", "launcher_scripts", "job.py")
_STARTED = []  # the launchers this module's tests started (Popen), so that a test that fails leaves no job behind


@pytest.fixture(autouse=True)
def _no_job_outlives_its_test():
    """A test that fails before it ends its job (a hanging one, while it waits for the workers) still takes the job
    down: SIGTERM to the launcher it started, which tears down every process of the job, then SIGKILL of the
    launcher's own process group if it does not end within 60 s."""
    yield
    while _STARTED:
        proc = _STARTED.pop()
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()


def _start(env_extra, tmp_path):
    # TMPDIR puts the launcher's job directory, where every process records its pid, under tmp_path.
    (tmp_path / "jobs").mkdir(exist_ok=True)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT, JOB_OUT=str(tmp_path),
               TMPDIR=str(tmp_path / "jobs"))
    env.update(env_extra)  # may replace PYTHONPATH; None removes a variable
    env = {k: v for k, v in env.items() if v is not None}
    proc = subprocess.Popen([sys.executable, JOB], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    _STARTED.append(proc)
    return proc


def _finish(proc, timeout=120):
    """(exit code, output) of a job; one that outlives `timeout` gets SIGTERM, so the launcher tears its processes
    down and prints its report, then the test fails with the output's tail (SIGKILL of the job's own process
    group only if the launcher does not end within 60 s)."""
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
        raise AssertionError(f"the job did not end within {timeout} s; ended by SIGTERM (exit {proc.returncode})\n"
                             f"--- output (tail) ---\n{out[-6000:]}") from None
    return proc.returncode, out


def _worker_pids(tmp_path):
    pids = []
    for name in os.listdir(tmp_path):
        if name.startswith("identity."):
            pids.append(int(open(tmp_path / name).read().split()[3]))
    return pids


def _recorded_pids(tmp_path, pattern):
    """{file name: pid} of the processes the running job recorded (the job directory is removed at the end)."""
    found = {}
    for path in glob.glob(str(tmp_path / "jobs" / "parallax-job-*" / pattern)):
        try:
            found[os.path.basename(path)] = int(open(path).read().split()[1])
        except (OSError, IndexError, ValueError):
            pass
    return found


def _wait_for(predicate, timeout=90):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError("timed out waiting")


def _assert_all_gone(pids, within=10.0):
    deadline = time.time() + within
    alive = pids
    while time.time() < deadline:
        alive = [p for p in pids if processes.alive(p)]
        if not alive:
            return
        time.sleep(0.2)
    raise AssertionError(f"processes left running: {alive}")


def test_two_worker_job_identities_and_prefixed_output(tmp_path):
    code, out = _finish(_start({}, tmp_path))
    assert code == 0, out
    identities = sorted(open(tmp_path / f"identity.{r}").read().split()[:3] for r in range(2))
    assert identities == [["0", "2", "True"], ["1", "2", "False"]]
    assert "[localhost/worker/0] worker 0 loss" in out and "[localhost/worker/1] worker 1 loss" in out
    assert "all 2 processes up" in out
    losses = set(re.findall(r"worker \d+ loss (\S+)", out))
    assert len(losses) == 1  # both replicas hold the same values after the step
    _assert_all_gone(_worker_pids(tmp_path))


def test_log_dir_gets_one_file_per_rank(tmp_path):
    logs = tmp_path / "logs"
    code, out = _finish(_start({"JOB_LOG_DIR": str(logs)}, tmp_path))
    assert code == 0, out
    assert sorted(os.listdir(logs)) == ["plan.json", "plan.txt", "worker.0.localhost.log", "worker.1.localhost.log"]
    assert "worker 1 loss" in (logs / "worker.1.localhost.log").read_text()
    assert "[localhost/worker" not in out


def test_a_failing_rank_stops_the_job_and_is_named(tmp_path):
    # Rank 0 goes on to a second step and fails too, in the allreduce rank 1 left: the first failure is named.
    code, out = _finish(_start({"JOB_FAIL_RANK": "1"}, tmp_path))
    assert code == 1
    assert "job failed: localhost/worker/1 failed first: RuntimeError: deliberate failure" in out
    _assert_all_gone(_worker_pids(tmp_path))


def test_a_second_get_runner_in_a_worker_fails_the_job_naming_the_mistake(tmp_path):
    # Its servers, collectives and the launcher's count of its steps belong to the first Runner: a second one would
    # hang, or end the job with a miscount ("stopped after 0 synchronized steps").
    code, out = _finish(_start({"JOB_TWICE": "1"}, tmp_path))
    assert code == 1, out[-3000:]
    assert re.search(r"worker/\d failed first: UnsupportedError: parallax.get_runner was called a second time in "
                     r"worker \d of 2", out), out[-3000:]
    assert "synchronized steps" not in out and "Traceback" not in out
    _assert_all_gone(_worker_pids(tmp_path))


def test_a_users_mistake_in_a_self_launched_script_is_one_clean_line(tmp_path):
    code, out = _finish(_start({"JOB_SPEC": "nohost.invalid:x"}, tmp_path))
    assert code == 1
    assert "parallax: error: ResourceSpecError: <string>:1: cannot parse 'nohost.invalid:x'" in out, out[-3000:]
    assert "Traceback" not in out


def test_the_console_shows_each_of_tfs_info_lines_once_per_job(tmp_path):
    """TF's INFO lines (its notes at import) came once per worker, and on TF 2.21 with TF's collectives a warning
    that a step's rendezvous was cleaned up, many times a job. The launcher gives its processes
    TF_CPP_MIN_LOG_LEVEL=1 unless the user set a level (TF 2.15 then prints none; TF 2.21 prints its notes at import
    whatever the level), and the console shows each of TF's INFO statements once per job, and each WARNING once but
    for its numbers (launcher/tf_notes.py). With the user's level 0, every worker prints the same notes, and the
    console still shows each once."""
    def worker_lines(level):
        env = {"JOB_TF_LOG_AS_IS": "1", "JOB_BACKEND": "tf", "TF_CPP_MIN_LOG_LEVEL": level}
        code, out = _finish(_start(env, tmp_path))
        assert code == 0, out[-3000:]
        lines = [line for line in out.splitlines() if line.startswith("[localhost/worker/")]
        warnings = [(m.group(1), re.sub(r"\d+", "N", m.group(2))) for m in map(TF_WARNING.search, lines) if m]
        return [m.group(1) for m in map(TF_INFO.search, lines) if m], warnings
    for level in (None, "0"):
        places, warnings = worker_lines(level)
        assert len(places) == len(set(places)), (level, places)
        assert len(warnings) == len(set(warnings)), (level, warnings)
    assert places, "with the user's level 0, the workers print TF's INFO lines"


# TF's INFO line, as TF 2.15 (`2026-12-04 20:22:41.090198: I tensorflow/...cc:113] ...`) and absl in TF 2.21
# (`I0000 00:00:1796413426.284160    3515 port.cc:153] ...`) print it; the group is the statement's place.
TF_INFO = re.compile(r"(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: I |I\d{4} \d\d:\d\d:[\d.]+ +\d+ )(\S+:\d+)\] ")
# and its WARNING line: the statement's place and the text.
TF_WARNING = re.compile(r"(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: W |W\d{4} \d\d:\d\d:[\d.]+ +\d+ )(\S+:\d+)\] (.*)")


@pytest.mark.alone  # it times the teardown
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_to_the_launcher_tears_everything_down(tmp_path, sig):
    proc = _start({"JOB_HANG": "1"}, tmp_path)
    deadline = time.time() + 90
    while len(_worker_pids(tmp_path)) < 2 and time.time() < deadline:
        time.sleep(0.5)
    pids = _worker_pids(tmp_path)
    assert len(pids) == 2, "workers did not start"
    os.kill(proc.pid, sig)
    code, out = _finish(proc, timeout=60)
    assert code == 128 + sig, out
    assert "all processes torn down" in out
    _assert_all_gone(pids)


def test_graph_mismatch_stops_the_job_naming_the_node(tmp_path):
    code, out = _finish(_start({"JOB_MISMATCH_RANK": "1"}, tmp_path))
    assert code != 0
    assert "GraphMismatchError: worker 1 built a different rewritten graph than worker 0" in out
    assert "first differing node: 'mul/y'" in out  # the first node rank 1 made differently, in creation order


def test_a_worker_whose_graph_differs_from_the_plan_is_refused_before_training(tmp_path):
    code, out = _finish(_start({"JOB_WIDER_RANK": "1"}, tmp_path))
    assert code != 0
    assert ("GraphMismatchError: worker 1's graph differs from the job's plan at variable 'b': shape (2,) here, "
            "(1,) in the plan") in out
    assert "worker 1 loss" not in out and "started worker 1" not in out


def test_mpirun_command_line():
    spec = ResourceSpec.load("localhost:2")
    cmd = mpirun.mpirun_command(spec, ["python", "train.py", "--x"], ["PARALLAX_ROLE"])
    joined = " ".join(cmd)
    assert "-np 2 -H localhost:2" in joined and "--tag-output" in joined and "--bind-to none" in joined
    assert "-x PARALLAX_ROLE" in joined and "-x PATH" in joined and "plm_rsh_args" not in joined
    assert cmd[-3:] == ["python", "train.py", "--x"]
    assert ("--allow-run-as-root" in cmd) == (os.geteuid() == 0)
    remote = ResourceSpec.load("h1:2,h2:2")
    cmd = mpirun.mpirun_command(remote, ["p"], [], SshSettings(2222, "/k"))
    assert cmd[cmd.index("plm_rsh_agent") + 1].endswith("-m parallax.launcher.rsh_agent") and "h1:2,h2:2" in cmd
    # The agent's ssh options travel in mpirun's environment, with the bind shim's variables for the daemons.
    agent = json.loads(mpirun.agent_environment(remote, SshSettings(2222, "/k"), {"LD_PRELOAD": "/s.so"})[
        rsh_agent.ENV_AGENT])
    assert " ".join(agent["ssh"]).count("-p 2222 -i /k") == 1 and "BatchMode=yes" in agent["ssh"]
    assert agent["env"] == {"LD_PRELOAD": "/s.so"}
    assert mpirun.agent_environment(spec, SshSettings(2222, "/k"), {}) == {}
    # A port given per host in the spec reaches mpirun's agent too; different ports cannot.
    spec_2200 = ResourceSpec.load("u@h1:2200:1,u@h2:2200:1")
    agent = json.loads(mpirun.agent_environment(spec_2200, SshSettings(), {})[rsh_agent.ENV_AGENT])
    assert "-p 2200" in " ".join(agent["ssh"])
    with pytest.raises(UnsupportedError, match="different ssh ports"):
        mpirun.mpirun_command(ResourceSpec.load("u@h1:2200:1,u@h2:2201:1"), ["p"], [], SshSettings())


PS_SPEC = "127.0.0.1: 0\n127.0.0.2: 0"  # two loopback hosts: two parameter servers


def test_ps_job_runs_and_its_servers_are_stopped_after_the_workers(tmp_path):
    proc = _start({"JOB_RUN_OPTION": "PS", "JOB_SPEC": PS_SPEC}, tmp_path)
    servers = _wait_for(lambda: (lambda p: p if len(p) == 2 else None)(_recorded_pids(tmp_path, "pid.ps.*")))
    code, out = _finish(proc)
    assert code == 0, out
    assert "[127.0.0.1/ps/0] serving ps task 0 at 127.0.0.1:" in out
    assert "[127.0.0.2/ps/1] serving ps task 1 at 127.0.0.2:" in out
    assert "2 workers and 2 parameter server(s) (PS)" in out
    losses = set(re.findall(r"worker \d+ loss (\S+)", out))
    assert len(losses) == 1
    _assert_all_gone(list(servers.values()) + _worker_pids(tmp_path))


def test_the_launcher_starts_only_the_servers_the_plan_needs(tmp_path):
    # HYBRID on a model without sparse variables: all AllReduce, no server, although the spec has two hosts.
    code, out = _finish(_start({"JOB_RUN_OPTION": "HYBRID", "JOB_SPEC": PS_SPEC}, tmp_path))
    assert code == 0, out
    assert "parameter server" not in out and "/ps/" not in out and not _recorded_pids(tmp_path, "pid.ps.*")


@pytest.mark.parametrize("run_option", ["PS", "HYBRID"])
def test_a_one_slot_job_of_a_command_that_cannot_be_planned_starts_no_server(tmp_path, run_option):
    # A shell wrapper cannot be run once to plan; its one worker plans for itself, as one device: no server.
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=ROOT, JOB_OUT=str(tmp_path), JOB_SPARSE="1",
               JOB_RUN_OPTION=run_option, JOB_SPEC="localhost:1", TMPDIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "parallax.launcher.cli", "-H", "localhost:1", "--", "bash", "-c",
                           f"{sys.executable} {JOB}"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "launching 1 worker (" in done.stderr and "parameter server" not in done.stderr + done.stdout
    assert "worker 0 loss" in done.stdout + done.stderr


def test_profiled_step_traces_every_worker_and_the_servers_it_used(tmp_path):
    import json
    logs = tmp_path / "logs"
    code, out = _finish(_start({"JOB_RUN_OPTION": "PS", "JOB_SPEC": PS_SPEC, "JOB_PROFILE": "1",
                                "JOB_LOG_DIR": str(logs)}, tmp_path))
    assert code == 0, out
    assert sorted(p.name for p in logs.glob("trace.*")) == ["trace.worker0.step2.json", "trace.worker1.step2.json"]
    events = json.loads((logs / "trace.worker0.step2.json").read_text())["traceEvents"]
    lanes = {e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert {"/job:ps/replica:0/task:0/device:CPU:0 Compute", "/job:worker/replica:0/task:0/device:CPU:0 Compute"} \
        <= lanes, lanes


def test_a_dying_server_stops_the_job_and_is_named(tmp_path):
    proc = _start({"JOB_RUN_OPTION": "PS", "JOB_SPEC": PS_SPEC, "JOB_HANG": "1"}, tmp_path)
    _wait_for(lambda: len(_worker_pids(tmp_path)) == 2)
    servers = _recorded_pids(tmp_path, "pid.ps.*")
    os.kill(servers["pid.ps.1"], signal.SIGKILL)
    code, out = _finish(proc, timeout=60)
    assert code != 0
    assert "job failed: 127.0.0.2/ps/1 was killed by signal 9 (SIGKILL) while the workers ran" in out
    _assert_all_gone(list(servers.values()) + _worker_pids(tmp_path))


def test_a_failing_worker_in_ps_mode_stops_the_servers_too(tmp_path):
    proc = _start({"JOB_RUN_OPTION": "PS", "JOB_SPEC": PS_SPEC, "JOB_FAIL_RANK": "1"}, tmp_path)
    servers = _wait_for(lambda: (lambda p: p if len(p) == 2 else None)(_recorded_pids(tmp_path, "pid.ps.*")))
    code, out = _finish(proc)
    assert code == 1 and "job failed: 127.0.0.2/worker/1 failed first" in out and "deliberate failure on worker 1" in out
    _assert_all_gone(list(servers.values()) + _worker_pids(tmp_path))


@pytest.mark.alone  # it times the teardown
def test_a_killed_launcher_takes_its_whole_job_down(tmp_path):
    """SIGKILL cannot be handled; the children's parent-death signal still stops servers, mpirun and workers."""
    proc = _start({"JOB_RUN_OPTION": "PS", "JOB_SPEC": PS_SPEC, "JOB_HANG": "1"}, tmp_path)
    _wait_for(lambda: len(_worker_pids(tmp_path)) == 2)
    everything = list(_recorded_pids(tmp_path, "pid.*").values())
    assert len(everything) == 4  # 2 workers, 2 servers
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    _assert_all_gone(everything, within=20)


@pytest.mark.parametrize("run_option, spec", [("MPI", "localhost:2"), ("PS", PS_SPEC)])
def test_chief_checkpoints_restore_into_the_unmodified_graph(tmp_path, run_option, spec):
    import numpy as np
    import tensorflow as tf
    ckpt = tmp_path / "ckpt"
    code, out = _finish(_start({"JOB_RUN_OPTION": run_option, "JOB_SPEC": spec, "JOB_CKPT": str(ckpt)}, tmp_path))
    assert code == 0, out
    trained = np.load(tmp_path / "w.npy")
    g = tf.Graph()
    with g.as_default():  # job.py's variable, in a plain single-device graph
        w = tf.compat.v1.get_variable("w", [2, 1], initializer=tf.compat.v1.zeros_initializer(), use_resource=True)
        with tf.compat.v1.Session() as sess:
            tf.compat.v1.train.Saver([w]).restore(sess, tf.compat.v1.train.latest_checkpoint(str(ckpt)))
            restored = sess.run(w)
    np.testing.assert_array_equal(restored, trained)
    assert np.any(trained != 0)  # two training steps happened


def test_a_taken_port_is_an_error_naming_the_host_and_port():
    import socket
    from parallax.runtime.tf_server import start_tf_server
    from parallax.errors import LaunchError
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(LaunchError, match=f"ps task 0 cannot start its TF server: port {port} on 127.0.0.1 is "
                                              f"taken by another process"):
            start_tf_server({"ps": [f"127.0.0.1:{port}"]}, "ps", 0)
        env = dict(os.environ, PYTHONPATH=ROOT, PARALLAX_ROLE="server", PARALLAX_PS_TASK="0",
                   PARALLAX_CLUSTER=f'{{"ps": ["127.0.0.1:{port}"]}}')
        server = subprocess.run([sys.executable, "-m", "parallax.runtime.ps_server"], env=env, capture_output=True,
                                text=True, timeout=120)
    assert server.returncode == 1
    assert f"parallax.runtime.ps_server: LaunchError: ps task 0 cannot start its TF server: port {port} on 127.0.0.1" \
        in server.stderr, server.stderr
