r"""Drift detection on a windowed agreement series, and drift episodes.

Two detectors run on each monitored (question, metric) series, one window at a time:

**Baseline** (``kind="baseline"``): the window breaches when its interval lies entirely below the gate
threshold (``ci_high < threshold``; ``baseline_rule: value`` compares the point value instead). An episode
opens after ``open_after`` consecutive breaching windows — with a stated false-alarm rate (``change.arl0``) after the
persistence :func:`labelgate.monitor.arl.persistence` derives from it: the number of consecutive breaches that a
series whose level sits exactly *at* the threshold (the worst in-control case) reaches no more often than once per
the series' share of the target. It closes with hysteresis (``baseline_close: clear``, the default): only after
``close_after`` windows whose interval lies entirely *at or above* the threshold (their value does, under
``baseline_rule: value``), then ``cooldown`` windows without a breach. A level that sits at the threshold, whose
intervals straddle it window after window, is then one lasting incident instead of a stream of open and close
alerts.

**Change** (``kind="change"``): a self-starting one-sided lower CUSUM on the standardised window values with a
reference frozen from the first window of an excursion, closed only once the series is back at its pre-episode
reference (:mod:`labelgate.monitor.cusum`). The limit ``h`` is stated or derived from ``change.arl0``
(:func:`labelgate.monitor.arl.cusum_limit`); with ``arl0`` the change detectors of a question also get what its
baseline rules do not spend (:func:`change_limit`). The change point reported ("since") is the first window of the
current excursion of the CUSUM above 0.

Windows with fewer than ``min_items`` items, or without a value, are skipped (they neither breach nor count as
within bounds).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from labelgate.monitor import arl, cusum

Z975 = NormalDist().inv_cdf(0.975)


@dataclass
class Event:
    """An episode transition produced by :func:`step`."""

    transition: str  # "open" | "close"
    kind: str  # "baseline" | "change"
    since: int  # window_start of the first window of the episode (microseconds)
    window: dict[str, Any]  # the window row that triggered the transition
    reason: str
    details: dict[str, Any]


def new_state() -> dict[str, Any]:
    """Empty detector state of one series (JSON-serialisable)."""
    return {"baseline": {"open": None, "run": 0, "ok": 0, "first": None}, "change": cusum.new_state(),
            "last_window": None}


def standard_error(row: dict[str, Any], level: float = 0.95) -> float | None:
    """Bootstrap standard error of a window from its interval (None when it has none)."""
    low, high = row.get("ci_low"), row.get("ci_high")
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return None
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    return (high - low) / (2.0 * z)


def step(
    state: dict[str, Any],
    row: dict[str, Any],
    *,
    threshold: float | None,
    baseline: bool,
    change: bool,
    drift: Any,
    level: float = 0.95,
    h: float | None = None,
    change_h: float | None = None,
) -> list[Event]:
    """Feed one window row (value, ci_low, ci_high, n_items, window_start...) to both detectors.

    Parameters
    ----------
    state : dict
        From :func:`new_state`; updated in place.
    row : dict
        A monitor window row; ``window_index`` orders the series.
    threshold : float or None
        The gate threshold of this metric (None: no baseline detection).
    baseline, change : bool
        Which detectors run on this series.
    drift : labelgate.pipeline.config.Drift
        ``baseline_rule``, ``open_after``, ``close_after``, ``cooldown``, ``min_items`` and the ``change`` settings.
    level : float
        Confidence level of the windows' intervals.
    h : float, optional
        The series' nominal alarm limit (:func:`labelgate.monitor.arl.cusum_limit` over the monitor's series); default
        ``cusum_limit(drift.change)``. With ``change.arl0`` the baseline persistence follows from it (the rule is held
        to the run length ``h`` gives).
    change_h : float, optional
        The change detector's limit once the question's baseline rules have taken what they spend
        (:func:`change_limit`); default ``h``.

    Returns
    -------
    list of Event
        The transitions this window caused (at most one per detector).

    Examples
    --------
    >>> from labelgate.pipeline.config import Drift
    >>> s, cfg = new_state(), Drift(close_after=1, cooldown=0)
    >>> row = lambda i, v: {"window_index": i, "window_start": i, "value": v, "ci_low": v - .05,
    ...                     "ci_high": v + .05, "n_items": 50}
    >>> [e.transition for i, v in enumerate([.9, .5, .5, .9]) for e in
    ...  step(s, row(i, v), threshold=.8, baseline=True, change=False, drift=cfg)]
    ['open', 'close']
    """
    state["last_window"] = row.get("window_index")
    value = row.get("value")
    if value is None or not math.isfinite(value) or (row.get("n_items") or 0) < drift.min_items:
        return []
    limit = arl.cusum_limit(drift.change) if h is None else float(h)
    c = cusum.upgrade(state["change"])
    se = standard_error(row, level)
    events = []
    if baseline and threshold is not None:
        events += _baseline(state["baseline"], c, row, float(threshold), drift, level, limit)
    if change and se is not None:
        events += _change(c, row, se, drift, limit if change_h is None else float(change_h))
    elif se is not None and state["baseline"]["open"] is None and not state["baseline"]["run"]:
        cusum.learn(c, float(value), se)  # the reference of a baseline-only series: its windows within bounds
    return events


def _reference_scale(c: dict[str, Any], drift: Any) -> tuple[bool, float, float]:
    """Whether the series' reference is known, and its window standard error and spread (1, 1 before: intervals
    as wide as the windows vary)."""
    if c["n"] < max(2, drift.change.reference_windows):
        return False, 1.0, 1.0
    _, tau2, mean_var = cusum.reference(c)
    return True, math.sqrt(mean_var), math.sqrt(mean_var + tau2)


def _persistence(c: dict[str, Any], drift: Any, level: float, h: float) -> int:
    """Consecutive breaches before a baseline episode opens, with the series' reference once it has one."""
    _, s, spread = _reference_scale(c, drift)
    return arl.baseline_persistence(drift, h, level, s, spread)


