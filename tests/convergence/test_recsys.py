"""The recommendation model converges with parallax as on one device: 2 HYBRID workers of batch B/2 against one
process of batch B, on the same synthetic click logs, with the four largest tables in 2 shards on the servers. The
held-out AUC is measured by models/recsys/eval.py, which restores each run's checkpoint into the unmodified
single-device graph."""
import re

import pytest

from tests.convergence.runs import make_data, model_dir, run, single_and_distributed

BATCH, STEPS = 256, 600
TABLES = ["--max-table-rows", "20000"]
AUC_TARGET = 0.72  # measured reference run: 0.7433 for both; a model of the counts alone reaches 0.60
AUC_AGREEMENT = 0.005


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_data(tmp_path_factory, "recsys", "--train-rows", "100000", "--heldout-rows", "20000")


def _auc_and_logloss(data, ckpt):
    out = run([f"{model_dir('recsys')}/eval.py", "--data-dir", data, "--checkpoint-dir", ckpt, *TABLES])
    m = re.search(r"held-out AUC ([0-9.]+) log loss ([0-9.]+)", out)
    return float(m.group(1)), float(m.group(2))


def test_recsys_two_hybrid_workers_reach_the_single_device_auc(data, tmp_path):
    common = ["--data-dir", data, "--steps", str(STEPS), "--log-every", "200", *TABLES]
    out, single, dist = single_and_distributed("recsys", tmp_path, common, BATCH)
    assert f"worker 1 step {STEPS} examples/s" in out
    (auc_single, loss_single), (auc_dist, loss_dist) = _auc_and_logloss(data, single), _auc_and_logloss(data, dist)
    print(f"recsys held-out AUC after {STEPS} steps of {BATCH}: single {auc_single:.4f} (log loss {loss_single:.4f}), "
          f"2 HYBRID workers {auc_dist:.4f} (log loss {loss_dist:.4f})")
    assert abs(auc_dist - auc_single) <= AUC_AGREEMENT and abs(loss_dist - loss_single) <= AUC_AGREEMENT
    assert auc_single >= AUC_TARGET and auc_dist >= AUC_TARGET
