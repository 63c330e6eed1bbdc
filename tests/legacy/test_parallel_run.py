"""Scripts written for the original Parallax (parallel_run, its config classes, list feeds and fetches) run on 2
workers in HYBRID, PS, MPI and async PS, started by themselves and by parallax-launch; their checkpoints restore into
the unmodified single-device graph, and the simple one matches one device bitwise."""
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

pytestmark = pytest.mark.slow  # real jobs


HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
SIMPLE, LM = os.path.join(HERE, "simple_driver.py"), os.path.join(HERE, "lm_driver.py")
MODES = [("HYBRID", True), ("PS", True), ("MPI", True), ("PS", False)]
IDS = ["HYBRID", "PS", "MPI", "async-PS"]
# Each script runs in every mode; each (mode, launch) pair runs once over the two scripts.
SIMPLE_RUNS = [(*mode, launch) for mode, launch in zip(MODES, ["self", "parallax-launch"] * 2)]
LM_RUNS = [(*mode, launch) for mode, launch in zip(MODES, ["parallax-launch", "self"] * 2)]


def _run(args, launch="self", timeout=300):
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
    cmd = [sys.executable, *args] if launch == "self" else \
        [sys.executable, "-m", "parallax.launcher.cli", "-H", "localhost:2", "--", sys.executable, *args]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(cmd)}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done.stdout + done.stderr


def _resource_info(tmp_path, text="localhost:0,1\n"):
    """The original's format: `host:ids` are device ids (two slots here), not an ssh port."""
    path = tmp_path / "resource_info"
    path.write_text(text)
    return str(path)


def _values(ckpt_dir):
    reader = tf.compat.v1.train.NewCheckpointReader(tf.compat.v1.train.latest_checkpoint(ckpt_dir))
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


@pytest.fixture(scope="module")
def one_device(tmp_path_factory):
    out = tmp_path_factory.mktemp("single")
    _run([SIMPLE, "--single_device", "--ckpt_dir", str(out), "--max_steps", "20"])
    return _values(str(out))


@pytest.mark.parametrize("mode,sync,launch", SIMPLE_RUNS, ids=[f"{i}-{r[2]}" for i, r in zip(IDS, SIMPLE_RUNS)])
def test_simple_example(tmp_path, one_device, launch, mode, sync):
    ckpt = str(tmp_path / "ckpt")
    out = _run([SIMPLE, "--resource_info", _resource_info(tmp_path), "--ckpt_dir", ckpt, "--max_steps", "20",
                "--run_option", mode, "--sync" if sync else "--nosync"], launch)
    assert "worker 1 of 2, 1 replica(s)" in out and ("global step: 10" if sync else "global step: ") in out
    assert out.count("parallax: average_sparse=None (the original Parallax's default: False)") == 1
    restored = _run([SIMPLE, "--restore_from", ckpt])
    assert "restored w=" in restored
    got = _values(ckpt)
    assert sorted(got) == sorted(one_device)
    if sync:  # both workers feed the same sample, as the original example does: their mean is one device's step
        for name, value in one_device.items():
            assert np.array_equal(got[name], value), name
    else:
        assert got["global_step"] >= 20


@pytest.mark.parametrize("mode,sync,launch", LM_RUNS, ids=[f"{i}-{r[2]}" for i, r in zip(IDS, LM_RUNS)])
def test_lm_example_ends_by_sigterm_and_its_checkpoint_restores(tmp_path, launch, mode, sync):
    ckpt = str(tmp_path / "ckpt")
    out = _run([LM, "--resource_info_file", _resource_info(tmp_path, "localhost: 0,1\n"), "--ckpt_dir", ckpt,
                "--run_option", mode, "--sync" if sync else "--nosync"], launch)
    # Each worker logs its local steps 0, 4 and 8 with the global step it fetched. Asynchronous workers race for
    # the global step, so which numbers they log is timing; synchronous ones log 8 at local step 8.
    assert out.count("PARALLAX INFO Iteration ") == 2 * 3, out[-4000:]
    if sync:
        assert "PARALLAX INFO Iteration 8 " in out
    assert out.count("parallax: ps_config.replicate_variables=True is not honoured") == 1
    restored = _run([LM, "--restore_from", ckpt])
    step = int(restored.split("restored global_step=")[1].split()[0])
    assert step == 12 if sync else step >= 12


def test_reference_variables_in_sync_ps_with_minimize_global_step_and_a_gpu_pin(tmp_path, one_device):
    ckpt, single = str(tmp_path / "ckpt"), str(tmp_path / "single")
    _run([SIMPLE, "--resource_info", _resource_info(tmp_path), "--ckpt_dir", ckpt, "--max_steps", "20",
          "--run_option", "PS", "--ref_variables", "--pin_gpu"])
    _run([SIMPLE, "--single_device", "--ckpt_dir", single, "--max_steps", "20", "--ref_variables"])
    got, want = _values(ckpt), _values(single)
    assert all(np.array_equal(got[k], want[k]) for k in want)


def test_export_graph_path_and_save_ckpt_secs_are_honoured(tmp_path):
    ckpt, graph = tmp_path / "ckpt", tmp_path / "graph"
    _run([SIMPLE, "--resource_info", _resource_info(tmp_path), "--ckpt_dir", str(ckpt), "--max_steps", "20",
          "--export_graph_path", str(graph), "--save_ckpt_secs", "0.000001"])
    assert "parallax_allreduce" in (graph / "graph.pbtxt").read_text()  # the rewritten graph, not the user's
    saved = sorted(int(p.name.split("-")[1].split(".")[0]) for p in ckpt.glob("model.ckpt-*.index"))
    assert len(saved) >= 5 and saved[-1] == 20  # a save after every step (TF's Saver keeps the last 5)


def test_each_worker_gets_its_own_shard_tensors(tmp_path):
    out = _run([os.path.join(HERE, "shard_driver.py"), _resource_info(tmp_path)])
    assert "[localhost/worker/0] shard 0 of 2: [0, 2, 4, 6]" in out
    assert "[localhost/worker/1] shard 1 of 2: [1, 3, 5, 7]" in out


def test_the_session_starts_the_graphs_queue_runners_as_the_originals_did():
    """The original's MonitoredTrainingSession started the QUEUE_RUNNERS collection: a script written for it never
    starts them, and its first step waited forever on the empty queue here. One slot: no job is launched."""
    output = _run([os.path.join(HERE, "queue_driver.py"), "localhost:1"], timeout=120)
    assert len([line for line in output.splitlines() if line.startswith("loss ")]) == 5, output[-3000:]
    assert "should_stop False" in output and "\ndone\n" in output, output[-3000:]
    assert "no queue runners were defined" not in output, output[-3000:]
