"""Checco et al.'s Phi (``labelgate.metrics.phi``).

reference-values.md: the slides' printed results do not belong to the demo
table, so Phi is tested by its defining properties (uniform -> 0, tight -> near
1, polarised -> < 0), by recovery of a known Beta precision, and by literal
re-implementations of the pieces (the authors' ``scale_mat`` and
``agreement``; brute-force integration of the item means).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, special

import labelgate as lg
from labelgate.metrics.phi import BetaItems, phi_agreement, phi_from_precision


def beta_ratings(rng: np.random.Generator, precision: float, n_items: int, k: int,
                 mu_range: tuple[float, float] = (0.02, 0.98)) -> lg.Ratings:
    mu = rng.uniform(*mu_range, n_items)[:, None]
    x = rng.beta(mu * precision, (1 - mu) * precision, size=(n_items, k))
    return lg.Ratings.from_wide(np.clip(x, 1e-12, 1 - 1e-12), level="interval")


def test_phi_of_precision_is_the_authors_agreement_function():
    # agreement(precision) = 1 - 2 exp(-ln 2 * precision / 2) in the package agreement-phi
    for p in (0.01, 0.5, 2.0, 5.0, 40.0):
        assert phi_from_precision(p) == pytest.approx(1 - 2 * math.exp(-math.log(2) * p / 2), abs=1e-15)
    assert phi_from_precision(2.0) == pytest.approx(0.0, abs=1e-15)
    assert phi_from_precision(1e-9) == pytest.approx(-1.0, abs=1e-8)
    assert phi_from_precision(200.0) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize(("p_true", "p_eval", "a0", "b0"), [
    (8.0, 8.0, 1.0, 1.0), (0.5, 0.5, 1.0, 1.0), (50.0, 200.0, 1.0, 1.0), (2.0, 0.01, 1.0, 1.0),
    (8.0, 8.0, 3.0, 5.0), (2.0, 1.0, 40.0, 60.0), (0.5, 0.3, 1.0, 700.0)])
def test_integrated_item_likelihood_equals_brute_force_quadrature(p_true, p_eval, a0, b0):
    rng = np.random.default_rng(int(p_true * 10))
    x = np.clip(rng.beta(0.3 * p_true, 0.7 * p_true, size=(5, 4)), 1e-6, 1 - 1e-6)
    items = BetaItems(np.full(5, 4.0), np.log(x).sum(axis=1), np.log1p(-x).sum(axis=1))
    brute = 0.0
    for row in x:
        def density(m: float, row: np.ndarray = row) -> float:
            # prod_j Beta(x_j | m p, (1 - m) p) * Beta(m | a0, b0), written out
            return math.exp(np.sum((m * p_eval - 1) * np.log(row) + ((1 - m) * p_eval - 1) * np.log1p(-row))
                            - 4 * special.betaln(m * p_eval, (1 - m) * p_eval)
                            + (a0 - 1) * math.log(m) + (b0 - 1) * math.log1p(-m) - special.betaln(a0, b0))
        value, _ = integrate.quad(density, 0, 1, limit=500, epsabs=0, epsrel=1e-12,
                                  points=[1e-3, 1e-2, 0.5, 0.99, 0.999])
        brute += math.log(value)
    assert items.loglik(p_eval, a0, b0) == pytest.approx(brute, abs=1e-7)


def test_continuous_uniform_ratings_give_phi_near_zero():
    r = lg.Ratings.from_wide(np.random.default_rng(0).uniform(size=(500, 5)), level="interval")
    est = phi_agreement(r, limits=(0, 1), squeeze=False, ci=0.95)
    assert abs(est.value) < 0.03
    assert est.ci[0] < 0.0 < est.ci[1]
    # the authors' flat prior on the item means overstates p here (all means are 1/2, 5 ratings per item)
    flat = phi_agreement(r, limits=(0, 1), squeeze=False, prior="flat", ci=0.95)
    assert flat.value > est.value and flat.ci[0] > 0


def test_tightly_concentrated_ratings_give_phi_near_one():
    rng = np.random.default_rng(1)
    truth = rng.integers(1, 6, size=(300, 1))
    noise = rng.integers(-1, 2, size=(300, 6)) * (rng.random((300, 6)) < 0.15)
    r = lg.Ratings.from_wide(np.clip(truth + noise, 1, 5), level="ordinal", categories=[1, 2, 3, 4, 5])
    assert float(phi_agreement(r)) > 0.9


def test_polarised_ratings_give_negative_phi():
    rng = np.random.default_rng(2)
    r = lg.Ratings.from_wide(rng.choice([1, 5], size=(300, 8)), level="ordinal", categories=[1, 2, 3, 4, 5])
    est = phi_agreement(r, ci=0.95)
    assert est.value < 0 and est.ci[1] < 0


@pytest.mark.parametrize("precision", [0.5, 2.0, 8.0])
def test_known_precision_is_recovered_when_item_means_span_the_scale(precision):
    # item means uniform over the scale: the flat prior on mu_i is right and the estimator unbiased
    rng = np.random.default_rng(3)
    fits = [phi_agreement(beta_ratings(rng, precision, 300, 5), limits=(0, 1), squeeze=False, ci=0.95)
            for _ in range(10)]
    estimates = np.array([f.details["precision"] for f in fits])
    assert estimates.mean() == pytest.approx(precision, rel=0.05)
    covered = sum(f.details["precision_ci_low"] <= precision <= f.details["precision_ci_high"] for f in fits)
    assert covered >= 8


def test_fitted_prior_removes_the_flat_prior_bias_for_concentrated_item_means():
    rng = np.random.default_rng(4)
    data = [beta_ratings(rng, 8.0, 300, 3, (0.2, 0.8)) for _ in range(8)]
    fitted = np.array([phi_agreement(r, limits=(0, 1), squeeze=False).details["precision"] for r in data])
    flat = np.array([phi_agreement(r, limits=(0, 1), squeeze=False, prior="flat").details["precision"]
                     for r in data])
    se = fitted.std() / math.sqrt(fitted.size)
    assert abs(fitted.mean() - 8.0) < 4 * se
    assert flat.mean() > fitted.mean() and flat.mean() > 8.0 + 4 * se


def _scale_mat(mat: np.ndarray, limits: tuple[float, float]) -> np.ndarray:
    """The authors' scale_mat (agreement_phi/__init__.py), line by line."""
    result = []
    for value in mat:
        length = len(value)
        temp = np.array(value) - limits[0]
        temp = temp / (limits[1] - limits[0])
        temp = (temp * (length - 1) + 0.5) / length
        result.append(list(temp))
    return np.array(result, ndmin=2)


