"""Standard errors and tests of no agreement against the published values and the peers' outputs.

* Gwet's analytic variances (*Handbook of Inter-Rater Reliability*, 4th ed., ch. 5) as irrCAC 0.4.4 computes them
  (``irrCAC.raw.CAC(...).gwet()/fleiss()/conger()/bp()/krippendorff()["est"]["se"]``): the handbook's datasets
  at irrCAC's printed precision (5 decimals) and to 1e-9 with ``digits=15``, every handbook weighting, and random
  sparse designs (items rated once, unequal numbers of ratings, unused categories).
* Cohen's kappa: statsmodels ``cohens_kappa`` (``std_kappa``, ``std_kappa0``, ``z_value``,
  ``pvalue_two_sided``) on random tables, and SAS PROC FREQ's printout that statsmodels' own tests reproduce (4
  decimals).
* Fleiss' kappa's test of kappa = 0 (Fleiss, Nee & Landis 1979): a literal transcription of the formula; an
  independently published printout at 4 decimals (G. Cardillo's MATLAB ``fleiss.m``, MathWorks File Exchange
  15426, README example on the 10 patients x 14 psychiatrists table: kappa 0.2099, standard error 0.0170,
  z 12.3743); and Fleiss' (1971) diagnoses data, z = 17.7 at 1 decimal, the value the test suite of pyirr (a Python
  port of R ``irr``, ``tests/test_kappam_fleiss.py``) asserts for ``kappam_fleiss(diagnoses)`` (R's own
  documentation does not print its example's output).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from irrCAC import table as irrcac_table
from irrCAC.datasets import raw_4raters, raw_g1g2
from irrCAC.raw import CAC
from statsmodels.stats.inter_rater import cohens_kappa

import labelgate as lg
from labelgate.metrics.weights import WEIGHTS
from tests import oracles

TOL = 1e-9
CATEGORIES = {"raw_4raters": [1.0, 2.0, 3.0, 4.0, 5.0], "raw_g1g2": ["a", "b", "c", "d", "e"]}
DATA = {"raw_4raters": raw_4raters, "raw_g1g2": raw_g1g2}
COEFFICIENTS = {"gwet": lg.gwet_ac, "fleiss": lg.fleiss_kappa, "conger": lg.conger_kappa, "bp": lg.bennett_s}
# alpha's distance is its level's; Gwet writes each as a weighting
ALPHA_LEVELS = {"nominal": "identity", "interval": "quadratic", "ratio": "ratio"}


def close(a: float, b: float, tol: float = TOL) -> bool:
    return math.isclose(float(a), float(b), rel_tol=tol, abs_tol=tol)


def irrcac(data: pd.DataFrame, cats: list, weights: str, method: str, digits: int = 15) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return getattr(CAC(data, weights=weights, categories=cats, digits=digits), method)()["est"]
        except ZeroDivisionError:  # irrCAC on a 0/0 coefficient (LabelGate: NaN with a reason)
            return {"se": math.nan, "coefficient_value": math.nan}


def handbook(name: str) -> tuple[pd.DataFrame, list[float]]:
    """The dataset as irrCAC reads it: its weights need numbers, so a..e become the ranks 1..5 (as LabelGate's)."""
    data, cats = DATA[name](), CATEGORIES[name]
    if name == "raw_g1g2":
        ranks = {c: float(k + 1) for k, c in enumerate(cats)}
        data = data.map(lambda v: ranks.get(v, np.nan))
    return data, [float(k + 1) for k in range(len(cats))]


# ----------------------------------------------------------------------------- Gwet's handbook / irrCAC
def test_irrcac_printed_standard_errors() -> None:
    # irrCAC's documented output on the handbook's 4-rater data (irrCAC/raw.py docstring)
    r = lg.Ratings.from_wide(raw_4raters(), categories=CATEGORIES["raw_4raters"], level="ordinal")
    assert round(lg.gwet_ac(r).se, 5) == 0.14295
    assert round(lg.fleiss_kappa(r).se, 5) == 0.15302
    assert round(lg.gwet_ac(r, weights="bipolar").se, 5) == 0.10582


@pytest.mark.parametrize("weights", WEIGHTS)
@pytest.mark.parametrize("method", sorted(COEFFICIENTS))
@pytest.mark.parametrize("name", sorted(DATA))
def test_handbook_datasets_equal_irrcac(name: str, method: str, weights: str) -> None:
    r = lg.Ratings.from_wide(DATA[name](), categories=CATEGORIES[name], level="ordinal")
    est = COEFFICIENTS[method](r, weights)
    data, cats = handbook(name)
    assert est.se_method == "analytic" and "Gwet" in est.details["se_source"]
    assert round(est.se, 5) == pytest.approx(irrcac(data, cats, weights, method, digits=5)["se"], abs=1e-12)
    assert close(est.se, irrcac(data, cats, weights, method)["se"])


@pytest.mark.parametrize("level", sorted(ALPHA_LEVELS))
@pytest.mark.parametrize("name", sorted(DATA))
def test_handbook_alpha_equals_irrcac(name: str, level: str) -> None:
    data, cats = handbook(name)
    est = lg.krippendorff_alpha(lg.Ratings.from_wide(data, categories=cats, level=level))
    want = irrcac(data, cats, ALPHA_LEVELS[level], "krippendorff")
    assert close(est.value, want["coefficient_value"]) and est.se_method == "analytic"
    assert close(est.se, want["se"])
    assert round(est.se, 5) == irrcac(data, cats, ALPHA_LEVELS[level], "krippendorff", digits=5)["se"]


def _designs(level: str, salt: int, n: int = 60):
    for seed in range(n):
        rng = np.random.default_rng([salt, seed])
        X, cats = oracles.random_wide(rng, level=level)
        X = X[~np.isnan(X).all(axis=1)]
        X = X[:, (~np.isnan(X)).any(axis=0)]  # irrCAC's Conger needs a rating in every rater column
        if X.shape[0] >= 3 and (~np.isnan(X)).sum(axis=1).max() >= 2:
            yield seed, X, cats


def _ranks(X: np.ndarray, cats: list[float]) -> tuple[np.ndarray, list[float]]:
    out = np.full_like(X, np.nan)
    for k, c in enumerate(cats):
        out[X == c] = k + 1
    return out, [float(k + 1) for k in range(len(cats))]


@pytest.mark.parametrize("weights", ["identity", "quadratic", "circular"])
@pytest.mark.parametrize("method", sorted(COEFFICIENTS))
def test_random_sparse_designs_equal_irrcac(method: str, weights: str) -> None:
    compared = 0
    for seed, X, cats in _designs("nominal", 11):
        est = COEFFICIENTS[method](lg.Ratings.from_wide(X, categories=cats), weights)
        ranks, rank_cats = _ranks(X, cats)
        want = irrcac(pd.DataFrame(ranks), rank_cats, weights, method)
        if math.isnan(est.se) or not want["se"] > 1e-12:
            continue  # undefined (0/0) or irrCAC's 1e-15 stand-in for a zero variance
        assert close(est.se, want["se"], 1e-8), (seed, est.se, want["se"], X.tolist())
        compared += 1
    assert compared >= 20, compared


@pytest.mark.parametrize("level", sorted(ALPHA_LEVELS))
def test_random_sparse_alpha_equals_irrcac(level: str) -> None:
    compared = 0
    for seed, X, cats in _designs("interval" if level != "nominal" else "nominal", 12):
        if level == "ratio":
            X, cats = X + 3.5, [c + 3.5 for c in cats]  # irrCAC's ratio weights need positive values
        est = lg.krippendorff_alpha(lg.Ratings.from_wide(X, categories=cats, level=level))
        data, irr_cats = (_ranks(X, cats) if level == "nominal" else (X, cats))
        want = irrcac(pd.DataFrame(data), irr_cats, ALPHA_LEVELS[level], "krippendorff")
        if est.is_nan or math.isnan(est.se) or not want["se"] > 1e-12:
            continue
        assert close(est.value, want["coefficient_value"], 1e-8), seed
        assert close(est.se, want["se"], 1e-8), (seed, est.se, want["se"])
        compared += 1
    assert compared >= 20, compared


@pytest.mark.parametrize("weights", WEIGHTS)
def test_percent_agreement_is_brennan_prediger_without_chance(weights: str) -> None:
    # Gwet's formula for S linearises p_a alone (p_e is fixed): se(S) = se(p_a) / (1 - p_e), irrCAC's bp, when
    # every item is pairable (a single-rated item enters S's item values as -p_e n/n', percent agreement's as 0)
    data, cats = handbook("raw_4raters")
    data = data[data.notna().sum(axis=1) >= 2]
    r = lg.Ratings.from_wide(data, categories=cats, level="ordinal")
    pa, bp = lg.percent_agreement(r, weights), irrcac(data, cats, weights, "bp")
    assert pa.se_method == "analytic" and close(pa.se, bp["se"] * (1.0 - bp["pe"]))


def test_percent_agreement_on_a_table_is_irrcac_table_with_the_sample_variance() -> None:
    # irrCAC's two-rater table formulas divide by n, the raw-ratings ones by n - 1
    table = np.array([[13, 0, 0], [0, 20, 7], [0, 4, 56]])
    est = lg.percent_agreement(lg.Ratings.from_contingency(table), "quadratic")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = irrcac_table.CAC(pd.DataFrame(table), weights="quadratic", digits=15).pa2()["est"]
    n = table.sum()
    assert close(est.se, want["se"] * math.sqrt(n / (n - 1)))


# ----------------------------------------------------------------------------- Cohen: statsmodels and SAS
SAS_TABLE = [[0, 4, 1], [0, 8, 0], [0, 1, 5]]


@pytest.mark.parametrize(("weights", "printed"), [
    ("identity", (0.4842, 0.1380, 0.1484, 3.2626, 0.0011)),
    ("linear", (0.4701, 0.1457, 0.1426, 3.2971, 0.0010)),
])
def test_cohen_kappa_equals_sas_printout(weights: str, printed: tuple[float, ...]) -> None:
    # SAS PROC FREQ AGREE / TEST KAPPA (WTKAP) on statsmodels' test table: kappa, ASE, ASE under H0, Z, two-sided p
    est = lg.cohen_kappa(lg.Ratings.from_contingency(SAS_TABLE), weights)
    got = (est.value, est.se, est.details["se_null"], est.z, est.p_value)
    assert tuple(round(x, 4) for x in got) == printed
    assert est.se_method == "analytic" and "Fleiss, Cohen & Everitt" in est.details["se_source"]


@pytest.mark.parametrize("weights", ["identity", "linear", "quadratic"])
def test_cohen_kappa_equals_statsmodels_on_random_tables(weights: str) -> None:
    rng = np.random.default_rng(35)
    for _ in range(40):
        q = int(rng.integers(2, 6))
        table = rng.integers(0, 12, size=(q, q)) + np.diag(rng.integers(0, 10, size=q))
        table[0, 0] += 1
        table[-1, -1] += 1  # every category in both margins
        sm_weights = {"identity": None, "linear": np.arange(q), "quadratic": np.arange(q)}[weights]
        want = cohens_kappa(table, weights=sm_weights, wt="quadratic" if weights == "quadratic" else None)
        est = lg.cohen_kappa(lg.Ratings.from_contingency(table), weights)
        assert close(est.value, want.kappa)
        assert close(est.se, want.std_kappa) and close(est.details["se_null"], want.std_kappa0)
        assert close(est.z, want.z_value) and close(est.p_value, want.pvalue_two_sided, 1e-8)


def test_cohen_kappa_equals_irrcac_table() -> None:
    table = np.array([[13, 0, 0], [0, 20, 7], [0, 4, 56]])
    est = lg.cohen_kappa(lg.Ratings.from_contingency(table), "quadratic")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = irrcac_table.CAC(pd.DataFrame(table), weights="quadratic", digits=15).cohen()["est"]
    assert close(est.se, want["se"])


def test_cohen_kappa_on_raw_pairs_is_the_table() -> None:
    rng = np.random.default_rng(7)
    X = rng.integers(0, 3, size=(40, 2)).astype(float)
    X[:5, 1] = np.nan  # items one rater skipped are not in the table
    table = np.zeros((3, 3))
    for a, b in X[5:].astype(int):
        table[a, b] += 1
    raw = lg.cohen_kappa(lg.Ratings.from_wide(X, categories=[0.0, 1.0, 2.0]))
    want = cohens_kappa(table)
    assert close(raw.se, want.std_kappa) and close(raw.z, want.z_value)


# ----------------------------------------------------------------------------- Fleiss' test of kappa = 0
def fleiss_null_literal(X: np.ndarray, cats: list[float]) -> float:
    """Fleiss, Nee & Landis (1979), as Fleiss, Levin & Paik (2003) print it: n items, m ratings each."""
    n, m = X.shape
    p = [float((X == c).sum()) / (n * m) for c in cats]
    pq = sum(pj * (1 - pj) for pj in p)
    var = 2.0 / (pq**2 * n * m * (m - 1)) * (pq**2 - sum(pj * (1 - pj) * ((1 - pj) - pj) for pj in p))
    return math.sqrt(var)


def test_fleiss_diagnoses_data_z() -> None:
    # Fleiss (1971): 30 patients, 6 psychiatrists, 5 diagnoses; kappa 0.430, z 17.7 (R irr::kappam.fleiss, as the
    # pyirr port's test suite asserts it: round(statistic, 1) == 17.7, round(value, 3) == 0.430)
    diagnoses = np.array([
        [4, 4, 4, 4, 4, 4], [2, 2, 2, 5, 5, 5], [2, 3, 3, 3, 3, 5], [5, 5, 5, 5, 5, 5], [2, 2, 2, 4, 4, 4],
        [1, 1, 3, 3, 3, 3], [3, 3, 3, 3, 5, 5], [1, 1, 3, 3, 3, 4], [1, 1, 4, 4, 4, 4], [5, 5, 5, 5, 5, 5],
        [1, 4, 4, 4, 4, 4], [1, 2, 4, 4, 4, 4], [2, 2, 2, 3, 3, 3], [1, 4, 4, 4, 4, 4], [2, 2, 4, 4, 4, 5],
        [3, 3, 3, 3, 3, 5], [1, 1, 1, 4, 5, 5], [1, 1, 1, 1, 1, 2], [2, 2, 4, 4, 4, 4], [1, 3, 3, 5, 5, 5],
        [5, 5, 5, 5, 5, 5], [2, 4, 4, 4, 4, 4], [2, 2, 4, 5, 5, 5], [1, 1, 4, 4, 4, 4], [1, 4, 4, 4, 4, 5],
        [2, 2, 2, 2, 2, 4], [1, 1, 1, 1, 5, 5], [2, 2, 4, 4, 4, 4], [1, 3, 3, 3, 3, 3], [5, 5, 5, 5, 5, 5]])
    est = lg.fleiss_kappa(lg.Ratings.from_wide(diagnoses))
    assert round(est.value, 3) == 0.430 and round(est.z, 1) == 17.7 and est.p_value < 1e-10
    assert close(est.details["se_null"], fleiss_null_literal(diagnoses, [1, 2, 3, 4, 5]))
    assert "Fleiss, Nee & Landis" in est.details["test_source"]


def test_fleiss_test_equals_cardillos_published_printout() -> None:
    # G. Cardillo (2007), "Fleiss'es kappa", MATLAB File Exchange 15426 (fleiss.m), README example: 10 patients,
    # 14 psychiatrists, 5 diagnoses as a count table. Printed: "Fleiss'es (overall) kappa = 0.2099", "kappa error =
    # 0.0170" (the standard error under H0), "z = 12.3743  p = 0.0000"; and per category "s.e.: 0.0331".
    counts = np.array([[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
                       [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]])
    est = lg.fleiss_kappa(lg.Ratings.from_counts(counts))
    assert round(est.value, 4) == 0.2099
    assert round(est.details["se_null"], 4) == 0.0170
    assert round(est.z, 4) == 12.3743 and round(est.p_value, 4) == 0.0
    # the same data as 14 ratings per item (wide) give the same test
    wide = np.array([np.repeat(np.arange(5), row) for row in counts])
    assert lg.fleiss_kappa(lg.Ratings.from_wide(wide)).z == pytest.approx(est.z, rel=1e-12)


@pytest.mark.parametrize("marginals", ["all_rated_items", "pairable_items"])
def test_fleiss_test_on_random_complete_designs(marginals: str) -> None:
    compared = 0
    for seed in range(40):
        rng = np.random.default_rng([35, seed])
        X, cats = oracles.random_wide(rng, complete=True)
        est = lg.fleiss_kappa(lg.Ratings.from_wide(X, categories=cats), marginals=marginals)
        if est.is_nan:
            continue
        se0 = fleiss_null_literal(X, cats)
        assert close(est.z, est.value / se0), seed
        assert close(est.details["se_null"], se0) and "Fleiss, Nee & Landis" in est.details["test_source"]
        assert close(est.p_value, math.erfc(abs(est.value / se0) / math.sqrt(2)), 1e-8)
        compared += 1
    assert compared >= 20


def test_no_test_where_the_literature_defines_none() -> None:
    X = np.array([[1, 1, np.nan], [2, 2, 2], [1, 2, 2], [3, 3, 3], [1, np.nan, np.nan]])
    r = lg.Ratings.from_wide(X)
    unequal = lg.fleiss_kappa(r)  # unequal numbers of ratings per item
    weighted = lg.fleiss_kappa(lg.Ratings.from_wide(X[1:4]), "quadratic")
    for est in (unequal, weighted, lg.gwet_ac(r), lg.conger_kappa(r), lg.bennett_s(r), lg.krippendorff_alpha(r)):
        assert math.isnan(est.z) and math.isnan(est.p_value) and est.to_dict()["p_value"] is None
        assert est.se_method == "analytic" and est.se > 0


# ----------------------------------------------------------------------------- the fallbacks: delta, bootstrap
def test_delta_method_where_no_formula_is_published() -> None:
    X = np.array([[1, 1, np.nan], [2, 2, 2], [1, 2, 2], [3, 3, 3], [1, 3, np.nan], [2, 2, 1]])
    r = lg.Ratings.from_wide(X, level="ordinal")
    for est in (lg.fleiss_kappa(r, marginals="pairable_items"), lg.gwet_ac(r, marginals="pairable_items"),
                lg.krippendorff_alpha(r), lg.janson_olsson_iota(r, distance="nominal"), lg.spa(r)):
        assert est.se_method == "delta" and est.se > 0, est
        assert "se_source" not in est.details
        delta = est.metric, est.value
        # the delta interval is value +- z se
        again = {"fleiss_kappa": lg.fleiss_kappa, "gwet_ac": lg.gwet_ac}.get(est.metric)
        if again is not None:
            interval = again(r, marginals="pairable_items", ci=0.95, ci_method="delta").ci
            assert close((interval[1] - interval[0]) / 2, 1.959963984540054 * est.se, 1e-9), delta


def test_gwet_analytic_variance_is_the_linearisation_with_n_minus_one() -> None:
    # on complete data Gwet's kappa*_i is the exact influence of each item: his variance is the delta method's
    # times n / (n - 1) (with single-rated items his treats the share of pairable items as fixed)
    rng = np.random.default_rng(3)
    X, cats = oracles.random_wide(rng, n_items=(30, 31), complete=True)
    r = lg.Ratings.from_wide(X, categories=cats)
    n = int((~np.isnan(X)).any(axis=1).sum())
    from labelgate.metrics._engine import _linearized
    from labelgate.metrics.agreement import build_fleiss_kappa, build_gwet_ac
    for est, stat in ((lg.fleiss_kappa(r), build_fleiss_kappa(r)), (lg.gwet_ac(r), build_gwet_ac(r))):
        delta = _linearized(stat, ("value",), None)[0]["value"]
        assert math.isclose(est.se, delta * math.sqrt(n / (n - 1)), rel_tol=1e-5), est.metric


def test_bootstrap_standard_error_when_no_linearisation(monkeypatch: pytest.MonkeyPatch) -> None:
    import labelgate.metrics._linear as linear

    monkeypatch.setattr(linear, "MAX_GRADIENT_COLUMNS", 0)  # as on statistics too wide to differentiate
    r = lg.Ratings.from_wide([[1, 1, 2], [2, 2, 2], [1, 2, 2], [3, 3, 3], [1, 3, 1], [2, 2, 1]], level="ordinal")
    assert lg.krippendorff_alpha(r).se_method is None  # no formula, no linearisation, no resamples
    est = lg.krippendorff_alpha(r, ci=0.9, n_boot=400, seed=1)
    assert est.se_method == "bootstrap" and 0 < est.se < 1


def test_undefined_value_has_no_standard_error() -> None:
    est = lg.fleiss_kappa(lg.Ratings.from_wide([[1, 1], [1, 1]]))
    assert est.is_nan and math.isnan(est.se) and est.se_method is None and math.isnan(est.z)


@pytest.mark.parametrize("method", sorted(COEFFICIENTS))
def test_custom_matrices_equal_irrcac(method: str) -> None:
    rng = np.random.default_rng(350)
    data, cats = handbook("raw_g1g2")
    r = lg.Ratings.from_wide(DATA["raw_g1g2"](), categories=CATEGORIES["raw_g1g2"])
    for _ in range(5):
        upper = np.triu(rng.random((5, 5)), 1)
        w = upper + upper.T + np.eye(5)
        assert close(COEFFICIENTS[method](r, w).se, irrcac(data, cats, w, method)["se"])


@pytest.mark.parametrize("weights", WEIGHTS)
def test_cohen_kappa_every_weighting_equals_irrcac_table(weights: str) -> None:
    table = np.array([[13, 1, 0, 2], [0, 20, 7, 1], [1, 4, 56, 3], [0, 2, 1, 9]])
    est = lg.cohen_kappa(lg.Ratings.from_contingency(table, categories=[1, 2, 3, 4], level="ordinal"), weights)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = irrcac_table.CAC(pd.DataFrame(table), weights=weights, digits=15).cohen()["est"]
    assert close(est.value, want["coefficient_value"]) and close(est.se, want["se"])
