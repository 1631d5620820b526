"""Variance components of sparse crossed designs, item / labeler ICC, latent scale, xCC, planning.

Oracles: literal enumeration of rating pairs (the U-statistics as defined),
Monte-Carlo unbiasedness, statsmodels' REML (``MixedLM`` with crossed
variance components) and ``BinomialBayesMixedGLM`` (test-only peers).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import labelgate as lg
from labelgate.metrics._logit import LATENT_RESIDUAL, _Laplace, fit_logit_crossed
from labelgate.metrics.planning import _Design, plan_items, raters_needed, simulate_pair, spearman_brown
from labelgate.metrics.variance import (
    component_sums,
    crossed,
    item_icc,
    labeler_icc,
    solve_components,
    variance_components,
)
from labelgate.metrics.xcc import cross_correlation, disattenuated_correlation


# ----------------------------------------------------------------------------- helpers
def sparse_design(rng: np.random.Generator, n_items: int, n_raters: int, low: int = 2, high: int = 6,
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Unbalanced crossed design: 2-6 ratings per item, raters drawn with unequal (Zipf-like) activity."""
    activity = 1.0 / np.arange(1, n_raters + 1) ** 0.8
    activity /= activity.sum()
    items, raters = [], []
    for i in range(n_items):
        k = int(rng.integers(low, high + 1))
        items.extend([i] * k)
        raters.extend(rng.choice(n_raters, size=k, replace=False, p=activity))
    return np.asarray(items), np.asarray(raters)


def simulate(rng: np.random.Generator, items: np.ndarray, raters: np.ndarray, sd_item: float, sd_rater: float,
             sd_residual: float, mean: float = 3.0) -> np.ndarray:
    # rater effects skewed (centred exponential): the moment estimators need no normality
    a = rng.normal(0.0, sd_item, items.max() + 1)
    b = (rng.exponential(1.0, raters.max() + 1) - 1.0) * sd_rater
    return mean + a[items] + b[raters] + rng.normal(0.0, sd_residual, items.size)


def ratings(items: np.ndarray, raters: np.ndarray, y: np.ndarray) -> lg.Ratings:
    return lg.Ratings.from_long({"item_id": items, "rater_id": raters, "label": y}, level="interval")


