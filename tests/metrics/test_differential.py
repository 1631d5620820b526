"""The metrics core against established implementations on many random designs (differential tests).

Peers (test-only): ``krippendorff`` 0.9, ``statsmodels`` (``fleiss_kappa``), ``scikit-learn``
(``cohen_kappa_score``) and ``irrCAC`` 0.4.4 (``CAC(..., digits=15)``), the implementation of Gwet's
*Handbook of Inter-Rater Reliability*. Tolerance 1e-9.

The random designs (``oracles.random_wide``) have items rated once, unequal numbers of ratings per
item and categories nobody used. Relations read from irrCAC's installed source (``irrCAC/raw.py``):

* ``gwet``, ``fleiss`` and ``conger`` take the observed agreement ``pa`` over the items with two or
  more ratings and the chance-agreement marginals over every rated item (``gwet``/``fleiss``: the
  mean of ``n_ik / n_i``; ``conger``: each rater's share over all his ratings). That is LabelGate's
  default (``marginals="all_rated_items"``): equal on the full data. irrCAC needs every rater column
  to hold a rating (else its Conger marginals are 0/0); LabelGate has no rater without a rating, so
  empty columns are dropped before irrCAC sees them.
* ``marginals="pairable_items"`` (LabelGate's earlier definition) equals irrCAC on the data *without*
  single-rated items for ``gwet`` and ``conger``; for ``fleiss_kappa`` it pools the ratings and
  equals statsmodels (and irrCAC) when every item has the same number of ratings.
* ``bp`` has no marginals: equal as is.
* Every weighting of the handbook (identity, linear, quadratic, ordinal, radical, ratio, circular,
  bipolar) and random custom matrices. irrCAC's weights use the category *values*; LabelGate uses
  the ranks 1..q for nominal/ordinal labels and the values for interval/ratio labels. Ordinal
  designs are given to irrCAC recoded to ranks 1..q; interval designs as they are (unequally spaced
  values). Ratio weights need positive values (irrCAC refuses 0): with them the interval designs
  are shifted by +3.5 (values in [0.5, 12.5]) and read at the ratio level.
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
from labelgate.metrics._engine import evaluate
from labelgate.metrics.agreement import build_conger_kappa, build_fleiss_kappa, build_gwet_ac
from labelgate.metrics.weights import WEIGHTS as ALL_WEIGHTS
from tests import oracles

TOL = 1e-9
N_SEEDS = 120
WEIGHTS = ("identity", "linear", "quadratic")  # scikit-learn's


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
        out[X == c] = k + 1
    return out


def weighted_design(X: np.ndarray, cats: list[float], level: str, weights: str,
                    ) -> tuple[np.ndarray, list[float], str]:
    """The design as it is, or for ratio weights on interval values, shifted to positive values at the ratio level."""
    if weights == "ratio" and level == "interval":
        return X + 3.5, [c + 3.5 for c in cats], "ratio"
    return X, cats, level


def irrcac(X: np.ndarray, cats: list[float], weights: str | np.ndarray, method: str) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = getattr(CAC(pd.DataFrame(X), weights=weights, categories=list(cats), digits=15), method)()
    return result["est"]


def irrcac_input(X: np.ndarray, cats: list[float], level: str) -> tuple[np.ndarray, list[float]]:
    """irrCAC weights come from category values: give it ranks 1..q when LabelGate uses ranks."""
    if level in ("nominal", "ordinal"):
        return to_ranks(X, cats), [float(k + 1) for k in range(len(cats))]
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


@pytest.mark.parametrize("weights", ALL_WEIGHTS)
@pytest.mark.parametrize("level", IRRCAC_LEVELS)
def test_bennett_s_vs_irrcac_bp(weights, level):
    # Brennan-Prediger has no marginals: equal on the full data, single-rated items included.
    compared = 0
    for seed, X0, cats0 in designs(level, 5):
        X, cats, at = weighted_design(X0, cats0, level, weights)
        est = lg.bennett_s(lg.Ratings.from_wide(X, level=at, categories=cats), weights=weights)
        if math.isnan(est.value):
            assert est.reason_code is not None
            continue
        if (counts(X) > 0).sum() < 2:  # irrCAC's variance divides by n(n-1) over rated items
            continue
        peer = irrcac(*irrcac_input(X, cats, at), weights, "bp")
        assert same(est.value, peer["coefficient_value"]), (seed, est.value, peer, X.tolist(), cats)
        assert same(est.details["p_o"], peer["pa"])
        compared += 1
    enough(compared)


def rated_columns(X: np.ndarray) -> np.ndarray:
    """The rater columns that hold at least one rating (LabelGate has no rater without one)."""
    return X[:, (~np.isnan(X)).any(axis=0)]


def sparse(X: np.ndarray) -> bool:
    """Some item is rated once and the rated items have unequal numbers of ratings."""
    n = counts(X)[counts(X) > 0]
    return bool((n == 1).any() and n.min() != n.max())


HANDBOOK = {"gwet": build_gwet_ac, "conger": build_conger_kappa, "fleiss": build_fleiss_kappa}


@pytest.mark.parametrize("method", sorted(HANDBOOK))
@pytest.mark.parametrize("weights", ALL_WEIGHTS)
@pytest.mark.parametrize("level", IRRCAC_LEVELS)
def test_handbook_coefficients_vs_irrcac_on_sparse_designs(method, weights, level):
    # The default definition is Gwet's: equal to irrCAC at full precision, single-rated items included.
    compared = with_singles = 0
    for seed, X0, cats0 in designs(level, 6):
        X, cats, at = weighted_design(X0, cats0, level, weights)
        r = lg.Ratings.from_wide(X, level=at, categories=cats)
        est = evaluate(method, HANDBOOK[method](r, weights=weights), ci=None, n_boot=0, seed=None)
        if est.reason_code == lg.Reason.NO_PAIRABLE_ITEMS:
            assert (counts(X) < 2).all()  # irrCAC divides by the number of pairable items: 0/0
            continue
        if (counts(X) > 0).sum() < 2:  # irrCAC's variance divides by n(n-1) over rated items
            continue
        if est.reason_code == lg.Reason.NO_EXPECTED_DISAGREEMENT:
            assert same(est.details["p_e"], 1.0)  # irrCAC's fleiss raises ZeroDivisionError on this 0/0
            continue
        peer = irrcac(*irrcac_input(rated_columns(X), cats, at), weights, method)
        assert same(est.details["p_o"], peer["pa"]), (seed, X.tolist(), cats)
        assert same(lg.percent_agreement(r, weights).value, peer["pa"])
        assert same(est.details["p_e"], peer["pe"]), (seed, est.details, peer, X.tolist(), cats)
        if not math.isnan(est.value):
            assert same(est.value, peer["coefficient_value"]), (seed, est.value, peer, X.tolist(), cats)
            compared += 1
            with_singles += sparse(X)
    enough(compared)
    assert with_singles >= N_SEEDS // 4, with_singles  # the sparse case is really exercised


@pytest.mark.parametrize("weights", ALL_WEIGHTS)
@pytest.mark.parametrize("level", IRRCAC_LEVELS)
def test_public_handbook_coefficients_are_the_builders(weights, level):
    # gwet_ac / conger_kappa / fleiss_kappa / scott_pi are the builders above with their default marginals.
    for _seed, X0, cats0 in designs(level, 12):
        X, cats, at = weighted_design(X0, cats0, level, weights)
        r = lg.Ratings.from_wide(X, level=at, categories=cats)
        for public, method in ((lg.gwet_ac, "gwet"), (lg.conger_kappa, "conger"), (lg.fleiss_kappa, "fleiss"),
                               (lg.scott_pi, "fleiss")):
            built = evaluate(method, HANDBOOK[method](r, weights=weights), ci=None, n_boot=0, seed=None)
            assert same(public(r, weights).value, built.value)


@pytest.mark.parametrize("weights", ALL_WEIGHTS)
@pytest.mark.parametrize("level", IRRCAC_LEVELS)
@pytest.mark.parametrize("method", ["gwet", "conger"])
def test_pairable_marginals_option_is_irrcac_without_single_rated_items(method, weights, level):
    compared = differ = 0
    for seed, X0, cats0 in designs(level, 7):
        X, cats, at = weighted_design(X0, cats0, level, weights)
        r = lg.Ratings.from_wide(X, level=at, categories=cats)
        est = evaluate(method, HANDBOOK[method](r, weights=weights, marginals="pairable_items"), ci=None, n_boot=0,
                       seed=None)
        reduced = without_singles(X)
        if math.isnan(est.value) or reduced.shape[0] < 2:
            continue
        peer = irrcac(*irrcac_input(reduced, cats, at), weights, method)
        assert same(est.value, peer["coefficient_value"]), (seed, est.value, peer, X.tolist(), cats)
        assert same(est.details["p_o"], peer["pa"]) and same(est.details["p_e"], peer["pe"])
        handbook = evaluate(method, HANDBOOK[method](r, weights=weights), ci=None, n_boot=0, seed=None)
        differ += not same(handbook.value, est.value)
        compared += 1
    enough(compared)
    assert differ > compared // 4  # the two definitions really differ when items are rated once


def test_fleiss_kappa_vs_irrcac_fleiss_equal_counts():
    compared = 0
    for seed, X, cats in designs("nominal", 8, complete=True):
        r = lg.Ratings.from_wide(X, categories=cats)
        est = lg.fleiss_kappa(r)
        if math.isnan(est.value):
            continue
        peer = irrcac(X, cats, "identity", "fleiss")
        assert same(est.value, peer["coefficient_value"]), (seed, est.value, peer, X.tolist(), cats)
        # with equal numbers of ratings the pooled (earlier) and item-mean marginals coincide
        assert same(lg.fleiss_kappa(r, marginals="pairable_items").value, est.value)
        compared += 1
    enough(compared)


def test_fleiss_kappa_pooled_option_vs_oracle_on_unequal_counts():
    # marginals="pairable_items" keeps Fleiss' pooled marginals over pairable items; it differs from Gwet's.
    compared = differ = 0
    for seed, X, cats in designs("nominal", 9, missing=0.35):
        r = lg.Ratings.from_wide(X, categories=cats)
        pooled = lg.fleiss_kappa(r, marginals="pairable_items")
        if math.isnan(pooled.value) or without_singles(X).shape[0] < 2:
            continue
        assert same(pooled.value, oracles.fleiss_kappa_pooled(X, cats)["value"]), (seed, X.tolist(), cats)
        differ += not same(pooled.value, lg.fleiss_kappa(r).value)
        compared += 1
    enough(compared, N_SEEDS // 2)
    assert differ > compared // 2


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
