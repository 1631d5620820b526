"""LabelGate's GX expectations: pass/fail around the threshold, observed value = core value, errors, renderers.

One ephemeral GX context per module; each check validates one expectation on
one in-memory batch (``batch.validate``).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

gx = pytest.importorskip("great_expectations")

from great_expectations.compatibility.pydantic import ValidationError  # noqa: E402
from great_expectations.data_context.types.base import ProgressBarsConfig  # noqa: E402

import labelgate as lg  # noqa: E402
import labelgate.gx as lge  # noqa: E402
from labelgate.errors import ParameterError  # noqa: E402
from labelgate.gx import _metrics as lgm  # noqa: E402
from labelgate.gx._base import Check, judge  # noqa: E402


# ------------------------------------------------------------------ data
def two_pools(n_items: int = 60, crowd_k: int = 5, trusted_k: int = 3, p_crowd: float = 0.8,
              p_trusted: float = 0.9, seed: int = 0, n_classes: int = 2) -> pd.DataFrame:
    """Long table: every item labelled by ``crowd_k`` crowd and ``trusted_k`` trusted raters."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, n_classes, n_items)
    rows = []
    for pool, k, p in (("crowd", crowd_k, p_crowd), ("trusted", trusted_k, p_trusted)):
        for i in range(n_items):
            for r in range(k):
                label = truth[i] if rng.random() < p else (truth[i] + rng.integers(1, n_classes)) % n_classes
                rows.append((f"i{i:03d}", f"{pool}{r}", int(label), pool))
    return pd.DataFrame(rows, columns=["item_id", "rater_id", "label", "pool"])


def numeric_pool(n_items: int = 80, n_raters: int = 16, k: int = 5, rater_sd: float = 0.4, seed: int = 0,
                 ) -> pd.DataFrame:
    """Crossed sparse design with item and rater effects (interval labels), pool 'crowd'."""
    rng = np.random.default_rng(seed)
    item, rater = rng.normal(0, 1, n_items), rng.normal(0, rater_sd, n_raters)
    rows = [(f"i{i}", f"r{j}", float(item[i] + rater[j] + rng.normal(0, 0.5)), "crowd")
            for i in range(n_items) for j in rng.choice(n_raters, k, replace=False)]
    return pd.DataFrame(rows, columns=["item_id", "rater_id", "label", "pool"])


def flip(df: pd.DataFrame, row: int) -> pd.DataFrame:
    """Copy with one binary label flipped."""
    out = df.copy()
    out.loc[row, "label"] = 1 - out.loc[row, "label"]
    return out


def pools_of(df: pd.DataFrame, **kw: object) -> dict:
    return lg.ratings_by_pool(df, pool="pool", item="item_id", rater="rater_id", value="label", **kw)


# ------------------------------------------------------------------ GX plumbing
@pytest.fixture(scope="module")
def batch_definition():
    ctx = gx.get_context(mode="ephemeral")
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    return ctx.data_sources.add_pandas("ann").add_dataframe_asset("a").add_batch_definition_whole_dataframe("w")


@pytest.fixture(scope="module")
def validate(batch_definition):
    def run(df: pd.DataFrame, expectation, **params):
        batch = batch_definition.get_batch(batch_parameters={"dataframe": df})
        return batch.validate(expectation, result_format="COMPLETE", expectation_parameters=params or None)
    return run


def around(validate, df_a, df_b, make, core_value):
    """Threshold halfway between the core values on two datasets: the higher passes, the lower fails."""
    va, vb = core_value(df_a), core_value(df_b)
    assert va != vb, "the two datasets must differ in the core value"
    high_df, low_df = (df_a, df_b) if va > vb else (df_b, df_a)
    threshold = (va + vb) / 2
    hi, lo = validate(high_df, make(threshold)), validate(low_df, make(threshold))
    assert hi.success is True and lo.success is False
    assert hi.result["observed_value"] == max(va, vb)
    assert lo.result["observed_value"] == min(va, vb)
    return hi, lo


NO_CI = {"ci": None}


