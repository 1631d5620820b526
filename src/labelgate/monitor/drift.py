r"""Drift detection on a windowed agreement series, and drift episodes.

Two detectors run on each monitored (question, metric) series, one window at a time:

**Baseline** (``kind="baseline"``): the window breaches when its interval lies entirely below the gate
threshold (``ci_high < threshold``; ``baseline_rule: value`` compares the point value instead). An episode
opens after ``open_after`` consecutive breaching windows. It closes with hysteresis (``baseline_close: clear``, the
default): only after ``close_after`` windows whose interval lies entirely *at or above* the threshold (their value
does, under ``baseline_rule: value``). A level that sits at the threshold, whose intervals straddle it window after
window, is then one lasting incident instead of a stream of open and close alerts.

**Change** (``kind="change"``): a self-starting one-sided lower CUSUM (Page 1954; Hawkins 1987) on the
standardised window values,

.. math::

    z_t = \frac{x_t - \bar x_{t}}{\sqrt{s_t^2 + \tau^2 + (\bar{s^2} + \tau^2) / n_t}}, \qquad
    C_t = \max(0,\ C_{t-1} - z_t - k), \qquad \text{alarm when } C_t > h,

where :math:`s_t` is the window's bootstrap standard error (the width of its interval over
:math:`2 z_{0.975}`), and the reference is the job's own history: :math:`\bar x_t` is the mean of the
:math:`n_t` earlier in-control windows (outside episodes), :math:`\bar{s^2}` their mean squared standard error
and :math:`\tau^2 = \max(0, \widehat{\mathrm{var}}(x) - \bar{s^2})` their excess between-window variance
(item and rater mix). Detection starts after ``reference_windows`` windows. Standardising with a reference
that keeps growing (rather than fixed after the first windows) keeps the false-alarm rate stable: with a
mean of only the first 10 windows, an error of half a standard error in the reference turns the in-control
CUSUM into a random walk (we measured 0 to 44 false alarms per 1,000 stationary windows across seeds).
With ``k = 0.5, h = 6`` the measured rate is about 0.5 per 1,000 stationary windows per series (at most 2
in every run we simulated; ``tests/test_monitor_drift.py``, ``benchmarks/bench_monitor.py``,
``docs/monitoring.md``); a CUSUM with known parameters has an in-control average run length of about
2,600 windows (Siegmund's approximation). The change point reported ("since") is the first window of the
current excursion of :math:`C` above 0.

**The reference is frozen during an excursion**: once the CUSUM passes ``h / 2``, windows are held aside and enter
the reference only when the CUSUM is back at 0, so the windows of a drop that has not (yet) raised an alarm never
teach the reference that the drop is normal — a slow decline keeps accumulating instead of being learned. Smaller
wobbles are learned at once: they are the noise the reference must know (a reference that stops at every wobble
stays small and raises false alarms). While an episode is open nothing is learned.

**The false-alarm rate is stated, not tuned**: with ``change.arl0`` (the in-control average run length of the
whole monitor, in windows) the limit ``h`` is derived for every series the detector watches
(:func:`labelgate.monitor.arl.cusum_limit`, Siegmund's approximation).

An open episode **closes** after ``close_after`` consecutive windows back within bounds — clearly above the
threshold (baseline; or no breach under ``baseline_close: no_breach``), or :math:`z_t \ge -` ``close_bound``
(change) — followed by a **cool-down** of ``cooldown`` windows without a renewed breach (baseline) or alarm (change,
a CUSUM restarted at 0 against the frozen reference). A breach or an alarm within the cool-down continues the same
episode: one incident, one open and one close alert. Windows with fewer than ``min_items`` items, or without a
value, are skipped (they neither breach nor count as within bounds).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

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
    return {
        "baseline": {"open": None, "run": 0, "ok": 0, "first": None},
        "change": {
            "open": None,
            "n": 0,
            "sum": 0.0,
            "sum_sq": 0.0,
            "sum_var": 0.0,
            "cusum": 0.0,
            "since": None,
            "ok": 0,
            "pending": [0, 0.0, 0.0, 0.0],  # windows of the current excursion: (n, sum, sum_sq, sum_var)
        },
        "last_window": None,
    }


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
        ``baseline_rule``, ``open_after``, ``close_after``, ``min_items`` and the ``change`` settings.
    h : float, optional
        The change detector's alarm limit (:func:`labelgate.monitor.arl.cusum_limit`); default ``drift.change.h``.

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
    >>> [e.transition for i, v in enumerate([.9, .5, .9]) for e in
    ...  step(s, row(i, v), threshold=.8, baseline=True, change=False, drift=cfg)]
    ['open', 'close']
    """
    state["last_window"] = row.get("window_index")
    value = row.get("value")
    if value is None or not math.isfinite(value) or (row.get("n_items") or 0) < drift.min_items:
        return []
    events = []
    if baseline and threshold is not None:
        events += _baseline(state["baseline"], row, float(threshold), drift)
    if change:
        events += _change(state["change"], row, drift, level, drift.change.h if h is None else h)
    return events


