"""The ``weights`` parameter of the IRR expectations: equal to the core with those weights, refused when unknown.

``expect_irr_at_or_above_trusted_baseline`` and ``expect_normalized_cross_kappa_to_be_at_least`` compute an IRR;
with ``weights`` it is the coefficient with those agreement weights (``lg.krippendorff_alpha(r, weights=...)``),
and the gate configuration passes a gate's ``weights`` through to them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

gx = pytest.importorskip("great_expectations")

from great_expectations.compatibility.pydantic import ValidationError  # noqa: E402
from great_expectations.data_context.types.base import ProgressBarsConfig  # noqa: E402

import labelgate as lg  # noqa: E402
import labelgate.gx as lge  # noqa: E402
from labelgate.errors import ParameterError  # noqa: E402
from labelgate.metrics.cross import irr_comparison  # noqa: E402

NO_CI = {"ci": None}
LEVELS = [1, 2, 3, 4, 5]


def ordinal_pools(n_items: int = 50, seed: int = 0) -> pd.DataFrame:
    """Five-point labels near each item's truth, sparse crowd (2-4 raters of 8 per item), 2 trusted raters."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(1, 6, n_items)
    rows = []
    for i in range(n_items):
        crowd = rng.choice(8, rng.integers(2, 5), replace=False)
        for pool, raters, spread in (("crowd", crowd, 1.2), ("trusted", range(2), 0.6)):
            for r in raters:
                label = int(np.clip(np.rint(truth[i] + rng.normal(0, spread)), 1, 5))
                rows.append((f"i{i:03d}", f"{pool}{r}", label, pool))
    return pd.DataFrame(rows, columns=["item_id", "rater_id", "label", "pool"])


@pytest.fixture(scope="module")
def validate():
    ctx = gx.get_context(mode="ephemeral")
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    definition = ctx.data_sources.add_pandas("w").add_dataframe_asset("a").add_batch_definition_whole_dataframe("b")

    def run(df: pd.DataFrame, expectation):
        return definition.get_batch(batch_parameters={"dataframe": df}).validate(expectation, result_format="COMPLETE")
    return run


def pools(df: pd.DataFrame) -> dict:
    return lg.ratings_by_pool(df, pool="pool", item="item_id", rater="rater_id", value="label", level="ordinal",
                              categories=LEVELS)


@pytest.mark.parametrize("weights", ["linear", "quadratic", "radical", "circular", "ordinal"])
def test_irr_baseline_with_weights_equals_weighted_alpha(validate, weights):
    df = ordinal_pools()
    p = pools(df)
    res = validate(df, lge.ExpectIrrAtOrAboveTrustedBaseline(tolerance=1.0, weights=weights, level="ordinal",
                                                             categories=LEVELS, **NO_CI))
    assert res.exception_info.get("raised_exception") is not True
    # every item has trusted labels: the crowd IRR on the common items is α of the crowd pool
    crowd, trusted = (lg.krippendorff_alpha(p[k], weights=weights).value for k in ("crowd", "trusted"))
    assert res.result["observed_value"] == pytest.approx(crowd, rel=1e-12)
    assert res.result["details"]["components"]["irr_trusted"] == pytest.approx(trusted, rel=1e-12)
    # and the weighting changed the value (the test would pass without the parameter otherwise)
    unweighted = validate(df, lge.ExpectIrrAtOrAboveTrustedBaseline(tolerance=1.0, level="ordinal",
                                                                    categories=LEVELS, **NO_CI))
    assert abs(unweighted.result["observed_value"] - crowd) > 1e-3


@pytest.mark.parametrize("irr", ["fleiss_kappa", "gwet_ac", "conger_kappa"])
def test_irr_baseline_weights_reach_every_weighted_irr(validate, irr):
    df = ordinal_pools(seed=1)
    p = pools(df)
    res = validate(df, lge.ExpectIrrAtOrAboveTrustedBaseline(tolerance=1.0, irr=irr, weights="quadratic",
                                                             level="ordinal", categories=LEVELS, **NO_CI))
    core = getattr(lg, irr)(p["crowd"], weights="quadratic").value
    assert res.result["observed_value"] == pytest.approx(core, rel=1e-12)


def test_a_custom_matrix_equals_the_named_weighting(validate):
    df = ordinal_pools(seed=2)
    matrix = lg.weights.named_weights("linear", LEVELS).tolist()
    named, custom = (validate(df, lge.ExpectIrrAtOrAboveTrustedBaseline(
        tolerance=1.0, weights=w, level="ordinal", categories=LEVELS, **NO_CI)) for w in ("linear", matrix))
    assert custom.result["observed_value"] == pytest.approx(named.result["observed_value"], rel=1e-12)


def test_normalized_cross_kappa_with_weights_equals_the_core(validate):
    df = ordinal_pools(seed=3)
    p = pools(df)
    res = validate(df, lge.ExpectNormalizedCrossKappaToBeAtLeast(min_value=0.1, weights="linear", level="ordinal",
                                                                 categories=LEVELS, **NO_CI))
    est = lg.normalized_cross_kappa(p["crowd"], p["trusted"], weights="linear")
    comp = res.result["details"]["components"]
    assert res.result["observed_value"] == pytest.approx(est.value, rel=1e-12)
    assert comp["irr_crowd"] == pytest.approx(lg.krippendorff_alpha(p["crowd"], weights="linear").value, rel=1e-12)
    assert comp["irr_trusted"] == pytest.approx(lg.krippendorff_alpha(p["trusted"], weights="linear").value,
                                                rel=1e-12)


