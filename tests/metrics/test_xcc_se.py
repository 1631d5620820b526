r"""The delta-method standard error of Spearman's disattenuated correlation.

:math:`\hat\rho = r_{xy} / \sqrt{rel_x\, rel_y}` with :math:`rel = 2\bar h / (1 + \bar h)` and :math:`\bar h` the mean
of the split-half correlations. :math:`r_{xy}` and the split-half correlations are correlations over the same items,
so they covary; the infinitesimal jackknife over the items carries their covariances without assuming any. Checked
against the literal composition of the influence function of Pearson's r (Devlin, Gnanadesikan & Kettenring 1975:
:math:`IF_i = \tilde a_i \tilde b_i - r (\tilde a_i^2 + \tilde b_i^2) / 2` on the standardised series) through
Spearman–Brown and the ratio, and against the spread of the estimator over simulated samples.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import labelgate as lg
from labelgate.metrics import xcc
from labelgate.metrics.cross import prepare_pair
from labelgate.metrics.xcc import DISATTENUATED_SE_SOURCE, disattenuated_correlation


def _pools(rng: np.random.Generator, n: int = 100, rho: float = 0.7) -> tuple[lg.Ratings, lg.Ratings]:
    truth = rng.normal(size=(n, 1))
    other = rho * truth + math.sqrt(1 - rho**2) * rng.normal(size=(n, 1))
    wx = truth + rng.normal(size=(n, 4))
    wy = other + rng.normal(size=(n, 3))
    wx[rng.random(wx.shape) < 0.1] = np.nan  # unequal ratings per item
    return lg.Ratings.from_wide(wx, level="interval"), lg.Ratings.from_wide(wy, level="interval")


def _pearson_influence(a: np.ndarray, b: np.ndarray) -> tuple[float, np.ndarray]:
    """Pearson's r of two series and each item's influence on it, divided by n (Devlin et al. 1975)."""
    za, zb = (a - a.mean()) / a.std(), (b - b.mean()) / b.std()
    r = float(np.mean(za * zb))
    return r, (za * zb - r * (za**2 + zb**2) / 2) / a.size


def _literal_se(x: lg.Ratings, y: lg.Ratings, n_splits: int, seed: int) -> tuple[float, float]:
    # the estimator's own split halves (the same generator, drawn in the same order), then the influence functions
    x, y, cx, cy = prepare_pair(x, y, "test")
    keep = (x.ratings_per_item[cx] >= 2) & (y.ratings_per_item[cy] >= 2)
    rng = np.random.default_rng(seed)
    mean_x, h1x, h2x = xcc._split_half_means(x, cx[keep], n_splits, rng)
    mean_y, h1y, h2y = xcc._split_half_means(y, cy[keep], n_splits, rng)
    r_xy, u_xy = _pearson_influence(mean_x, mean_y)
    rel, u_rel = [], []
    for h1, h2 in ((h1x, h2x), (h1y, h2y)):
        pairs = [_pearson_influence(h1[s], h2[s]) for s in range(n_splits)]
        half = float(np.mean([p[0] for p in pairs]))
        u_half = np.mean([p[1] for p in pairs], axis=0)
        rel.append(2 * half / (1 + half))
        u_rel.append(2 / (1 + half) ** 2 * u_half)  # d rel / d half = 2 / (1 + half)^2
    value = r_xy / math.sqrt(rel[0] * rel[1])
    u = value * (u_xy / r_xy - u_rel[0] / (2 * rel[0]) - u_rel[1] / (2 * rel[1]))
    return value, float(np.sqrt(np.sum(u**2)))


@pytest.mark.parametrize(("seed", "n_splits", "n"), [(0, 1, 30), (1, 5, 100), (2, 20, 400)])
def test_the_standard_error_equals_the_literal_influence_functions(seed: int, n_splits: int, n: int) -> None:
    x, y = _pools(np.random.default_rng(100 + seed), n=n)
    est = disattenuated_correlation(x, y, n_splits=n_splits, seed=seed)
    value, se = _literal_se(x, y, n_splits, seed)
    assert est.value == pytest.approx(value, rel=1e-12)
    # central differences of relative step 1e-5 on the item sums: agreement to about 1e-8 of the value
    assert est.se == pytest.approx(se, rel=1e-6)
    assert est.se_method == "delta" and est.details["se_source"] == DISATTENUATED_SE_SOURCE


def test_the_standard_error_is_the_same_with_an_interval_and_is_computed_when_read() -> None:
    x, y = _pools(np.random.default_rng(7))
    point = disattenuated_correlation(x, y, seed=3)
    assert "_se_pending" in point.__dict__
    with_interval = disattenuated_correlation(x, y, seed=3, ci=0.9, n_boot=400)
    assert point.se == with_interval.se and point.se_method == with_interval.se_method == "delta"
    # the percentile interval of the bootstrap spans about 2 x 1.645 of these standard errors
    low, high = with_interval.ci
    assert 0.7 < (high - low) / (2 * 1.6448536269514722 * point.se) < 1.4


@pytest.mark.parametrize("rho", [0.7, 1.0])
def test_the_standard_error_matches_the_spread_of_simulated_estimates(rho: float) -> None:
    # 200 independent samples of 100 items: the estimates' standard deviation is known within a relative error of
    # 1/sqrt(2 x 199) = 0.05, so the mean standard error is within 3 of those errors (0.85-1.15; observed 0.98-1.00
    # at rho = 1 over three seeds, 1.05 at rho = 0.7). Each sample draws its own splits (5), whose variation the standard error,
    # conditional on the splits, leaves out: small next to the items' at 5 splits
    rng = np.random.default_rng(2025)
    values, ses = [], []
    for _ in range(200):
        x, y = _pools(rng, rho=rho)
        est = disattenuated_correlation(x, y, n_splits=5, seed=int(rng.integers(2**31)))
        values.append(est.value)
        ses.append(est.se)
    ratio = float(np.mean(ses)) / float(np.std(values, ddof=1))
    assert 0.85 < ratio < 1.15, ratio


def test_too_many_splits_to_differentiate_fall_back_to_the_bootstrap() -> None:
    # 341 splits give 6 x 683 = 4,098 item columns, past the gradient's 4,096: the item bootstrap's standard error,
    # drawn when read, equal to the interval call's
    x, y = _pools(np.random.default_rng(8), n=40)
    point = disattenuated_correlation(x, y, n_splits=341, seed=4, n_boot=100)
    with_interval = disattenuated_correlation(x, y, n_splits=341, seed=4, n_boot=100, ci=0.9)
    assert point.se_method == with_interval.se_method == "bootstrap"
    assert point.se == with_interval.se > 0 and point.details["se_n_boot"] == 100
