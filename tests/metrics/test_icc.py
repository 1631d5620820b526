"""ICCs of complete designs (``labelgate.metrics.icc``) against pingouin and the two-way ANOVA.

pingouin (test-only peer) computes McGraw & Wong's six ICCs with their F
intervals; its CI column is rounded to 2 decimals by default, so the option is
switched off for the comparison.
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
from labelgate.errors import DesignError
from labelgate.metrics.icc import FORMS, icc, mean_squares
from labelgate.metrics.variance import variance_components

pg = pytest.importorskip("pingouin")

PINGOUIN_TYPES = dict(zip(["ICC(1,1)", "ICC(A,1)", "ICC(C,1)", "ICC(1,k)", "ICC(A,k)", "ICC(C,k)"], FORMS,
                          strict=True))


def _random_complete(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    return (rng.normal(size=(n, 1)) * rng.uniform(0.3, 2) + rng.normal(size=(1, k)) * rng.uniform(0, 1.5)
            + rng.normal(size=(n, k)) + 3.0)


def _long(x: np.ndarray) -> pd.DataFrame:
    n, k = x.shape
    return pd.DataFrame({"t": np.repeat(np.arange(n), k), "r": np.tile(np.arange(k), n), "y": x.ravel()})


def _pingouin(x: np.ndarray) -> pd.DataFrame:
    old = pg.options.get("round.column.CI95")
    pg.options["round.column.CI95"] = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return pg.intraclass_corr(_long(x), targets="t", raters="r", ratings="y").set_index("Type")
    finally:
        pg.options["round.column.CI95"] = old


@pytest.mark.parametrize(("seed", "n", "k"), [(0, 12, 4), (1, 30, 2), (2, 7, 6), (3, 50, 3), (4, 5, 10)])
def test_six_forms_and_intervals_equal_pingouin(seed, n, k):
    x = _random_complete(np.random.default_rng(seed), n, k)
    r = lg.Ratings.from_wide(x, level="interval")
    ref = _pingouin(x)
    for kind, form in PINGOUIN_TYPES.items():
        est = icc(r, form, ci=0.95)
        row = ref.loc[kind]
        assert est.value == pytest.approx(row["ICC"], abs=1e-9), form
        assert est.ci[0] == pytest.approx(row["CI95"][0], abs=1e-9), form
        assert est.ci[1] == pytest.approx(row["CI95"][1], abs=1e-9), form
        assert est.details["f"] == pytest.approx(row["F"], rel=1e-9)
        assert est.details["p_value"] == pytest.approx(row["pval"], rel=1e-6, abs=1e-300)
        assert (est.details["df1"], est.details["df2"]) == (row["df1"], row["df2"])


def test_wine_example_of_pingouin_docs():
    # pingouin's documented example (8 wines x 4 judges): ICC(A,1) = 0.728, ICC(C,k) = 0.915 (3 decimals)
    data = pg.read_dataset("icc")
    r = lg.Ratings.from_long(data, item="Wine", rater="Judge", value="Scores", level="interval")
    assert round(float(icc(r, "A1")), 3) == 0.728
    assert round(float(icc(r, "Ck")), 3) == 0.915


@pytest.mark.parametrize("seed", [5, 6, 7])
def test_variance_components_equal_two_way_anova_on_complete_designs(seed):
    rng = np.random.default_rng(seed)
    x = _random_complete(rng, 20, 5)
    n, k = x.shape
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        aov = pg.anova(data=_long(x), dv="y", between=["t", "r"], ss_type=2).set_index("Source")
    # one rating per cell: the interaction row is the residual (as pingouin's intraclass_corr reads it)
    ms_items, ms_raters, ms_error = aov.loc["t", "MS"], aov.loc["r", "MS"], aov.loc["t * r", "MS"]
    vc = variance_components(lg.Ratings.from_wide(x, level="interval"))
    assert vc.item_raw == pytest.approx((ms_items - ms_error) / k, abs=1e-9)
    assert vc.rater_raw == pytest.approx((ms_raters - ms_error) / n, abs=1e-9)
    assert vc.residual_raw == pytest.approx(ms_error, abs=1e-9)


def test_item_icc_equals_agreement_icc_on_complete_designs():
    x = _random_complete(np.random.default_rng(8), 25, 4)
    r = lg.Ratings.from_wide(x, level="interval")
    vc = variance_components(r)
    assert not vc.negative
    from labelgate.metrics.variance import item_icc
    assert float(item_icc(r)) == pytest.approx(float(icc(r, "A1")), abs=1e-12)


def test_narrower_level_gives_a_nested_interval():
    r = lg.Ratings.from_wide(_random_complete(np.random.default_rng(9), 15, 3), level="interval")
    for form in FORMS:
        wide, narrow = icc(r, form, ci=0.95).ci, icc(r, form, ci=0.8).ci
        assert wide[0] < narrow[0] < float(icc(r, form)) < narrow[1] < wide[1], form


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), scale=st.floats(0.01, 100), shift=st.floats(-1e3, 1e3))
def test_affine_invariance(seed, scale, shift):
    x = _random_complete(np.random.default_rng(seed), 8, 3)
    base = lg.Ratings.from_wide(x, level="interval")
    moved = lg.Ratings.from_wide(x * scale + shift, level="interval")
    for form in FORMS:
        assert float(icc(moved, form)) == pytest.approx(float(icc(base, form)), abs=1e-8)


def test_ordinal_ranks_and_binary_labels_are_used_as_numbers():
    rng = np.random.default_rng(10)
    x = rng.integers(1, 6, size=(20, 3))
    ordinal = lg.Ratings.from_wide(x, level="ordinal", categories=[1, 2, 3, 4, 5])
    interval = lg.Ratings.from_wide(x - 1.0, level="interval", categories=[0, 1, 2, 3, 4])
    assert float(icc(ordinal, "C1")) == pytest.approx(float(icc(interval, "C1")), abs=1e-12)
    b = rng.integers(0, 2, size=(20, 3))
    nominal = lg.Ratings.from_wide(np.where(b == 1, "yes", "no").astype(object))
    assert float(icc(nominal)) == pytest.approx(float(icc(lg.Ratings.from_wide(b, level="interval"))), abs=1e-12)


def test_incomplete_design_raises_and_points_to_variance_components():
    x = _random_complete(np.random.default_rng(11), 6, 3)
    x[2, 1] = np.nan
    with pytest.raises(lg.DesignError, match="variance_components") as info:
        icc(lg.Ratings.from_wide(x, level="interval"))
    assert info.value.code == lg.Reason.INCOMPLETE_DESIGN
    assert info.value.context["missing_cells"] == 1


def test_form_is_validated():
    r = lg.Ratings.from_wide([[1, 2], [2, 3], [4, 4]], level="interval")
    with pytest.raises(lg.ParameterError, match="'form' parameter of icc must be one of '1', 'A1'"):
        icc(r, "A,1")
    with pytest.raises(lg.ParameterError, match="'ci' parameter of icc"):
        icc(r, ci=2)


def test_nominal_labels_with_more_than_two_categories_are_refused():
    with pytest.raises(lg.ParameterError, match="needs numeric labels"):
        icc(lg.Ratings.from_wide([["a", "b"], ["c", "a"], ["b", "b"]]))


@pytest.mark.parametrize(("wide", "code"), [
    ([[2, 2], [2, 2], [2, 2]], lg.Reason.NO_EXPECTED_DISAGREEMENT),   # all ratings equal
    ([[1], [2], [3]], lg.Reason.NO_PAIRABLE_ITEMS),                   # a single rater
    ([[1, 2, 3]], lg.Reason.NO_VARIANCE),                             # a single item
])
def test_degenerate_designs_give_nan_with_reason(wide, code):
    est = icc(lg.Ratings.from_wide(wide, level="interval"), "A1", ci=0.95)
    assert math.isnan(est.value) and est.ci is None
    assert est.reason_code == code and est.reason


def test_mean_squares_by_hand():
    # 3 items x 2 raters; grand mean 3; item means 2, 3, 4; rater means 8/3, 10/3
    # SS_total = 6, SS_items = 2 * (1 + 0 + 1) = 4, SS_raters = 3 * 2 / 9 = 2/3, SS_error = 4/3
    x = np.array([[1.0, 3.0], [3.0, 3.0], [4.0, 4.0]])
    ms = mean_squares(lg.Ratings.from_wide(x, level="interval"))
    assert ms["ms_items"] == pytest.approx(4 / 2, abs=1e-12)
    assert ms["ms_raters"] == pytest.approx(2 / 3, abs=1e-12)
    assert ms["ms_error"] == pytest.approx((4 / 3) / 2, abs=1e-12)
    assert ms["ms_within"] == pytest.approx((2 / 3 + 4 / 3) / 3, abs=1e-12)


# --------------------------------------------------------------------------- missing data: missing="omit"
def _pingouin_omit(x: np.ndarray) -> pd.DataFrame:
    frame = _long(x).dropna()  # a missing rating is an absent row, as in a long table
    old = pg.options.get("round.column.CI95")
    pg.options["round.column.CI95"] = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return pg.intraclass_corr(frame, targets="t", raters="r", ratings="y",
                                      nan_policy="omit").set_index("Type")
    finally:
        pg.options["round.column.CI95"] = old


@pytest.mark.parametrize(("seed", "n", "k"), [(10, 20, 3), (11, 40, 2), (12, 15, 5), (13, 60, 4)])
def test_omit_equals_pingouin_nan_policy_omit(seed, n, k):
    rng = np.random.default_rng(seed)
    x = _random_complete(rng, n, k)
    x[rng.random(x.shape) < 0.1] = np.nan
    x[0, :] = np.nan  # an item nobody rated: not in the long table at all
    x[1, 1:] = np.nan  # an item rated once
    r = lg.Ratings.from_wide(x, level="interval")
    complete = ~np.isnan(x).any(axis=1)
    rated = ~np.isnan(x).all(axis=1)
    ref = _pingouin_omit(x)
    with pytest.raises(DesignError, match="complete design"):
        icc(r, "A1")
    for kind, form in PINGOUIN_TYPES.items():
        est = icc(r, form, missing="omit", ci=0.95)
        row = ref.loc[kind]
        assert est.value == pytest.approx(row["ICC"], abs=1e-9), form
        assert est.ci[0] == pytest.approx(row["CI95"][0], abs=1e-9), form
        assert est.ci[1] == pytest.approx(row["CI95"][1], abs=1e-9), form
        assert est.details["f"] == pytest.approx(row["F"], rel=1e-9)
        assert (est.details["df1"], est.details["df2"]) == (row["df1"], row["df2"])
        assert est.n_items == complete.sum() and est.n_ratings == complete.sum() * k
        assert est.details["n_items_omitted"] == rated.sum() - complete.sum()
        # the same as the complete items alone, and as subset_items on them
        alone = icc(lg.Ratings.from_wide(x[complete], level="interval"), form)
        assert est.value == pytest.approx(alone.value, abs=1e-12)
        codes = [code for code, label in enumerate(r.item_labels) if complete[label]]  # unrated rows have no code
        assert icc(r.subset_items(codes), form).value == pytest.approx(alone.value, abs=1e-12)


def test_omit_on_a_complete_design_changes_nothing():
    x = _random_complete(np.random.default_rng(14), 10, 3)
    r = lg.Ratings.from_wide(x, level="interval")
    for form in FORMS:
        est = icc(r, form, missing="omit")
        assert est.value == icc(r, form).value and est.details["n_items_omitted"] == 0


def test_omit_drops_a_rater_without_ratings_and_refuses_when_nothing_is_complete():
    frame = pd.DataFrame({"item_id": [1, 1, 2, 2, 3], "rater_id": ["a", "b", "a", "b", "c"],
                          "label": [1.0, 2.0, 3.0, 3.5, 2.0], "pool": ["x", "x", "x", "x", "y"]})
    pool = lg.ratings_by_pool(frame, level="interval")["x"]
    est = icc(pool, "C1", missing="omit")
    assert est.n_items == 2 and est.details["n_raters"] == 2
    sparse = lg.Ratings.from_long({"item_id": [1, 1, 2, 2], "rater_id": ["a", "b", "b", "c"], "label": [1, 2, 3, 4]},
                                  level="interval")
    with pytest.raises(DesignError, match=r"missing='omit'\): no item is rated by all 3 raters"):
        icc(sparse, missing="omit")
    with pytest.raises(lg.ParameterError, match="missing"):
        icc(sparse, missing="drop")


def test_subset_items_shrinks_the_item_axis_and_keeps_the_ids():
    r = lg.Ratings.from_long({"item_id": ["p", "q", "q", "s", "s"], "rater_id": ["a", "a", "b", "a", "b"],
                              "label": [1.0, 2.0, 2.5, 3.0, 4.0]}, level="interval")
    sub = r.subset_items([1, 2])
    assert sub.n_items == 2 and list(sub.item_labels) == ["q", "s"] and sub.n_ratings == 4
    assert icc(sub, "A1").value == pytest.approx(icc(lg.Ratings.from_wide([[2.0, 2.5], [3.0, 4.0]],
                                                                          level="interval"), "A1").value)
    counts = lg.Ratings.from_counts([[1, 1], [2, 0], [0, 2]])
    kept = counts.subset_items([0, 2])
    assert kept.n_items == 2 and list(kept.item_labels) == [0, 2] and kept.item_counts.tolist() == [[1, 1], [0, 2]]
    assert float(lg.fleiss_kappa(kept)) == float(lg.fleiss_kappa(lg.Ratings.from_counts([[1, 1], [0, 2]])))


def test_exchangeable_raters_have_the_one_way_forms_only():
    x = _random_complete(np.random.default_rng(15), 12, 3)
    frame = pd.DataFrame({"item_id": np.repeat(np.arange(12), 3), "label": x.ravel()})
    anonymous = lg.Ratings.from_long(frame, rater=None, level="interval")
    named = lg.Ratings.from_wide(x, level="interval")
    for form in ("1", "1k"):
        assert icc(anonymous, form).value == pytest.approx(icc(named, form).value, abs=1e-12)
    for form in ("A1", "C1", "Ak", "Ck"):
        with pytest.raises(DesignError, match=rf"icc\(form='{form}'\) needs to know which rater"):
            icc(anonymous, form)
