"""Suites as data: strict loading, the silent-drop pitfall, configs, and a file-context checkpoint with Data Docs."""

from __future__ import annotations

import html
import json
import re
from contextlib import contextmanager

import numpy as np
import pandas as pd
import pytest

gx = pytest.importorskip("great_expectations")

from great_expectations.checkpoint import UpdateDataDocsAction  # noqa: E402
from great_expectations.data_context.types.base import ProgressBarsConfig  # noqa: E402
from great_expectations.exceptions import InvalidExpectationConfigurationError  # noqa: E402
from great_expectations.expectations import registry  # noqa: E402

import labelgate.gx as lge  # noqa: E402

SHIPPED = ("crowd_vs_trusted", "crowd_pool_health")


@contextmanager
def unregistered(type_: str):
    """Simulate a process in which the module defining ``type_`` was not imported."""
    cls = registry._registered_expectations.pop(type_)
    try:
        yield
    finally:
        registry._registered_expectations[type_] = cls


def binary_two_pools(n_items: int = 80, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 2, n_items)
    rater_bias = rng.normal(0, 0.3, 12)
    rows = []
    for i in range(n_items):
        for pool, raters, p in (("crowd", rng.choice(12, 6, replace=False), 0.85), ("trusted", range(3), 0.92)):
            for j in raters:
                right = rng.random() < p
                label = truth[i] if right else 1 - truth[i]
                rater = f"{pool}{j}"
                if pool == "crowd" and rng.random() < abs(rater_bias[j]) / 3:
                    label = int(rater_bias[j] > 0)
                rows.append((f"s{i:03d}", rater, int(label), pool))
    return pd.DataFrame(rows, columns=["item_id", "rater_id", "label", "pool"])


# ------------------------------------------------------------------ shipped suites
@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_suites_load_strictly(name):
    suite = lge.load_suite(name)
    with open(lge.suites_dir() / f"{name}.json", encoding="utf-8") as fh:
        raw = json.load(fh)
    assert [e.expectation_type for e in suite.expectations] == [e["type"] for e in raw["expectations"]]
    assert suite.meta["labelgate"]["expectation_types"] == [e["type"] for e in raw["expectations"]]
    assert set(raw["suite_parameters"]) >= {
        p["$PARAMETER"] for e in raw["expectations"] for p in e["kwargs"].values() if isinstance(p, dict)}


def test_every_labelgate_type_is_in_a_shipped_suite():
    shipped = {e.expectation_type for name in SHIPPED for e in lge.load_suite(name).expectations}
    assert shipped == set(lge.LABELGATE_EXPECTATION_TYPES)


# ------------------------------------------------------------------ silent drop → loud error
def test_gx_silently_drops_an_unregistered_type_and_we_raise(tmp_path):
    data = {"name": "typo", "expectations": [
        {"type": "expect_normalised_cross_kappa_to_be_at_least", "kwargs": {"min_value": 0.8}},
        {"type": "expect_cross_kappa_to_be_at_least", "kwargs": {"min_value": 0.2}}]}
    # The pitfall: GX keeps one expectation out of two and only logs.
    assert len(gx.ExpectationSuite(name="typo", expectations=data["expectations"]).expectations) == 1
    with pytest.raises(lge.SuiteIntegrityError, match="expect_normalised_cross_kappa_to_be_at_least") as info:
        lge.suite_from_dict(data)
    assert "expect_normalized_cross_kappa_to_be_at_least" in str(info.value)  # did-you-mean
    path = tmp_path / "typo.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(lge.SuiteIntegrityError):
        lge.load_suite(path)


def test_unregistered_labelgate_expectation_raises_on_load():
    with unregistered("expect_spa_to_be_between"):
        with pytest.raises(lge.SuiteIntegrityError, match="not registered") as info:
            lge.load_suite("crowd_vs_trusted")
        assert "expect_spa_to_be_between" in str(info.value)
        with pytest.raises(lge.SuiteIntegrityError, match="expect_spa_to_be_between"):
            lge.check_registered()


def test_stored_suite_losing_an_expectation_raises(tmp_path):
    ctx = gx.get_context(mode="file", project_root_dir=tmp_path)
    ctx.suites.add(lge.load_suite("crowd_vs_trusted"))
    assert len(lge.get_suite(ctx, "crowd_vs_trusted").expectations) == 4
    with unregistered("expect_irr_at_or_above_trusted_baseline"):
        dropped = ctx.suites.get("crowd_vs_trusted")  # GX: 3 expectations, no error
        assert len(dropped.expectations) == 3
        with pytest.raises(lge.SuiteIntegrityError, match="expect_irr_at_or_above_trusted_baseline"):
            lge.verify_suite(dropped)  # the manifest stored in meta catches it
        with pytest.raises(lge.SuiteIntegrityError, match="stored JSON"):
            lge.get_suite(ctx, "crowd_vs_trusted")


def test_invalid_parameters_in_a_suite_file_raise_naming_the_parameter():
    data = {"name": "bad", "expectations": [
        {"type": "expect_spa_to_be_between", "kwargs": {"min_value": 0.9, "max_value": 0.2}}]}
    with pytest.raises(InvalidExpectationConfigurationError, match="min_value"):
        lge.suite_from_dict(data)
    data["expectations"][0]["kwargs"] = {"min_value": 0.5, "weighting": "uniform"}
    with pytest.raises(InvalidExpectationConfigurationError, match="weighting"):
        lge.suite_from_dict(data)


