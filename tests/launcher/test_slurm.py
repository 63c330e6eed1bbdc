"""parallax-launch inside a Slurm allocation: hosts from SLURM_JOB_NODELIST (expanded by the real `scontrol`, from
Debian's slurm-client), slots from SLURM_NTASKS_PER_NODE or SLURM_TASKS_PER_NODE. No Slurm daemon runs: scontrol
expands host lists from a configuration file alone, and the allocation's variables are set as Slurm sets them."""
import os
import subprocess
import sys

import pytest

from parallax.errors import ResourceSpecError
from parallax.launcher import slurm

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
JOB = os.path.join(ROOT, "tests", "launcher_scripts", "job.py")


@pytest.fixture
def slurm_conf(tmp_path):
    """A minimal configuration: without one, scontrol looks for its controller in DNS."""
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=parallaxtest\nSlurmctldHost=localhost\nNodeName=localhost CPUs=2 State=UNKNOWN\n"
                    "PartitionName=debug Nodes=localhost Default=YES State=UP\n")
    return str(conf)


@pytest.mark.parametrize("text, nodes, counts", [
    ("2", 3, [2, 2, 2]), ("2(x3)", 3, [2, 2, 2]), ("4(x2),1", 3, [4, 4, 1]), ("1,2,3", 3, [1, 2, 3])])
def test_tasks_per_node_expanded(text, nodes, counts):
    assert slurm.tasks_per_node(text, nodes) == counts


@pytest.mark.parametrize("text, nodes, message", [
    ("2(x2)", 3, "gives 2 counts for 3 nodes"), ("two", 1, "cannot read 'two'"), ("0", 1, "at least one task")])
def test_bad_tasks_per_node_named(text, nodes, message):
    with pytest.raises(ResourceSpecError, match=message):
        slurm.tasks_per_node(text, nodes)


def test_the_real_scontrol_expands_the_nodelist(monkeypatch, slurm_conf):
    monkeypatch.setenv("SLURM_CONF", slurm_conf)
    text, found = slurm.hostfile_text({"SLURM_JOB_NODELIST": "node[1-2],gpu[07-08]", "SLURM_JOB_ID": "7",
                                       "SLURM_TASKS_PER_NODE": "2(x2),1(x2)"})
    assert text == "node1 slots=2\nnode2 slots=2\ngpu07 slots=1\ngpu08 slots=1\n"
    assert found.startswith("Slurm allocation 7: node1 x2, node2 x2, gpu07 x1, gpu08 x1")


def _cli(env, *args):
    full = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2", **env)
    for name in [n for n in full if n.startswith("SLURM_") and n not in env]:
        del full[name]
    return subprocess.run([sys.executable, "-m", "parallax.launcher.cli", *args, "--", sys.executable, JOB],
                          cwd=ROOT, env=full, capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # a real job
def test_a_job_inside_an_allocation_runs_on_its_hosts_and_slots(slurm_conf, tmp_path):
    result = _cli({"SLURM_CONF": slurm_conf, "SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "localhost",
                   "SLURM_NTASKS_PER_NODE": "2", "SLURM_TASKS_PER_NODE": "1", "JOB_OUT": str(tmp_path)},
                  "--run-option", "MPI", "-x", "JOB_OUT")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "parallax-launch: Slurm allocation 42: localhost x2 (SLURM_JOB_NODELIST=localhost, " \
           "SLURM_NTASKS_PER_NODE=2)" in result.stderr
    assert "[localhost/worker/0] worker 0 loss" in result.stdout and "[localhost/worker/1] worker 1 loss" in \
        result.stdout


@pytest.mark.slow  # a real job
def test_remote_allocation_hosts_are_reached_like_hostfile_hosts(slurm_conf):
    result = _cli({"SLURM_CONF": slurm_conf, "SLURM_JOB_ID": "43", "SLURM_JOB_NODELIST": "n1.invalid,n2.invalid",
                   "SLURM_TASKS_PER_NODE": "2(x2)"}, "--dry-run")
    assert "Slurm allocation 43: n1.invalid x2, n2.invalid x2" in result.stderr, result.stderr
    assert result.returncode == 2 and "n1.invalid" in result.stderr.split("Slurm allocation")[1]


def test_no_hosts_and_no_allocation_is_a_clear_error():
    result = _cli({})
    assert result.returncode == 2 and "where should the job run?" in result.stderr
