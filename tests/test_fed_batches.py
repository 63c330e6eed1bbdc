"""Workers fed the same batch train on copies of it: the runner reports a digest of each worker's first fed
batch (example_counts.fed_digest) and the launcher warns when every worker's is the same (input_ledger.py)."""
import os

import numpy as np
import pytest
import tensorflow as tf

from parallax.rules.example_counts import fed_digest
from parallax.launcher.input_ledger import InputLedger
from tests.launched import run_script

pytestmark = pytest.mark.slow  # real jobs


ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SCRIPT = os.path.join(ROOT, "tests", "launcher_scripts", "fed_batches.py")
WARNING = "every worker was fed the same batch in synchronized step 1"


@pytest.mark.parametrize("mode", ["MPI", "PS"])
@pytest.mark.parametrize("how, warned", [("same", True), ("shares", False)])
def test_workers_fed_the_same_batch_are_warned_of(mode, how, warned):
    proc = run_script([SCRIPT, mode, how], timeout=180)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    assert output.count("done") >= 2 and (WARNING in output) == warned, output[-3000:]
    trained = {line.split(" w ")[1] for line in output.splitlines() if " w [" in line}
    assert len(trained) == 1, output[-3000:]  # train.run and w.eval ran through each worker's runner, in step


def test_the_ledger_warns_once_when_every_worker_reported_the_same_digest():
    ledger = InputLedger()
    assert ledger.fed("w0", 1, "abc", 2) is None  # the other worker has not reported
    assert WARNING in ledger.fed("w1", 1, "abc", 2)
    other = InputLedger()
    other.fed("w0", 1, "abc", 2)
    assert other.fed("w1", 1, "abd", 2) is None


def test_the_digest_reads_only_the_inputs_and_their_values():
    g = tf.Graph()
    with g.as_default():
        x, rate = tf.compat.v1.placeholder(tf.float32, [None, 2], "x"), tf.compat.v1.placeholder(tf.float32, [], "r")
    a, b = np.zeros((2, 2), np.float32), np.ones((2, 2), np.float32)
    assert fed_digest({x: a, rate: 0.5}, {"x"}) == fed_digest({x: a.copy(), rate: 0.1}, {"x"})
    assert fed_digest({x: a}, {"x"}) != fed_digest({x: b}, {"x"})
    assert fed_digest({rate: 0.5}, {"x"}) is None
