"""The NMT model converges with parallax as on one device: 2 HYBRID workers of batch B/2 against one process of
batch B. BLEU is measured by models/nmt/eval.py, which restores each run's checkpoint into the unmodified
single-device graph and decodes the test set greedily."""
import os
import sys

import pytest

from tests.convergence.runs import make_data, metric, model_dir, single_and_distributed

NMT = model_dir("nmt")
BATCH, STEPS = 64, 800
BLEU_TARGET = 90.0  # measured reference runs: see docs/convergence.md
BLEU_AGREEMENT = 1.0


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_data(tmp_path_factory, "nmt")


def _bleu(data, ckpt):
    return metric("nmt", r"test BLEU ([0-9.]+)", ["--data-dir", data, "--checkpoint-dir", ckpt])


def test_nmt_two_hybrid_workers_reach_the_single_device_bleu(data, tmp_path):
    common = ["--data-dir", data, "--steps", str(STEPS), "--log-every", "100"]
    out, single, dist = single_and_distributed("nmt", tmp_path, common, BATCH)
    assert f"worker 1 step {STEPS} words/s" in out
    bleu_single, bleu_dist = _bleu(data, single), _bleu(data, dist)
    print(f"NMT test BLEU after {STEPS} steps of {BATCH}: single {bleu_single:.2f}, "
          f"2 HYBRID workers {bleu_dist:.2f}")
    assert abs(bleu_dist - bleu_single) <= BLEU_AGREEMENT
    assert bleu_single > BLEU_TARGET and bleu_dist > BLEU_TARGET


def test_bleu_scores_what_it_should():
    sys.path[:0] = [NMT, os.path.dirname(NMT)]
    from nmt import bleu
    ref = [["the", "big", "cat", "sees", "the", "dogs"]]
    assert bleu(ref, ref) == pytest.approx(100.0)
    assert bleu([["the", "big", "cat", "sees", "the"]], ref) < 100.0  # brevity penalty
    assert bleu([["dogs", "the", "sees", "cat", "big", "the"]], ref) == 0.0  # no 4-gram in common