def test_quadratic_weights_are_the_interval_distance_in_normalized_cross_kappa():
    """κx with distance 1 - w and α with weights w: quadratic weights on equally spaced labels are the interval
    distance up to the constant (x_max - x_min)², which cancels in both ratios."""
    p = pools(ordinal_pools(seed=4))
    weighted = lg.normalized_cross_kappa(p["crowd"], p["trusted"], weights="quadratic")
    interval = lg.normalized_cross_kappa(p["crowd"], p["trusted"], distance="interval")
    assert weighted.value == pytest.approx(interval.value, rel=1e-10)
    assert weighted.details["cross_kappa"] == pytest.approx(interval.details["cross_kappa"], rel=1e-10)


def test_the_sentence_names_the_weights():
    config = lge.ExpectIrrAtOrAboveTrustedBaseline(tolerance=0.05, weights="linear").configuration
    sentence = lge.ExpectIrrAtOrAboveTrustedBaseline._full_sentence(
        lge.ExpectIrrAtOrAboveTrustedBaseline._kwargs(config))
    assert "Krippendorff's α with linear weights" in sentence


@pytest.mark.parametrize(("cls", "kwargs"), [
    (lge.ExpectIrrAtOrAboveTrustedBaseline, {"tolerance": 0.1, "weights": "lineer"}),
    (lge.ExpectNormalizedCrossKappaToBeAtLeast, {"min_value": 0.5, "weights": "cubic"}),
    (lge.ExpectIrrAtOrAboveTrustedBaseline, {"tolerance": 0.1, "weights": [[1.0, 0.5], [0.5]]}),
    (lge.ExpectIrrAtOrAboveTrustedBaseline, {"tolerance": 0.1, "irr": "janson_olsson_iota", "weights": "linear"}),
])
def test_a_bad_weights_parameter_fails_at_validation_naming_it(cls, kwargs):
    with pytest.raises(ValidationError, match="'weights' parameter") as info:
        cls(**kwargs)
    if isinstance(kwargs["weights"], str) and kwargs.get("irr") is None:
        assert "'linear'" in str(info.value) and "'bipolar'" in str(info.value)  # the options are listed


def test_the_core_refuses_weights_for_iota_and_with_a_distance():
    p = pools(ordinal_pools(seed=5))
    with pytest.raises(ParameterError, match="janson_olsson_iota takes no 'weights'"):
        irr_comparison(p["crowd"], p["trusted"], irr="janson_olsson_iota", weights="linear")
    with pytest.raises(ParameterError, match="'distance' or 'weights', not both"):
        lg.normalized_cross_kappa(p["crowd"], p["trusted"], distance="interval", weights="linear")


# ------------------------------------------------------------------ the gate configuration
def test_the_gate_config_passes_weights_to_the_expectation():
    from labelgate.gate.measure import suite_config
    from labelgate.pipeline.config import config_from_dict

    config = config_from_dict({
        "questions": [{"name": "q", "level": "ordinal", "categories": LEVELS}],
        "gates": [{"type": "irr_baseline", "tolerance": 0.05, "weights": "linear"},
                  {"type": "normalized_cross_kappa", "min_value": 0.5, "irr": "gwet_ac", "weights": "quadratic"},
                  {"type": "cross_kappa", "min_value": 0.5}]})
    question = config.questions[0]
    suite = suite_config(config, question, config.gates_for(question), LEVELS)
    entries = {e["type"]: e for e in suite["expectations"]}
    assert entries["irr_baseline"]["weights"] == "linear"
    assert entries["normalized_cross_kappa"]["weights"] == "quadratic"
    assert "weights" not in entries["cross_kappa"]
    built = lge.suite_from_config(suite)
    kinds = {type(e).__name__: e for e in built.expectations}
    assert kinds["ExpectIrrAtOrAboveTrustedBaseline"].weights == "linear"
    assert kinds["ExpectNormalizedCrossKappaToBeAtLeast"].weights == "quadratic"


@pytest.mark.parametrize(("gate", "message"), [
    ({"type": "irr_baseline", "tolerance": 0.1, "weights": "lineer"}, "unknown weighting 'lineer'"),
    ({"type": "cross_kappa", "min_value": 0.5, "weights": "linear"}, "has no IRR to weight"),
    ({"type": "irr_baseline", "tolerance": 0.1, "weights": [[1.0, 0.0]]}, "must be square"),
])
def test_a_bad_gate_weights_names_the_key(gate, message):
    from labelgate.pipeline.config import ConfigError, config_from_dict

    with pytest.raises(ConfigError) as info:
        config_from_dict({"gates": [gate]}, source="gate.yaml")
    assert "gates[0].weights" in str(info.value) and message in str(info.value)


def test_a_matrix_of_the_wrong_size_fails_when_computed_naming_weights(validate):
    res = validate(ordinal_pools(seed=6), lge.ExpectIrrAtOrAboveTrustedBaseline(
        tolerance=1.0, weights=[[1.0, 0.0], [0.0, 1.0]], level="ordinal", categories=LEVELS, **NO_CI))
    message = lge.raised_exception(res)
    assert res.success is False and message is not None and "weights" in message, message
