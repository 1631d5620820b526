"""The gate's decision policy: a pure function from expectation outcomes to ACCEPT / REJECT / REVIEW / ERROR.

Per blocking expectation (warnings are reported, never blocking):

* judged on intervals (``use_ci_bound`` and an interval):
  the whole interval and the point pass                  → pass
  the point fails and the whole interval fails           → REJECT
  otherwise (the interval straddles a threshold)         → REVIEW
* judged on the point (no interval): fails               → REJECT
* a metric that cannot be judged is decided by its cause (:class:`Reliability`: the IRR of each pool on the common
  items, which the normalized-κx and IRR-baseline expectations report):

  ======================================================================  ========
  cause                                                                   decision
  ======================================================================  ========
  the trusted IRR is at or below chance (≤ :data:`CHANCE_TOLERANCE`),      ERROR
  whatever the expectation's severity: it cannot serve as a reference
  the crowd IRR is at or below chance while the trusted IRR is above it    REJECT
  (their intervals apart, when there are intervals); also when a
  normalized κx is defined but divided by such a crowd IRR
  the crowd IRR is at or below chance, the trusted IRR not clearly above   REVIEW
  either cause above, but the batch shares too few items with the          REVIEW
  trusted replication (a coverage problem)
  any other undefined metric (too few common or pairable items, one        REVIEW
  category only, ...), with the metric's reason
  ======================================================================  ========

plus REVIEW when the batch covers too few trusted items. The batch decision is the worst of all: ERROR, then REJECT,
then REVIEW, then ACCEPT. Any other ERROR (invalid config or input, an expectation that failed to run —
:class:`labelgate.gate.measure.ExpectationRunError` —, any failure) is decided by the runner, which never reaches
:func:`decide` on an error path — so no error path can end in ACCEPT, and an undefined outcome is always a statistic
that was computed (NaN by ``docs/degenerate-input.md``), never one that raised.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

Decision = Literal["ACCEPT", "REJECT", "REVIEW", "ERROR"]
Verdict = Literal["pass", "reject", "review", "error"]
Cause = Literal["trusted_at_chance", "crowd_at_chance", "crowd_at_chance_unclear"]
_RANK = {"ACCEPT": 0, "REVIEW": 1, "REJECT": 2, "ERROR": 3}
_DECISION_OF: dict[Verdict, Decision] = {"reject": "REJECT", "review": "REVIEW", "error": "ERROR"}
_CAUSE_VERDICT: dict[Cause, Verdict] = {"trusted_at_chance": "error", "crowd_at_chance": "reject",
                                        "crowd_at_chance_unclear": "review"}

#: Chance-corrected agreement (κ, α, AC) at or below this is "at chance". A tolerance, not ``== 0`` or ``<= 0``: an
#: IRR computed at chance comes out as ±1e-4 or so, and a normalization by +1e-4 is as meaningless as one by −1e-4.
CHANCE_TOLERANCE = 0.01


#: Process exit code of each decision (the CLI's contract): exit 1 means REJECT and nothing else.
EXIT_CODES = {"ACCEPT": 0, "REJECT": 1, "REVIEW": 2, "ERROR": 3}


@dataclass(frozen=True)
class Reliability:
    """The IRR of the crowd and of the trusted pool on their common items, as one expectation reported them.

    Attributes
    ----------
    crowd, trusted : float
        Point values (NaN when undefined).
    crowd_high, trusted_low : float
        The crowd interval's upper end and the trusted interval's lower end (NaN without an interval).
    """

    crowd: float
    trusted: float
    crowd_high: float = math.nan
    trusted_low: float = math.nan

    def cause(self) -> Cause | None:
        """Which chance case this is, or None when both pools agree above chance (or are undefined)."""
        if _at_chance(self.trusted):
            return "trusted_at_chance"
        if not _at_chance(self.crowd):
            return None
        apart = not (math.isfinite(self.crowd_high) and math.isfinite(self.trusted_low)) \
            or self.crowd_high < self.trusted_low
        return "crowd_at_chance" if self.trusted > CHANCE_TOLERANCE and apart else "crowd_at_chance_unclear"

    def describe(self, cause: Cause) -> str:
        """The reason line's text for ``cause``."""
        crowd, trusted = _num(self.crowd), _num(self.trusted)
        if math.isfinite(self.crowd_high):
            crowd += f" (interval up to {_num(self.crowd_high)})"
        if cause == "trusted_at_chance":
            return (f"the trusted replication's IRR is {trusted}, at or below chance (≤ {CHANCE_TOLERANCE:g}): it "
                    "cannot serve as a reference")
        if cause == "crowd_at_chance":
            return (f"the crowd's IRR is {crowd}, at or below chance (≤ {CHANCE_TOLERANCE:g}), while the trusted "
                    f"replication's is {trusted}: the batch agrees no better than random labels")
        low = f" (interval from {_num(self.trusted_low)})" if math.isfinite(self.trusted_low) else ""
        return (f"the crowd's IRR is {crowd}, at or below chance (≤ {CHANCE_TOLERANCE:g}), but the trusted "
                f"replication's IRR {trusted}{low} is not clearly above the crowd's, so the comparison is inconclusive")


