"""Jobs that train until their input ends, on data whose size is not always a multiple of N*b (real processes, two
loopback hosts, every mode): equal shards are exact; shards whose last batches differ run on with a warning naming
the step; a shard that ends a step early ends the job with the reason, within seconds, in every mode."""
import os
import re
import time

import pytest

from tests.launched import run_script

pytestmark = pytest.mark.slow  # real jobs; their wall-time bound (LIMIT) is 4x their time, shared cores included

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SCRIPT = os.path.join(ROOT, "tests", "launcher_scripts", "uneven_data.py")
LIMIT = 90  # start-up included; an input left waiting is named after input_ledger.STRANDED_S
EPOCHS = 2


def _job(examples, mode, chief_delay=0.0):
    start = time.time()
    proc = run_script([SCRIPT, examples, mode, EPOCHS, chief_delay], timeout=LIMIT + 60)
    took = time.time() - start
    print(f"{mode} {examples}: exit {proc.returncode} after {took:.1f} s")
    assert took < LIMIT, proc.stderr[-3000:]
    return proc, proc.stdout + proc.stderr


@pytest.mark.parametrize("mode", ["MPI", "PS", "HYBRID"])
def test_equal_shards_end_together_and_match_one_device(mode):
    proc, out = _job(42, mode)
    assert proc.returncode == 0, out[-3000:]
    assert "warning: synchronized step" not in out
    assert float(re.search(r"max diff (\S+)", out).group(1)) < 1e-12, out[-3000:]


@pytest.mark.parametrize("mode", ["MPI", "PS", "HYBRID"])
def test_a_worker_that_starts_its_next_epoch_first_meets_the_others_and_stays_exact(mode):
    """The chief waits before each step, so worker 1 ends its epoch first and starts the next while the chief's
    last step of the epoch has yet to run. Before input_end.py and the chief's readiness (sync_passes.py), the
    chief's failed step took worker 1's rows (PS, HYBRID), or the two steps met under one step id (TF's
    collectives): the job hung or failed in every mode."""
    proc, out = _job(42, mode, chief_delay=0.4)
    assert proc.returncode == 0, out[-3000:]
    assert re.findall(r"worker \d ran (\d+) steps", out) == ["10", "10"], out[-3000:]
    assert float(re.search(r"max diff (\S+)", out).group(1)) < 1e-12, out[-3000:]


@pytest.mark.parametrize("mode", ["MPI", "PS", "HYBRID"])
def test_differing_last_batches_are_warned_naming_the_step(mode):
    proc, out = _job(43, mode)
    assert proc.returncode == 0, out[-3000:]
    assert "warning: synchronized step 5 is not exactly one device's: the workers' batches differ " \
           "(127.0.0.1/worker/0: 2, 127.0.0.2/worker/1: 1 examples)" in proc.stderr, out[-3000:]
    assert float(re.search(r"max diff (\S+)", out).group(1)) > 1e-6  # it is indeed not one device's


@pytest.mark.parametrize("mode", ["MPI", "PS", "HYBRID"])
def test_a_shard_that_ends_a_step_early_ends_the_job_with_the_reason(mode):
    proc, out = _job(41, mode)
    assert proc.returncode != 0
    assert "job failed: 127.0.0.2/worker/1's input ended in synchronized step 5 (OutOfRangeError) while " \
           "127.0.0.1/worker/0's still had a batch" in proc.stderr, out[-3000:]
    assert "drop_remainder=True" in proc.stderr
