"""parallax-launch on this machine: its options, errors, dry run, start-up timeout, and the launcher's pieces that
need no other host (ssh failure wording, host agent, bind shim, local-cluster shapes)."""
import os
import signal
import subprocess
import sys
import time

import pytest

from parallax.errors import LaunchError
from parallax.launcher import host_agent, local_cluster, recorded_pids, rsh_agent, ssh
from parallax.process import bind_shim
from parallax.process.resource_spec import Host, ResourceSpec

pytestmark = pytest.mark.alone  # make test runs it one test at a time: it times the launcher

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
JOB = os.path.join(ROOT, "tests", "launcher_scripts", "job.py")
LAUNCH = [sys.executable, "-m", "parallax.launcher.cli"]


def _cli(*args, timeout=120, env=None):
    full_env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2", **(env or {}))
    return subprocess.run([*LAUNCH, *args], cwd=ROOT, env=full_env, capture_output=True, text=True,
                          timeout=timeout)


def test_the_launcher_imports_no_tensorflow():
    code = ("import sys, parallax.launcher.cli, parallax.launcher.job, parallax.launcher.local_cluster; "
            "assert 'tensorflow' not in sys.modules, 'tensorflow was imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
    started = time.time()
    result = _cli("--help")
    assert result.returncode == 0 and "--local-cluster" in result.stdout and "--dry-run" in result.stdout
    assert time.time() - started < 5


def test_console_script_is_installed():
    script = os.path.join(os.path.dirname(sys.executable), "parallax-launch")
    assert os.access(script, os.X_OK), "parallax-launch is missing: reinstall parallax (make install)"
    assert subprocess.run([script, "--help"], capture_output=True).returncode == 0


def test_dry_run_on_localhost_lists_servers_workers_ports_and_mpirun():
    # The script's own Config asks for PS: the plan (made by running it once) needs one server.
    result = _cli("-H", "localhost:2", "--dry-run", "--", sys.executable, JOB, env={"JOB_RUN_OPTION": "PS"})
    assert result.returncode == 0, result.stderr
    assert "planning: running the script once" in result.stderr
    rows = [line.split() for line in result.stdout.splitlines() if line.startswith("localhost")]
    assert [r[:3] for r in rows] == [["localhost", "ps", "0"], ["localhost", "worker", "0"],
                                     ["localhost", "worker", "1"]]
    assert len({r[3] for r in rows}) == 3 and all(r[3].isdigit() for r in rows)
    assert "mpirun command:" in result.stdout and "-np 2 -H localhost:2" in result.stdout
    mpi = _cli("-H", "localhost:2", "--run-option", "MPI", "--dry-run", "--", sys.executable, JOB,
               env={"JOB_RUN_OPTION": "PS"})
    assert " ps " not in mpi.stdout and "localhost  worker  1" in mpi.stdout  # the plan for MPI needs no server


def test_np_uses_the_first_slots():
    spec = ResourceSpec.load("a:2,b:2,c:2").first_workers(3)
    assert [(h.hostname, h.num_slots) for h in spec.hosts] == [("a", 2), ("b", 1)]
    with pytest.raises(LaunchError.__mro__[1], match="-np 7 asks for 7 workers but the spec has 6 slots"):
        ResourceSpec.load("a:2,b:2,c:2").first_workers(7)
    result = _cli("-H", "localhost:4", "-np", "2", "--run-option", "MPI", "--dry-run", "--", sys.executable, JOB)
    assert "-np 2 -H localhost:2" in result.stdout


@pytest.mark.parametrize("args, message", [
    (["-H", "localhost:2"], "no training command"),
    (["-H", "localhost:2", "-x", "NOT_SET_ANYWHERE_123", "--", "python", "x.py"], "NOT_SET_ANYWHERE_123 is not set"),
    (["-H", "localhost:2", "--ssh-identity-file", "/nonexistent/key", "--", "python", "x.py"], "no such file"),
    (["-H", "localhost:x", "--", "python", "x.py"], "item 1 'localhost:x' is not 'host:slots'"),
    (["--local-cluster", "2by2", "--", "python", "x.py"], "write HOSTSxSLOTS[@RATE]"),
    (["-H", "localhost:2", "-np", "0", "--", "python", "x.py"], "-np 0 asks for 0 workers but the spec has 2 slots"),
    (["-H", "localhost:2", "--stall-warning", "9", "--stall-timeout", "5", "--", sys.executable, JOB],
     "the stall warning (9 s) must come before the stall timeout (5 s)"),
])
def test_bad_input_is_a_clear_error(args, message):
    result = _cli(*args)
    assert result.returncode == 2 and message in result.stderr, result.stderr


def test_missing_script_and_wrong_python_fail_preflight():
    result = _cli("-H", "localhost:2", "--", sys.executable, "/nonexistent/train.py")
    assert result.returncode == 2
    assert "the script /nonexistent/train.py does not exist on this host" in result.stderr
    result = _cli("-H", "localhost:2", "--python", "/usr/bin/false-python", "--", "python", JOB)
    assert result.returncode == 2 and "/usr/bin/false-python" in result.stderr


def test_a_script_that_fails_while_planning_starts_nothing(tmp_path):
    script = tmp_path / "broken.py"
    script.write_text("import parallax\nraise RuntimeError('no data here')\n")
    result = _cli("-H", "localhost:2", "--", sys.executable, str(script))
    assert result.returncode == 2
    assert "LaunchError: planning: the script was run once here to make the job's plan, and it exited 1" in \
        result.stderr and "RuntimeError: no data here" in result.stderr
    assert "launching" not in result.stderr


def test_start_timeout_names_the_processes_that_never_came_up():
    started = time.time()
    result = _cli("-H", "localhost:2", "--run-option", "MPI", "--start-timeout", "3", "--", sys.executable, "-c",
                  "import time; time.sleep(60)")
    assert result.returncode == 1
    assert "start-up timed out: 2 of 2 processes were not up after 3 s" in result.stderr
    assert "localhost/worker/0, localhost/worker/1" in result.stderr
    assert time.time() - started < 30


def test_extra_environment_reaches_the_workers(tmp_path):
    result = _cli("-H", "localhost:2", "--run-option", "MPI", "-x", "JOB_OUT", "-x", "JOB_EXTRA=hello", "--",
                  sys.executable, "-c", "import os, parallax; print('extra', os.environ.get('JOB_EXTRA'), "
                                        "os.environ.get('JOB_OUT'), 'SECRET_TOKEN' in os.environ)",
                  env={"JOB_OUT": str(tmp_path), "SECRET_TOKEN": "x"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(f"extra hello {tmp_path} True") == 2  # local ranks inherit mpirun's environment


def test_ssh_failures_are_classified_with_ssh_words():
    host = Host("node7", (0,), user="alice", ssh_port=2222)
    settings = ssh.SshSettings(identity_file="/keys/id")
    denied = ssh.failure(settings, host, 255, "alice@node7: Permission denied (publickey).")
    assert isinstance(denied, ssh.SshAuthenticationError)
    assert "alice@node7: ssh authentication failed with /keys/id" in str(denied)
    refused = ssh.failure(settings, host, 255, "ssh: connect to host node7 port 2222: Connection refused")
    assert isinstance(refused, ssh.HostUnreachableError) and "(port 2222)" in str(refused)
    missing = ssh.failure(settings, host, 127, "bash: /opt/py/bin/python: No such file or directory",
                          ["/opt/py/bin/python"])
    assert "/opt/py/bin/python` is not there" in str(missing)
    assert ssh.command(settings, host, ["echo", "a b"])[-3:] == ["alice@node7", "--", "echo 'a b'"]
    assert settings.options(host)[settings.options(host).index("-p") + 1] == "2222"


def test_host_agent_stops_only_processes_of_its_job(tmp_path):
    job_dir = tmp_path / "parallax-job-test"
    job_dir.mkdir()
    ours = subprocess.Popen(["sleep", "60"], env=dict(os.environ, PARALLAX_JOB_DIR=str(job_dir)))
    other = subprocess.Popen(["sleep", "60"])
    try:
        (job_dir / "pid.worker.0").write_text(f"h {ours.pid}\n")
        (job_dir / "pid.worker.1").write_text(f"h {other.pid}\n")  # e.g. a pid reused by another program
        survivors = recorded_pids.stop(str(job_dir), ["worker.0", "worker.1", "ps.0"], grace=1)
        assert survivors == {}
        assert ours.wait(timeout=5) == -signal.SIGTERM
        assert other.poll() is None
    finally:
        other.kill()
        ours.kill()
    host_agent.cleanup(str(job_dir))
    assert not job_dir.exists()


def test_bind_shim_environment_names_the_hosts_and_each_server_maps_its_own_port():
    env = bind_shim.environment(ResourceSpec.load("localhost:2"))
    assert bind_shim.ENV_BIND_MAP not in env  # the job has no map: each server process sets its own entry
    assert env[bind_shim.ENV_BIND_HOSTS] == "127.0.0.1"
    assert os.path.isfile(env["LD_PRELOAD"].split()[0])
    assert bind_shim.server_map("localhost:4001") == "4001=127.0.0.1"
    assert bind_shim.server_map("10.1.2.3:4002") == "4002=10.1.2.3"


def test_bind_hosts_end_with_the_launchers_own_address_when_it_is_no_host_of_the_job(monkeypatch):
    # Spec names under .invalid never resolve: stand in for addresses; no packet leaves this machine.
    resolved = {"h1.invalid": "10.9.0.1", "h2.invalid": "10.9.0.2"}
    monkeypatch.setattr(bind_shim, "ipv4", lambda name: resolved[name])
    monkeypatch.setattr(bind_shim, "_is_address_here", lambda address: False)
    monkeypatch.setattr(bind_shim, "source_address", lambda destination: f"route-to-{destination}")
    spec = ResourceSpec.load("h1.invalid:1,h2.invalid:1")
    assert bind_shim.host_addresses(spec) == ["10.9.0.1", "10.9.0.2", "route-to-10.9.0.1"]
    monkeypatch.setattr(bind_shim, "_is_address_here", lambda address: address == "10.9.0.2")
    assert bind_shim.host_addresses(spec) == ["10.9.0.1", "10.9.0.2"]


def test_rsh_agent_exports_the_shim_before_the_daemon_command():
    words = [" orted", "-mca", "ess", '"env"', "-mca", "orte_hnp_uri", '"1.0;tcp://10.0.0.1:5"']
    command = rsh_agent.remote_command(words, {"LD_PRELOAD": "/x/shim.so", "PARALLAX_BIND_HOSTS": "10.0.0.2"})
    assert command == ("export LD_PRELOAD=/x/shim.so; export PARALLAX_BIND_HOSTS=10.0.0.2;  orted -mca ess "
                       '"env" -mca orte_hnp_uri "1.0;tcp://10.0.0.1:5"')


def test_local_cluster_shapes_and_root_requirement(monkeypatch):
    assert local_cluster.parse_shape("2x2@1gbit") == (2, 2, "1gbit")
    assert local_cluster.parse_shape("3x1") == (3, 1, None)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(LaunchError, match="a local cluster needs root"):
        local_cluster.check_available()
