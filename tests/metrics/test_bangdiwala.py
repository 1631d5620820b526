"""Bangdiwala's B: the published worked example, a literal oracle, and its limits."""

from __future__ import annotations

import math

import numpy as np
import pytest

import labelgate as lg

# Agresti's SexualFun table (Hout, Duncan & Sobel 1987), as R's vcd ships it; vcd's agreementplot prints
# Bangdiwala 0.1464624
SEXUAL_FUN = [[7, 7, 2, 3], [2, 8, 3, 7], [1, 5, 4, 9], [2, 8, 9, 14]]


def literal(table: np.ndarray) -> float:
    """Bangdiwala (1985): sum of squared diagonal counts over the sum of products of the marginal counts."""
    q = table.shape[0]
    squares = sum(table[k, k] ** 2 for k in range(q))
    rectangles = sum(table[k, :].sum() * table[:, k].sum() for k in range(q))
    return squares / rectangles


def test_vcd_worked_example() -> None:
    est = lg.bangdiwala_b(lg.Ratings.from_contingency(SEXUAL_FUN))
    assert round(float(est), 7) == 0.1464624
    assert est.details["agreement_area"] == 325 and est.details["chart_area"] == 2219
    assert est.n_items == 91 and est.se_method == "delta" and est.se > 0
    assert math.isnan(est.z) and math.isnan(est.p_value)


def test_symmetric_in_the_raters() -> None:
    table = np.asarray(SEXUAL_FUN)
    assert float(lg.bangdiwala_b(lg.Ratings.from_contingency(table.T))) == pytest.approx(325 / 2219, abs=1e-15)


def test_random_tables_equal_the_literal_formula() -> None:
    rng = np.random.default_rng(1985)
    for _ in range(50):
        q = int(rng.integers(2, 7))
        table = rng.integers(0, 9, size=(q, q))
        table[0, 0] += 1
        assert float(lg.bangdiwala_b(lg.Ratings.from_contingency(table))) == pytest.approx(literal(table), rel=1e-12)


def test_raw_ratings_use_the_items_both_raters_judged() -> None:
    rng = np.random.default_rng(2)
    X = rng.integers(0, 3, size=(50, 2)).astype(float)
    X[:8, 0] = np.nan
    X[8:12, 1] = np.nan
    table = np.zeros((3, 3))
    for a, b in X[12:].astype(int):
        table[a, b] += 1
    est = lg.bangdiwala_b(lg.Ratings.from_wide(X, categories=[0.0, 1.0, 2.0]))
    assert float(est) == pytest.approx(literal(table), rel=1e-12)
    assert est.n_items == 38 and est.n_items_excluded == 12


def test_perfect_and_no_agreement() -> None:
    assert float(lg.bangdiwala_b(lg.Ratings.from_contingency([[5, 0], [0, 7]]))) == 1.0
    assert float(lg.bangdiwala_b(lg.Ratings.from_contingency([[0, 5, 1], [3, 0, 0], [0, 2, 0]]))) == 0.0


def test_no_category_in_common_is_nan_with_a_reason() -> None:
    est = lg.bangdiwala_b(lg.Ratings.from_contingency([[0, 4], [0, 0]]))
    assert est.is_nan and est.reason_code == lg.Reason.NO_VARIANCE and "no category in common" in est.reason


def test_delta_and_bootstrap_intervals_bracket_the_value() -> None:
    r = lg.Ratings.from_contingency(SEXUAL_FUN)
    delta = lg.bangdiwala_b(r, ci=0.95, ci_method="delta")
    assert delta.ci == pytest.approx((delta.value - 1.959963984540054 * delta.se,
                                      delta.value + 1.959963984540054 * delta.se))
    boot = lg.bangdiwala_b(r, ci=0.95, n_boot=500, seed=3, ci_method="percentile")
    assert boot.ci[0] < boot.value < boot.ci[1] and boot.n_boot == 500


def test_needs_two_identified_raters() -> None:
    with pytest.raises(lg.DesignError, match="exactly two raters") as info:
        lg.bangdiwala_b(lg.Ratings.from_wide([[0, 1, 1], [1, 1, 0]]))
    assert info.value.code == lg.Reason.WRONG_RATER_COUNT
    with pytest.raises(lg.DesignError, match="which rater gave each rating"):
        lg.bangdiwala_b(lg.Ratings.from_counts([[1, 1], [2, 0]]))