def _baseline(b: dict[str, Any], row: dict[str, Any], threshold: float, drift: Any) -> list[Event]:
    high = row.get("ci_high")
    use_high = drift.baseline_rule == "ci_high" and high is not None
    judged = float(row["ci_high"] if use_high else row["value"])
    breach = judged < threshold
    if b["open"] is None:
        b["run"] = b["run"] + 1 if breach else 0
        if breach and b["run"] == 1:
            b["first"] = row["window_start"]
        if b["run"] >= drift.open_after:
            b["open"], b["run"], b["ok"] = {"since": b["first"], "window": row.get("window_index")}, 0, 0
            what = "upper end of its interval" if use_high else "value"
            reason = (
                f"the {what} {judged:.3f} is below the gate threshold {threshold:.3f} "
                f"(value {row['value']:.3f}{_interval(row)}, {row.get('n_items')} items)"
            )
            return [Event("open", "baseline", b["first"], row, reason, {"threshold": threshold})]
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


def _change(c: dict[str, Any], row: dict[str, Any], drift: Any, level: float, h: float) -> list[Event]:
    se = standard_error(row, level)
    if se is None:
        return []
    cfg = drift.change
    n = c["n"]
    if n < cfg.reference_windows:
        _learn(c, row["value"], se)
        return []
    c.setdefault("pending", [0, 0.0, 0.0, 0.0])  # detector states stored before the field existed
    mean, tau2, mean_var = _reference(c)
    scale = math.sqrt(se * se + tau2 + (mean_var + tau2) / n)
    z = (row["value"] - mean) / scale if scale > 0 else 0.0
    details = {"z": z, "reference": mean, "tau": math.sqrt(tau2), "reference_windows": n}
    if c["open"] is None:
        before = c["cusum"]
        c["cusum"] = max(0.0, before - z - cfg.k)
        if c["cusum"] == 0.0:
            c["since"] = None
        elif before == 0.0 or c["since"] is None:
            c["since"] = row["window_start"]
        details["cusum"], details["h"] = c["cusum"], h
        if c["cusum"] > h:
            c["open"], c["ok"] = {"since": c["since"], "window": row.get("window_index")}, 0
            c["pending"] = [0, 0.0, 0.0, 0.0]  # the excursion's windows never enter the reference
            reason = (
                f"agreement fell: CUSUM {c['cusum']:.1f} > {h:.2f}; window value {row['value']:.3f}"
                f"{_interval(row)} is {-z:.1f} SE below the reference {mean:.3f} (mean of {n} earlier "
                "windows)"
            )
            return [Event("open", "change", c["since"], row, reason, details)]
        if c["cusum"] > h / 2.0 or c["pending"][0]:  # a drop on its way to an alarm: keep it out of the reference
            _hold(c, row["value"], se)
        else:  # small excursions are the noise the reference must learn: a reference that stops learning at every
            _learn(c, row["value"], se)  # wobble starts from too few windows and raises false alarms
        if c["cusum"] == 0.0:  # the excursion ended without an alarm: its windows were in control after all
            _release(c)
        return []
    if c["ok"] < drift.close_after:
        c["ok"] = c["ok"] + 1 if z >= -cfg.close_bound else 0
        c["cusum"] = 0.0  # the cool-down watches for a renewed alarm from a fresh start
    else:  # cooling down: a renewed alarm continues the same incident
        c["cusum"] = max(0.0, c["cusum"] - z - cfg.k)
        c["ok"], c["cusum"] = (0, 0.0) if c["cusum"] > h else (c["ok"] + 1, c["cusum"])
    if c["ok"] >= drift.close_after + drift.cooldown:
        since = c["open"]["since"]
        c["open"], c["ok"], c["cusum"], c["since"] = None, 0, 0.0, None
        reason = (
            f"back within {cfg.close_bound:g} SE of the reference {mean:.3f} for {drift.close_after} "
            f"window(s), then {drift.cooldown} without an alarm (last value {row['value']:.3f}{_interval(row)})"
        )
        return [Event("close", "change", since, row, reason, details)]
    return []


def _learn(c: dict[str, Any], value: float, se: float) -> None:
    """Add an in-control window to the reference (running sums of value, value², se²)."""
    c["n"] += 1
    c["sum"] += value
    c["sum_sq"] += value * value
    c["sum_var"] += se * se


def _hold(c: dict[str, Any], value: float, se: float) -> None:
    """Keep a window of the current excursion aside; it joins the reference only if no alarm follows."""
    pending = c["pending"]
    pending[0] += 1
    pending[1] += value
    pending[2] += value * value
    pending[3] += se * se


def _release(c: dict[str, Any]) -> None:
    n, total, total_sq, total_var = c["pending"]
    c["n"] += n
    c["sum"] += total
    c["sum_sq"] += total_sq
    c["sum_var"] += total_var
    c["pending"] = [0, 0.0, 0.0, 0.0]


def _reference(c: dict[str, Any]) -> tuple[float, float, float]:
    """(mean, excess between-window variance tau², mean within-window variance) of the reference."""
    n = c["n"]
    mean = c["sum"] / n
    var = max(0.0, (c["sum_sq"] - n * mean * mean) / (n - 1)) if n > 1 else 0.0
    mean_var = c["sum_var"] / n
    return mean, max(0.0, var - mean_var), mean_var


def _interval(row: dict[str, Any]) -> str:
    low, high = row.get("ci_low"), row.get("ci_high")
    return f", CI {low:.3f}–{high:.3f}" if low is not None and high is not None else ""


def episode_id(monitor: str, question: str, metric: str, kind: str, since: int) -> str:
    """Deterministic id of an episode (reruns over the same windows find the same id)."""
    key = f"{monitor}\x1f{question}\x1f{metric}\x1f{kind}\x1f{since}"
    return hashlib.sha256(key.encode()).hexdigest()[:32]