# ------------------------------------------------------------------ each expectation around its threshold
def test_normalized_cross_kappa_passes_above_and_fails_below(validate):
    a = two_pools(seed=1)
    b = flip(a, 3)

    def core(df):
        p = pools_of(df)
        return lg.normalized_cross_kappa(p["crowd"], p["trusted"]).value

    hi, _ = around(validate, a, b, lambda t: lge.ExpectNormalizedCrossKappaToBeAtLeast(min_value=t, **NO_CI), core)
    comp = hi.result["details"]["components"]
    p = pools_of(a if core(a) > core(b) else b)
    est = lg.normalized_cross_kappa(p["crowd"], p["trusted"])
    assert comp["cross_kappa"] == est.details["cross_kappa"]
    assert comp["irr_crowd"] == est.details["irr_x"] and comp["irr_trusted"] == est.details["irr_y"]


@pytest.mark.parametrize("irr", ["fleiss_kappa", "gwet_ac"])
def test_normalized_cross_kappa_irr_option_matches_core(validate, irr):
    df = two_pools(seed=2)
    p = pools_of(df)
    res = validate(df, lge.ExpectNormalizedCrossKappaToBeAtLeast(min_value=0.1, irr=irr, **NO_CI))
    assert res.result["observed_value"] == lg.normalized_cross_kappa(p["crowd"], p["trusted"], irr=irr).value


def test_cross_kappa_passes_above_and_fails_below(validate):
    a = two_pools(seed=3)
    b = flip(a, 10)

    def core(df):
        p = pools_of(df)
        return lg.cross_kappa(p["crowd"], p["trusted"]).value

    around(validate, a, b, lambda t: lge.ExpectCrossKappaToBeAtLeast(min_value=t, **NO_CI), core)


def test_irr_baseline_tolerance_around_threshold(validate):
    a = two_pools(seed=4)
    b = flip(a, 7)

    def irr(df, pool):
        return lg.krippendorff_alpha(pools_of(df)[pool]).value

    def diff(df):
        return irr(df, "crowd") - irr(df, "trusted")

    da, db = diff(a), diff(b)
    assert da < 0 and db < 0 and da != db
    tolerance = -(da + db) / 2
    high, low = (a, b) if da > db else (b, a)
    ok = validate(high, lge.ExpectIrrAtOrAboveTrustedBaseline(tolerance=tolerance, **NO_CI))
    bad = validate(low, lge.ExpectIrrAtOrAboveTrustedBaseline(tolerance=tolerance, **NO_CI))
    assert ok.success is True and bad.success is False
    # observed value = the core IRR of the crowd pool (every crowd item has trusted labels here)
    assert ok.result["observed_value"] == irr(high, "crowd")
    comp = ok.result["details"]["components"]
    assert comp["irr_trusted"] == pytest.approx(irr(high, "trusted"), abs=1e-12)
    assert comp["difference"] == pytest.approx(diff(high), abs=1e-12)
    assert ok.result["details"]["thresholds"] == {"tolerance": tolerance}


def test_irr_baseline_min_ratio_and_max_excess(validate):
    df = two_pools(seed=5, p_crowd=0.95, p_trusted=0.75)  # crowd agrees far more than the trusted pool
    p = pools_of(df)
    ratio = lg.krippendorff_alpha(p["crowd"]).value / lg.krippendorff_alpha(p["trusted"]).value
    assert ratio > 1
    assert validate(df, lge.ExpectIrrAtOrAboveTrustedBaseline(min_ratio=ratio - 1e-6, **NO_CI)).success
    assert not validate(df, lge.ExpectIrrAtOrAboveTrustedBaseline(min_ratio=ratio + 1e-6, **NO_CI)).success
    excess = lg.krippendorff_alpha(p["crowd"]).value - lg.krippendorff_alpha(p["trusted"]).value
    flagged = validate(df, lge.ExpectIrrAtOrAboveTrustedBaseline(max_excess=excess - 1e-6, **NO_CI))
    assert flagged.success is False
    checks = {c["parameter"]: c["passes_on_point"] for c in flagged.result["details"]["checks"]}
    assert checks == {"tolerance": True, "max_excess": False}
    assert validate(df, lge.ExpectIrrAtOrAboveTrustedBaseline(max_excess=excess + 1e-6, **NO_CI)).success