def baseline_spend(state: dict[str, Any], threshold: float | None, drift: Any, level: float, h: float) -> float:
    """False episodes per window the baseline rule of a series spends (:func:`labelgate.monitor.arl.spend`): at the
    breach probability of the level its reference shows, at most that of a level at the threshold (the worst
    in-control case, also before the reference is known or without a threshold)."""
    c = cusum.upgrade(state["change"])
    known, s, spread = _reference_scale(c, drift)
    z = arl.breach_z(drift, level)
    p = arl.breach_probability(0.0, s, spread, 0.0, z)
    if known and threshold is not None:
        p = min(p, arl.breach_probability(cusum.reference(c)[0], s, spread, float(threshold), z))
    return arl.spend(p, arl.baseline_persistence(drift, h, level, s, spread))


def change_limit(states: dict[str, dict[str, Any]], thresholds: dict[str, float | None], baseline: list[str],
                 change: list[str], drift: Any, level: float, h: float) -> float:
    """The limit of a question's change detectors: what the question's budget leaves once its ``baseline`` series
    (those with a gate) have taken their :func:`baseline_spend` (:func:`labelgate.monitor.arl.change_share`); ``h``
    is the series' nominal limit. Without ``change.arl0`` it is ``h``."""
    if drift.change.arl0 is None or not change:
        return h
    target = arl.run_length(drift.change.k, h)
    spent = sum(baseline_spend(states[m], thresholds.get(m), drift, level, h) for m in baseline)
    return arl.limit_for(drift.change.k, arl.change_share(len(baseline), len(change), spent, target))