def _at_chance(irr: float) -> bool:
    return math.isfinite(irr) and irr <= CHANCE_TOLERANCE


def _num(value: float) -> str:
    return f"{value:.3g}" if math.isfinite(value) else "undefined"


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
    reliability : Reliability, optional
        Both pools' IRR, when the expectation reports them (normalized κx, IRR baseline): they decide an undefined
        metric by its cause.
    undefined : bool
        A statistic the expectation checks is undefined although ``value`` is not (an IRR baseline's difference
        when the trusted IRR is undefined).
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
    reliability: Reliability | None = None
    undefined: bool = False

    @property
    def is_undefined(self) -> bool:
        """Whether the value, or another statistic the expectation checks, is undefined."""
        return self.undefined or not math.isfinite(self.value)

    @property
    def cause(self) -> Cause | None:
        """The chance case that decides this outcome (see the module's table), or None."""
        cause = self.reliability.cause() if self.reliability is not None else None
        if cause is None or cause == "trusted_at_chance":
            return cause
        # a crowd at chance decides an undefined metric, and a normalized κx divided by that crowd's IRR; a defined
        # IRR comparison is judged on its own thresholds
        return cause if self.is_undefined or self.gate == "normalized_cross_kappa" else None

    @property
    def verdict(self) -> Verdict:
        """This outcome's own verdict under the policy."""
        cause = self.cause
        if cause is not None:
            return _CAUSE_VERDICT[cause]
        if self.is_undefined:
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
        Reasons the batch covers too few trusted items (each forces REVIEW, and turns a chance case's REJECT or
        ERROR into REVIEW: IRRs on too few common items decide nothing).
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
        decision = worse(decision, "REVIEW")
        reasons.append(problem)
    blocking = [o for o in outcomes if o.severity == "blocking"]
    if not blocking:
        decision = worse(decision, "REVIEW")
        reasons.append("no blocking expectation was evaluated, so nothing supports an ACCEPT")
    for o in outcomes:
        verdict = o.verdict
        if verdict == "pass":
            continue
        line = _reason_line(o, verdict)
        if o.cause is not None and verdict != "review" and coverage_problems:
            verdict, line = "review", f"{line} — but the batch shares too few items with the trusted replication"
        if o.severity == "warning" and verdict != "error":  # an unusable reference is no warning
            warnings.append(line)
            continue
        decision = worse(decision, _DECISION_OF[verdict])
        reasons.append(line)
    return GateDecision(decision=decision, reasons=reasons, warnings=warnings)


def question_verdicts(metrics: Any) -> dict[str, Decision]:
    """Each question's own verdict from a summary's metric rows: the worst verdict of its blocking expectations
    (ACCEPT when all pass), so that a question is shown with its verdict and each expectation with its own.

    The batch decision may be worse (coverage, validation, the rater policy): this is the measurement's verdict.

    >>> question_verdicts({"q": {"a": {"verdict": "pass", "severity": "blocking"},
    ...                          "b": {"verdict": "review", "severity": "blocking"},
    ...                          "c": {"verdict": "reject", "severity": "warning"}}})
    {'q': 'REVIEW'}
    """
    out: dict[str, Decision] = {}
    for question, rows in (metrics or {}).items():
        judged = [r for r in (rows or {}).values() if isinstance(r, dict) and r.get("verdict") in _VERDICTS]
        blocking = [r for r in judged if r.get("severity", "blocking") == "blocking"]
        if not judged:
            continue
        decision: Decision = "ACCEPT"
        for row in blocking:
            if row["verdict"] != "pass":
                decision = worse(decision, _DECISION_OF[row["verdict"]])
        out[str(question)] = decision
    return out


_VERDICTS = ("pass", "reject", "review", "error")


def worse(a: Decision, b: Decision) -> Decision:
    """The decision that outranks the other (ERROR > REJECT > REVIEW > ACCEPT)."""
    return a if _RANK[a] >= _RANK[b] else b


def _reason_line(o: Outcome, verdict: Verdict) -> str:
    where = f"[{o.question}] {o.description or o.gate}"
    cause = o.cause
    if cause is not None and o.reliability is not None:
        return f"{where}: {o.reliability.describe(cause)}"
    if o.is_undefined:
        return f"{where}: undefined — {o.reason or 'no reason given'}"
    numbers = "; ".join(check_numbers(o, c) for c in deciding_checks(o))
    numbers = f": {numbers}" if numbers else ""
    if verdict == "reject":
        if o.interval_verdict is None:
            return f"{where}: fails on the point value{numbers}"
        return f"{where}: fails on the point value and on the whole interval{numbers}"
    return f"{where}: the interval straddles the threshold (point {'passes' if o.passes_on_point else 'fails'})" \
        f"{numbers}"