# ------------------------------------------------------------------ config → suite
def test_suite_from_config_applies_defaults_where_accepted():
    suite = lge.suite_from_config({
        "name": "gate",
        "defaults": {"crowd_pool": "mturk", "trusted_pool": "experts", "label_column": "bias", "irr": "fleiss_kappa",
                     "weighting": "flat", "use_ci_bound": True},
        "expectations": [
            {"type": "normalized_cross_kappa", "min_value": {"$PARAMETER": "min_nkx"}},
            {"type": "ExpectIrrAtOrAboveTrustedBaseline", "tolerance": 0.05, "severity": "warning"},
            {"type": "expect_spa_to_be_between", "min_value": 0.6, "meta": {"owner": "qa"}},
        ]})
    nkx, irr, spa = suite.expectations
    assert (nkx.irr, nkx.crowd_pool, nkx.label_column, nkx.use_ci_bound) == ("fleiss_kappa", "mturk", "bias", True)
    assert nkx.min_value == {"$PARAMETER": "min_nkx"}
    assert (irr.irr, irr.tolerance, irr.severity) == ("fleiss_kappa", 0.05, "warning")
    assert (spa.weighting, spa.crowd_pool, spa.meta) == ("flat", "mturk", {"owner": "qa"})


@pytest.mark.parametrize(("config", "match"), [
    ({"name": "g", "defaults": {"crowd_pol": "x"}, "expectations": []}, "crowd_pol"),
    ({"name": "g", "expectations": [{"type": "spa", "min_value": 0.5, "maxvalue": 0.9}]}, "maxvalue"),
    ({"name": "g", "expectations": [{"type": "kappa_magic", "min_value": 0.5}]}, "kappa_magic"),
    ({"name": "g", "expectations": [{"min_value": 0.5}]}, "type"),
])
def test_suite_from_config_errors(config, match):
    with pytest.raises(InvalidExpectationConfigurationError, match=match):
        lge.suite_from_config(config)


# ------------------------------------------------------------------ end to end: file context, checkpoint, Data Docs
def _text(path) -> str:
    raw = path.read_text(encoding="utf-8")
    raw = re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", raw, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", raw)))


def _ci(details: dict) -> str:
    return f"{details['ci_low']:.2f}–{details['ci_high']:.2f}".replace("-", "−")


def test_checkpoint_end_to_end_with_data_docs(tmp_path):
    ctx = gx.get_context(mode="file", project_root_dir=tmp_path)
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    bd = ctx.data_sources.add_pandas("annotations").add_dataframe_asset("batch").add_batch_definition_whole_dataframe(
        "whole")
    suites = [ctx.suites.add(lge.load_suite(name)) for name in SHIPPED]
    vds = [ctx.validation_definitions.add(gx.ValidationDefinition(name=f"vd_{s.name}", data=bd, suite=s))
           for s in suites]
    cp = ctx.checkpoints.add(gx.Checkpoint(name="gate", validation_definitions=vds,
                                           actions=[UpdateDataDocsAction(name="docs")],
                                           result_format={"result_format": "COMPLETE"}))
    lge.verify_checkpoint(cp)
    params = {k: v for s in suites for k, v in lge.expectation_parameters(s).items()}
    res = cp.run(batch_parameters={"dataframe": binary_two_pools()}, expectation_parameters=params)

    site = tmp_path / "gx" / "uncommitted" / "data_docs" / "local_site"
    pages = {p.parts[-4]: _text(p) for p in (site / "validations").rglob("*.html")}  # validations/<suite>/...
    assert set(pages) == set(SHIPPED)
    expected_sentence = {
        "expect_normalized_cross_kappa_to_be_at_least":
            "normalized κx (crowd vs trusted) must be at least 0.80, judged on the 95% CI bound.",
        "expect_irr_at_or_above_trusted_baseline":
            "Krippendorff's α of the crowd pool must be at least Krippendorff's α of the trusted pool − 0.10, "
            "and at most Krippendorff's α of the trusted pool + 0.30",
        "expect_cross_kappa_to_be_at_least": "κx (crowd vs trusted) must be at least 0.20.",
        "expect_spa_to_be_between": "SPA (annotations_m1 weighting) of the crowd pool must be between 0.50 and 0.99.",
        "expect_labeler_icc_below_item_icc":
            "labeler ICC of the crowd pool must be below its item ICC, judged on the 95% CI bound.",
    }
    seen = set()
    for vr in res.run_results.values():
        page = pages[vr.suite_name]
        for evr in vr.results:
            type_ = evr.expectation_config.type
            seen.add(type_)
            r = evr.result
            assert r["observed_value"] is not None, (type_, r["details"].get("reason"))
            observed = f"{r['observed_value']:.2f} (95% CI {_ci(r['details'])})"
            assert expected_sentence[type_] in page, type_
            assert f"— observed {observed}" in page, (type_, observed)
    assert seen == set(lge.LABELGATE_EXPECTATION_TYPES)
    # The suite pages show unresolved suite parameters by name.
    suite_page = _text(site / "expectations" / "crowd_vs_trusted.html")
    assert "must be at least suite parameter ‘min_normalized_cross_kappa’" in suite_page
    # A new context on the same folder reads the suites back complete.
    again = gx.get_context(mode="file", project_root_dir=tmp_path)
    assert [len(lge.get_suite(again, n).expectations) for n in SHIPPED] == [4, 2]
