"""The LM as a Keras model, trained by its own Model.fit, converges with parallax as on one device: 2 HYBRID workers
of batch B/2 (train_keras_distributed.py) against one process of batch B (train_keras.py), same data, same steps.
Each run's weights are loaded into a new single-device model by models/lm/eval_keras.py. (That the two scripts
differ by the two parallax lines: tests/model_scripts/.)"""
import os

import pytest

from tests.convergence.runs import make_data, metric, model_dir, run

LM = model_dir("lm")
BATCH, STEPS = 32, 300
PPL_BOUND = 70.0  # measured reference run: 58.85 for both (single and 2 HYBRID workers), 300 steps
PPL_AGREEMENT = 0.005


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_data(tmp_path_factory, "lm")


def _perplexity(data, ckpt):
    return metric("lm", r"held-out perplexity ([0-9.]+)", ["--data-dir", data, "--checkpoint-dir", ckpt],
                  script="eval_keras.py")


def test_keras_lm_two_hybrid_workers_reach_the_single_device_perplexity(data, tmp_path):
    common = ["--data-dir", data, "--steps", str(STEPS), "--log-every", "100"]
    single, dist = str(tmp_path / "single"), str(tmp_path / "dist")
    run([os.path.join(LM, "train_keras.py"), *common, "--batch-size", str(BATCH), "--checkpoint-dir", single])
    out = run([os.path.join(LM, "train_keras_distributed.py"), *common, "--batch-size", str(BATCH // 2),
               "--resource-spec", "localhost:2", "--run-option", "HYBRID", "--checkpoint-dir", dist])
    assert f"worker/1] step {STEPS} words/s" in out and f"worker/0] step {STEPS} words/s" in out  # both log
    ppl_single, ppl_dist = _perplexity(data, single), _perplexity(data, dist)
    print(f"Keras LM held-out perplexity after {STEPS} steps of {BATCH}: single {ppl_single:.2f}, "
          f"2 HYBRID workers {ppl_dist:.2f}")
    assert abs(ppl_dist / ppl_single - 1) <= PPL_AGREEMENT
    assert ppl_single < PPL_BOUND and ppl_dist < PPL_BOUND
