"""The metrics core against established implementations on many random designs (differential tests).

Peers (test-only): ``krippendorff`` 0.9, ``statsmodels`` (``fleiss_kappa``), ``scikit-learn``
(``cohen_kappa_score``) and ``irrCAC`` 0.4.4 (``CAC(..., digits=15)``). Tolerance 1e-9.

Where a peer defines a coefficient differently from LabelGate's documented policy, the test checks
the documented *relation* instead of equality (read from irrCAC's installed source, ``irrCAC/raw.py``):

* irrCAC keeps items with a single rating in its marginals: ``gwet`` and ``fleiss`` average
  ``n_ik / n_i`` over every rated item, ``conger`` takes each rater's marginal over all his ratings.
  LabelGate excludes single-rated items everywhere. Both use the same observed agreement ``pa``
  (pairable items only), and irrCAC on the data *without* single-rated items (and without the rater
  columns that become empty) equals LabelGate on the full data. ``bp`` has no marginals: equal as is.
* irrCAC ``fleiss`` is Gwet's generalisation with item-mean marginals
  ``pi_k = mean_i n_ik / n_i``; LabelGate's ``fleiss_kappa`` pools the ratings
  (``pi_k = sum_i n_ik / sum_i n_i``). Equal when every item has the same number of ratings; otherwise
  irrCAC's value is ``(p_o - pe) / (1 - pe)`` with ``p_o`` ours and ``pe = sum_k pi_k^2`` from
  item-mean marginals.
* irrCAC linear/quadratic weights use the category *values*; LabelGate uses ranks for
  nominal/ordinal labels and values for interval/ratio labels. Ordinal designs are given to irrCAC
  recoded to ranks; interval designs as they are (unequally spaced values).
* scikit-learn's weights use the positions of ``labels``: we pass the full category list, so they
  are LabelGate's ranks. scikit-learn needs complete pairs: on incomplete two-rater data it is
  given the items both raters judged, which is what ``cohen_kappa`` uses.
* irrCAC ``krippendorff`` (Gwet's weighted formulation) with identity weights is nominal alpha and
  with quadratic weights interval alpha.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator

import krippendorff
import numpy as np
import pandas as pd
import pytest
from irrCAC.raw import CAC
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

import labelgate as lg
import oracles
from labelgate.metrics._engine import evaluate
from labelgate.metrics.agreement import build_fleiss_kappa

TOL = 1e-9
N_SEEDS = 120
WEIGHTS = ("identity", "linear", "quadratic")


def same(a: float, b: float) -> bool:
    a, b = float(a), float(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=TOL, abs_tol=TOL)


def designs(level: str, salt: int, **kw) -> Iterator[tuple[int, np.ndarray, list[float]]]:
    for seed in range(N_SEEDS):
        rng = np.random.default_rng([salt, seed])
        X, cats = oracles.random_wide(rng, level=level, **kw)
        yield seed, X, cats


def counts(X: np.ndarray) -> np.ndarray:
    return (~np.isnan(X)).sum(axis=1)


def without_singles(X: np.ndarray) -> np.ndarray:
    """Drop items with fewer than two ratings, then rater columns left empty."""
    kept = X[counts(X) >= 2]
    return kept[:, (~np.isnan(kept)).any(axis=0)]


def to_ranks(X: np.ndarray, cats: list[float]) -> np.ndarray:
    out = np.full_like(X, np.nan)
    for k, c in enumerate(cats):
        out[X == c] = k
    return out


def irrcac(X: np.ndarray, cats: list[float], weights: str, method: str) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = getattr(CAC(pd.DataFrame(X), weights=weights, categories=list(cats), digits=15), method)()
    return result["est"]


def irrcac_input(X: np.ndarray, cats: list[float], level: str) -> tuple[np.ndarray, list[float]]:
    """irrCAC weights come from category values: give it ranks when LabelGate uses ranks."""
    if level in ("nominal", "ordinal"):
        return to_ranks(X, cats), [float(k) for k in range(len(cats))]
    return X, cats


def enough(compared: int, minimum: int = N_SEEDS * 3 // 4) -> None:
    # Guard against a test that silently compares nothing (e.g. every design degenerate).
    assert compared >= minimum, f"only {compared} designs compared"


# -------------------------------------------------------------------------------- krippendorff
@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_krippendorff_alpha_vs_krippendorff_package(level):
    compared = 0
    for seed, X, cats in designs(level, 1):
        est = lg.krippendorff_alpha(lg.Ratings.from_wide(X, level=level, categories=cats))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # 0/0 when one value is used: nan
                want = krippendorff.alpha(reliability_data=X.T, value_domain=cats, level_of_measurement=level)
        except ValueError:  # "at least one unit with values assigned by at least two coders"
            assert est.reason_code == lg.Reason.NO_PAIRABLE_ITEMS, (seed, est)
            continue
        assert same(est.value, want), (seed, level, est.value, want, X.tolist(), cats)
        compared += not math.isnan(want)
    enough(compared)


# --------------------------------------------------------------------------------- statsmodels
def test_fleiss_kappa_vs_statsmodels_complete_data():
    compared = 0
    for seed, X, cats in designs("nominal", 2, complete=True):
        r = lg.Ratings.from_wide(X, categories=cats)
        table = np.stack([(X == c).sum(axis=1) for c in cats], axis=1)  # items x categories, unused kept
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            fleiss = sm_fleiss_kappa(table, method="fleiss")
            randolph = sm_fleiss_kappa(table, method="randolph")
        # statsmodels' "randolph" (free-marginal) kappa is Bennett's S with q = all listed categories.
        assert same(lg.bennett_s(r).value, randolph), (seed, X.tolist(), cats)
        if np.isfinite(fleiss):
            assert same(lg.fleiss_kappa(r).value, fleiss), (seed, X.tolist(), cats)
            compared += 1
        else:
            assert math.isnan(lg.fleiss_kappa(r).value)
    enough(compared)


# -------------------------------------------------------------------------------- scikit-learn
@pytest.mark.parametrize("weights", WEIGHTS)
@pytest.mark.parametrize("level", ["nominal", "ordinal"])
def test_cohen_kappa_vs_sklearn_complete(weights, level):
    compared = 0
    for seed, X, cats in designs(level, 3, complete=True, n_raters=(2, 2), n_items=(4, 20)):
        sk = None if weights == "identity" else weights
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # UndefinedMetricWarning when one label is used: nan
            want = cohen_kappa_score(X[:, 0], X[:, 1], labels=cats, weights=sk)
        est = lg.cohen_kappa(lg.Ratings.from_wide(X, level=level, categories=cats), weights=weights)
        assert same(est.value, want), (seed, est.value, want, X.tolist(), cats)
        compared += not math.isnan(want)
    enough(compared)


@pytest.mark.parametrize("weights", WEIGHTS)
def test_cohen_kappa_vs_sklearn_on_items_both_rated(weights):
    # Documented relation: cohen_kappa on incomplete data = sklearn on the items both raters judged.
    compared = 0
    for seed, X, cats in designs("ordinal", 4, n_raters=(2, 2), n_items=(4, 20), singles=False):
        both = ~np.isnan(X).any(axis=1)
        if both.sum() < 2 or np.isnan(X).all(axis=0).any():
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # UndefinedMetricWarning when one label is used: nan
            want = cohen_kappa_score(X[both, 0], X[both, 1], labels=cats,
                                     weights=None if weights == "identity" else weights)
        est = lg.cohen_kappa(lg.Ratings.from_wide(X, level="ordinal", categories=cats), weights=weights)
        assert same(est.value, want), (seed, est.value, want, X.tolist(), cats)
        compared += not math.isnan(want)
    enough(compared, N_SEEDS // 2)


# -------------------------------------------------------------------------------------- irrCAC
IRRCAC_LEVELS = ["ordinal", "interval"]


@pytest.mark.parametrize("weights", WEIGHTS)
@pytest.mark.parametrize("level", IRRCAC_LEVELS)
def test_bennett_s_vs_irrcac_bp(weights, level):
    # Brennan-Prediger has no marginals: equal on the full data, single-rated items included.
    compared = 0
    for seed, X, cats in designs(level, 5):
        est = lg.bennett_s(lg.Ratings.from_wide(X, level=level, categories=cats), weights=weights)
        if math.isnan(est.value):
            assert est.reason_code is not None
            continue
        if (counts(X) > 0).sum() < 2:  # irrCAC's variance divides by n(n-1) over rated items
            continue
        peer = irrcac(*irrcac_input(X, cats, level), weights, "bp")
        assert same(est.value, peer["coefficient_value"]), (seed, est.value, peer, X.tolist(), cats)
        assert same(est.details["p_o"], peer["pa"])
        compared += 1
    enough(compared)


@pytest.mark.parametrize("weights", WEIGHTS)
@pytest.mark.parametrize("level", IRRCAC_LEVELS)
def test_gwet_ac_vs_irrcac_gwet(weights, level):
    compared = 0
    for seed, X, cats in designs(level, 6):
        est = lg.gwet_ac(lg.Ratings.from_wide(X, level=level, categories=cats), weights=weights)
        reduced = without_singles(X)
        if math.isnan(est.value) or reduced.shape[0] < 2:
            continue
        Xp, cp = irrcac_input(X, cats, level)
        full = irrcac(Xp, cp, weights, "gwet")
        assert same(est.details["p_o"], full["pa"]), (seed, X.tolist(), cats)  # same observed agreement
        peer = irrcac(without_singles(Xp), cp, weights, "gwet")
        assert same(est.value, peer["coefficient_value"]), (seed, est.value, peer, X.tolist(), cats)
        assert same(est.details["p_e"], peer["pe"])
        compared += 1
    enough(compared)


@pytest.mark.parametrize("weights", WEIGHTS)
@pytest.mark.parametrize("level", IRRCAC_LEVELS)
def test_conger_kappa_vs_irrcac_conger(weights, level):
    compared = 0
    for seed, X, cats in designs(level, 7):
        est = lg.conger_kappa(lg.Ratings.from_wide(X, level=level, categories=cats), weights=weights)
        reduced = without_singles(X)
        if math.isnan(est.value) or reduced.shape[0] < 2:
            continue
        Xp, cp = irrcac_input(X, cats, level)
        peer = irrcac(without_singles(Xp), cp, weights, "conger")
        assert same(est.value, peer["coefficient_value"]), (seed, est.value, peer, X.tolist(), cats)
        assert same(est.details["p_o"], peer["pa"]) and same(est.details["p_e"], peer["pe"])
        compared += 1
    enough(compared)


def test_fleiss_kappa_vs_irrcac_fleiss_equal_counts():
    compared = 0
    for seed, X, cats in designs("nominal", 8, complete=True):
        est = lg.fleiss_kappa(lg.Ratings.from_wide(X, categories=cats))
        if math.isnan(est.value):
            continue
        peer = irrcac(X, cats, "identity", "fleiss")
        assert same(est.value, peer["coefficient_value"]), (seed, est.value, peer, X.tolist(), cats)
        compared += 1
    enough(compared)


@pytest.mark.parametrize("weights", ["linear", "quadratic"])
@pytest.mark.parametrize("level", IRRCAC_LEVELS)
def test_weighted_fleiss_builder_vs_irrcac_fleiss_equal_counts(weights, level):
    # The public fleiss_kappa is unweighted; its builder takes weights (p_e = pi' W pi, as irrCAC).
    compared = 0
    for seed, X, cats in designs(level, 11, complete=True):
        r = lg.Ratings.from_wide(X, level=level, categories=cats)
        est = evaluate("fleiss_kappa", build_fleiss_kappa(r, weights=weights), ci=None, n_boot=0, seed=None)
        if math.isnan(est.value):
            continue
        peer = irrcac(*irrcac_input(X, cats, level), weights, "fleiss")
        assert same(est.value, peer["coefficient_value"]), (seed, est.value, peer, X.tolist(), cats)
        compared += 1
    enough(compared)


def test_fleiss_kappa_vs_irrcac_fleiss_unequal_counts_documented_relation():
    compared = differ = 0
    for seed, X, cats in designs("nominal", 9, missing=0.35):
        reduced = without_singles(X)
        est = lg.fleiss_kappa(lg.Ratings.from_wide(X, categories=cats))
        if math.isnan(est.value) or reduced.shape[0] < 2:
            continue
        peer = irrcac(reduced, cats, "identity", "fleiss")
        p_o = est.details["p_o"]
        assert same(p_o, peer["pa"]), (seed, X.tolist(), cats)
        # pe from item-mean marginals over the pairable items
        share = np.stack([(reduced == c).sum(axis=1) for c in cats], axis=1) / counts(reduced)[:, None]
        pe = float((share.mean(axis=0) ** 2).sum())
        assert same(peer["coefficient_value"], (p_o - pe) / (1 - pe)), (seed, peer, p_o, pe)
        assert same(peer["coefficient_value"], oracles.fleiss_kappa_item_mean(X, cats)["value"])
        differ += not same(est.value, peer["coefficient_value"])
        compared += 1
    enough(compared, N_SEEDS // 2)
    assert differ > compared // 2  # the two definitions really differ on unequal counts


@pytest.mark.parametrize(("weights", "level"), [("identity", "nominal"), ("quadratic", "interval")])
def test_krippendorff_alpha_vs_irrcac_krippendorff(weights, level):
    compared = 0
    for seed, X, cats in designs("interval", 10):
        est = lg.krippendorff_alpha(lg.Ratings.from_wide(X, level=level, categories=cats))
        if math.isnan(est.value) or without_singles(X).shape[0] < 2:
            continue
        peer = irrcac(X, cats, weights, "krippendorff")
        assert same(est.value, peer["coefficient_value"]), (seed, est.value, peer, X.tolist(), cats)
        compared += 1
    enough(compared)