def test_irr_baseline_fleiss_matches_core(validate):
    df = two_pools(seed=6)
    p = pools_of(df)
    res = validate(df, lge.ExpectIrrAtOrAboveTrustedBaseline(irr="fleiss_kappa", tolerance=1.0, **NO_CI))
    assert res.result["observed_value"] == pytest.approx(lg.fleiss_kappa(p["crowd"]).value, abs=1e-12)
    assert res.result["details"]["metric"] == "fleiss_kappa"


def test_spa_between_around_both_bounds(validate):
    a = two_pools(seed=7)
    b = flip(a, 0)

    def core(df):
        return lg.spa(pools_of(df)["crowd"]).value

    around(validate, a, b, lambda t: lge.ExpectSpaToBeBetween(min_value=t, **NO_CI), core)
    # upper bound: the lower value passes, the higher fails
    va, vb = core(a), core(b)
    t = (va + vb) / 2
    low_df, high_df = (a, b) if va < vb else (b, a)
    assert validate(low_df, lge.ExpectSpaToBeBetween(max_value=t, **NO_CI)).success
    assert not validate(high_df, lge.ExpectSpaToBeBetween(max_value=t, **NO_CI)).success


def test_spa_weighting_and_single_pool_batch(validate):
    df = two_pools(seed=8).query("pool == 'crowd'").drop(columns="pool")
    r = lg.Ratings.from_long(df, item="item_id", rater="rater_id", value="label")
    res = validate(df, lge.ExpectSpaToBeBetween(min_value=0.0, max_value=1.0, weighting="flat", pool_column=None,
                                              **NO_CI))
    assert res.success and res.result["observed_value"] == lg.spa(r, weighting="flat").value


variance = pytest.importorskip("labelgate.metrics.variance")


def test_labeler_icc_below_item_icc_around_margin(validate):
    df = numeric_pool(seed=1)
    r = pools_of(df, level="interval")["crowd"]
    item = variance.item_icc(r).value
    labeler = variance.labeler_icc(r).value
    gap = item - labeler
    assert gap > 0
    ok = validate(df, lge.ExpectLabelerIccBelowItemIcc(margin=gap - 1e-6, level="interval", **NO_CI))
    bad = validate(df, lge.ExpectLabelerIccBelowItemIcc(margin=gap + 1e-6, level="interval", **NO_CI))
    assert ok.success is True and bad.success is False
    assert ok.result["observed_value"] == labeler
    comp = ok.result["details"]["components"]
    assert comp["item_icc"] == item
    vc = variance.variance_components(r).to_dict()
    assert {k: comp["variance_components"][k] for k in ("item", "rater", "residual")} == {
        k: vc[k] for k in ("item", "rater", "residual")}


def test_labeler_icc_fails_when_labelers_dominate(validate):
    df = numeric_pool(seed=2, rater_sd=3.0)  # labeler bias larger than the item spread
    res = validate(df, lge.ExpectLabelerIccBelowItemIcc(level="interval", n_boot=200))
    comp = res.result["details"]["components"]
    assert comp["labeler_icc"] > comp["item_icc"] and res.success is False
    # joint interval of the gap, from the same replicates
    assert comp["gap_ci_low"] <= comp["gap"] <= comp["gap_ci_high"]


def test_labeler_icc_rejects_nominal_labels_with_reason(validate):
    df = two_pools(seed=9, n_classes=3)
    res = validate(df, lge.ExpectLabelerIccBelowItemIcc(**NO_CI))
    assert res.success is False and res.result["observed_value"] is None
    assert "numeric" in res.result["details"]["reason"]
    binary = validate(two_pools(seed=9), lge.ExpectLabelerIccBelowItemIcc(**NO_CI))
    assert binary.result["observed_value"] is not None  # a binary label has variance components


