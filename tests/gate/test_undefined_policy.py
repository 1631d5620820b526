"""Undefined metrics are decided by their cause (``labelgate.gate.decision``, README "Decision policy").

A crowd at chance agreement against a reliable trusted pool is REJECTed, a trusted pool at chance is an ERROR (it
cannot serve as a reference), too few common items stay REVIEW. The end-to-end tests gate a crowd of random labels
(``labelgate synth --scenario random``) under every gate type that applies to nominal labels.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from labelgate.gate import run
from labelgate.gate.decision import CHANCE_TOLERANCE, Outcome, Reliability, decide
from labelgate.gate.measure import reliability
from labelgate.pipeline.synth import scenario_named, simulate

NAN = math.nan


def nkx(value=NAN, crowd=-0.0003, trusted=0.8, *, crowd_high=NAN, trusted_low=NAN, severity="blocking",
        interval=None, point=False):
    """A normalized-κx outcome with both pools' IRRs."""
    return Outcome("q", "normalized_cross_kappa", severity, value, point, interval,
                   reason="IRR_x * IRR_y <= 0" if math.isnan(value) else None,
                   description="normalized_cross_kappa (min_value 0.8)",
                   reliability=Reliability(crowd, trusted, crowd_high, trusted_low))


# ------------------------------------------------------------------------------------------- the policy
def test_a_crowd_at_chance_against_a_reliable_trusted_pool_is_rejected_with_that_reason():
    result = decide([nkx()])
    assert result.decision == "REJECT"
    assert result.reasons == ["[q] normalized_cross_kappa (min_value 0.8): the crowd's IRR is -0.0003, at or below "
                              "chance (≤ 0.01), while the trusted replication's is 0.8: the batch agrees no better "
                              "than random labels"]


def test_chance_is_judged_with_a_tolerance_not_on_the_sign():
    # +0.004 is chance as much as -0.0003: normalized kappa_x is then defined, but divided by noise
    assert decide([nkx(value=0.9, crowd=0.004, point=True, interval="straddle")]).decision == "REJECT"
    assert decide([nkx(crowd=CHANCE_TOLERANCE)]).decision == "REJECT"
    # just above the tolerance a defined value is judged on its threshold as usual
    assert decide([nkx(value=0.9, crowd=0.05, point=True, interval="pass")]).decision == "ACCEPT"


def test_a_trusted_pool_at_chance_is_an_error_whatever_the_severity():
    for trusted in (-0.2, 0.0, 0.005):
        result = decide([nkx(crowd=0.6, trusted=trusted)])
        assert result.decision == "ERROR"
        assert "the trusted replication's IRR is" in result.reasons[0]
        assert "cannot serve as a reference" in result.reasons[0]
    assert decide([nkx(crowd=0.6, trusted=0.0, severity="warning")]).decision == "ERROR"
    rejected = Outcome("q", "spa", "blocking", 0.2, False, "fail")
    assert decide([rejected, nkx(crowd=0.6, trusted=0.0)]).decision == "ERROR"  # ERROR outranks REJECT


def test_a_crowd_at_chance_without_a_clearly_reliable_trusted_pool_is_review():
    # the intervals overlap: the trusted pool is not clearly above the crowd
    result = decide([nkx(crowd=0.001, trusted=0.1, crowd_high=0.08, trusted_low=0.02)])
    assert result.decision == "REVIEW"
    assert "is not clearly above the crowd's, so the comparison is inconclusive" in result.reasons[0]
    assert decide([nkx(crowd=0.001, trusted=0.5, crowd_high=0.08, trusted_low=0.3)]).decision == "REJECT"


def test_too_few_common_items_keep_a_chance_case_in_review():
    few = ["only 5 items are shared with the trusted replication (minimum 20)"]
    for outcome in (nkx(), nkx(crowd=0.6, trusted=-0.1)):
        result = decide([outcome], coverage_problems=few)
        assert result.decision == "REVIEW"
        assert result.reasons[0] == few[0]
        assert result.reasons[1].endswith("but the batch shares too few items with the trusted replication")


