"""The documented example: BABE/MBIC, MTurk crowd vs expert SG1, through the LabelGate expectations.

Skips when ``../shared/data/babe_mbic`` is absent. The numbers quoted in
``docs/expectations.md`` come from this configuration.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

DATA = Path(os.environ.get("LABELGATE_SHARED_DATA", Path(__file__).resolve().parents[3] / "shared" / "data"))
CSV = DATA / "babe_mbic" / "babe_mbic_long.csv.gz"
if not CSV.is_file():
    pytest.skip(f"BABE/MBIC long file not found at {CSV} (set LABELGATE_SHARED_DATA)", allow_module_level=True)

import great_expectations as gx  # noqa: E402
import pandas as pd  # noqa: E402
from great_expectations.data_context.types.base import ProgressBarsConfig  # noqa: E402

import labelgate as lg  # noqa: E402
import labelgate.gx as lge  # noqa: E402

OPINION = ["Entirely factual", "Somewhat factual but also opinionated", "Expresses writer's opinion"]
DEFAULTS = {"crowd_pool": "crowd_mturk", "trusted_pool": "expert_sg1", "duplicates": "first", "n_boot": 1000}
CONFIG = {
    "name": "babe_mbic_gate",
    "defaults": DEFAULTS,
    "expectations": [
        {"type": "normalized_cross_kappa", "label_column": "label_bias", "min_value": 0.8, "use_ci_bound": True},
        {"type": "irr_baseline", "label_column": "label_bias", "tolerance": 0.1, "max_excess": 0.3},
        {"type": "cross_kappa", "label_column": "label_bias", "min_value": 0.2},
        {"type": "spa", "label_column": "label_bias", "min_value": 0.5, "max_value": 0.99},
        {"type": "normalized_cross_kappa", "label_column": "label_opinion", "level": "ordinal",
         "categories": OPINION, "min_value": 0.8, "use_ci_bound": True},
        {"type": "labeler_icc", "label_column": "label_bias", "use_ci_bound": True},
    ],
}


@pytest.fixture(scope="module")
def babe() -> pd.DataFrame:
    return pd.read_csv(CSV)


@pytest.fixture(scope="module")
def results(babe):
    ctx = gx.get_context(mode="ephemeral")
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    bd = ctx.data_sources.add_pandas("babe").add_dataframe_asset("mbic_sg1").add_batch_definition_whole_dataframe("w")
    suite = ctx.suites.add(lge.suite_from_config(CONFIG))  # adding assigns the expectation ids
    res = bd.get_batch(batch_parameters={"dataframe": babe}).validate(suite, result_format="COMPLETE")
    by_id = {r.expectation_config.id: r for r in res.results}
    return [by_id[e.id] for e in suite.expectations]


def pools(babe: pd.DataFrame, label: str, **kw):
    two = babe[babe["pool"].isin(["crowd_mturk", "expert_sg1"])]
    p = lg.ratings_by_pool(two, pool="pool", item="item_id", rater="rater_id", value=label, duplicates="first", **kw)
    return p["crowd_mturk"], p["expert_sg1"]


def test_observed_values_equal_the_core(babe, results):
    crowd, trusted = pools(babe, "label_bias")
    nkx, irr, kx, spa, nkx_op, _ = (r.result for r in results)
    assert nkx["observed_value"] == lg.normalized_cross_kappa(crowd, trusted).value
    assert kx["observed_value"] == lg.cross_kappa(crowd, trusted).value
    assert spa["observed_value"] == lg.spa(crowd).value
    common = crowd.subset_items([i for i in range(crowd.n_items) if trusted.ratings_per_item[i] > 0])
    assert irr["observed_value"] == pytest.approx(lg.krippendorff_alpha(common).value, abs=1e-12)
    crowd_op, trusted_op = pools(babe, "label_opinion", level="ordinal", categories=OPINION)
    assert nkx_op["observed_value"] == lg.normalized_cross_kappa(crowd_op, trusted_op).value


def test_the_story_the_gates_tell(results):
    nkx, irr, kx, spa, nkx_op, icc = results
    cov = nkx.result["details"]["coverage"]
    assert (cov["n_crowd_items"], cov["n_common_items"]) == (1700, 1698)
    # The MTurk crowd agrees with itself far less than the experts do ...
    comp = irr.result["details"]["components"]
    assert comp["difference_ci_high"] < -0.1 and irr.success is False
    # ... yet, once both IRRs are accounted for, it tracks the experts about as well as they track each other.
    assert nkx.result["observed_value"] > 0.8
    assert kx.success and spa.success
    # The ordinal opinion label clears the normalized kappa_x gate even on the CI lower bound.
    assert nkx_op.success and nkx_op.result["details"]["passes_on_bound"]
    # The binary bias label has variance components: labelers explain far less variance than sentences.
    c = icc.result["details"]["components"]
    assert c["labeler_icc"] < c["item_icc"] and icc.success
    for r in results:
        assert r.result["details"]["reason"] is None
