"""The original Parallax's front end without a job: Config assigned field by field, the original's config classes
translated (each field honoured or warned about, never an error), its resource-info format, the per-replica
session's feeds, and the parallax.shard / parallax.partition / parallax.log names."""
import logging
import os
import signal
import subprocess
import sys

import pytest

import parallax
from parallax.config import translate
from parallax.legacy import run as legacy_run
from parallax.errors import ConfigError, ParallaxError

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def test_fields_assigned_after_construction_are_checked_at_once_and_combinations_at_start():
    config = parallax.Config()
    config.run_option = "PS"
    config.save_checkpoint_steps = 5  # checkpoint_dir comes next: the order of assignments does not matter
    config.checkpoint_dir = "/tmp/ckpt"
    config.check_combinations()
    assert config == parallax.Config(run_option="PS", save_checkpoint_steps=5, checkpoint_dir="/tmp/ckpt")
    with pytest.raises(ConfigError, match="run_option='X' is not allowed"):
        config.run_option = "X"
    assert config.run_option == "PS"  # a refused value leaves the field as it was
    with pytest.raises(ConfigError, match="Config has no field 'run_optoin'"):
        config.run_optoin = "MPI"
    config.checkpoint_dir = None
    with pytest.raises(ConfigError, match="save_checkpoint_steps is set but Config.checkpoint_dir is None"):
        config.check_combinations()


def _original_config(**ps):
    config = parallax.Config()
    config.run_option = "HYBRID"
    config.average_sparse = False
    config.communication_config = parallax.CommunicationConfig(
        parallax.PSConfig(**{"replicate_variables": False, **ps}), parallax.MPIConfig(mpirun_options="-mca x y"))
    config.ckpt_config = parallax.CheckPointConfig(ckpt_dir="/tmp/c", save_ckpt_steps=10, save_ckpt_secs=60)
    config.profile_config = parallax.ProfileConfig(profile_dir="/tmp/p", profile_steps=[3], profile_range=(5, 6))
    config.search_partitions = True
    config.export_graph_path = "/tmp/g"
    return config


def test_the_original_fields_become_config_fields_or_one_warning_each():
    t = translate(_original_config(local_aggregation=False, boundary_among_servers=False,
                                                 protocol="grpc+verbs"))
    c = t.config
    assert (c.run_option, c.average_sparse, c.local_aggregation, c.place_post_aggregation_ops,
            c.place_boundary_ops) == ("HYBRID", False, False, False, True)
    assert (c.checkpoint_dir, c.save_checkpoint_steps, c.log_dir, c.profile_steps) == \
        ("/tmp/c", 10, "/tmp/p", (3, 5, 6))
    assert t.save_checkpoint_secs == 60 and t.export_graph_path == "/tmp/g"
    warned = "\n".join(t.warnings)
    for field in ("ps_config.protocol='grpc+verbs'", "mpi_config.mpirun_options='-mca x y'", "search_partitions"):
        assert f"parallax: {field}" in warned
    assert len(t.warnings) == 3 and not c.legacy


def test_original_fields_that_contradict_each_other_are_warnings_not_errors():
    config = parallax.Config()
    config.ckpt_config = parallax.CheckPointConfig(save_ckpt_steps=10, save_ckpt_secs=5)
    t = translate(config)
    assert t.config.save_checkpoint_steps is None and t.save_checkpoint_secs is None
    assert [w.split(" is not")[0] for w in t.warnings] == ["parallax: ckpt_config.save_ckpt_steps=10",
                                                           "parallax: ckpt_config.save_ckpt_secs=5"]


def test_a_config_without_original_fields_translates_to_itself_without_warnings():
    config = parallax.Config(run_option="MPI")
    t = translate(config)
    assert t.config == config and t.warnings == ()


@pytest.mark.parametrize("text,slots", [("localhost:0,1\n", (0, 1)), ("localhost: 0, 1,\n", (0, 1)),
                                        ("# a comment\nlocalhost:0\n", (0,)), ("localhost\n", (0,))])
def test_resource_info_in_the_original_format_names_device_ids(tmp_path, monkeypatch, text, slots):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    path = tmp_path / "resource_info"
    path.write_text(text)
    spec = legacy_run._spec(str(path))
    assert [(h.hostname, h.slots, h.ssh_port) for h in spec.hosts] == [("localhost", slots, None)]


