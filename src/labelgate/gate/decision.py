"""The gate's decision policy: a pure function from expectation outcomes to ACCEPT / REJECT / REVIEW.

Per blocking expectation (warnings are reported, never blocking):

* value undefined (NaN)                                  → REVIEW
* judged on intervals (``use_ci_bound`` and an interval):
  the whole interval and the point pass                  → pass
  the point fails and the whole interval fails           → REJECT
  otherwise (the interval straddles a threshold)         → REVIEW
* judged on the point (no interval): fails               → REJECT

plus REVIEW when the batch covers too few trusted items. The batch decision is REJECT if any REJECT,
else REVIEW if any REVIEW, else ACCEPT. ERROR (invalid config or input, any failure) is decided by the
flow, which never reaches :func:`decide` on an error path — so no error path can end in ACCEPT.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

Decision = Literal["ACCEPT", "REJECT", "REVIEW", "ERROR"]
Verdict = Literal["pass", "reject", "review"]
_RANK = {"ACCEPT": 0, "REVIEW": 1, "REJECT": 2, "ERROR": 3}


#: Process exit code of each decision (the CLI's contract): exit 1 means REJECT and nothing else.
EXIT_CODES = {"ACCEPT": 0, "REJECT": 1, "REVIEW": 2, "ERROR": 3}

@dataclass(frozen=True)
class Outcome:
    """One expectation's result on one question, as the policy needs it.

    Attributes
    ----------
    question, gate : str
        Where it comes from (gate = expectation type).
    severity : {"blocking", "warning"}
    value : float
        Observed value (NaN when undefined).
    passes_on_point : bool
    interval_verdict : {"pass", "fail", "straddle"} or None
        None when no interval was computed or judging is on points.
    reason : str, optional
        Why the value is undefined.
    description : str
        A readable one-line statement (threshold, value, interval) for reports and alerts.
    details : dict
        Everything else (components, interval, thresholds) for the record.
    """

    question: str
    gate: str
    severity: Literal["blocking", "warning"]
    value: float
    passes_on_point: bool
    interval_verdict: Literal["pass", "fail", "straddle"] | None
    reason: str | None = None
    description: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def verdict(self) -> Verdict:
        """This outcome's own verdict under the policy."""
        if not math.isfinite(self.value):
            return "review"
        if self.interval_verdict is None:
            return "pass" if self.passes_on_point else "reject"
        if self.interval_verdict == "pass":  # a percentile interval can exclude its point: then do not accept
            return "pass" if self.passes_on_point else "review"
        if self.interval_verdict == "fail" and not self.passes_on_point:
            return "reject"
        return "review"


@dataclass(frozen=True)
class GateDecision:
    """The batch decision with its reasons (one line per non-passing blocking check)."""

    decision: Decision
    reasons: list[str]
    warnings: list[str]


def decide(outcomes: list[Outcome], *, coverage_problems: list[str] | None = None,
           validation_problems: list[str] | None = None) -> GateDecision:
    """Combine expectation outcomes (and coverage / validation findings) into the batch decision.

    Parameters
    ----------
    outcomes : list of Outcome
        Every expectation on every question.
    coverage_problems : list of str
        Reasons the batch covers too few trusted items (each forces REVIEW).
    validation_problems : list of str
        Validation findings that did not stop the run (reported as reasons, force REVIEW).

    Examples
    --------
    >>> ok = Outcome("q", "cross_kappa", "blocking", 0.7, True, "pass")
    >>> straddle = Outcome("q", "spa", "blocking", 0.6, True, "straddle", description="SPA ≥ 0.6")
    >>> decide([ok]).decision, decide([ok, straddle]).decision
    ('ACCEPT', 'REVIEW')
    >>> decide([]).decision
    'REVIEW'
    """
    decision: Decision = "ACCEPT"
    reasons: list[str] = []
    warnings: list[str] = []
    for problem in (coverage_problems or []) + (validation_problems or []):
        decision = _worse(decision, "REVIEW")
        reasons.append(problem)
    blocking = [o for o in outcomes if o.severity == "blocking"]
    if not blocking:
        decision = _worse(decision, "REVIEW")
        reasons.append("no blocking expectation was evaluated, so nothing supports an ACCEPT")
    for o in outcomes:
        verdict = o.verdict
        if verdict == "pass":
            continue
        line = _reason_line(o, verdict)
        if o.severity == "warning":
            warnings.append(line)
            continue
        decision = _worse(decision, "REJECT" if verdict == "reject" else "REVIEW")
        reasons.append(line)
    return GateDecision(decision=decision, reasons=reasons, warnings=warnings)


def _worse(a: Decision, b: Decision) -> Decision:
    return a if _RANK[a] >= _RANK[b] else b


def _reason_line(o: Outcome, verdict: Verdict) -> str:
    where = f"[{o.question}] {o.description or o.gate}"
    if not math.isfinite(o.value):
        return f"{where}: undefined — {o.reason or 'no reason given'}"
    if verdict == "reject":
        return f"{where}: fails on the point value and on the whole interval"
    return f"{where}: the interval straddles the threshold (point {'passes' if o.passes_on_point else 'fails'})"
