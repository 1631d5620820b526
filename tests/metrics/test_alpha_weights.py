"""Krippendorff's α with every weighting of Gwet's handbook and custom matrices; asymmetric weights.

Peer: irrCAC 0.4.4 (``CAC(...).krippendorff()``, Gwet's weighted α: the distance :math:`1 - w_{kl}`), on the
handbook's datasets at irrCAC's printed precision (its default ``digits=5``) and on random sparse designs at
full precision (1e-9). irrCAC's weights use the category values; LabelGate uses the ranks 1..q for nominal and
ordinal labels and the values for interval/ratio labels (``tests/metrics/test_differential.py`` explains the
recoding). Asymmetric matrices: Cohen's κ uses them as they are (irrCAC's ``kappa2_table``, i.e.
``irrCAC.table.CAC(...).cohen()``); every coefficient that pairs ratings without order uses the symmetric part and
says so.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from irrCAC import table as irrcac_table
from irrCAC.datasets import raw_4raters, raw_5observers, raw_g1g2
from irrCAC.raw import CAC
from statsmodels.stats.inter_rater import cohens_kappa

import labelgate as lg
from labelgate.metrics.weights import WEIGHTS, named_weights
from tests.metrics.test_differential import (
    designs,
    enough,
    irrcac,
    irrcac_input,
    same,
    weighted_design,
    without_singles,
)

# name -> (data, LabelGate categories, irrCAC numeric categories: the ranks of non-numeric ones)
HANDBOOK = {
    "raw_4raters": (raw_4raters, [1.0, 2.0, 3.0, 4.0, 5.0]),
    "raw_5observers": (raw_5observers, None),
    "raw_g1g2": (raw_g1g2, ["a", "b", "c", "d", "e"]),
}


def _handbook(name: str) -> tuple[lg.Ratings, pd.DataFrame, list[float]]:
    load, cats = HANDBOOK[name]
    data = load()
    if cats is None:
        cats = sorted({float(v) for v in data.to_numpy().ravel() if not pd.isna(v)})
    r = lg.Ratings.from_wide(data, categories=cats, level="ordinal")  # positions: ranks 1..q
    rank_of = {c: float(k + 1) for k, c in enumerate(cats)}
    ranks = data.apply(lambda column: column.map(rank_of)).astype(float)  # a missing rating stays NaN
    return r, ranks, [float(k + 1) for k in range(len(cats))]


@pytest.mark.parametrize("weights", WEIGHTS)
@pytest.mark.parametrize("name", sorted(HANDBOOK))
def test_alpha_equals_irrcac_on_the_handbook_datasets(name, weights):
    r, ranks, cats = _handbook(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        printed = CAC(ranks, weights=weights, categories=cats).krippendorff()["est"]
        full = CAC(ranks, weights=weights, categories=cats, digits=15).krippendorff()["est"]
    est = lg.krippendorff_alpha(r, weights)
    assert round(est.value, 5) == pytest.approx(printed["coefficient_value"], abs=1e-12), (est, printed)
    assert math.isclose(est.value, full["coefficient_value"], rel_tol=1e-9), (est, full)
    assert est.details["distance_from"] == "weights" and est.details["weights"] == weights


@pytest.mark.parametrize("weights", WEIGHTS)
@pytest.mark.parametrize("level", ["ordinal", "interval"])
def test_alpha_equals_irrcac_on_random_sparse_designs(weights, level):
    compared = 0
    for seed, X, cats in designs(level, 35):
        X, cats, at = weighted_design(X, cats, level, weights)
        est = lg.krippendorff_alpha(lg.Ratings.from_wide(X, level=at, categories=cats), weights)
        if math.isnan(est.value) or without_singles(X).shape[0] < 2:
            continue
        peer = irrcac(*irrcac_input(X, cats, at), weights, "krippendorff")
        assert same(est.value, peer["coefficient_value"]), (seed, est.value, peer, X.tolist(), cats)
        compared += 1
    enough(compared)


def test_alpha_with_a_custom_matrix_equals_irrcac():
    compared = 0
    for seed, X, cats in designs("nominal", 36):
        w = np.random.default_rng([36, seed]).uniform(0.0, 1.0, (len(cats), len(cats)))
        w = (w + w.T) / 2.0
        np.fill_diagonal(w, 1.0)
        est = lg.krippendorff_alpha(lg.Ratings.from_wide(X, categories=cats), w)
        if math.isnan(est.value) or without_singles(X).shape[0] < 2:
            continue
        peer = irrcac(X, cats, w, "krippendorff")
        assert same(est.value, peer["coefficient_value"]), (seed, est.value, peer)
        assert est.details["weights"] == "custom"
        compared += 1
    enough(compared)


def test_the_level_sets_the_metric_only_when_no_weights_are_given():
    data = [[1, 1, None], [2, 2, 2], [3, 3, 1], [None, 4, 4], [1, 2, 2]]
    numeric = lg.Ratings.from_wide(data, level="interval")
    nominal = lg.Ratings.from_wide(data)  # numeric labels, default level: nominal, whatever the labels look like
    assert nominal.level == "nominal"
    default = lg.krippendorff_alpha(nominal)
    assert default.details["distance"] == "nominal" and default.details["distance_from"] == "level"
    interval = lg.krippendorff_alpha(numeric)
    assert interval.details["distance"] == "interval" and interval.details["distance_from"] == "level"
    # the caller asks for nominal α on interval-level ratings
    for asked in ("identity", "nominal", np.eye(4)):
        assert lg.krippendorff_alpha(numeric, asked).value == pytest.approx(default.value, abs=1e-14)
    # quadratic weights are interval α (1 - w is the squared difference up to a factor)
    assert lg.krippendorff_alpha(numeric, "quadratic").value == pytest.approx(interval.value, abs=1e-14)
    assert lg.krippendorff_alpha(nominal, "quadratic").value == pytest.approx(interval.value, abs=1e-14)
    assert not math.isclose(default.value, interval.value, abs_tol=1e-3)


def test_alpha_weights_keep_the_item_bootstrap():
    rng = np.random.default_rng(4)
    X = rng.integers(0, 4, size=(60, 3)).astype(float)
    X[rng.random(X.shape) < 0.2] = np.nan
    r = lg.Ratings.from_wide(X, level="ordinal")
    est = lg.krippendorff_alpha(r, "linear", ci=0.9, n_boot=200, seed=1)
    assert est.ci is not None and est.ci[0] <= est.value <= est.ci[1]


def _asymmetric(q: int, seed: int) -> np.ndarray:
    w = np.random.default_rng(seed).uniform(0.0, 1.0, (q, q))
    np.fill_diagonal(w, 1.0)
    return w


def test_cohen_kappa_uses_an_asymmetric_matrix_as_irrcac_kappa2_table():
    compared = 0
    for seed in range(60):
        rng = np.random.default_rng([37, seed])
        q = int(rng.integers(2, 6))
        table = rng.integers(0, 8, size=(q, q)) + np.diag(rng.integers(0, 10, size=q))
        if table.sum() < 3:
            continue
        w = _asymmetric(q, seed)
        est = lg.cohen_kappa(lg.Ratings.from_contingency(table), w)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            peer = irrcac_table.CAC(pd.DataFrame(table), weights=w, digits=15).cohen()["est"]
        if math.isnan(est.value):
            continue
        assert same(est.value, peer["coefficient_value"]), (seed, est, peer, table.tolist())
        assert same(est.details["p_o"], peer["pa"]) and same(est.details["p_e"], peer["pe"])
        # the standard error: Fleiss, Cohen & Everitt with the whole matrix, as statsmodels' cohens_kappa (whose
        # weights are disagreements); irrCAC's table variance reads the margins of an asymmetric matrix transposed
        peer_se = cohens_kappa(table, weights=1.0 - w, wt=None)
        assert est.se_method == "analytic" and same(est.se, peer_se.std_kappa), (seed, est.se, peer_se.std_kappa)
        compared += 1
    assert compared >= 50


def test_cohen_kappa_with_asymmetric_weights_depends_on_the_rater_order():
    table = np.array([[10, 6, 1], [1, 12, 2], [0, 7, 9]])
    w = np.array([[1.0, 0.8, 0.0], [0.2, 1.0, 0.5], [0.0, 0.1, 1.0]])
    forward = lg.cohen_kappa(lg.Ratings.from_contingency(table), w)
    backward = lg.cohen_kappa(lg.Ratings.from_contingency(table.T), w)
    swapped = lg.cohen_kappa(lg.Ratings.from_contingency(table.T), w.T)
    assert not math.isclose(forward.value, backward.value, abs_tol=1e-6)
    assert forward.value == pytest.approx(swapped.value, abs=1e-14)
    assert "weights_order" in forward.details and "weights_note" not in forward.details
    # the item bootstrap resamples the ordered correction with the rest
    est = lg.cohen_kappa(lg.Ratings.from_contingency(table), w, ci=0.9, n_boot=200, seed=0)
    assert est.value == forward.value and est.ci is not None and est.ci[0] <= est.value <= est.ci[1]


MULTI_RATER = {"percent_agreement": lg.percent_agreement, "bennett_s": lg.bennett_s,
               "fleiss_kappa": lg.fleiss_kappa, "scott_pi": lg.scott_pi, "gwet_ac": lg.gwet_ac,
               "conger_kappa": lg.conger_kappa, "krippendorff_alpha": lg.krippendorff_alpha}


@pytest.mark.parametrize("name", sorted(MULTI_RATER))
def test_unordered_coefficients_use_the_symmetric_part_and_say_so(name):
    rng = np.random.default_rng(38)
    X = rng.integers(0, 4, size=(40, 3)).astype(float)
    X[rng.random(X.shape) < 0.15] = np.nan
    r = lg.Ratings.from_wide(X, level="ordinal")
    w = _asymmetric(4, 5)
    function = MULTI_RATER[name]
    est = function(r, w)
    symmetric = function(r, (w + w.T) / 2.0)
    assert est.value == pytest.approx(symmetric.value, abs=1e-14)
    assert "symmetric part" in est.details["weights_note"] and name in est.details["weights_note"]
    assert "weights_note" not in symmetric.details


def test_the_weights_module_is_public():
    assert lg.weights is lg.metrics.weights
    assert set(lg.weights.WEIGHTS) == set(WEIGHTS) and lg.weights.ALIASES == {"nominal": "identity"}
    assert np.array_equal(lg.weights.named_weights("nominal", [1.0, 2.0, 3.0]), np.eye(3))
    r = lg.Ratings.from_wide([[1, 2], [2, 3]], level="interval")
    assert np.array_equal(lg.weights.weight_matrix(r, "linear"), named_weights("linear", np.array([1.0, 2.0, 3.0])))


@settings(max_examples=60)
@given(st.integers(2, 5), st.integers(0, 2**32 - 1))
def test_relabelling_the_categories_with_the_matrix_changes_no_weighted_coefficient(q, seed):
    # a coefficient depends on the categories only through W: permuting both together changes nothing
    rng = np.random.default_rng(seed)
    X = rng.integers(0, q, size=(25, 3)).astype(float)
    X[rng.random(X.shape) < 0.2] = np.nan
    w = _asymmetric(q, seed)
    perm = rng.permutation(q)
    relabelled = np.where(np.isnan(X), np.nan, perm[np.nan_to_num(X).astype(int)])
    moved = np.empty_like(w)
    moved[np.ix_(perm, perm)] = w  # the credit of (perm[k], perm[l]) is that of (k, l)
    r = lg.Ratings.from_wide(X, categories=list(range(q)))
    s = lg.Ratings.from_wide(relabelled, categories=list(range(q)))
    for function in (*MULTI_RATER.values(), lg.cohen_kappa):
        ratings = (lg.Ratings.from_wide(X[:, :2], categories=list(range(q))),
                   lg.Ratings.from_wide(relabelled[:, :2], categories=list(range(q)))) \
            if function is lg.cohen_kappa else (r, s)
        a, b = function(ratings[0], w).value, function(ratings[1], moved).value
        assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, abs=1e-12), function
