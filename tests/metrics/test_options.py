"""Options and error paths of individual metrics not covered by the registry-driven tests."""

from __future__ import annotations

import numpy as np
import pytest

import labelgate as lg
from labelgate.errors import Reason


def pair(level="nominal"):
    rng = np.random.default_rng(5)
    truth = rng.integers(0, 4, 50)
    x = np.where(rng.random((50, 3)) < 0.7, truth[:, None], rng.integers(0, 4, (50, 3)))
    y = np.where(rng.random((50, 2)) < 0.7, truth[:, None], rng.integers(0, 4, (50, 2)))
    cats = [0, 1, 2, 3]
    return lg.Ratings.from_wide(x, level=level, categories=cats), lg.Ratings.from_wide(y, level=level, categories=cats)


def test_named_custom_and_matrix_distances_agree():
    x, y = pair()
    nominal = float(lg.cross_kappa(x, y))
    assert float(lg.cross_kappa(x, y, distance=lambda a, b: float(a != b))) == pytest.approx(nominal, abs=1e-12)
    assert float(lg.cross_kappa(x, y, distance=1 - np.eye(4))) == pytest.approx(nominal, abs=1e-12)
    squared = float(lg.cross_kappa(x, y, distance="interval"))
    assert float(lg.cross_kappa(x, y, distance=lambda a, b: (a - b) ** 2)) == pytest.approx(squared, abs=1e-12)
    xi, yi = pair("interval")
    assert float(lg.cross_kappa(xi, yi)) == pytest.approx(squared, abs=1e-12)  # moments path == matrix path


def test_bad_distance_is_a_parameter_error():
    x, y = pair()
    with pytest.raises(lg.ParameterError, match="'distance' parameter of cross_kappa must be one of"):
        lg.cross_kappa(x, y, distance="euclid")
    with pytest.raises(lg.ParameterError, match="non-negative 4x4 matrix"):
        lg.cross_kappa(x, y, distance=np.ones((3, 3)))


def test_ordinal_cross_kappa_uses_pooled_ordinal_metric_and_reversal_invariance():
    x, y = pair("ordinal")
    est = lg.cross_kappa(x, y)
    assert 0 < float(est) < 1
    flip = {0: 3, 1: 2, 2: 1, 3: 0}
    xr = lg.Ratings(x.item_codes, x.rater_codes, np.vectorize(flip.get)(x.value_codes), item_labels=x.item_labels,
                    rater_labels=x.rater_labels, categories=x.categories, level="ordinal")
    yr = lg.Ratings(y.item_codes, y.rater_codes, np.vectorize(flip.get)(y.value_codes), item_labels=y.item_labels,
                    rater_labels=y.rater_labels, categories=y.categories, level="ordinal")
    assert float(lg.cross_kappa(xr, yr)) == pytest.approx(float(est), abs=1e-12)


def test_iota_needs_an_explicit_distance_for_ordinal_labels():
    x, _ = pair("ordinal")
    with pytest.raises(lg.ParameterError, match="janson_olsson_iota defines nominal and interval distances"):
        lg.janson_olsson_iota(x)
    assert np.isfinite(float(lg.janson_olsson_iota(x, distance="interval")))
    with pytest.raises(lg.ParameterError, match="'distance' parameter of janson_olsson_iota"):
        lg.janson_olsson_iota(x, distance="ordinal")


def test_normalized_cross_kappa_options_and_components():
    x, y = pair()
    for irr in ("krippendorff_alpha", "fleiss_kappa", "conger_kappa", "gwet_ac", "janson_olsson_iota"):
        est = lg.normalized_cross_kappa(x, y, irr=irr)
        d = est.details
        assert d["irr"] == irr
        assert float(est) == pytest.approx(d["cross_kappa"] / np.sqrt(d["irr_x"] * d["irr_y"]), abs=1e-12)
    with pytest.raises(lg.ParameterError, match="'irr' parameter of normalized_cross_kappa must be one of"):
        lg.normalized_cross_kappa(x, y, irr="cohen")


