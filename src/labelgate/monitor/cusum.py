r"""The change detector of a window series: a self-starting one-sided lower CUSUM with a frozen reference, and the
evidence that an episode is over.

**Alarm** (Page 1954; Hawkins 1987). A window is standardised against the reference,
:math:`z_i = (x_i - \bar x)/\sigma_i` with :math:`\sigma_i^2 = s_i^2 + \tau^2`, where :math:`s_i` is its bootstrap
standard error (the width of its interval over :math:`2 z_{(1+\text{level})/2}`), :math:`\bar x` the mean of the
:math:`n` reference windows and :math:`\tau^2 = \max(0, \widehat{\mathrm{var}}(x) - \bar{s^2})` their excess
between-window variance (item and rater mix). An *excursion* starts with the first window that lifts the CUSUM above
0; over its :math:`m` windows

.. math::

    C = D \sqrt{\frac{m}{m + w^2 v}} - m k, \qquad D = -\sum_i z_i, \quad w = \sum_i 1/\sigma_i, \quad
    v = (\bar{s^2} + \tau^2)/n, \qquad \text{alarm when } C > h,

(:func:`excursion_cusum`: the one-sided CUSUM :math:`\max(0, C_{t-1} - z_t - k)` with the reference's own error
allowed for), and the excursion ends when :math:`C` is back at 0. Detection starts after ``reference_windows``
windows. The reference keeps growing with in-control windows (a reference fixed on the first 10 windows made the
in-control CUSUM a random walk: 0 to 44 false alarms per 1,000 windows across seeds).

**The reference is frozen from the first window of an excursion** until the excursion ends: its windows are held
aside and join the reference only when :math:`C` is back at 0 without an alarm; with an alarm they are dropped, and
nothing is learned until the episode closes. A drop on its way to an alarm, or a slow decline, is never learned as
normal.

**Closing: back at the pre-episode reference.** While an episode is open, the evidence that the series is back at its
frozen reference rather than still :math:`d` standard errors below it is the log-likelihood-ratio CUSUM

.. math::

    R_t = \max\big(0,\ R_{t-1} + d\,(z_t + d/2)\big),

where :math:`z_t` is standardised as above with the reference's variance added (:func:`standardise`) and :math:`d` is
the drop the episode is about: the lower 95 % bound of the alarming excursion's mean shift, at least :math:`2k`. The
series is *back* when :math:`R_t > 2k\,(h + \ln(10)/(2k))` (:func:`return_limit`) and the last ``close_after`` windows
each had :math:`z \ge -` ``close_bound``. Under a drop of :math:`2k` standard errors that goes on, :math:`R` is then
an in-control CUSUM with a limit :math:`\ln(10)/(2k)` above :math:`h`, so a false return is about ten times rarer
than a false alarm; on a full return it gains :math:`d^2/2` a window. Then a **cool-down** of ``cooldown`` windows
watches a CUSUM restarted at 0 against the same frozen reference; a renewed alarm within it continues the episode (one
incident, one open and one close alert) and the return starts over.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

Z975 = NormalDist().inv_cdf(0.975)

#: How much rarer than a false alarm a false return (an episode closed while its drop goes on) is made.
RETURN_ODDS = 10.0

#: Reference windows below which a change detector is still *learning*: the reference's own error (1/sqrt(n) window
#: standard errors) is then a large part of a small drop, and a sustained drop of 1 SE lasting 40 windows is one alert
#: in fewer than 95 % of runs (measured with ``k = 0.5`` at limits 3.9-4.7, run lengths 300-720 windows:
#: ``benchmarks/bench_monitor_calibration.py``, docs/monitoring.md "A young monitor"). A pass reports the series still
#: learning instead of promising that rate.
LEARNING_WINDOWS = 80

#: Detector state of one series' change detector (JSON-serialisable); ``pending`` holds the windows of the current
#: excursion as running sums (n, sum, sum of squares, sum of squared standard errors), ``excursion`` its CUSUM's
#: sums (:func:`excursion_cusum`: minus the sum of z, the sum of 1/sigma).
FIELDS: dict[str, Any] = {"open": None, "n": 0, "sum": 0.0, "sum_sq": 0.0, "sum_var": 0.0, "cusum": 0.0,
                          "since": None, "ok": 0, "back": 0.0, "cool": None, "pending": [0, 0.0, 0.0, 0.0],
                          "excursion": [0.0, 0.0], "drop": None}


def new_state() -> dict[str, Any]:
    """An empty change-detector state."""
    return {k: (list(v) if isinstance(v, list) else v) for k, v in FIELDS.items()}


def upgrade(c: dict[str, Any]) -> dict[str, Any]:
    """Fill the fields a state stored by an earlier version lacks."""
    for key, value in FIELDS.items():
        c.setdefault(key, list(value) if isinstance(value, list) else value)
    return c


def learning(c: dict[str, Any], metric: str, reference_windows: int | None = None) -> dict[str, Any] | None:
    """What a pass says of a change detector whose reference holds fewer than :data:`LEARNING_WINDOWS` windows
    (None once it holds them).

    ``reference_windows`` (``monitor.drift.change.reference_windows``) is when the detector starts to alarm; the
    message names both numbers and where each comes from, so that "N of 80" is not read as a misread configuration.

    >>> learning({"n": 12}, "irr_crowd", 10)["message"]  # doctest: +NORMALIZE_WHITESPACE
    'irr_crowd: change detector still learning its reference (12 of 80 windows, the fixed length at which its stated
    false-alarm rate and power hold); it alarms from 10 windows on (monitor.drift.change.reference_windows): a
    sustained drop of 1 SE may be missed until then'
    """
    n = int(c.get("n", 0))
    if n >= LEARNING_WINDOWS:
        return None
    start = "" if reference_windows is None else (
        f"; it alarms from {reference_windows} windows on (monitor.drift.change.reference_windows)")
    return {"metric": metric, "reference_windows": n, "needed": LEARNING_WINDOWS, "alarms_from": reference_windows,
            "message": f"{metric}: change detector still learning its reference ({n} of {LEARNING_WINDOWS} windows, "
                       f"the fixed length at which its stated false-alarm rate and power hold){start}: a sustained "
                       "drop of 1 SE may be missed until then"}


def standardise(c: dict[str, Any], value: float, se: float) -> tuple[float, dict[str, Any]]:
    """``z`` of a window against the reference, with the reference's numbers (for an event's details)."""
    n = c["n"]
    mean, tau2, mean_var = reference(c)
    scale = math.sqrt(se * se + tau2 + (mean_var + tau2) / n)
    z = (value - mean) / scale if scale > 0 else 0.0
    return z, {"z": z, "reference": mean, "tau": math.sqrt(tau2), "reference_windows": n}


def watch(c: dict[str, Any], value: float, se: float, k: float, h: float) -> bool:
    """One in-control window: update the excursion's CUSUM and the reference; True when it alarms.

    The caller has checked that the reference holds ``reference_windows`` windows. See :func:`excursion_cusum`.
    """
    mean, tau2, mean_var = reference(c)
    sigma = math.sqrt(se * se + tau2)
    z = (value - mean) / sigma if sigma > 1e-12 * max(1.0, abs(mean)) else 0.0
    total, weight = c["excursion"]
    total, weight = total - z, weight + (1.0 / sigma if sigma > 0 else 0.0)
    m = c["pending"][0] + 1
    c["cusum"] = excursion_cusum(total, weight, m, (mean_var + tau2) / c["n"], k)
    if c["cusum"] <= 0.0:
        c["cusum"], c["since"], c["excursion"] = 0.0, None, [0.0, 0.0]
        learn(c, value, se)
        release(c)  # the excursion ended without an alarm: its windows were in control after all
        return False
    if c["cusum"] > h:
        # the drop the episode is about: the lower 95 % bound of the excursion's mean shift, at least the design 2k
        c["drop"] = max(2.0 * k, total / m - Z975 * math.sqrt(1.0 / m + 1.0 / c["n"]))
        c["pending"], c["excursion"] = [0, 0.0, 0.0, 0.0], [0.0, 0.0]  # its windows never enter the reference
        c["ok"], c["back"], c["cool"] = 0, 0.0, None
        return True
    c["excursion"] = [total, weight]
    hold(c, value, se)
    return False


def excursion_cusum(total: float, weight: float, m: int, reference_var: float, k: float) -> float:
    r"""The CUSUM of an excursion of ``m`` windows against a frozen reference.

    With :math:`D = -\sum_i z_i` over the excursion (:math:`z_i = (x_i - \bar x)/\sigma_i`,
    :math:`\sigma_i^2 = s_i^2 + \tau^2`), every term shares the reference's error, of variance
    :math:`v = (\bar{s^2} + \tau^2)/n`: :math:`\mathrm{var}(D) = m + (\sum_i 1/\sigma_i)^2 v`. The statistic is
    :math:`D` rescaled to the variance :math:`m` it would have against a known reference, less :math:`m k`:

    .. math::

        C = D \sqrt{\frac{m}{m + w^2 v}} - m k, \qquad w = \sum_i 1/\sigma_i,

    so a reference of few windows does not turn a long excursion into a random walk (the shared error grows as
    :math:`m^2`, the noise as :math:`m`). For :math:`m = 1` it is the usual
    :math:`-z/\sqrt{1 + v/\sigma^2} - k`.
    """
    return total * math.sqrt(m / (m + weight * weight * reference_var)) - m * k


def returned(c: dict[str, Any], z: float, k: float, h: float, close_after: int, close_bound: float,
             cooldown: int) -> bool:
    """One window of an open episode: True when the episode is over (back at the reference, then cooled down)."""
    if c["cool"] is None:
        d = c.get("drop") or 2.0 * k
        c["back"] = max(0.0, c["back"] + d * (z + d / 2.0))
        c["ok"] = c["ok"] + 1 if z >= -close_bound else 0
        if c["back"] > 2.0 * k * return_limit(k, h) and c["ok"] >= close_after:
            c["cool"], c["cusum"] = 0, 0.0
            return cooldown == 0
        return False
    c["cusum"] = max(0.0, c["cusum"] - z - k)
    if c["cusum"] > h:  # a renewed alarm within the cool-down: the same incident goes on
        c["cool"], c["back"], c["ok"], c["cusum"] = None, 0.0, 0, 0.0
        return False
    c["cool"] += 1
    return c["cool"] >= cooldown


def return_limit(k: float, h: float) -> float:
    """The limit of the return CUSUM: ``h + ln(RETURN_ODDS) / (2k)``, so that under a drop of ``2k`` standard errors
    that goes on a false return is :data:`RETURN_ODDS` times rarer than a false alarm (the run length of a CUSUM
    grows as :math:`e^{2kh}`)."""
    return h + math.log(RETURN_ODDS) / (2.0 * k)


def reopen_ready(c: dict[str, Any]) -> None:
    """Reset the episode fields after a close (the reference stays as it was before the episode)."""
    c["open"], c["ok"], c["back"], c["cool"], c["cusum"], c["since"] = None, 0, 0.0, None, 0.0, None
    c["excursion"] = [0.0, 0.0]


def learn(c: dict[str, Any], value: float, se: float) -> None:
    """Add an in-control window to the reference (running sums of value, value², se²)."""
    c["n"] += 1
    c["sum"] += value
    c["sum_sq"] += value * value
    c["sum_var"] += se * se


def hold(c: dict[str, Any], value: float, se: float) -> None:
    """Keep a window of the current excursion aside; it joins the reference only if no alarm follows."""
    pending = c["pending"]
    pending[0] += 1
    pending[1] += value
    pending[2] += value * value
    pending[3] += se * se


def release(c: dict[str, Any]) -> None:
    """Add the held windows of an excursion that ended without an alarm to the reference."""
    n, total, total_sq, total_var = c["pending"]
    c["n"] += n
    c["sum"] += total
    c["sum_sq"] += total_sq
    c["sum_var"] += total_var
    c["pending"] = [0, 0.0, 0.0, 0.0]


def reference(c: dict[str, Any]) -> tuple[float, float, float]:
    """(mean, excess between-window variance tau², mean within-window variance) of the reference."""
    n = c["n"]
    mean = c["sum"] / n
    var = max(0.0, (c["sum_sq"] - n * mean * mean) / (n - 1)) if n > 1 else 0.0
    mean_var = c["sum_var"] / n
    return mean, max(0.0, var - mean_var), mean_var