# ------------------------------------------------------------------ judging rule with the interval
def test_ci_bound_straddle_gives_point_pass_bound_fail(validate):
    df = two_pools(seed=10)
    probe = validate(df, lge.ExpectCrossKappaToBeAtLeast(min_value=0.0, n_boot=500))
    d = probe.result["details"]
    assert d["ci_low"] < d["value"] < d["ci_high"]
    t = (d["ci_low"] + d["value"]) / 2
    on_point = validate(df, lge.ExpectCrossKappaToBeAtLeast(min_value=t, n_boot=500))
    on_bound = validate(df, lge.ExpectCrossKappaToBeAtLeast(min_value=t, n_boot=500, use_ci_bound=True))
    assert on_point.success is True and on_bound.success is False
    for res in (on_point, on_bound):
        det = res.result["details"]
        assert (det["passes_on_point"], det["passes_on_bound"], det["interval_verdict"]) == (True, False, "straddle")
    assert on_bound.result["details"]["judged_on"] == "ci_bound"
    below = validate(df, lge.ExpectCrossKappaToBeAtLeast(min_value=d["ci_high"] + 0.01, n_boot=500))
    assert below.result["details"]["interval_verdict"] == "fail"


def test_judge_uses_the_conservative_end_for_each_bound():
    m = {"value": 0.5, "ci_low": 0.4, "ci_high": 0.6}
    at_most = judge([Check("max_value", "value", "<=", 0.55)], m, use_ci_bound=True)
    assert at_most["checks"][0]["passes_on_point"] and not at_most["success"]
    between = judge([Check("min_value", "value", ">=", 0.3), Check("max_value", "value", "<=", 0.7)], m, True)
    assert between["success"] and between["interval_verdict"] == "pass"
    nan = judge([Check("min_value", "value", ">=", 0.3)], {"value": None}, use_ci_bound=False)
    assert nan["success"] is False and nan["passes_on_bound"] is None


def test_suite_parameter_threshold_is_resolved(validate):
    df = two_pools(seed=11)
    p = pools_of(df)
    v = lg.cross_kappa(p["crowd"], p["trusted"]).value
    exp = lge.ExpectCrossKappaToBeAtLeast(min_value={"$PARAMETER": "min_kx"}, **NO_CI)
    assert validate(df, exp, min_kx=v - 1e-6).success
    res = validate(df, exp, min_kx=v + 1e-6)
    assert not res.success and res.result["details"]["thresholds"] == {"min_value": v + 1e-6}


# ------------------------------------------------------------------ NaN, columns, question filter
def test_nan_fails_with_reason(validate):
    df = two_pools(seed=12)
    df["label"] = 1  # one category everywhere: kappa_x is 0/0
    res = validate(df, lge.ExpectCrossKappaToBeAtLeast(min_value=0.0, **NO_CI))
    assert res.success is False and res.result["observed_value"] is None
    assert "expected" in res.result["details"]["reason"]
    assert res.result["details"]["reason_code"] == "no_expected_disagreement"


def test_undefined_trusted_irr_fails_with_its_reason(validate):
    df = two_pools(seed=19)
    df.loc[df["pool"] == "trusted", "label"] = 0  # the experts all say 0: their alpha is 0/0
    res = validate(df, lge.ExpectIrrAtOrAboveTrustedBaseline(tolerance=0.1, **NO_CI))
    assert res.success is False
    assert res.result["observed_value"] == lg.krippendorff_alpha(pools_of(df)["crowd"]).value  # crowd IRR defined
    assert "trusted IRR is undefined" in res.result["details"]["reason"]


def test_custom_columns_pools_and_question(validate):
    base = two_pools(seed=13)
    other = two_pools(seed=14)
    df = pd.concat([base.assign(q="q1"), other.assign(q="q2")], ignore_index=True)
    df = df.rename(columns={"item_id": "sentence", "rater_id": "worker", "label": "y", "pool": "source"})
    df["source"] = df["source"].map({"crowd": "mturk", "trusted": "experts"})
    exp = lge.ExpectCrossKappaToBeAtLeast(min_value=0.0, item_column="sentence", rater_column="worker",
                                        label_column="y", pool_column="source", question_column="q",
                                        question="q2", crowd_pool="mturk", trusted_pool="experts", **NO_CI)
    res = validate(df, exp)
    p = pools_of(other)
    assert res.result["observed_value"] == lg.cross_kappa(p["crowd"], p["trusted"]).value
    assert res.result["details"]["question"] == "q2"