def test_other_undefined_metrics_stay_review_with_their_reason():
    no_irr = Outcome("q", "cross_kappa", "blocking", NAN, False, None, reason="no pairable items")
    assert decide([no_irr]).decision == "REVIEW"
    both_undefined = nkx(crowd=NAN, trusted=NAN)
    result = decide([both_undefined])
    assert result.decision == "REVIEW" and "undefined — IRR_x * IRR_y <= 0" in result.reasons[0]


def test_an_undefined_checked_statistic_is_review_not_reject():
    # IRR baseline: the crowd IRR (the value) is defined, the difference is not (the trusted IRR is undefined);
    # this used to read as "fails on the point value" and REJECT the crowd
    outcome = Outcome("q", "irr_baseline", "blocking", 0.6, False, None, reason="difference is undefined",
                      reliability=Reliability(0.6, NAN), undefined=True)
    result = decide([outcome])
    assert result.decision == "REVIEW" and "undefined — difference is undefined" in result.reasons[0]


def test_the_pools_irrs_are_read_from_each_expectations_details():
    normalized = {"value": None, "components": {"irr_crowd": -0.001, "irr_trusted": 0.7, "irr_crowd_ci_high": 0.02,
                                                "irr_trusted_ci_low": 0.6}}
    assert reliability("normalized_cross_kappa", normalized) == Reliability(-0.001, 0.7, 0.02, 0.6)
    baseline = {"value": 0.001, "ci_high": 0.03, "components": {"irr_trusted": 0.7, "irr_trusted_ci_low": None}}
    pools = reliability("irr_baseline", baseline)
    assert pools is not None and (pools.crowd, pools.trusted, pools.crowd_high) == (0.001, 0.7, 0.03)
    assert math.isnan(pools.trusted_low)  # no interval: judged on the points
    assert reliability("cross_kappa", normalized) is None


# ------------------------------------------------------------------------------------------- end to end
@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("undefined")
    random_crowd = simulate(scenario_named("random", 600), seed=0)
    random_crowd.to_csv(folder / "random.csv", index=False)
    good = scenario_named("good", 600)
    chance_trusted = replace(good, pools=(good.pools[0], replace(good.pools[1], noise=1.0)))
    simulate(chance_trusted, seed=0).to_csv(folder / "chance-trusted.csv", index=False)
    return folder


def _gate(folder: Path, name: str, gate: dict) -> dict:
    config = {"gates": [gate], "interval": {"n_boot": 200, "seed": 0},
              "store": {"url": f"sqlite:///{(folder / 'results.db').as_posix()}"},
              "reports": {"dir": (folder / "reports").as_posix()}}
    return run(config, folder / f"{name}.csv", force=True)


#: One gate of each type that applies to nominal labels (labeler ICC needs numbers), by name.
GATES = {
    "normalized_cross_kappa": {"type": "normalized_cross_kappa", "min_value": 0.8},
    "cross_kappa": {"type": "cross_kappa", "min_value": 0.4},
    "irr_baseline-tolerance": {"type": "irr_baseline", "tolerance": 0.1},
    "irr_baseline-min_ratio": {"type": "irr_baseline", "min_ratio": 0.8},
    "spa": {"type": "spa", "min_value": 0.6},
}


@pytest.mark.parametrize("name", list(GATES))
def test_a_random_label_crowd_is_rejected_under_every_gate_type(data, name):
    summary = _gate(data, "random", GATES[name])
    assert summary["decision"] == "REJECT", summary["reasons"]
    if name == "normalized_cross_kappa":  # undefined: decided by its cause, named in the reason
        assert "at or below chance" in summary["reasons"][0]
        assert "no better than random labels" in summary["reasons"][0]


@pytest.mark.parametrize("name", ["normalized_cross_kappa", "irr_baseline-tolerance", "irr_baseline-min_ratio"])
def test_a_trusted_pool_at_chance_ends_in_error(data, name):
    summary = _gate(data, "chance-trusted", GATES[name])
    assert summary["decision"] == "ERROR", summary["reasons"]
    assert any("cannot serve as a reference" in r for r in summary["reasons"])