def test_normalized_cross_kappa_interval_carries_component_intervals():
    x, y = pair()
    est = lg.normalized_cross_kappa(x, y, ci=0.95, n_boot=300, seed=1)
    d = est.to_dict()
    for key in ("cross_kappa", "irr_x", "irr_y"):
        assert d[f"{key}_ci_low"] <= d[key] <= d[f"{key}_ci_high"]


def test_nonpositive_irr_product_is_nan_with_reason():
    # crowd raters disagree systematically (alpha < 0) while trusted raters agree
    x = lg.Ratings.from_wide([[0, 1], [1, 0], [0, 1], [1, 0], [0, 0]])
    y = lg.Ratings.from_wide([[0, 0], [1, 1], [0, 0], [1, 1], [0, 0]])
    est = lg.normalized_cross_kappa(x, y)
    assert est.is_nan and est.reason_code == Reason.NONPOSITIVE_IRR_PRODUCT
    assert "IRR_x * IRR_y" in est.reason
    assert est.details["irr_x"] < 0 < est.details["irr_y"]


def test_undefined_component_is_named_in_the_reason():
    x = lg.Ratings.from_wide([[0, 0], [0, 0], [0, 0]], categories=[0, 1])
    y = lg.Ratings.from_wide([[0, 1], [1, 1], [0, 0]], categories=[0, 1])
    est = lg.normalized_cross_kappa(x, y)
    assert est.is_nan and est.reason.startswith("irr_x is undefined")


def test_spa_bad_weighting():
    x, _ = pair()
    with pytest.raises(lg.ParameterError, match="'weighting' parameter of spa must be one of"):
        lg.spa(x, weighting="uniform")


def test_single_rating_items_are_reported_not_silently_used():
    r = lg.Ratings.from_wide([[0, 0], [1, 1], [1, np.nan], [0, np.nan]])
    est = lg.krippendorff_alpha(r)
    assert est.n_items == 2 and est.n_items_excluded == 2 and est.n_ratings == 4


def test_normalized_cross_kappa_uses_one_distance_for_kappa_and_the_irrs():
    # ordinal labels judged with the interval distance: alpha must use it too (eq. 13 compares like with like)
    x, y = pair("ordinal")
    est = lg.normalized_cross_kappa(x, y, distance="interval")
    xi, yi = pair("interval")
    kappa = float(lg.cross_kappa(xi, yi))
    alpha_x, alpha_y = float(lg.krippendorff_alpha(xi)), float(lg.krippendorff_alpha(yi))
    assert est.details["cross_kappa"] == pytest.approx(kappa, abs=1e-12)
    assert est.details["irr_x"] == pytest.approx(alpha_x, abs=1e-12)
    assert float(est) == pytest.approx(kappa / np.sqrt(alpha_x * alpha_y), abs=1e-12)
    with pytest.raises(lg.ParameterError, match="janson_olsson_iota has no ordinal distance"):
        lg.normalized_cross_kappa(x, y, irr="janson_olsson_iota", distance="ordinal")


def test_irr_comparison_equals_the_two_irrs_computed_apart():
    from labelgate.metrics.cross import irr_comparison

    x, y = pair()
    for irr, func in (("krippendorff_alpha", lg.krippendorff_alpha), ("fleiss_kappa", lg.fleiss_kappa),
                      ("gwet_ac", lg.gwet_ac)):
        est = irr_comparison(x, y, irr=irr, ci=0.9, n_boot=300, seed=3)
        crowd, trusted = float(func(x)), float(func(y))
        assert float(est) == pytest.approx(crowd, abs=1e-12)
        assert est.details["irr_y"] == pytest.approx(trusted, abs=1e-12)
        assert est.details["difference"] == pytest.approx(crowd - trusted, abs=1e-12)
        assert est.details["ratio"] == pytest.approx(crowd / trusted, abs=1e-12)
        assert est.details["difference_ci_low"] <= est.details["difference"] <= est.details["difference_ci_high"]
    with pytest.raises(lg.ParameterError, match="'irr' parameter of irr_comparison must be one of"):
        irr_comparison(x, y, irr="cohen")
    with pytest.raises(lg.ParameterError, match="'n_boot' parameter of irr_comparison"):
        irr_comparison(x, y, n_boot=1)
