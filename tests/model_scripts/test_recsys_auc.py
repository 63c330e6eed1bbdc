"""models/recsys's AUC is the Mann-Whitney statistic: the share of (click, non-click) pairs ranked right, ties half."""
import numpy as np
import pytest

from tests.models_for_tests.recsys_modules import recsys_modules

_, recsys = recsys_modules()


def _pairs_ranked_right(labels, scores):
    pos, neg = scores[labels == 1], scores[labels == 0]
    return float(np.mean([(p > n) + 0.5 * (p == n) for p in pos for n in neg]))


def test_auc_counts_pairs_with_ties_half():
    rng = np.random.RandomState(0)
    labels = rng.randint(0, 2, 300)
    scores = np.round(rng.rand(300) + 0.3 * labels, 1)  # rounded: many ties
    assert recsys.auc_of(labels, scores) == pytest.approx(_pairs_ranked_right(labels, scores), abs=1e-12)
    assert recsys.auc_of([0, 0, 1, 1], [0.1, 0.2, 0.3, 0.4]) == 1.0
    assert recsys.auc_of([1, 1, 0, 0], [0.1, 0.2, 0.3, 0.4]) == 0.0
    assert recsys.auc_of([0, 1], [0.5, 0.5]) == 0.5


def test_auc_needs_both_classes():
    with pytest.raises(ValueError, match="both clicks and non-clicks"):
        recsys.auc_of([1, 1], [0.2, 0.3])
