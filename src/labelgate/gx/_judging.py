"""The judging rule of LabelGate's expectations and how their numbers are written, without GX.

Each check compares one statistic of a metric result with one threshold (:class:`Check`); :func:`judge` gives the
verdict on the point value and, with an interval, on its conservative end (both are reported, so that a decision
policy can tell REJECT from REVIEW). :func:`raised_exception` reads the exception a GX validation result carries.
The ``fmt_*`` helpers write thresholds, values and intervals for the Data Docs sentences. The expectations' base
class (:mod:`labelgate.gx._base`) imports them from here; :mod:`labelgate.gx` exports the public ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, Optional, TypeGuard

Op = Literal[">=", "<=", ">"]


@dataclass(frozen=True)
class Check:
    """One comparison of a statistic of the metric result with a threshold.

    Attributes
    ----------
    parameter : str
        Name of the threshold parameter (e.g. ``"min_value"``).
    statistic : str
        Key of the statistic in the metric result (``"value"`` or a component
        such as ``"difference"``); its interval is ``<statistic>_ci_low`` /
        ``<statistic>_ci_high`` (``ci_low`` / ``ci_high`` for ``"value"``).
    op : {">=", "<=", ">"}
        The statistic must be at least / at most / above the threshold.
    threshold : float
        The resolved threshold.
    """

    parameter: str
    statistic: str
    op: Op
    threshold: float


def _finite(x: Any) -> TypeGuard[float]:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _passes(x: Any, op: Op, threshold: float) -> bool:
    if not _finite(x):
        return False
    return bool(x >= threshold if op == ">=" else x <= threshold if op == "<=" else x > threshold)


def _interval(m: dict[str, Any], statistic: str) -> tuple[Any, Any, Any]:
    if statistic == "value":
        return m.get("value"), m.get("ci_low"), m.get("ci_high")
    return m.get(statistic), m.get(f"{statistic}_ci_low"), m.get(f"{statistic}_ci_high")


def judge(checks: list[Check], m: dict[str, Any], use_ci_bound: bool) -> dict[str, Any]:
    """Apply the judging rule to a metric result.

    Returns a dict with ``success``, ``passes_on_point``, ``passes_on_bound``
    (None without an interval), ``interval_verdict`` (``"pass"`` when the
    whole interval satisfies every check, ``"fail"`` when the whole interval
    of some check is on the failing side, ``"straddle"`` otherwise; None
    without an interval) and the per-check ``checks``.
    """
    rows = []
    for c in checks:
        point, low, high = _interval(m, c.statistic)
        has_ci = _finite(low) and _finite(high)
        conservative, optimistic = (high, low) if c.op == "<=" else (low, high)
        rows.append({"parameter": c.parameter, "statistic": c.statistic, "op": c.op, "threshold": c.threshold,
                     "point": point, "ci_low": low, "ci_high": high,
                     "passes_on_point": _passes(point, c.op, c.threshold),
                     "passes_on_bound": _passes(conservative, c.op, c.threshold) if has_ci else None,
                     "passes_on_optimistic_bound": _passes(optimistic, c.op, c.threshold) if has_ci else None})
    on_point = all(r["passes_on_point"] for r in rows)
    with_ci = all(r["passes_on_bound"] is not None for r in rows)
    on_bound = all(r["passes_on_bound"] for r in rows) if with_ci else None
    verdict = None
    if with_ci:
        verdict = ("pass" if on_bound else
                   "fail" if not all(r["passes_on_optimistic_bound"] for r in rows) else "straddle")
    success = bool(on_bound) if use_ci_bound else on_point
    return {"success": success, "passes_on_point": on_point, "passes_on_bound": on_bound,
            "interval_verdict": verdict, "checks": rows}


def raised_exception(evr: Any) -> Optional[str]:  # noqa: UP045
    """The exception message of a validation result, or None.

    GX 1.24 stores an exception raised by the expectation itself as
    ``exception_info = {"raised_exception": True, "exception_message": ...}``
    but an exception raised while computing a *metric* (e.g. a pool value
    missing from the batch) as ``{"<metric configuration id>": {...}}``;
    this reads both shapes.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> raised_exception(SimpleNamespace(exception_info={"MetricConfigurationID(...)": {
    ...     "raised_exception": True, "exception_message": "The 'crowd_pool' parameter is 'x', ..."}}))
    "The 'crowd_pool' parameter is 'x', ..."
    >>> raised_exception(SimpleNamespace(exception_info={"raised_exception": False}))
    """
    info = getattr(evr, "exception_info", None) or {}
    entries = [info] if "raised_exception" in info else [v for v in info.values() if isinstance(v, dict)]
    for entry in entries:
        if entry.get("raised_exception"):
            return str(entry.get("exception_message") or "the expectation raised an exception")
    return None


# ------------------------------------------------------------------ formatting
def fmt_threshold(value: Any) -> str:
    """A threshold as written: ``0.8`` → ``"0.80"``, a suite parameter by its name."""
    if isinstance(value, dict):
        return f"suite parameter ‘{value.get('$PARAMETER', '?')}’"
    if not _finite(value):
        return str(value)
    return f"{value:.2f}" if round(value, 2) == value else f"{value:g}"


def fmt_number(value: Any, digits: int = 2) -> str:
    """A statistic; ``"NaN"`` when undefined. Unicode minus for negatives."""
    if not _finite(value):
        return "NaN"
    return f"{value:.{digits}f}".replace("-", "−")


def fmt_interval(low: Any, high: Any, level: Any, digits: int = 2) -> str:
    """``"95% CI 0.81–0.90"`` (empty when there is no interval)."""
    if not (_finite(low) and _finite(high)):
        return ""
    sep = " to " if min(low, high) < 0 else "–"  # "−0.38–−0.16" is hard to read
    return f"{float(level or 0.95):.0%} CI {fmt_number(low, digits)}{sep}{fmt_number(high, digits)}"


def digits_for(values: list[Any], thresholds: list[Any]) -> int:
    """2 decimals, or more when a value would print equal to a threshold it is compared with."""
    numbers = [t for t in thresholds if _finite(t)]
    for digits in (2, 3, 4):
        if not any(_finite(v) and f"{v:.{digits}f}" == f"{t:.{digits}f}" and v != t
                   for v in values for t in numbers):
            return digits
    return 4


def with_ci(value: Any, low: Any, high: Any, level: Any, digits: int = 2) -> str:
    """``"0.86 (95% CI 0.81–0.90)"``."""
    ci = fmt_interval(low, high, level, digits)
    return f"{fmt_number(value, digits)} ({ci})" if ci else fmt_number(value, digits)


def fmt_kw(kw: dict[str, Any], name: str) -> str:
    """A formatted threshold from completed kwargs."""
    return fmt_threshold(kw.get(name))