def test_squeeze_is_the_authors_scale_mat():
    rng = np.random.default_rng(5)
    data = rng.integers(1, 8, size=(40, 6)).astype(float)
    squeezed = _scale_mat(data, (1.0, 7.0))
    ours = phi_agreement(lg.Ratings.from_wide(data, level="interval"), limits=(1, 7))
    theirs = phi_agreement(lg.Ratings.from_wide(squeezed, level="interval"), limits=(0, 1), squeeze=False)
    assert ours.value == pytest.approx(theirs.value, abs=1e-10)
    assert ours.details["precision"] == pytest.approx(theirs.details["precision"], rel=1e-8)


def test_ordinal_limits_are_categories_and_default_to_the_scale_ends():
    rng = np.random.default_rng(6)
    data = rng.integers(2, 5, size=(50, 5))  # categories 1 and 5 declared but unused
    ordinal = lg.Ratings.from_wide(data, level="ordinal", categories=[1, 2, 3, 4, 5])
    interval = lg.Ratings.from_wide(data, level="interval")
    assert float(phi_agreement(ordinal)) == pytest.approx(float(phi_agreement(interval, limits=(1, 5))), abs=1e-10)
    assert float(phi_agreement(ordinal, limits=(1, 5))) == pytest.approx(float(phi_agreement(ordinal)), abs=1e-12)
    assert phi_agreement(ordinal).details["limits"] == [1, 5]


def test_identical_ratings_within_every_item_give_one():
    est = phi_agreement(lg.Ratings.from_wide([[1, 1, 1], [3, 3, 3], [5, 5, 5]], level="interval"))
    assert est.value == 1.0 and est.details["precision"] == math.inf


