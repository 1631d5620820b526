"""The statistic blocks the core and the monitor share, against brute force on small data."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import labelgate as lg
from labelgate.metrics._cross_disagreement import moment_cross_observed
from labelgate.metrics._items import agreement_from_counts
from labelgate.metrics.alpha import interval_within
from labelgate.metrics.spa import spa_from_sums


def _moments(values: list[float]) -> list[float]:
    x = np.asarray(values, dtype=float)
    return [x.size, x.sum(), (x * x).sum()]


@pytest.mark.parametrize("seed", range(20))
def test_interval_within_is_the_sum_over_ordered_pairs(seed):
    rng = np.random.default_rng(seed)
    items = [list(rng.normal(3.0, 2.0, size=rng.integers(1, 6))) for _ in range(8)]
    moments = np.asarray([_moments(v) for v in items])
    got = interval_within(moments, moments[:, 0] >= 2)
    for values, value in zip(items, got, strict=True):
        pairs = [(a - b) ** 2 for a, b in itertools.permutations(values, 2)]
        expected = sum(pairs) / (len(values) - 1) if len(values) >= 2 else 0.0
        assert value == pytest.approx(expected, rel=1e-10, abs=1e-10)


@pytest.mark.parametrize("seed", range(20))
def test_moment_cross_observed_is_the_weighted_sum_over_cross_pairs(seed):
    rng = np.random.default_rng(seed)
    xs = [list(rng.normal(size=rng.integers(1, 5))) for _ in range(6)]
    ys = [list(rng.normal(size=rng.integers(1, 5))) for _ in range(6)]
    got = moment_cross_observed(np.asarray([_moments(v) for v in xs]), np.asarray([_moments(v) for v in ys]))
    for x, y, value in zip(xs, ys, got, strict=True):
        r, s = len(x), len(y)
        expected = (r + s) / (r * s) * sum((a - b) ** 2 for a in x for b in y)  # xRR eq. 10, squared distance
        assert value == pytest.approx(expected, rel=1e-10)


def test_agreement_from_counts_is_the_share_of_agreeing_ordered_pairs():
    labels = [[0, 0, 1], [2, 2, 2, 2], [1], [0, 1, 2, 0]]
    counts = np.asarray([np.bincount(v, minlength=3) for v in labels], dtype=float)
    got = agreement_from_counts(counts, counts.sum(axis=1), np.eye(3))
    for values, value in zip(labels, got, strict=True):
        pairs = list(itertools.permutations(values, 2))
        expected = sum(a == b for a, b in pairs) / len(pairs) if pairs else 0.0
        assert value == pytest.approx(expected)


@pytest.mark.parametrize("weighting", ["flat", "annotations", "annotations_m1", "edges", "inv_var", "inv_var_class"])
def test_spa_from_sums_gives_the_core_spa(weighting):
    rng = np.random.default_rng(7)
    wide = np.where(rng.random((40, 6)) < 0.5, rng.integers(0, 3, size=(40, 6)), np.nan)
    r = lg.Ratings.from_wide(wide, categories=[0, 1, 2])
    counts = np.asarray([np.bincount(row[~np.isnan(row)].astype(int), minlength=3) for row in wide], dtype=float)
    n = counts.sum(axis=1)
    pairable = n >= 2
    agree = agreement_from_counts(counts, n, np.eye(3))
    sizes = np.unique(n[pairable])
    slot = np.searchsorted(sizes, n[pairable])
    by_size = np.bincount(slot, weights=agree[pairable], minlength=sizes.size)[None, :]
    items = np.bincount(slot, minlength=sizes.size).astype(float)[None, :]
    value = spa_from_sums(by_size, items, counts[pairable].sum(axis=0)[None, :], sizes, weighting, 3)[0]
    assert value == pytest.approx(float(lg.spa(r, weighting=weighting)), rel=1e-12)
