"""Config(check_steps=K) (step_check.py, one_device_replay.py): the job's first steps computed again as one device
computes them, on the workers' batches, every variable compared. It must say "agree" where the job is one
device's, and catch what is not, in every mode: a planted error (gradients summed, not averaged), every worker
reading the same batch, a batch made in the graph, an input's end inside the checked steps; and say why when it
cannot replay (a batch size written into the graph)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import parallax
from parallax.runtime import one_device_replay, step_check
from parallax.errors import CheckError, ConfigError
from tests.launched import ROOT, run_script
from tests.rule_jobs_run import rule_jobs

SCRIPT = os.path.join(ROOT, "tests", "launcher_scripts", "checked_job.py")


def test_one_devices_batch_is_the_workers_blocks_in_order_padded_to_the_longest():
    a, b = np.ones((2, 3)), 2 * np.ones((1, 2))
    joined = one_device_replay.batch_of([a, b], "batch")
    assert joined.shape == (3, 3) and joined[2].tolist() == [2, 2, 0] and joined[:2].tolist() == a.tolist()
    assert one_device_replay.batch_of([np.float64(0.1), np.float64(0.2)], "same") == 0.1


def test_an_element_wise_sharded_batch_interleaves_the_workers_examples():
    # worker 0 read examples 0, 2, 4 and worker 1 examples 1, 3 of one device's batch of 5
    joined = one_device_replay.batch_of([np.array([0, 2, 4]), np.array([1, 3])], "batch", "interleaved")
    assert joined.tolist() == [0, 1, 2, 3, 4]


def test_a_sparse_batchs_entries_are_renumbered_to_their_examples_place_in_row_major_order():
    indices = [np.array([[0, 1], [1, 0]]), np.array([[0, 2], [2, 2]])]
    values, shapes = [np.array([10, 11]), np.array([20, 21])], [np.array([2, 3]), np.array([3, 4])]
    got = one_device_replay.sparse_batch_of(indices, values, shapes)
    assert got[0].tolist() == [[0, 1], [1, 0], [2, 2], [4, 2]] and got[1].tolist() == [10, 11, 20, 21]
    assert got[2].tolist() == [5, 4]
    got = one_device_replay.sparse_batch_of(indices, values, shapes, "interleaved")  # 0->0, 1->2; 0->1, 2->4
    assert got[0].tolist() == [[0, 1], [1, 2], [2, 0], [4, 2]] and got[1].tolist() == [10, 20, 11, 21]


def test_tolerance_follows_the_dtype_and_the_magnitude():
    assert step_check.tolerance(np.dtype(np.float64), 1.0) < 1e-8
    assert 1e-6 < step_check.tolerance(np.dtype(np.float32), 1.0) < 1e-4
    assert step_check.tolerance(np.dtype(np.float32), 100.0) > 50 * step_check.tolerance(np.dtype(np.float32), 1.0)
    assert step_check.tolerance(np.dtype(np.int64), 5.0) == 0


def test_identical_batches_and_no_input_are_found():
    step = lambda v: {"fed": {"x:0": np.array([v])}, "read": {}, "ended": False, "fetches": []}  # noqa: E731
    assert step_check._identical_batches([[step(1), step(2)], [step(1), step(2)]], {"x:0"}) == "all"
    assert step_check._identical_batches([[step(1), step(2)], [step(3), step(2)]], {"x:0"}) is None  # chance
    assert step_check._identical_batches([[step(1)], [step(1)]], set()) == "none"  # what was fed is no input


def test_a_difference_fails_or_warns_as_configured(capsys):
    result = {"differing": [("w", 0.5, "")], "compared": 3, "worst": 0.5, "same": None, "ends": []}
    with pytest.raises(CheckError, match=r"1 of 3 variables differ .* w \(max abs diff 0.5\)"):
        step_check._report(result, 2, 2, fails=True)
    step_check._report(result, 2, 2, fails=False)
    assert "parallax: warning: check of the first 2 training steps of 2 workers" in capsys.readouterr().err


def test_config_refuses_bad_check_settings():
    with pytest.raises(ConfigError, match="check_steps"):
        parallax.Config(check_steps=-1)
    with pytest.raises(ConfigError, match="sync=False"):
        parallax.Config(check_steps=2, sync=False)
    with pytest.raises(ConfigError, match="check_fails"):
        parallax.Config(check_fails="yes")


def test_launch_refuses_check_warns_without_steps():
    done = subprocess.run([sys.executable, "-m", "parallax.launcher.cli", "-H", "localhost:2", "--check-warns", "--",
                           "python", "x.py"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2 and "--check-warns needs --check-steps K" in done.stderr


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    return rule_jobs("step_check", tmp_path_factory.mktemp("step_check"))


def _check_lines(observed):
    return [line for line in observed["stderr"].splitlines() if "check" in line and "parallax" in line]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["MPI", "PS", "HYBRID"])
def test_the_check_agrees_where_the_job_is_one_devices_and_catches_what_is_not(jobs, mode):
    exact, planted = _check_lines(jobs[mode]["exact"]), _check_lines(jobs[mode]["planted"])
    assert exact and "are one device's with the global batch: 6 variables agree" in exact[-1], exact
    assert planted and "variables differ from one device's" in planted[-1] and "emb/Adam (max abs diff" in \
        planted[-1], planted
    same = _check_lines(jobs[mode]["same_batches"])
    assert same and "in every checked step, every worker's batch was the same" in same[-1], same
    fixed = _check_lines(jobs[mode]["fixed_batch"])
    assert fixed and "could not be replayed" in fixed[-1] and "give the inputs a first dimension of None" in \
        fixed[-1], fixed


@pytest.mark.slow
def test_the_check_names_an_inputs_end_and_a_batch_made_in_the_graph(jobs):
    ended = _check_lines(jobs["HYBRID"]["epoch_end"])
    assert ended and "the input ended in checked step 5" in ended[-1] and "emb/Adam" in ended[-1], ended
    no_input = _check_lines(jobs["MPI"]["no_input"])
    assert no_input and "the steps read no input" in no_input[-1], no_input


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    return rule_jobs("check_cases", tmp_path_factory.mktemp("check_cases"))


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["MPI", "PS", "HYBRID"])
def test_the_check_agrees_on_user_graphs_that_are_one_devices(cases, mode):
    """Graphs of each kind of input the check records, exact in the suite: the check must say so (it found the
    order of an element-wise sharded batch, a dataset's sparse elements and micro-steps that only accumulate)."""
    for name, observed in cases[mode].items():
        lines = _check_lines(observed)
        assert lines and "are one device's with the global batch" in lines[-1], (name, lines)


@pytest.mark.slow
def test_a_launched_job_that_fails_its_check_ends_every_process_with_the_difference():
    proc = run_script(["-m", "parallax.launcher.cli", "-H", "localhost:2", "--check-steps", "3", "--",
                       sys.executable, SCRIPT, "HYBRID", "planted", "tf"], timeout=240)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output[-3000:]
    assert "CheckError: check of the first 3 training steps of 2 workers" in output and \
        "w/Adam (max abs diff" in output, output[-3000:]
    assert "worker 0 done" not in output


@pytest.mark.slow
def test_a_launched_job_that_passes_its_check_says_so_and_trains_on():
    proc = run_script(["-m", "parallax.launcher.cli", "-H", "localhost:2", "--check-steps", "2", "--",
                       sys.executable, SCRIPT, "PS", "exact", "tf"], timeout=240)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    assert "the first 2 training steps of 2 workers are one device's" in output and "worker 1 done" in output