def test_single_rated_items_are_excluded():
    wide = np.array([[1, 2, np.nan], [4, 5, 5], [3, np.nan, np.nan], [2, 2, 3]])
    est = phi_agreement(lg.Ratings.from_wide(wide, level="interval"), limits=(1, 5))
    assert est.n_items == 3 and est.n_items_excluded == 1 and est.n_ratings == 8
    lonely = np.full((3, 3), np.nan)
    lonely[[0, 1, 2], [0, 1, 2]] = [1, 2, 3]
    none = phi_agreement(lg.Ratings.from_wide(lonely, level="interval"))
    assert none.is_nan and none.reason_code == lg.Reason.NO_PAIRABLE_ITEMS


def test_bad_input_raises_naming_the_problem():
    r = lg.Ratings.from_wide([[1, 2], [2, 3]], level="interval")
    with pytest.raises(lg.ParameterError, match="bounded ordered scale"):
        phi_agreement(lg.Ratings.from_wide([["a", "b"], ["b", "b"]]))
    with pytest.raises(lg.ParameterError, match="outside the limits"):
        phi_agreement(r, limits=(2, 3))
    with pytest.raises(lg.ParameterError, match="low < high"):
        phi_agreement(r, limits=(3, 1))
    with pytest.raises(lg.ParameterError, match="squeeze=False"):
        phi_agreement(r, squeeze=False)
    with pytest.raises(lg.ParameterError, match="'ci' parameter of phi_agreement"):
        phi_agreement(r, ci=95)
    with pytest.raises(lg.ParameterError, match="'prior' parameter of phi_agreement must be one of"):
        phi_agreement(r, prior="jeffreys")


# ----------------------------------------------------------------------------- standard error
def _se_spread(prior: str, replicates: int, n_items: int) -> float:
    """sd of Phi over simulated Beta designs (precision 6, item means uniform on the scale, 5 ratings per item)
    divided by the root mean square of the reported standard errors."""
    rng = np.random.default_rng([35, 3, n_items])
    values, variances = [], []
    for _ in range(replicates):
        est = phi_agreement(beta_ratings(rng, 6.0, n_items, 5), limits=(0, 1), squeeze=False, prior=prior)
        assert est.se_method == "delta" and est.se > 0
        values.append(est.value)
        variances.append(est.se**2)
    return float(np.std(values, ddof=1) / math.sqrt(np.mean(variances)))


def test_flat_prior_standard_error_matches_the_spread_of_simulated_estimates():
    # 200 replicates: the sample sd has a relative sampling error of about 1 / sqrt(400) = 5 %; 3 of them
    assert 0.85 < _se_spread("flat", 200, 30) < 1.15


def test_fitted_prior_standard_error_matches_the_spread_of_simulated_estimates():
    # the joint fit is slower, so 40 replicates: a relative sampling error of about 11 %; 3 of them
    assert 0.67 < _se_spread("beta", 40, 25) < 1.33


@pytest.mark.parametrize("prior", ["beta", "flat"])
def test_standard_error_is_the_delta_method_over_the_log_precision(prior):
    r = beta_ratings(np.random.default_rng([35, 4]), 5.0, 40, 4)
    est = phi_agreement(r, limits=(0, 1), squeeze=False, prior=prior, ci=0.9)
    p, se_log = est.details["precision"], est.details["log_precision_se"]
    # dPhi/dlog p by central differences of the authors' agreement function
    h = 1e-6
    slope = (phi_from_precision(p * math.exp(h)) - phi_from_precision(p * math.exp(-h))) / (2 * h)
    assert est.se == pytest.approx(float(slope) * se_log, rel=1e-6)
    assert "observed information" in est.details["se_source"] and math.isnan(est.z) and math.isnan(est.p_value)
    if prior == "beta":  # the Wald interval on log p is log p -/+ z se(log p)
        z = 1.6448536269514722
        assert est.details["precision_ci_low"] == pytest.approx(p * math.exp(-z * se_log), rel=1e-9)
        assert est.details["precision_ci_high"] == pytest.approx(p * math.exp(z * se_log), rel=1e-9)
    else:  # the likelihood-ratio interval of a regular likelihood is close to the Wald one
        assert est.details["precision_ci_low"] == pytest.approx(p * math.exp(-1.6448536269514722 * se_log), rel=0.05)


def test_no_standard_error_at_infinite_precision():
    r = lg.Ratings.from_wide([[1, 1, 1], [3, 3, 3], [5, 5, 5]], level="ordinal", categories=[1, 2, 3, 4, 5])
    est = phi_agreement(r)
    assert est.value == 1.0 and math.isnan(est.se) and est.se_method is None and "infinite" in est.details["se_note"]