def test_a_bare_host_has_a_slot_per_visible_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")
    path = tmp_path / "resource_info"
    path.write_text("localhost\n")
    assert legacy_run._spec(str(path)).hosts[0].slots == (0, 1, 2)


def test_bad_resource_info_is_a_clear_error(tmp_path):
    path = tmp_path / "resource_info"
    path.write_text("localhost: a,b\n")
    with pytest.raises(parallax.ResourceSpecError, match="is not `host: device ids`"):
        legacy_run._spec(str(path))


class _Runner:
    is_chief = True

    def __init__(self):
        self.fed = None

    def run(self, fetches, feed_dict, **_):
        self.fed = feed_dict
        return {"loss": 1.5, "pair": (2, 3), "train": None}


def test_the_session_takes_a_value_per_replica_and_returns_a_list_per_leaf():
    runner = _Runner()
    session = legacy_run.ReplicaSession(runner)
    assert session.run({}, {"x:0": [7]}) == {"loss": [1.5], "pair": ([2], [3]), "train": [None]}
    assert runner.fed == {"x:0": 7} and session.should_stop() is False
    with pytest.raises(ParallaxError, match=r"a list with one value per replica .*feed \{x:0: \[value\]\}"):
        session.run({}, {"x:0": 7})


def test_the_original_module_names():
    import tensorflow as tf
    assert callable(parallax.shard) and parallax.shard.shard is not None
    assert isinstance(parallax.shard(tf.data.Dataset.range(3)), tf.data.Dataset)
    assert parallax.partition.get_partitions(4) == 4
    with pytest.raises(ParallaxError):
        parallax.partition.get_partitions(0)
    assert isinstance(parallax.log, logging.Logger) and parallax.log.name == "PARALLAX"


# A script that ends while its own SIGTERM is still unhandled: Python handles the signal at its next check, which
# under load comes after the script has returned, inside the exit hook that writes the last checkpoint.
LATE_SIGTERM = {
    # The signal reaches another thread while the main thread is in C code (a sleep) just before the hook: Python
    # handles it at the hook's first line.
    "at the hook's first line": ("threading.Thread(target=lambda: (time.sleep(0.2), os.kill(os.getpid(), "
                                 "signal.SIGTERM)), daemon=True).start()\n"
                                 "signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])\n"
                                 "atexit.register(time.sleep, 0.6)\n"),
    "half-way through the save": "S.kill_in_close = True\n",
}


@pytest.mark.slow  # real processes
@pytest.mark.parametrize("when", list(LATE_SIGTERM))
def test_a_sigterm_handled_after_the_script_has_returned_does_not_abort_the_last_checkpoint(when):
    script = ("import atexit, os, signal, threading, time\n"
              "from parallax.legacy import run as legacy_run\n"
              "class S:\n"
              "    kill_in_close = False\n"
              "    def close(self):\n"
              "        if self.kill_in_close:\n"
              "            os.kill(os.getpid(), signal.SIGTERM)\n"
              "            sum(range(1000))\n"
              "        print('saved', flush=True)\n"
              "legacy_run._exit_cleanly_on_sigterm()\n"
              "atexit.register(legacy_run._close_at_exit, S())\n" + LATE_SIGTERM[when])
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3"))
    assert done.returncode == 0 and done.stdout == "saved\n", done.stderr


@pytest.mark.slow  # real processes
def test_a_sigterm_during_the_script_ends_it_as_its_end_does():
    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        legacy_run._exit_cleanly_on_sigterm()
        with pytest.raises(SystemExit):
            os.kill(os.getpid(), signal.SIGTERM)
            sum(range(1000))  # bytecode boundaries: Python runs the handler at one of them
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.slow  # real processes
def test_a_last_checkpoint_that_fails_at_exit_fails_the_process():
    script = ("from parallax.legacy import run as legacy_run\n"
              "class S:\n"
              "    def close(self):\n"
              "        raise OSError('disk full')\n"
              "legacy_run._close_at_exit(S())\n"
              "print('not reached')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="3"))
    assert done.returncode == 1 and "not reached" not in done.stdout
    assert "CheckpointError: parallel_run's session failed to close at exit" in done.stderr
    assert "OSError: disk full" in done.stderr
