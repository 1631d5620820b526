"""The decision policy: every combination of verdicts, severities, coverage and validation findings."""

from __future__ import annotations

import math

import pytest

from labelgate.gate.decision import Outcome, decide


def outcome(value=0.9, point=True, interval="pass", severity="blocking", gate="normalized_cross_kappa"):
    return Outcome("q1", gate, severity, value, point, interval, reason="d_e = 0" if math.isnan(value) else None,
                   description=f"{gate} ≥ 0.8")


@pytest.mark.parametrize(("point", "interval", "expected"), [
    (True, "pass", "ACCEPT"),
    (False, "fail", "REJECT"),
    (True, "straddle", "REVIEW"),
    (False, "straddle", "REVIEW"),
    (True, "fail", "REVIEW"),       # percentile interval entirely below but point above: not a confident REJECT
    (False, "pass", "REVIEW"),
    (True, None, "ACCEPT"),         # judged on the point value (no interval)
    (False, None, "REJECT"),
])
def test_single_blocking_expectation(point, interval, expected):
    assert decide([outcome(point=point, interval=interval)]).decision == expected


def test_nan_value_is_review_with_the_reason():
    result = decide([outcome(value=float("nan"), point=False, interval=None)])
    assert result.decision == "REVIEW"
    assert "undefined — d_e = 0" in result.reasons[0]


def test_reject_outranks_review_and_review_outranks_accept():
    reject = outcome(point=False, interval="fail")
    review = outcome(point=True, interval="straddle")
    accept = outcome()
    assert decide([accept, review]).decision == "REVIEW"
    assert decide([review, reject, accept]).decision == "REJECT"
    assert len(decide([review, reject, accept]).reasons) == 2


def test_warnings_are_reported_not_blocking():
    result = decide([outcome(), outcome(point=False, interval="fail", severity="warning", gate="spa")])
    assert result.decision == "ACCEPT"
    assert result.reasons == [] and len(result.warnings) == 1 and "spa" in result.warnings[0]


def test_coverage_and_validation_problems_force_review():
    assert decide([outcome()], coverage_problems=["coverage 0.05 < 0.10"]).decision == "REVIEW"
    assert decide([outcome()], validation_problems=["3 rows quarantined"]).decision == "REVIEW"
    assert decide([outcome(point=False, interval="fail")], coverage_problems=["low"]).decision == "REJECT"


def test_nothing_blocking_evaluated_never_accepts():
    assert decide([]).decision == "REVIEW"
    assert decide([outcome(severity="warning")]).decision == "REVIEW"
