"""The LM converges with parallax as on one device: 2 HYBRID workers of batch B/2 against one process of batch B,
same data, same steps. The perplexities are measured by models/lm/eval.py, which restores each run's checkpoint
into the unmodified single-device graph."""
import os

import pytest

from tests.convergence.runs import make_data, metric, model_dir, run, single_and_distributed

LM = model_dir("lm")
BATCH, STEPS = 32, 600
PPL_BOUND = 55.0  # measured reference run: 46.46 for both (single and 2 HYBRID workers), 600 steps
PPL_AGREEMENT = 0.02


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_data(tmp_path_factory, "lm")


def _assert_summaries(log_dir, last_step):
    """The chief wrote TensorBoard scalars for loss, learning rate and throughput, up to the last step."""
    import tensorflow as tf
    files = list(log_dir.glob("events.out.tfevents.*"))
    assert len(files) == 1, files  # one writer: the chief's
    tags, steps = set(), set()
    for event in tf.compat.v1.train.summary_iterator(str(files[0])):
        for value in event.summary.value:
            tags.add(value.tag)
            steps.add(event.step)
    assert tags == {"loss", "learning_rate", "words_per_second"} and last_step in steps


def _perplexity(data, ckpt):
    return metric("lm", r"held-out perplexity ([0-9.]+)", ["--data-dir", data, "--checkpoint-dir", ckpt])


def test_lm_two_hybrid_workers_reach_the_single_device_perplexity(data, tmp_path):
    common = ["--data-dir", data, "--steps", str(STEPS), "--log-every", "100"]
    out, single, dist = single_and_distributed("lm", tmp_path, common, BATCH, ["--log-dir", str(tmp_path / "tb")])
    assert f"worker 1 step {STEPS} words/s" in out  # every worker logs
    _assert_summaries(tmp_path / "tb", STEPS)
    ppl_single, ppl_dist = _perplexity(data, single), _perplexity(data, dist)
    print(f"LM held-out perplexity after {STEPS} steps of {BATCH}: single {ppl_single:.2f}, "
          f"2 HYBRID workers {ppl_dist:.2f}")
    assert abs(ppl_dist / ppl_single - 1) <= PPL_AGREEMENT
    assert ppl_single < PPL_BOUND and ppl_dist < PPL_BOUND


def test_a_new_distributed_job_continues_from_the_chiefs_checkpoint(data, tmp_path):
    """With the embedding and softmax in 2 shards on the servers; eval.py restores them into unsharded variables."""
    ckpt = str(tmp_path / "ckpt")
    common = ["--data-dir", data, "--log-every", "50", "--batch-size", "16", "--resource-spec", "localhost:2",
              "--checkpoint-dir", ckpt, "--partitions", "2"]
    run([os.path.join(LM, "train_distributed.py"), *common, "--steps", "50"])
    first = _perplexity(data, ckpt)
    out = run([os.path.join(LM, "train_distributed.py"), *common, "--steps", "100"])  # --steps: the global step
    import tensorflow as tf
    assert tf.train.latest_checkpoint(ckpt).endswith("model.ckpt-100")  # the second job restored step 50
    assert "worker 0 step 50 " not in out and "worker 0 step 100 " in out, out[-2000:]  # and trained 50 more
    assert _perplexity(data, ckpt) < first