def test_coverage_is_share_of_crowd_items_with_trusted_labels(validate):
    df = two_pools(seed=15, n_items=40)
    keep = ~((df["pool"] == "trusted") & (df["item_id"] >= "i030"))  # trusted labels on 30 of 40 items
    res = validate(df[keep].reset_index(drop=True), lge.ExpectNormalizedCrossKappaToBeAtLeast(min_value=0.0, **NO_CI))
    cov = res.result["details"]["coverage"]
    assert (cov["n_crowd_items"], cov["n_trusted_items"], cov["n_common_items"]) == (40, 30, 30)
    assert cov["coverage"] == pytest.approx(0.75)


# ------------------------------------------------------------------ errors naming the parameter
@pytest.mark.parametrize(("cls", "kwargs", "parameter"), [
    (lge.ExpectNormalizedCrossKappaToBeAtLeast, {"min_value": 0.8, "irr": "cohens_magic"}, "irr"),
    (lge.ExpectIrrAtOrAboveTrustedBaseline, {"irr": "nope"}, "irr"),
    (lge.ExpectSpaToBeBetween, {"min_value": 0.9, "max_value": 0.5}, "min_value"),
    (lge.ExpectSpaToBeBetween, {"min_value": 0.5, "weighting": "uniform"}, "weighting"),
    (lge.ExpectSpaToBeBetween, {}, "min_value"),
    (lge.ExpectCrossKappaToBeAtLeast, {}, "min_value"),
    (lge.ExpectCrossKappaToBeAtLeast, {"min_value": 0.5, "ci": 1.5}, "ci"),
    (lge.ExpectCrossKappaToBeAtLeast, {"min_value": 0.5, "ci": None, "use_ci_bound": True}, "use_ci_bound"),
    (lge.ExpectCrossKappaToBeAtLeast, {"min_value": 0.5, "n_boot": 1}, "n_boot"),
    (lge.ExpectCrossKappaToBeAtLeast, {"min_value": 0.5, "trusted_pool": "crowd"}, "trusted_pool"),
    (lge.ExpectCrossKappaToBeAtLeast, {"min_value": 0.5, "pool_column": None}, "pool_column"),
    (lge.ExpectCrossKappaToBeAtLeast, {"min_value": {"PARAM": "x"}}, "min_value"),
    (lge.ExpectCrossKappaToBeAtLeast, {"min_value": 0.5, "level": "categorical"}, "level"),
    (lge.ExpectCrossKappaToBeAtLeast, {"min_value": 0.5, "treshold": 0.1}, "treshold"),
    (lge.ExpectIrrAtOrAboveTrustedBaseline, {"tolerance": -0.1}, "tolerance"),
    (lge.ExpectLabelerIccBelowItemIcc, {"margin": -0.1}, "margin"),
])
def test_bad_parameters_raise_naming_the_parameter(cls, kwargs, parameter):
    with pytest.raises(ValidationError, match=parameter):
        cls(**kwargs)


@pytest.mark.parametrize(("kwargs", "parameter"), [
    ({"crowd_pool": "mturk"}, "crowd_pool"),
    ({"trusted_pool": "experts"}, "trusted_pool"),
    ({"pool_column": "replication"}, "pool_column"),
    ({"question": "q9"}, "question_column"),
])
def test_missing_pool_value_raises_naming_the_parameter(validate, kwargs, parameter):
    df = two_pools(seed=16)
    kw = {"item_column": "item_id", "rater_column": "rater_id", "label_column": "label", "pool_column": "pool",
          "question_column": "question", "question": None, "crowd_pool": "crowd", "trusted_pool": "trusted",
          "level": "nominal", "categories": None, "duplicates": "error", "ci": None, "n_boot": 2, "seed": 0}
    with pytest.raises(ParameterError, match=parameter) as info:
        lgm.compute_cross_kappa(df, {**kw, **kwargs})
    assert info.value.context["parameter"] == parameter
    # Inside a GX run the metric error fails the expectation, with the message naming the parameter.
    res = validate(df, lge.ExpectCrossKappaToBeAtLeast(min_value=0.0, **NO_CI, **kwargs))
    assert res.success is False
    assert parameter in lge.raised_exception(res)