def _baseline(b: dict[str, Any], c: dict[str, Any], row: dict[str, Any], threshold: float, drift: Any,
              level: float, h: float) -> list[Event]:
    high = row.get("ci_high")
    use_high = drift.baseline_rule == "ci_high" and high is not None
    judged = float(row["ci_high"] if use_high else row["value"])
    breach = judged < threshold
    if b["open"] is None:
        b["run"] = b["run"] + 1 if breach else 0
        if breach and b["run"] == 1:
            b["first"] = row["window_start"]
        needed = _persistence(c, drift, level, h)
        if b["run"] >= needed:
            b["open"], b["run"], b["ok"] = {"since": b["first"], "window": row.get("window_index")}, 0, 0
            what = "upper end of its interval" if use_high else "value"
            reason = (
                f"the {what} {judged:.3f} is below the gate threshold {threshold:.3f} "
                f"(value {row['value']:.3f}{_interval(row)}, {row.get('n_items')} items)"
                + (f" in {needed} consecutive windows" if needed > 1 else "")
            )
            return [Event("open", "baseline", b["first"], row, reason, {"threshold": threshold, "windows": needed})]
        return []
    if drift.baseline_close == "clear":  # back only when clearly back: hysteresis against a level at the threshold
        low = row.get("ci_low")
        back = float(low if use_high and low is not None else row["value"]) >= threshold
    else:
        back = not breach
    if b["ok"] < drift.close_after:
        b["ok"] = b["ok"] + 1 if back else 0
    else:  # cooling down: only a renewed breach keeps the incident open
        b["ok"] = 0 if breach else b["ok"] + 1
    if b["ok"] >= drift.close_after + drift.cooldown:
        since = b["open"]["since"]
        b["open"], b["ok"] = None, 0
        reason = (
            f"back at or above the gate threshold {threshold:.3f} for {drift.close_after} window(s), then "
            f"{drift.cooldown} without a breach "
            f"(last value {row['value']:.3f}{_interval(row)})"
        )
        return [Event("close", "baseline", since, row, reason, {"threshold": threshold})]
    return []


def _change(c: dict[str, Any], row: dict[str, Any], se: float, drift: Any, h: float) -> list[Event]:
    cfg, value = drift.change, float(row["value"])
    if c["n"] < cfg.reference_windows:
        cusum.learn(c, value, se)
        return []
    z, details = cusum.standardise(c, value, se)
    if c["open"] is None:
        if c["cusum"] <= 0.0:
            c["since"] = row["window_start"]  # the first window of an excursion, if this one starts it
        alarm = cusum.watch(c, value, se, cfg.k, h)
        details["cusum"], details["h"] = c["cusum"], h
        if not alarm:
            return []
        c["open"] = {"since": c["since"], "window": row.get("window_index")}
        reason = (
            f"agreement fell: CUSUM {c['cusum']:.1f} > {h:.2f}; window value {value:.3f}{_interval(row)} is "
            f"{-z:.1f} SE below the reference {details['reference']:.3f} (mean of {details['reference_windows']} "
            "earlier windows)"
        )
        return [Event("open", "change", c["since"], row, reason, details)]
    if not cusum.returned(c, z, cfg.k, h, drift.close_after, cfg.close_bound, drift.cooldown):
        return []
    since = c["open"]["since"]
    cusum.reopen_ready(c)
    reason = (
        f"back at the pre-episode reference {details['reference']:.3f} (return CUSUM above {h:.2f}, the last "
        f"{drift.close_after} window(s) within {cfg.close_bound:g} SE), then {drift.cooldown} window(s) without an "
        f"alarm (last value {value:.3f}{_interval(row)})"
    )
    return [Event("close", "change", since, row, reason, details)]


def _interval(row: dict[str, Any]) -> str:
    low, high = row.get("ci_low"), row.get("ci_high")
    return f", CI {low:.3f}–{high:.3f}" if low is not None and high is not None else ""


def episode_id(monitor: str, question: str, metric: str, kind: str, since: int) -> str:
    """Deterministic id of an episode (reruns over the same windows find the same id)."""
    key = f"{monitor}\x1f{question}\x1f{metric}\x1f{kind}\x1f{since}"
    return hashlib.sha256(key.encode()).hexdigest()[:32]
