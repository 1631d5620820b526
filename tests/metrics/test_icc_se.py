"""Standard errors of the ICC forms (``labelgate.metrics.icc.icc_se``).

* A literal transcription of Fisher's (1925) large-sample variance for the one-way forms (and the Spearman–Brown
  transform for ``1k``), and of the delta method over the mean squares for the two-way forms.
* An independent check of both: the standard deviation of the estimates over designs simulated from the normal
  ANOVA model equals the root mean square of the reported standard errors. With ``R`` replicates the sample standard
  deviation has a relative sampling error of about ``1 / sqrt(2 R)`` (3.5 % at 400), and the large-sample variances
  are themselves first-order approximations at 40-100 items, so the ratio must lie within 10 % of 1. The agreement
  forms under a rater effect read the rater mean square, which has only ``k - 1`` degrees of freedom (a coefficient
  of variation of ``sqrt(2 / (k - 1))``: 100 % at 3 raters), where a linearisation is rough: their standard error
  is conservative, 5-20 % larger than the spread at 3-6 raters, and is held to that (0.75-1.1). Under a rater effect
  the one-way forms' model is wrong, and the test shows it (their standard error is too small).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import labelgate as lg
from labelgate.metrics.icc import FORMS, icc, mean_squares


def _fisher_literal(rho: float, n: int, k: int) -> float:
    """Fisher (1925): var(ICC(1)) = 2 (1 - rho)^2 (1 + (k - 1) rho)^2 / (k (k - 1) (n - 1))."""
    return math.sqrt(2 * (1 - rho) ** 2 * (1 + (k - 1) * rho) ** 2 / (k * (k - 1) * (n - 1)))


def _delta_literal(form: str, x: np.ndarray) -> float:
    """Numerical gradient of the form's formula in (MS_items, MS_raters, MS_error), var(MS) = 2 MS^2 / df."""
    n, k = x.shape
    grand = x.mean()
    msr = k * ((x.mean(axis=1) - grand) ** 2).sum() / (n - 1)
    msc = n * ((x.mean(axis=0) - grand) ** 2).sum() / (k - 1)
    resid = x - x.mean(axis=1, keepdims=True) - x.mean(axis=0, keepdims=True) + grand
    mse = (resid**2).sum() / ((n - 1) * (k - 1))

    def f(r: float, c: float, e: float) -> float:
        return {"C1": (r - e) / (r + (k - 1) * e), "Ck": (r - e) / r,
                "A1": (r - e) / (r + (k - 1) * e + k * (c - e) / n), "Ak": (r - e) / (r + (c - e) / n)}[form]

    point = np.array([msr, msc, mse])
    dfs = np.array([n - 1, k - 1, (n - 1) * (k - 1)])
    grad = np.empty(3)
    for j in range(3):
        h = 1e-6 * point[j]
        up, down = point.copy(), point.copy()
        up[j] += h
        down[j] -= h
        grad[j] = (f(*up) - f(*down)) / (2 * h)
    return float(np.sqrt(np.sum(grad**2 * 2 * point**2 / dfs)))


@pytest.mark.parametrize("seed", range(5))
def test_standard_errors_equal_the_literal_formulas(seed: int) -> None:
    rng = np.random.default_rng([35, 1, seed])
    n, k = int(rng.integers(5, 30)), int(rng.integers(2, 7))
    x = rng.normal(size=(n, 1)) + 0.5 * rng.normal(size=(1, k)) + rng.normal(size=(n, k))
    r = lg.Ratings.from_wide(x, level="interval")
    one = icc(r, "1")
    assert one.se_method == "analytic" and one.se == pytest.approx(_fisher_literal(one.value, n, k), rel=1e-12)
    assert "Fisher (1925)" in one.details["se_source"]
    # 1k = Spearman-Brown of 1, so its standard error is Fisher's times the transform's derivative
    ones = icc(r, "1k")
    slope = k / (1 + (k - 1) * one.value) ** 2
    assert ones.se_method == "analytic" and ones.se == pytest.approx(one.se * slope, rel=1e-9)
    for form in ("C1", "Ck", "A1", "Ak"):
        est = icc(r, form)
        assert est.se_method == "delta" and est.se == pytest.approx(_delta_literal(form, x), rel=1e-6), form
        assert "delta method" in est.details["se_source"]
    # the consistency form's delta variance is Fisher's expression with the residual mean square
    c1 = icc(r, "C1")
    assert c1.se == pytest.approx(_fisher_literal(c1.value, n, k), rel=1e-12)


def _spread(seed: int, n: int, k: int, rater_sd: float, replicates: int = 400) -> dict[str, float]:
    """sd of the estimates / root mean square of the reported se, per form, over simulated normal designs."""
    rng = np.random.default_rng([35, 2, seed])
    values: dict[str, list[float]] = {f: [] for f in FORMS}
    variances: dict[str, list[float]] = {f: [] for f in FORMS}
    for _ in range(replicates):
        x = rng.normal(size=(n, 1)) + rater_sd * rng.normal(size=(1, k)) + 0.8 * rng.normal(size=(n, k))
        r = lg.Ratings.from_wide(x, level="interval")
        for form in FORMS:
            est = icc(r, form)
            values[form].append(est.value)
            variances[form].append(est.se**2)
    return {f: float(np.std(values[f], ddof=1) / math.sqrt(np.mean(variances[f]))) for f in FORMS}


def test_every_form_matches_the_spread_of_simulated_estimates_under_the_one_way_model() -> None:
    ratios = _spread(1, 60, 4, rater_sd=0.0)
    assert all(0.9 < ratio < 1.1 for ratio in ratios.values()), ratios


@pytest.mark.parametrize(("seed", "n", "k"), [(2, 60, 4), (3, 40, 6), (4, 100, 3)])
def test_two_way_forms_match_the_spread_of_simulated_estimates_with_a_rater_effect(seed: int, n: int, k: int) -> None:
    ratios = _spread(seed, n, k, rater_sd=0.5)
    assert all(0.9 < ratios[f] < 1.1 for f in ("C1", "Ck")), ratios
    assert all(0.75 < ratios[f] < 1.1 for f in ("A1", "Ak")), ratios
    # the one-way model ignores the rater effect, and so does its standard error
    assert ratios["1"] > 1.1 and ratios["1k"] > 1.1, ratios


def test_no_standard_error_without_a_value() -> None:
    est = icc(lg.Ratings.from_wide([[2.0, 2.0], [2.0, 2.0], [2.0, 2.0]], level="interval"), "A1")
    assert est.is_nan and math.isnan(est.se) and est.se_method is None and "se_source" not in est.details
    perfect = icc(lg.Ratings.from_wide([[1.0, 1.0], [2.0, 2.0], [4.0, 4.0]], level="interval"), "1")
    assert perfect.value == pytest.approx(1.0) and perfect.se == pytest.approx(0.0, abs=1e-12)


def test_mean_squares_feed_the_standard_error() -> None:
    # the standard error reads the same mean squares as the value (one pass over the ratings)
    r = lg.Ratings.from_wide([[1, 2, 3], [3, 3, 4], [5, 6, 6], [2, 2, 4]], level="interval")
    ms = mean_squares(r)
    assert icc(r, "Ck").details["ms_error"] == ms["ms_error"]
