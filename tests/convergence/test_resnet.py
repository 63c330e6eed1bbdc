"""The ResNet converges with parallax as on one device: 2 HYBRID workers of batch B/2 against one process of batch
B on scikit-learn's digits. Accuracy is measured by models/resnet/eval.py, which restores each run's checkpoint into
the unmodified single-device graph."""
from tests.convergence.runs import metric, single_and_distributed

BATCH, STEPS = 64, 300
ACCURACY_TARGET = 95.0  # percent; the measured reference run reached 99.17 for both
# One device against itself: 5 repeated runs of train.py reached 98.61-100.00% (the test set has 360 images, 0.28
# points each), and TF_DETERMINISTIC_OPS with oneDNN off did not make it repeat. A tolerance under that spread
# failed CI by chance; this one is the spread plus a margin. Exactness itself is the equivalence suite's job.
AGREEMENT_POINTS = 2.0


def _accuracy(ckpt):
    return metric("resnet", r"test accuracy ([0-9.]+)%", ["--checkpoint-dir", ckpt])


def test_resnet_two_hybrid_workers_reach_the_single_device_accuracy(tmp_path):
    out, single, dist = single_and_distributed("resnet", tmp_path, ["--steps", str(STEPS), "--log-every", "100"],
                                               BATCH)
    assert f"worker 1 step {STEPS} images/s" in out
    acc_single, acc_dist = _accuracy(single), _accuracy(dist)
    print(f"ResNet test accuracy after {STEPS} steps of {BATCH}: single {acc_single:.2f}%, "
          f"2 HYBRID workers {acc_dist:.2f}%")
    assert abs(acc_dist - acc_single) <= AGREEMENT_POINTS
    assert acc_single >= ACCURACY_TARGET and acc_dist >= ACCURACY_TARGET