def test_unknown_question_value_names_question(validate):
    df = two_pools(seed=17).assign(question="q1")
    with pytest.raises(ParameterError, match="'question'"):
        lgm.compute_spa(df, {**dict.fromkeys(lgm.COMMON_VALUE_KEYS), "item_column": "item_id",
                           "rater_column": "rater_id", "label_column": "label", "pool_column": "pool",
                           "question_column": "question", "question": "q2", "crowd_pool": "crowd",
                           "level": "nominal", "duplicates": "error", "n_boot": 2, "weighting": "flat"})


# ------------------------------------------------------------------ renderers
def _render(cls, **kwargs):
    exp = cls(**kwargs)
    out = cls._prescriptive_renderer(configuration=exp.configuration)
    return out[0].to_json_dict()["string_template"]["params"]["sentence"]


def test_prescriptive_sentences():
    assert _render(lge.ExpectNormalizedCrossKappaToBeAtLeast, min_value=0.8) == (
        "normalized κx (crowd vs trusted) must be at least 0.80.")
    assert _render(lge.ExpectNormalizedCrossKappaToBeAtLeast, min_value={"$PARAMETER": "min_nkx"}, use_ci_bound=True,
                   crowd_pool="mturk", trusted_pool="experts") == (
        "normalized κx (mturk vs experts) must be at least suite parameter ‘min_nkx’, judged on the 95% CI bound.")
    assert _render(lge.ExpectCrossKappaToBeAtLeast, min_value=0.35) == "κx (crowd vs trusted) must be at least 0.35."
    assert _render(lge.ExpectSpaToBeBetween, min_value=0.6, max_value=0.9) == (
        "SPA (annotations_m1 weighting) of the crowd pool must be between 0.60 and 0.90.")
    assert _render(lge.ExpectIrrAtOrAboveTrustedBaseline, tolerance=0.05) == (
        "Krippendorff's α of the crowd pool must be at least Krippendorff's α of the trusted pool − 0.05.")
    assert _render(lge.ExpectLabelerIccBelowItemIcc, margin=0.1) == (
        "labeler ICC of the crowd pool must be below its item ICC by more than 0.10.")


def test_observed_value_renderer_shows_interval(validate):
    df = two_pools(seed=18)
    res = validate(df, lge.ExpectNormalizedCrossKappaToBeAtLeast(min_value=0.1, n_boot=300))
    d = res.result["details"]
    text = lge.ExpectNormalizedCrossKappaToBeAtLeast._diagnostic_observed_value_renderer(result=res)
    assert text == f"{res.result['observed_value']:.2f} (95% CI {d['ci_low']:.2f}–{d['ci_high']:.2f})"
    statement = lge.ExpectNormalizedCrossKappaToBeAtLeast.statement(res.result)
    assert statement.startswith(f"— observed {text}")


# ------------------------------------------------------------------ registration
def test_every_labelgate_expectation_is_registered():
    lge.check_registered()
    assert set(lge.LABELGATE_EXPECTATION_TYPES) == {
        "expect_irr_at_or_above_trusted_baseline", "expect_normalized_cross_kappa_to_be_at_least",
        "expect_cross_kappa_to_be_at_least", "expect_labeler_icc_below_item_icc", "expect_spa_to_be_between"}


def test_importing_labelgate_gx_registers_every_expectation():
    # A fresh interpreter that only runs `import labelgate.gx`.
    code = ("import labelgate.gx\n"
            "from great_expectations.expectations.registry import _registered_expectations as R\n"
            "from labelgate.gx.suites import LABELGATE_EXPECTATION_TYPES as T\n"
            "print(sorted(t for t in T if t not in R))\n")
    probe = code.replace("from labelgate.gx.suites import LABELGATE_EXPECTATION_TYPES as T",
                         "T = " + repr(lge.LABELGATE_EXPECTATION_TYPES))
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", f"`import labelgate.gx` left these unregistered: {out.stdout.strip()}"


def test_base_class_is_not_an_expectation_type():
    from great_expectations.expectations.registry import _registered_expectations

    assert "label_gate_expectation" not in _registered_expectations