def brute_force_components(items: np.ndarray, raters: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The U-statistics written literally over ordered pairs, and the 3 x 3 moment system."""
    counts = np.bincount(items)
    keep = counts[items] >= 2
    items, raters, y = items[keep], raters[keep], y[keep]
    half_sq = (y[:, None] - y[None, :]) ** 2 / 2
    same_item = items[:, None] == items[None, :]
    same_rater = raters[:, None] == raters[None, :]
    distinct = ~np.eye(y.size, dtype=bool)
    within_item = same_item & ~same_rater
    within_rater = same_rater & ~same_item
    u = np.array([half_sq[within_item].sum(), half_sq[within_rater].sum(), half_sq[distinct].sum()])
    system = np.array([[0, within_item.sum(), within_item.sum()],
                       [within_rater.sum(), 0, within_rater.sum()],
                       [(~same_item).sum(), (~same_rater).sum(), distinct.sum()]], dtype=float)
    return np.linalg.solve(system, u)


# ------------------------------------------------------------------- point estimates: oracles
@pytest.mark.parametrize("seed", range(6))
def test_moment_estimates_equal_the_literal_pair_enumeration(seed):
    rng = np.random.default_rng(seed)
    items, raters = sparse_design(rng, 40, 12, low=1)
    y = simulate(rng, items, raters, 1.0, 0.7, 0.8)
    vc = variance_components(ratings(items, raters, y))
    expected = brute_force_components(items, raters, y)
    assert [vc.item_raw, vc.rater_raw, vc.residual_raw] == pytest.approx(expected, abs=1e-9)
    assert vc.n_items_excluded == int((np.bincount(items) == 1).sum())


def test_weighted_sums_equal_the_literal_expanded_resample():
    """Bootstrap weights: pairs of distinct *original* ratings of the expanded (copied) data."""
    rng = np.random.default_rng(7)
    items, raters = sparse_design(rng, 15, 6)
    y = simulate(rng, items, raters, 1.0, 0.5, 0.7)
    c = crossed(ratings(items, raters, y), "test")
    w = rng.integers(0, 3, c.n_axis).astype(float)
    v = rng.integers(0, 3, c.n_raters).astype(float)
    got = component_sums(c, w[None, :], v[None, :])
    # expand: observation (i, j) appears w_i * v_j times, as (item copy, rater copy)
    rows = [(i, ci, j, cj, val) for i, j, val in zip(c.pos, c.rater, c.y, strict=True)
            for ci in range(int(w[i])) for cj in range(int(v[j]))]
    e = np.array(rows)
    item, icopy, rater, rcopy, val = (e[:, k] for k in range(5))
    half_sq = (val[:, None] - val[None, :]) ** 2 / 2
    same_item, same_rater = item[:, None] == item[None, :], rater[:, None] == rater[None, :]
    same_item_copy = same_item & (icopy[:, None] == icopy[None, :])
    same_rater_copy = same_rater & (rcopy[:, None] == rcopy[None, :])
    distinct_obs = ~(same_item & same_rater)
    expected = {
        "a": (same_item_copy & ~same_rater).sum(), "u_item": half_sq[same_item_copy & ~same_rater].sum(),
        "b": (same_rater_copy & ~same_item).sum(), "u_rater": half_sq[same_rater_copy & ~same_item].sum(),
        "c1": (~same_item).sum(), "c2": (~same_rater).sum(), "c3": distinct_obs.sum(),
        "u_all": half_sq.sum(), "N": len(rows),
    }
    for key, value in expected.items():
        assert float(got[key][0]) == pytest.approx(float(value), rel=1e-10, abs=1e-9), key


def test_weighted_moment_equations_are_conditionally_unbiased():
    """For fixed bootstrap weights, the weighted estimator is unbiased over the model (why it is used)."""
    rng = np.random.default_rng(8)
    items, raters = sparse_design(rng, 60, 15)
    w = rng.integers(0, 3, 60).astype(float)[None, :]
    v = rng.integers(0, 3, 15).astype(float)[None, :]
    estimates = []
    for _ in range(400):
        y = simulate(rng, items, raters, 1.0, 0.6, 0.8)
        point = solve_components(component_sums(crossed(ratings(items, raters, y), "t"), w, v))
        estimates.append([point[f"{k}_raw"][0] for k in ("item", "rater", "residual")])
    est = np.array(estimates)
    se = est.std(axis=0) / np.sqrt(len(est))
    assert np.all(np.abs(est.mean(axis=0) - [1.0, 0.36, 0.64]) < 4 * se)


def test_monte_carlo_unbiasedness_on_a_sparse_unbalanced_design():
    rng = np.random.default_rng(9)
    items, raters = sparse_design(rng, 250, 40)
    truth = np.array([1.0, 0.5**2, 0.8**2])
    estimates = np.array([
        [getattr(variance_components(ratings(items, raters, simulate(rng, items, raters, 1.0, 0.5, 0.8))),
                 f"{k}_raw") for k in ("item", "rater", "residual")]
        for _ in range(300)])
    se = estimates.std(axis=0) / np.sqrt(len(estimates))
    assert np.all(np.abs(estimates.mean(axis=0) - truth) < 4 * se), (estimates.mean(axis=0), se)
    # and each component is estimated, not a constant
    assert np.all(estimates.std(axis=0) > 0.01)


def test_agrees_with_reml_on_small_simulated_data():
    """Moments vs REML (statsmodels MixedLM, crossed variance components) on 8 Gaussian data sets.

    Both are consistent for the same parameters but weigh the data differently,
    so they differ by sampling noise: over 30 such data sets the share
    differences had SD 0.015 (item) and 0.022 (rater). Tolerances: 4 SD per data
    set, and 4 SD / sqrt(8) for the mean difference (no systematic gap).
    """
    sm = pytest.importorskip("statsmodels.api")
    diffs = []
    for seed in range(8):
        rng = np.random.default_rng(seed)
        counts = rng.integers(4, 7, 120)
        items = np.repeat(np.arange(120), counts)
        raters = np.concatenate([rng.choice(25, k, replace=False) for k in counts])
        y = 3 + rng.normal(0, 1, 120)[items] + rng.normal(0, 0.6, 25)[raters] + rng.normal(0, 0.8, items.size)
        df = pd.DataFrame({"item": items, "rater": raters, "y": y, "g": 1})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = sm.MixedLM.from_formula("y ~ 1", groups="g", re_formula="0", data=df,
                                            vc_formula={"item": "0 + C(item)", "rater": "0 + C(rater)"})
            fit = model.fit(reml=True)
        reml = dict(zip(model.exog_vc.names, fit.vcomp, strict=True))
        total = reml["item"] + reml["rater"] + fit.scale
        vc = variance_components(ratings(items, raters, y))
        diffs.append([vc.share("item") - reml["item"] / total, vc.share("rater") - reml["rater"] / total,
                      vc.item / reml["item"] - 1, vc.residual / fit.scale - 1])
    d = np.array(diffs)
    assert np.all(np.abs(d[:, 0]) < 0.06) and np.all(np.abs(d[:, 1]) < 0.09)
    assert abs(d[:, 0].mean()) < 0.025 and abs(d[:, 1].mean()) < 0.035
    assert abs(d[:, 2].mean()) < 0.07 and abs(d[:, 3].mean()) < 0.12


# ------------------------------------------------------------------------- policies, errors
def test_negative_estimates_are_reported_and_truncated():
    rng = np.random.default_rng(3)
    for _ in range(50):  # no rater effect: the raw rater variance is negative about half the time
        items, raters = sparse_design(rng, 30, 8)
        vc = variance_components(ratings(items, raters, simulate(rng, items, raters, 1.0, 0.0, 1.0)))
        if vc.rater_raw < 0:
            break
    assert vc.rater_raw < 0 and vc.rater == 0.0 and "rater" in vc.negative
    assert vc.total == pytest.approx(vc.item + vc.residual)
    assert vc.to_dict()["negative"] == ["rater"]
    est = labeler_icc(ratings(items, raters, simulate(rng, items, raters, 1.0, 0.0, 1.0)))
    assert est.value >= 0.0


def test_to_dict_has_the_components_and_counts():
    r = lg.Ratings.from_wide([[1, 2, 3], [3, 3, 4], [5, 6, 6], [2, 2, 4], [1, np.nan, np.nan]], level="interval")
    d = variance_components(r).to_dict()
    assert {"item", "rater", "residual", "n_items", "n_raters", "n_ratings", "n_items_excluded",
            "within_item_pairs", "within_rater_pairs", "all_pairs", "negative"} <= d.keys()
    assert (d["n_items"], d["n_raters"], d["n_ratings"], d["n_items_excluded"]) == (4, 3, 12, 1)
    assert (d["within_item_pairs"], d["within_rater_pairs"], d["all_pairs"]) == (24, 36, 132)


def test_single_category_is_nan_with_reason():
    r = lg.Ratings.from_wide(np.ones((6, 4)))
    for func in (item_icc, labeler_icc):
        est = func(r, ci=0.9, n_boot=50)
        assert math.isnan(est.value) and est.ci is None
        assert est.reason_code == lg.Reason.NO_EXPECTED_DISAGREEMENT
    assert variance_components(r).reason_code == lg.Reason.NO_EXPECTED_DISAGREEMENT


def test_no_pairable_item_is_nan_with_reason():
    wide = np.full((5, 4), np.nan)
    for i in range(5):
        wide[i, i % 4] = i % 2
    est = item_icc(lg.Ratings.from_wide(wide, categories=[0, 1]))
    assert est.is_nan and est.reason_code == lg.Reason.NO_PAIRABLE_ITEMS
    assert est.n_items == 0 and est.n_items_excluded == 5


def test_raters_with_a_single_rating_leave_only_the_item_share():
    # every rater rates one item: rater and residual variances are confounded
    rng = np.random.default_rng(4)
    items = np.repeat(np.arange(50), 3)
    y = rng.normal(size=50)[items] + rng.normal(size=150)
    r = lg.Ratings.from_long({"item_id": items, "rater_id": np.arange(150), "label": y}, level="interval")
    vc = variance_components(r)
    assert math.isnan(vc.rater) and math.isnan(vc.residual) and vc.rater_plus_residual > 0
    assert math.isfinite(float(item_icc(r)))
    est = labeler_icc(r)
    assert est.is_nan and est.reason_code == lg.Reason.NO_PAIRABLE_ITEMS and "confounded" in est.reason


def test_parameters_are_validated():
    r = lg.Ratings.from_wide([[1, 2], [2, 3], [4, 4]], level="interval")
    with pytest.raises(lg.ParameterError, match="'resample' parameter of item_icc must be one of"):
        item_icc(r, resample="raters")
    with pytest.raises(lg.ParameterError, match="'scale' parameter of labeler_icc must be one of"):
        labeler_icc(r, scale="logit")
    with pytest.raises(lg.ParameterError, match="'n_boot' parameter of variance_components"):
        variance_components(r, ci=0.9, n_boot=1)
    with pytest.raises(lg.ParameterError, match="needs numeric labels"):
        item_icc(lg.Ratings.from_wide([["a", "b"], ["c", "a"], ["b", "b"]]))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), scale=st.floats(0.01, 100), shift=st.floats(-1e3, 1e3))
def test_shares_are_invariant_to_affine_maps_and_relabelling(seed, scale, shift):
    rng = np.random.default_rng(seed)
    items, raters = sparse_design(rng, 25, 7)
    y = simulate(rng, items, raters, 1.0, 0.5, 0.7)
    base = variance_components(ratings(items, raters, y))
    perm_i, perm_r, order = rng.permutation(25), rng.permutation(7), rng.permutation(items.size)
    moved = variance_components(ratings(perm_i[items][order], perm_r[raters][order], (y * scale + shift)[order]))
    for key in ("item", "rater", "residual"):
        assert moved.share(key) == pytest.approx(base.share(key), abs=1e-8)


# --------------------------------------------------------------------------------- bootstrap
def test_bootstrap_is_deterministic_and_brackets_the_value():
    rng = np.random.default_rng(5)
    items, raters = sparse_design(rng, 200, 30)
    r = ratings(items, raters, simulate(rng, items, raters, 1.0, 0.6, 0.8))
    for resample in ("items_and_raters", "items"):
        a = labeler_icc(r, ci=0.9, n_boot=300, seed=3, resample=resample)
        b = labeler_icc(r, ci=0.9, n_boot=300, seed=3, resample=resample)
        assert a.ci == b.ci and a.ci_level == 0.9 and a.n_boot == 300
        assert a.ci[0] < a.value < a.ci[1]
        assert a.details["icc_minus_labeler_icc_ci_low"] < a.details["icc_minus_labeler_icc_ci_high"]
    two_way = item_icc(r, ci=0.9, n_boot=300, seed=3)
    vc = variance_components(r, ci=0.9, n_boot=300, seed=3)
    assert vc.ci["item_share"] == pytest.approx(two_way.ci)
    assert vc.to_dict()["item_ci_low"] <= vc.item <= vc.to_dict()["item_ci_high"]


@pytest.mark.slow
def test_two_way_bootstrap_coverage():
    """90% intervals of the item and labeler ICC cover the truth in most simulated designs (slow)."""
    rng = np.random.default_rng(6)
    items, raters = sparse_design(rng, 300, 40)
    truth = np.array([1.0, 0.36, 0.64])
    shares = truth / truth.sum()
    hits = np.zeros(2)
    for _ in range(100):
        r = ratings(items, raters, simulate(rng, items, raters, 1.0, 0.6, 0.8))
        vc = variance_components(r, ci=0.9, n_boot=400, seed=int(rng.integers(1 << 30)))
        hits += [vc.ci["item_share"][0] <= shares[0] <= vc.ci["item_share"][1],
                 vc.ci["rater_share"][0] <= shares[1] <= vc.ci["rater_share"][1]]
    assert np.all(hits >= 82)


# ------------------------------------------------------------------------------ latent scale
def _binary_design(rng, n_items=150, n_raters=30, per=6, sd_item=1.5, sd_rater=0.7, mu=-0.5):
    items = np.repeat(np.arange(n_items), per)
    raters = np.concatenate([rng.choice(n_raters, per, replace=False) for _ in range(n_items)])
    eta = mu + rng.normal(0, sd_item, n_items)[items] + rng.normal(0, sd_rater, n_raters)[raters]
    y = (rng.random(items.size) < 1 / (1 + np.exp(-eta))).astype(float)
    return items, raters, y


def test_laplace_objective_at_zero_variances_is_the_logistic_likelihood():
    rng = np.random.default_rng(0)
    items, raters, y = _binary_design(rng, 20, 5, 3)
    objective = _Laplace(y, items, raters, 20, 5)
    mu = 0.3
    p = 1 / (1 + np.exp(-mu))
    expected = -np.sum(y * np.log(p) + (1 - y) * np.log(1 - p))
    assert objective(np.array([mu, 0.0, 0.0])) == pytest.approx(expected, rel=1e-12)
    # the objective is even in each standard deviation (spherical random effects)
    assert objective(np.array([mu, 0.8, -0.4])) == pytest.approx(objective(np.array([mu, 0.8, 0.4])), rel=1e-10)


@pytest.mark.parametrize("seed", [3, 4])
def test_latent_fit_agrees_with_statsmodels_variational_bayes(seed):
    """Laplace ML vs statsmodels' BinomialBayesMixedGLM.fit_vb (posterior means): SDs within 10%."""
    pytest.importorskip("statsmodels")
    import scipy.sparse as sp
    from statsmodels.genmod.bayes_mixed_glm import BinomialBayesMixedGLM

    rng = np.random.default_rng(seed)
    items, raters, y = _binary_design(rng)
    fit = fit_logit_crossed(y, items, raters, 150, 30, hessian=False)
    n = y.size
    exog_vc = sp.hstack([sp.csr_matrix((np.ones(n), (np.arange(n), items)), shape=(n, 150)),
                         sp.csr_matrix((np.ones(n), (np.arange(n), raters)), shape=(n, 30))]).tocsr()
    model = BinomialBayesMixedGLM(y, np.ones((n, 1)), exog_vc, np.r_[np.zeros(150, int), np.ones(30, int)],
                                  vcp_p=2, fe_p=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vb = model.fit_vb()
    sd_item, sd_rater = np.exp(vb.vcp_mean)
    assert fit.converged
    assert fit.sd_item == pytest.approx(sd_item, rel=0.1)
    assert fit.sd_rater == pytest.approx(sd_rater, rel=0.1)
    assert fit.mu == pytest.approx(float(vb.fe_mean[0]), abs=0.1)


def test_latent_iccs_recover_the_simulated_variances():
    rng = np.random.default_rng(11)
    items, raters, y = _binary_design(rng, 400, 50, 8, sd_item=1.2, sd_rater=0.6, mu=0.2)
    r = lg.Ratings.from_long({"item_id": items, "rater_id": raters, "label": y})
    est = item_icc(r, scale="latent", ci=0.95, n_boot=2000, seed=0)
    truth = 1.44 / (1.44 + 0.36 + LATENT_RESIDUAL)
    assert est.metric == "item_icc_latent" and est.details["scale"] == "latent"
    assert est.ci[0] < truth < est.ci[1]
    assert est.value == pytest.approx(truth, abs=0.05)
    lab = labeler_icc(r, scale="latent")
    assert lab.metric == "labeler_icc_latent"
    assert lab.value == pytest.approx(0.36 / (1.44 + 0.36 + LATENT_RESIDUAL), abs=0.04)
    # the observed (probability) scale value is smaller, as the blog notes
    assert float(item_icc(r)) < est.value


def test_latent_scale_needs_a_binary_label():
    r = lg.Ratings.from_wide([[1, 2], [2, 3], [3, 3]], level="ordinal")
    with pytest.raises(lg.ParameterError, match="needs a binary label"):
        item_icc(r, scale="latent")
    est = item_icc(lg.Ratings.from_wide(np.zeros((5, 3))), scale="latent")
    assert est.is_nan and est.reason_code == lg.Reason.NO_EXPECTED_DISAGREEMENT


# --------------------------------------------------------------------------- cross-replication
def _pair(rng, n_items=400, rho=0.7, means=(2.0, -1.0), k=(5, 3), pools=(60, 20)):
    sx, sy = 1.0, 0.8
    cov = np.array([[sx**2, rho * sx * sy], [rho * sx * sy, sy**2]])
    a = rng.multivariate_normal([0, 0], cov, size=n_items)
    out = []
    for s, (kk, pool, rs, es) in enumerate(((k[0], pools[0], 0.5, 1.0), (k[1], pools[1], 0.3, 0.7))):
        items = np.repeat(np.arange(n_items), kk)
        raters = np.concatenate([rng.choice(pool, kk, replace=False) for _ in range(n_items)])
        y = means[s] + a[items, s] + rng.normal(0, rs, pool)[raters] + rng.normal(0, es, items.size)
        out.append(lg.Ratings.from_long({"item_id": items, "rater_id": raters, "label": y}, level="interval"))
    return out


def test_cross_covariance_is_unbiased_and_rho_is_recovered():
    rng = np.random.default_rng(12)
    values = np.array([[cross_correlation(*_pair(rng)).details[k] for k in ("cov", "rho")] for _ in range(150)])
    se = values.std(axis=0) / np.sqrt(len(values))
    assert abs(values[:, 0].mean() - 0.7 * 0.8) < 4 * se[0]
    assert values[:, 1].mean() == pytest.approx(0.7, abs=0.03)


def test_cross_covariance_equals_the_literal_centred_cross_products():
    rng = np.random.default_rng(13)
    x, y = _pair(rng, n_items=30)
    # drop some ratings so that the design is unbalanced
    keep_x = rng.random(x.n_ratings) < 0.8
    x = lg.Ratings.from_long({"item_id": x.item_labels[x.item_codes][keep_x],
                              "rater_id": x.rater_labels[x.rater_codes][keep_x], "label": x.values[keep_x]},
                             level="interval")
    est = cross_correlation(x, y)
    ix, vx = x.item_labels[x.item_codes].astype(int), x.values
    iy, vy = y.item_labels[y.item_codes].astype(int), y.values
    common = np.intersect1d(ix, iy)
    mx, my = vx[np.isin(ix, common)].mean(), vy[np.isin(iy, common)].mean()
    r_i = np.array([(ix == i).sum() for i in common], dtype=float)
    s_i = np.array([(iy == i).sum() for i in common], dtype=float)
    products = sum(((vx[ix == i] - mx)[:, None] * (vy[iy == i] - my)[None, :]).sum() for i in common)
    nx, ny, rs = r_i.sum(), s_i.sum(), (r_i * s_i).sum()
    k = rs - (r_i * s_i**2).sum() / ny - (r_i**2 * s_i).sum() / nx + rs * rs / (nx * ny)
    assert est.details["cov"] == pytest.approx(products / k, rel=1e-10)


def test_cross_correlation_contract_and_invariances():
    rng = np.random.default_rng(14)
    x, y = _pair(rng)
    est = cross_correlation(x, y, ci=0.9, n_boot=300, seed=1)
    d = est.to_dict()
    assert {"rho", "xcc", "icc_x", "icc_y", "cov"} <= d.keys()
    assert d["xcc"] == pytest.approx(d["rho"] * math.sqrt(d["icc_x"] * d["icc_y"]), rel=1e-12)
    assert est.ci[0] < est.value < est.ci[1]
    assert est == cross_correlation(x, y, ci=0.9, n_boot=300, seed=1)
    shifted = lg.Ratings.from_long({"item_id": y.item_labels[y.item_codes], "rater_id": y.rater_labels[y.rater_codes],
                                    "label": 10 * y.values - 7}, level="interval")
    assert float(cross_correlation(x, shifted)) == pytest.approx(est.value, abs=1e-10)


def test_cross_correlation_is_close_to_normalized_kappa_x_without_mean_shift():
    rng = np.random.default_rng(15)
    x, y = _pair(rng, n_items=800, means=(0.0, 0.0))
    rho = float(cross_correlation(x, y))
    assert rho == pytest.approx(float(lg.normalized_cross_kappa(x, y)), abs=0.06)
    assert rho == pytest.approx(float(disattenuated_correlation(x, y, seed=0)), abs=0.06)


def test_a_replication_without_pairable_items_gives_nan_with_reason():
    x = lg.Ratings.from_wide([[1.0], [2.0], [3.0], [4.0]], level="interval")
    y = lg.Ratings.from_wide([[1.0, 2.0], [2.0, 2.0], [3.0, 5.0], [4.0, 4.0]], level="interval")
    est = cross_correlation(x, y, ci=0.9, n_boot=50)
    assert est.is_nan and est.ci is None
    assert est.reason_code == lg.Reason.NO_PAIRABLE_ITEMS and "replication x" in est.reason


def test_no_common_items_is_an_error():
    x = lg.Ratings.from_long({"item_id": [1, 1], "rater_id": ["a", "b"], "label": [0, 1]})
    y = lg.Ratings.from_long({"item_id": [2, 2], "rater_id": ["a", "b"], "label": [0, 1]})
    for func in (cross_correlation, disattenuated_correlation):
        with pytest.raises(lg.DesignError, match="no item is rated in both") as info:
            func(x, y)
        assert info.value.code == lg.Reason.NO_COMMON_ITEMS


def test_disattenuated_correlation_components():
    rng = np.random.default_rng(16)
    x, y = _pair(rng, n_items=300, means=(0.0, 0.0))
    est = disattenuated_correlation(x, y, n_splits=5, ci=0.9, n_boot=300, seed=2)
    mean_x = np.bincount(x.item_codes, weights=x.values) / np.bincount(x.item_codes)
    mean_y = np.bincount(y.item_codes, weights=y.values) / np.bincount(y.item_codes)
    d = est.details
    assert d["r_xy"] == pytest.approx(np.corrcoef(mean_x, mean_y)[0, 1], abs=1e-12)
    assert d["reliability_x"] == pytest.approx(2 * d["split_half_x"] / (1 + d["split_half_x"]), abs=1e-12)
    assert est.value == pytest.approx(d["r_xy"] / math.sqrt(d["reliability_x"] * d["reliability_y"]), abs=1e-12)
    assert est.ci[0] < est.value < est.ci[1]
    assert est.value == pytest.approx(0.7, abs=0.08)


# -------------------------------------------------------------------------------- planning
@settings(max_examples=100, deadline=None)
@given(rho=st.floats(0.01, 0.99), k=st.floats(0.05, 200.0))
def test_spearman_brown_and_its_inverse_round_trip(rho, k):
    target = spearman_brown(rho, k)
    assert raters_needed(rho, target) == pytest.approx(k, rel=1e-9)
    assert spearman_brown(rho, raters_needed(rho, target)) == pytest.approx(target, rel=1e-12)


def test_spearman_brown_values_arrays_and_estimates():
    assert spearman_brown(0.5, 4) == pytest.approx(0.8)
    assert spearman_brown(0.3, 1) == pytest.approx(0.3)
    assert raters_needed(0.5, 0.8) == pytest.approx(4.0)
    np.testing.assert_allclose(spearman_brown(np.array([0.2, 0.5]), 2), [1 / 3, 2 / 3])
    est = lg.Estimate("item_icc", 0.4, ci=(0.3, 0.5), ci_level=0.95, n_items=10, n_ratings=30)
    sb = spearman_brown(est, 3)
    assert sb.value == pytest.approx(spearman_brown(0.4, 3)) and sb.ci[0] == pytest.approx(spearman_brown(0.3, 3))
    need = raters_needed(est, 0.9)
    assert need.ci == pytest.approx((raters_needed(0.5, 0.9), raters_needed(0.3, 0.9)))
    with pytest.raises(lg.ParameterError, match="'k' parameter of spearman_brown"):
        spearman_brown(0.5, 0)
    with pytest.raises(lg.ParameterError, match="'target' parameter of raters_needed"):
        raters_needed(0.5, 1.0)
    with pytest.raises(lg.ParameterError, match="'reliability' parameter of raters_needed"):
        raters_needed(0.0, 0.8)


def test_plan_items_by_simulation_reaches_the_target_width():
    design = _Design(0.5, 0.6, 0.9, 0.1, 0.0, 3, 3, 20, 20)
    plan = plan_items(0.15, icc_x=0.5, icc_y=0.6, rho=0.9, labeler_icc_x=0.1, pilot_items=100, n_sim=150, seed=0)
    assert plan.method == "simulation" and plan.n_items > 100
    rng = np.random.default_rng(1)
    values = [float(lg.normalized_cross_kappa(*simulate_pair(design, plan.n_items, rng))) for _ in range(200)]
    low, high = np.quantile(values, [0.025, 0.975])
    assert (high - low) == pytest.approx(0.15, rel=0.2)


def test_plan_items_from_pilot_data_scales_with_the_square_of_the_width():
    rng = np.random.default_rng(2)
    x, y = simulate_pair(_Design(0.5, 0.6, 0.9, 0.0, 0.0, 3, 3, 20, 20), 150, rng)
    base = plan_items(1.0, x, y, n_boot=300, seed=0)
    assert base.method == "bootstrap" and base.pilot_items == 150
    same = plan_items(base.pilot_width, x, y, n_boot=300, seed=0)
    half = plan_items(base.pilot_width / 2, x, y, n_boot=300, seed=0)
    assert same.n_items == 150 and half.n_items == 600
    assert set(base.to_dict()) >= {"n_items", "width", "pilot_width", "method"}


def test_plan_items_parameters_are_validated():
    with pytest.raises(lg.ParameterError, match="pilot data"):
        plan_items(0.1)
    with pytest.raises(lg.ParameterError, match="'width' parameter of plan_items"):
        plan_items(0.0, icc_x=0.5, icc_y=0.5)
    with pytest.raises(lg.ParameterError, match="must be <= 1"):
        plan_items(0.1, icc_x=0.8, icc_y=0.5, labeler_icc_x=0.3)