def all_checks(o: Outcome) -> list[dict[str, Any]]:
    """Every check of an outcome's details (``parameter, statistic, op, threshold, point, ci_low, ci_high``...)."""
    return [c for c in o.details.get("checks") or [] if isinstance(c, dict)]


def deciding_checks(o: Outcome) -> list[dict[str, Any]]:
    """The checks that keep an outcome from passing: those failing on the point or on the conservative end of the
    interval (all of them when none does, so that a reason never shows no number)."""
    checks = all_checks(o)
    failing = [c for c in checks if not c.get("passes_on_point") or c.get("passes_on_bound") is False]
    return failing or checks


def fmt(value: Any) -> str:
    """A statistic as the reasons and next steps write it: three decimals, a true minus sign; "undefined" when it
    is not a finite number.

    A value that three decimals would show as zero keeps two significant digits (an IRR at chance is −0.00026,
    not −0.000).

    >>> fmt(-0.0665), fmt(0.8), fmt(-0.000259), fmt(0.0), fmt(None)
    ('−0.067', '0.800', '−0.00026', '0.000', 'undefined')
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "undefined"
    text = f"{value:.2g}" if 0 < abs(value) < 0.0005 else f"{value:.3f}"
    return text.replace("-", "−") if text.strip("-0.") else text.lstrip("-")  # never "−0.000"


def _setting(value: Any) -> str:
    """A configured threshold as written (``0.1``, not ``0.100``; never ``−0``)."""
    return f"{value + 0.0:g}".replace("-", "−") if isinstance(value, (int, float)) else str(value)


def check_numbers(o: Outcome, check: dict[str, Any]) -> str:
    """The numbers of one check of ``o``: the point, its interval and the threshold — for an IRR baseline, the
    threshold on the crowd's IRR and how it derives from the trusted IRR.

    Examples
    --------
    >>> o = Outcome("q", "irr_baseline", "blocking", 0.33, True, "straddle", details={
    ...     "value": 0.33, "ci_level": 0.95, "thresholds": {"tolerance": 0.1}, "components": {"irr_trusted": 0.397},
    ...     "checks": [{"parameter": "tolerance", "statistic": "difference", "op": ">=", "threshold": -0.1,
    ...                 "point": -0.067, "ci_low": -0.13, "ci_high": -0.001}]})
    >>> print(check_numbers(o, o.details["checks"][0]))  # doctest: +NORMALIZE_WHITESPACE
    crowd IRR 0.330 vs threshold 0.297 = trusted IRR 0.397 − tolerance 0.1; difference crowd − trusted −0.067,
    95% interval [−0.130, −0.001], must be ≥ −0.1
    """
    d = o.details
    op = {">=": "≥", "<=": "≤", ">": ">"}.get(str(check.get("op")), str(check.get("op")))
    level = d.get("ci_level")
    low, high = check.get("ci_low"), check.get("ci_high")
    interval = ""
    if low is not None and high is not None:
        pct = f"{level * 100:g}% " if isinstance(level, (int, float)) else ""
        interval = f", {pct}interval [{fmt(low)}, {fmt(high)}]"
    statistic = str(check.get("statistic"))
    name = o.gate if statistic == "value" else statistic
    if o.gate == "irr_baseline":
        name = {"difference": "difference crowd − trusted", "ratio": "ratio crowd / trusted"}.get(name, name)
    text = f"{name} {fmt(check.get('point'))}{interval}, must be {op} {_setting(check.get('threshold'))}"
    derived = _baseline_threshold(o, check)
    return f"{derived}; {text}" if derived else text


def _baseline_threshold(o: Outcome, check: dict[str, Any]) -> str | None:
    """For an IRR baseline's check: the threshold on the crowd IRR it amounts to and how it is derived."""
    if o.gate != "irr_baseline":
        return None
    trusted = (o.details.get("components") or {}).get("irr_trusted")
    crowd = o.details.get("value")
    limit = check.get("threshold")
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (trusted, crowd, limit)):
        return None
    trusted, crowd, limit = float(trusted), float(crowd), float(limit)  # type: ignore[arg-type]
    parameter = check.get("parameter")
    if parameter == "tolerance":
        return (f"crowd IRR {fmt(crowd)} vs threshold {fmt(trusted + limit)} = "
                f"trusted IRR {fmt(trusted)} − tolerance {_setting(-limit)}")
    if parameter == "max_excess":
        return (f"crowd IRR {fmt(crowd)} vs ceiling {fmt(trusted + limit)} = trusted IRR {fmt(trusted)} + "
                f"max_excess {_setting(limit)}")
    if parameter == "min_ratio":
        return (f"crowd IRR {fmt(crowd)} vs threshold {fmt(limit * trusted)} = min_ratio {_setting(limit)} × "
                f"trusted IRR {fmt(trusted)}")
    return None
