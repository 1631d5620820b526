"""The intervals of the item-statistic metrics against literal formulas: BCa, the delta method, percentile.

``ci_method="auto"`` (the default) is BCa for every metric but normalized kappa_x, whose default is the delta
interval. Fast and deterministic (part of ``make test``); the coverage figures are in ``tests/metrics/test_interval_coverage.py``.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

import labelgate as lg
from labelgate.core.estimate import DEFAULT_CI_METHOD, INTERVAL_METHODS, resolve_ci_method
from labelgate.metrics import _linear
from labelgate.metrics._cross_disagreement import build_cross_kappa
from labelgate.metrics._engine import ItemStatistic, bootstrap, combine, evaluate, jackknife_components
from labelgate.metrics._intervals import bca_interval, interval_of, jackknife_acceleration, percentile_interval
from labelgate.metrics.agreement import build_conger_kappa
from labelgate.metrics.alpha import build_alpha
from labelgate.metrics.cross import irr_comparison, prepare_pair

PHI = NormalDist()


def _mean_statistic(x: np.ndarray) -> ItemStatistic:
    """The sample mean as an item statistic: blocks (x_i, 1), value = sum x / n."""
    def finalize(sums: list[np.ndarray]) -> dict[str, np.ndarray]:
        return {"value": sums[0][:, 0] / sums[0][:, 1]}

    return ItemStatistic(blocks=[np.column_stack([x, np.ones_like(x)])], finalize=finalize, n_items=x.size,
                         n_ratings=x.size)


def _skewed(n: int = 40, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).lognormal(0.0, 1.0, n)


def _wide(rng: np.random.Generator, n_items: int, n_raters: int = 4, q: int = 3) -> np.ndarray:
    """Every item has ratings by raters 0 and 1 (all items pairable, so the item axis is every row)."""
    truth = rng.integers(0, q, (n_items, 1))
    data = np.where(rng.random((n_items, n_raters)) < 0.7, truth, rng.integers(0, q, (n_items, n_raters)))
    data = data.astype(float)
    missing = rng.random(data.shape) < 0.3
    missing[:, :2] = False
    data[missing] = np.nan
    return data


# ------------------------------------------------------------------ the formulas
def test_bca_of_the_mean_of_a_skewed_sample_matches_the_literal_formula():
    x = _skewed()
    n, level, n_boot, seed = x.size, 0.9, 4000, 7
    est = evaluate("mean", _mean_statistic(x), ci=level, n_boot=n_boot, seed=seed, ci_method="bca")
    replicates = bootstrap(_mean_statistic(x), n_boot=n_boot, seed=seed)  # the same resamples
    theta = x.mean()
    # Efron (1987): z0 from the share of replicates below the estimate; a from the jackknife, which for the mean
    # is skewness / (6 sqrt(n)): theta_bar - theta_(i) = (x_i - mean) / (n - 1).
    z0 = PHI.inv_cdf(float(np.mean(replicates < theta) + 0.5 * np.mean(replicates == theta)))
    d = x - theta
    a = np.sum(d**3) / (6.0 * np.sum(d**2) ** 1.5)
    ends = []
    for beta in ((1 - level) / 2, (1 + level) / 2):
        z = z0 + PHI.inv_cdf(beta)
        ends.append(np.quantile(replicates, PHI.cdf(z0 + z / (1 - a * z))))
    assert est.ci == pytest.approx(tuple(ends), abs=1e-12)
    assert est.ci_method == "bca" and est.n_boot == n_boot and est.ci_level == level
    # a right-skewed sample: BCa moves the interval to the right of the percentile interval
    percentile, _ = percentile_interval(replicates, level)
    assert percentile is not None and a > 0.02
    assert est.ci[0] > percentile[0] and est.ci[1] > percentile[1]
    assert n == 40


def test_acceleration_of_the_mean_is_skewness_over_6_root_n():
    x = _skewed(60, seed=3)
    loo = jackknife_components(_mean_statistic(x))["value"]
    literal = np.array([np.delete(x, i).mean() for i in range(x.size)])
    np.testing.assert_allclose(loo, literal, rtol=0, atol=1e-12)
    d = x - x.mean()
    skewness = np.mean(d**3) / np.mean(d**2) ** 1.5
    assert jackknife_acceleration(loo) == pytest.approx(skewness / (6 * math.sqrt(x.size)), rel=1e-9)


@pytest.mark.parametrize("case", ["alpha", "alpha_interval", "conger", "cross_kappa"])
def test_jackknife_is_a_literal_leave_one_item_out_loop(case):
    rng = np.random.default_rng(11)
    wide, other = _wide(rng, 15), _wide(rng, 15)
    cats = [0, 1, 2]
    level = "interval" if case == "alpha_interval" else "nominal"

    def metric(w: np.ndarray, o: np.ndarray) -> float:
        r = lg.Ratings.from_wide(w, level=level, categories=None if level == "interval" else cats)
        if case == "conger":
            return float(lg.conger_kappa(r))
        if case == "cross_kappa":
            return float(lg.cross_kappa(r, lg.Ratings.from_wide(o, categories=cats)))
        return float(lg.krippendorff_alpha(r))

    r = lg.Ratings.from_wide(wide, level=level, categories=None if level == "interval" else cats)
    if case == "conger":
        stat = build_conger_kappa(r)  # a sparse raters x categories block
    elif case == "cross_kappa":
        x, y, cx, cy = prepare_pair(r, lg.Ratings.from_wide(other, categories=cats), "test")
        stat = build_cross_kappa(x, y, cx, cy)
    else:
        stat = build_alpha(r)
    fast = jackknife_components(stat)["value"]
    literal = np.array([metric(np.delete(wide, i, axis=0), np.delete(other, i, axis=0))
                        for i in range(wide.shape[0])])
    np.testing.assert_allclose(fast, literal, rtol=0, atol=1e-12)
    u = literal.mean() - literal
    assert jackknife_acceleration(fast) == pytest.approx(np.sum(u**3) / (6 * np.sum(u**2) ** 1.5), abs=1e-12)


def test_jackknife_on_a_sample_of_items_above_the_cap():
    x = _skewed(300, seed=5)
    stat = _mean_statistic(x)
    full = jackknife_components(stat)["value"]
    sample = jackknife_components(stat, rng=np.random.default_rng(1), max_items=60)["value"]
    again = jackknife_components(stat, rng=np.random.default_rng(1), max_items=60)["value"]
    assert sample.size == 60 and np.array_equal(sample, again)
    # exact leave-one-out values of 60 distinct items
    assert all(np.min(np.abs(full - v)) < 1e-13 for v in sample) and np.unique(sample).size == 60
    assert jackknife_acceleration(sample, n_axis=300) == pytest.approx(
        jackknife_acceleration(sample) * math.sqrt(60 / 300), rel=1e-12)


# ------------------------------------------------------------------ invariances
def test_bca_without_bias_or_acceleration_is_the_percentile_interval():
    reps = np.concatenate([np.linspace(-1, 1, 1001), [0.0]])  # symmetric around 0: z0 = 0
    jack = np.array([-1.0, 1.0, 0.0, -1.0, 1.0])              # symmetric: a = 0
    bca, _, _ = bca_interval(reps, 0.0, jack, 0.9)
    assert bca == pytest.approx(percentile_interval(reps, 0.9)[0], abs=1e-15)


@pytest.mark.parametrize(("scale", "shift"), [(2.5, 7.0), (0.1, -3.0), (-1.0, 0.0), (-4.0, 1.5)])
def test_bca_is_affine_equivariant(scale, shift):
    rng = np.random.default_rng(2)
    reps, jack = rng.gamma(2.0, 1.0, 999), rng.gamma(2.0, 1.0, 50)
    (low, high), _, _ = bca_interval(reps, 1.7, jack, 0.95)
    moved, _, _ = bca_interval(scale * reps + shift, scale * 1.7 + shift, scale * jack + shift, 0.95)
    expected = sorted((scale * low + shift, scale * high + shift))  # a decreasing map swaps the ends
    assert moved == pytest.approx(tuple(expected), abs=1e-12)


def test_interval_alpha_bca_is_invariant_to_the_units_of_the_labels():
    wide = _wide(np.random.default_rng(4), 40, q=5) + 1.0
    base = lg.krippendorff_alpha(lg.Ratings.from_wide(wide, level="interval"), ci=0.95, n_boot=300, seed=2)
    moved = lg.krippendorff_alpha(lg.Ratings.from_wide(2.5 * wide - 7.0, level="interval"), ci=0.95, n_boot=300,
                                  seed=2)
    assert base.ci_method == "bca" and moved.ci == pytest.approx(base.ci, abs=1e-9)


# ------------------------------------------------------------------ seeds and the option
def test_seeded_intervals_are_reproducible_and_share_the_resamples():
    x = lg.Ratings.from_wide(_wide(np.random.default_rng(6), 50))
    a = lg.fleiss_kappa(x, ci=0.95, n_boot=300, seed=9)
    b = lg.fleiss_kappa(x, ci=0.95, n_boot=300, seed=np.random.Generator(np.random.SFC64(9)))
    assert a.ci == b.ci and a.ci_method == resolve_ci_method(DEFAULT_CI_METHOD, "fleiss_kappa") == "bca"
    # the percentile interval is that of the very same resamples
    p = lg.fleiss_kappa(x, ci=0.95, n_boot=300, seed=9, ci_method="percentile")
    from labelgate.metrics.agreement import build_fleiss_kappa
    expected, _ = percentile_interval(bootstrap(build_fleiss_kappa(x), n_boot=300, seed=9), 0.95)
    assert p.ci == expected and p.ci_method == "percentile"
    assert p.to_dict()["ci_method"] == "percentile" and a.to_dict()["ci_method"] == "bca"


def test_components_of_normalized_cross_kappa_get_the_same_method():
    rng = np.random.default_rng(8)
    x, y = lg.Ratings.from_wide(_wide(rng, 60)), lg.Ratings.from_wide(_wide(rng, 60))
    bca = lg.normalized_cross_kappa(x, y, ci=0.9, n_boot=300, seed=1, ci_method="bca")
    pct = lg.normalized_cross_kappa(x, y, ci=0.9, n_boot=300, seed=1, ci_method="percentile")
    delta = lg.normalized_cross_kappa(x, y, ci=0.9)  # the default of normalized kappa_x
    assert bca.ci_method == "bca" and pct.ci_method == "percentile" and delta.ci_method == "delta"
    z = PHI.inv_cdf(0.95)
    for key in ("cross_kappa", "irr_x", "irr_y"):
        assert bca.details[f"{key}_ci_low"] <= bca.details[key] <= bca.details[f"{key}_ci_high"]
        assert bca.details[f"{key}_ci_low"] != pct.details[f"{key}_ci_low"]
        # each component's delta interval is symmetric, with the component's own linearised s.e.
        low, high = delta.details[f"{key}_ci_low"], delta.details[f"{key}_ci_high"]
        assert (low + high) / 2 == pytest.approx(delta.details[key], abs=1e-12)
        assert (high - low) / (2 * z) == pytest.approx(_literal_se(_component_statistic(x, y, key)), rel=1e-6)


def test_specific_agreement_takes_the_option():
    r = lg.Ratings.from_wide(_wide(np.random.default_rng(9), 50))
    for method in INTERVAL_METHODS:
        for est in lg.specific_agreement(r, ci=0.9, n_boot=200, seed=3, ci_method=method).values():
            assert est.ci is not None and est.ci_method == method


@pytest.mark.parametrize("bad", ["BCa", "studentized", None, 1])
def test_unknown_method_is_a_parameter_error(bad):
    r = lg.Ratings.from_wide([[0, 1], [1, 1], [0, 0]])
    with pytest.raises(lg.ParameterError, match="The 'ci_method' parameter of gwet_ac must be one of 'auto', "
                                               "'bca', 'delta', 'percentile'; got"):
        lg.gwet_ac(r, ci=0.95, ci_method=bad)


# ------------------------------------------------------------------ degenerate inputs
def test_perfect_agreement_gives_a_point_interval():
    wide = np.repeat(np.arange(20)[:, None] % 3, 3, axis=1).astype(float)
    est = lg.krippendorff_alpha(lg.Ratings.from_wide(wide), ci=0.95, n_boot=200, seed=0)
    assert est.value == 1.0 and est.ci == (1.0, 1.0) and est.ci_method == "bca"
    assert jackknife_acceleration(np.ones(20)) == 0.0
    # every item contributes alike: the influence values are rounding residue, the delta interval a point
    delta = lg.krippendorff_alpha(lg.Ratings.from_wide(1.7156 * wide, level="interval"), ci=0.95, ci_method="delta")
    assert delta.value == pytest.approx(1.0) and delta.ci == (delta.value, delta.value)
    assert delta.ci_method == "delta"


def test_undefined_value_has_no_interval_and_a_reason():
    est = lg.fleiss_kappa(lg.Ratings.from_wide(np.ones((6, 3))), ci=0.95, n_boot=100, seed=0)
    assert est.is_nan and est.reason_code == lg.Reason.NO_EXPECTED_DISAGREEMENT and est.reason
    assert est.ci is None and est.ci_method is None and est.n_boot == 0


def test_replicates_on_one_side_fall_back_to_percentile_with_a_note():
    reps = np.linspace(0.5, 0.9, 200)
    assert bca_interval(reps, 0.95, np.linspace(0, 1, 10), 0.95)[0] is None
    interval, _, method, note = interval_of(reps, 0.95, 0.95, "bca", np.linspace(0, 1, 10))
    assert interval == percentile_interval(reps, 0.95)[0] and method == "percentile"
    assert note is not None and "one side" in note


def test_undefined_jackknife_or_too_large_acceleration_fall_back():
    reps = np.random.default_rng(0).normal(size=500)
    assert bca_interval(reps, 0.0, np.array([1.0, np.nan, 2.0]), 0.95)[2] == (
        "fewer than 3 leave-one-item-out values are defined")
    # |a| < 1/6 always (the most skewed case, one outlying item among n: a = (n - 2) / (6 sqrt(n (n - 1)))), so
    # 1 - a (z0 + z) <= 0 needs z0 + z > 6: nearly every replicate below the estimate and a very high level.
    outlier = np.r_[np.zeros(199), -200.0]  # an item whose removal lowers the value: a > 0
    assert jackknife_acceleration(outlier) == pytest.approx(198 / (6 * math.sqrt(200 * 199)), rel=1e-9)
    high = np.r_[np.linspace(-1.0, 0.9, 1999), 2.0]
    interval, _, why = bca_interval(high, 1.0, outlier, 0.999)
    assert interval is None and "acceleration" in why


def test_undefined_resamples_are_left_out_and_counted():
    reps = np.r_[np.random.default_rng(1).normal(size=300), [np.nan] * 5]
    interval, n_failed, _ = bca_interval(reps, 0.0, np.random.default_rng(2).normal(size=30), 0.95)
    assert interval is not None and n_failed == 5
    assert bca_interval(np.array([np.nan, 1.0]), 0.0, np.arange(5.0), 0.95)[0] is None


# ------------------------------------------------------------------ the delta method
def _literal_se(stat: ItemStatistic, key: str = "value") -> float:
    """Infinitesimal jackknife by a loop over items: U_i = d/de F(S + e (x_i - S/n)), se = sqrt(sum U_i^2)."""
    blocks = [np.asarray(b.toarray() if hasattr(b, "toarray") else b, dtype=float) for b in stat.get_blocks()]
    sums = [b.sum(axis=0) for b in blocks]
    n, eps = blocks[0].shape[0], 1e-5 * blocks[0].shape[0]
    influence = []
    for i in range(n):
        ends = []
        for sign in (1.0, -1.0):
            moved = [(s + sign * eps * (b[i] - s / n))[None] for s, b in zip(sums, blocks, strict=True)]
            ends.append(float(np.atleast_1d(stat.finalize(moved)[key])[0]))
        influence.append((ends[0] - ends[1]) / (2 * eps))
    return float(np.sqrt(np.sum(np.square(influence))))


def _component_statistic(x: lg.Ratings, y: lg.Ratings, key: str) -> ItemStatistic:
    x, y, cx, cy = prepare_pair(x, y, "test")
    return {"cross_kappa": lambda: build_cross_kappa(x, y, cx, cy), "irr_x": lambda: build_alpha(x, cx),
            "irr_y": lambda: build_alpha(y, cy)}[key]()


def test_delta_of_the_mean_is_the_plug_in_standard_error():
    x = _skewed(50, seed=2)
    est = evaluate("mean", _mean_statistic(x), ci=0.9, n_boot=100, seed=0, ci_method="delta")
    se = math.sqrt(np.sum((x - x.mean()) ** 2)) / x.size  # s / sqrt(n) with the 1/n variance
    half = PHI.inv_cdf(0.95) * se
    assert est.ci == pytest.approx((x.mean() - half, x.mean() + half), rel=1e-8)
    assert est.ci_method == "delta" and est.n_boot == 0 and est.ci_level == 0.9 and "n_boot_undefined" not in (
        est.details)


def test_delta_of_cohens_kappa_is_the_fleiss_cohen_everitt_standard_error():
    # kappa_x with one rating per item in each replication is Cohen's kappa; its delta-method s.e. is the
    # large-sample formula of Fleiss, Cohen & Everitt (1969, Psychological Bulletin 72, 323-327).
    rng = np.random.default_rng(5)
    n = 80
    a = rng.integers(0, 3, n)
    b = np.where(rng.random(n) < 0.6, a, rng.integers(0, 3, n))
    x = lg.Ratings.from_wide(a[:, None].astype(float), categories=[0, 1, 2])
    y = lg.Ratings.from_wide(b[:, None].astype(float), categories=[0, 1, 2])
    est = lg.cross_kappa(x, y, ci=0.95, ci_method="delta")
    p = np.zeros((3, 3))
    np.add.at(p, (a, b), 1.0 / n)
    rows, cols = p.sum(axis=1), p.sum(axis=0)
    p_o, p_e = np.trace(p), rows @ cols
    diagonal = sum(p[i, i] * ((1 - p_e) - (rows[i] + cols[i]) * (1 - p_o)) ** 2 for i in range(3))
    off = (1 - p_o) ** 2 * sum(p[i, j] * (cols[i] + rows[j]) ** 2 for i in range(3) for j in range(3) if i != j)
    se = math.sqrt((diagonal + off - (p_o * p_e - 2 * p_e + p_o) ** 2) / (n * (1 - p_e) ** 4))
    assert est.value == pytest.approx((p_o - p_e) / (1 - p_e), abs=1e-12)
    assert (est.ci[1] - est.ci[0]) / (2 * PHI.inv_cdf(0.975)) == pytest.approx(se, rel=1e-8)


@pytest.mark.parametrize("case", ["alpha", "alpha_interval", "conger", "cross_kappa", "normalized_cross_kappa"])
def test_linearized_se_is_a_literal_loop_over_items(case):
    rng = np.random.default_rng(12)
    wide, other = _wide(rng, 25), _wide(rng, 25)
    level = "interval" if case == "alpha_interval" else "nominal"
    r = lg.Ratings.from_wide(wide, level=level, categories=None if level == "interval" else [0, 1, 2])
    o = lg.Ratings.from_wide(other, categories=[0, 1, 2])
    if case == "conger":
        stat = build_conger_kappa(r)  # a sparse raters x categories block
    elif case == "cross_kappa":
        stat = _component_statistic(r, o, "cross_kappa")
    elif case == "normalized_cross_kappa":
        est = lg.normalized_cross_kappa(r, o, ci=0.95)
        x, y, cx, cy = prepare_pair(r, o, "test")

        def ratio(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
            return {"value": parts[0]["value"] / np.sqrt(parts[1]["value"] * parts[2]["value"])}

        stat = combine([build_cross_kappa(x, y, cx, cy), build_alpha(x, cx), build_alpha(y, cy)], ratio,
                       n_items=int(cx.size), n_ratings=0)
        assert est.ci_method == "delta" and est.n_boot == 0
        assert (est.ci[1] - est.ci[0]) / (2 * PHI.inv_cdf(0.975)) == pytest.approx(_literal_se(stat), rel=1e-6)
    else:
        stat = build_alpha(r)
    se, why = _linear.linearized_se(stat.get_blocks(), stat.finalize)
    assert why is None and se is not None
    assert float(se["value"]) == pytest.approx(_literal_se(stat), rel=1e-6)


def test_delta_is_invariant_to_the_units_of_the_labels():
    wide = _wide(np.random.default_rng(4), 40, q=5) + 1.0
    base = lg.krippendorff_alpha(lg.Ratings.from_wide(wide, level="interval"), ci=0.95, ci_method="delta")
    moved = lg.krippendorff_alpha(lg.Ratings.from_wide(2.5 * wide - 7.0, level="interval"), ci=0.95,
                                  ci_method="delta")
    assert base.ci_method == moved.ci_method == "delta" and moved.ci == pytest.approx(base.ci, abs=1e-9)
    # and equivariant for a statistic in the data's units: the mean of 2.5 x - 7
    x = _skewed(30, seed=8)
    a = evaluate("mean", _mean_statistic(x), ci=0.95, n_boot=2, seed=0, ci_method="delta").ci
    b = evaluate("mean", _mean_statistic(2.5 * x - 7.0), ci=0.95, n_boot=2, seed=0, ci_method="delta").ci
    assert b == pytest.approx((2.5 * a[0] - 7.0, 2.5 * a[1] - 7.0), rel=1e-9)


def test_auto_is_delta_for_normalized_cross_kappa_only():
    rng = np.random.default_rng(13)
    x, y = lg.Ratings.from_wide(_wide(rng, 40)), lg.Ratings.from_wide(_wide(rng, 40))
    assert DEFAULT_CI_METHOD == "auto"
    assert lg.normalized_cross_kappa(x, y, ci=0.95, n_boot=200, seed=1).ci_method == "delta"
    for est in (lg.cross_kappa(x, y, ci=0.95, n_boot=200, seed=1), lg.krippendorff_alpha(x, ci=0.95, n_boot=200),
                irr_comparison(x, y, ci=0.95, n_boot=200, seed=1),
                *lg.specific_agreement(x, ci=0.95, n_boot=200, seed=1).values()):
        assert est.ci_method == "bca" and est.n_boot == 200
    explicit = lg.normalized_cross_kappa(x, y, ci=0.95, n_boot=200, seed=1, ci_method="delta")
    assert explicit.ci == lg.normalized_cross_kappa(x, y, ci=0.95).ci


def test_delta_for_specific_agreement_per_category():
    r = lg.Ratings.from_wide(_wide(np.random.default_rng(9), 50))
    for est in lg.specific_agreement(r, ci=0.9, n_boot=200, seed=3, ci_method="delta").values():
        assert est.ci_method == "delta" and est.n_boot == 0
        assert sum(est.ci) / 2 == pytest.approx(est.value, abs=1e-12)


def test_too_many_columns_fall_back_to_bca_with_a_note(monkeypatch):
    rng = np.random.default_rng(14)
    x, y = lg.Ratings.from_wide(_wide(rng, 40)), lg.Ratings.from_wide(_wide(rng, 40))
    monkeypatch.setattr(_linear, "MAX_GRADIENT_COLUMNS", 5)
    est = lg.normalized_cross_kappa(x, y, ci=0.95, n_boot=300, seed=2)
    bca = lg.normalized_cross_kappa(x, y, ci=0.95, n_boot=300, seed=2, ci_method="bca")
    assert est.ci_method == "bca" and est.ci == bca.ci and est.n_boot == 300
    note = est.details["ci_method_note"]
    assert note.startswith("delta interval undefined (the item statistics have") and note.endswith(
        "BCa interval given")


def test_a_value_not_differentiable_at_the_data_falls_back():
    # value = sqrt(k - S): defined at the data's sum S = k and below, undefined just above it
    x = np.r_[np.zeros(20), np.ones(20)]

    def finalize(sums: list[np.ndarray]) -> dict[str, np.ndarray]:
        with np.errstate(invalid="ignore"):
            return {"value": np.sqrt(20.0 - sums[0][:, 0])}

    stat = ItemStatistic(blocks=[x[:, None]], finalize=finalize, n_items=40, n_ratings=40)
    est = evaluate("root", stat, ci=0.9, n_boot=300, seed=1, ci_method="delta")
    assert est.ci is not None and est.ci_method in ("bca", "percentile") and est.n_boot == 300
    assert "delta interval undefined (the value is not differentiable" in est.details["ci_method_note"]
    se, why = _linear.linearized_se(stat.get_blocks(), finalize)
    assert why is None and se is not None and np.isnan(se["value"])
    assert _linear.normal_interval(1.0, float("nan"), 0.95) is None
