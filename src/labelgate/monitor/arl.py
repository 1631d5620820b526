r"""Alarm limits from a stated false-alarm rate (``change.arl0``): the change detector's ``h`` and the baseline rule's
persistence, for every series a monitor watches.

**Budget.** ``arl0`` is the in-control average run length of the *whole monitor*, in windows. The false alarms of
independent series add up, so each of the ``S`` series the monitor watches
(:func:`labelgate.monitor.episodes.series_count`: every (question, metric) series under the change detector, and every
one with a baseline gate) gets the run length ``T = S · arl0``: the rate ``1 / arl0`` is split evenly across series.

**Change detector.** Siegmund's approximation of the in-control average run length of a one-sided CUSUM with
reference :math:`k` and limit :math:`h` on N(0, 1) observations,

.. math::

    \mathrm{ARL}_0(h) \approx \frac{e^{2kb} - 2kb - 1}{2k^2}, \qquad b = h + c,

with Siegmund's boundary correction :math:`c = 1.166`. :func:`cusum_limit` solves :math:`\mathrm{ARL}_0(h) = T`. The
detector here is self-starting, with a reference frozen during excursions whose own error its CUSUM allows for
(:mod:`labelgate.monitor.cusum`); the rates it achieves at these limits, on simulated and on measured windows, are
measured by ``benchmarks/bench_drift_calibration.py`` and ``benchmarks/bench_monitor_calibration.py``
(docs/monitoring.md).

**Baseline rule.** A stable window breaches with probability ``p`` (:func:`breach_probability`); an episode opens
after ``r`` consecutive breaches, whose average run length is the classical

.. math::

    \mathrm{ARL}(p, r) = \frac{1 - p^r}{(1 - p)\, p^r}

(Feller 1968, ch. XIII). :func:`persistence` is the smallest ``r`` with :math:`\mathrm{ARL}(p_0, r) \ge T` where
:math:`p_0` is the breach probability of a series whose level sits *at* the threshold — the worst case that still
meets the gate.

**What the baseline rules leave.** A whole number of windows cannot meet :math:`T` exactly (at :math:`p_0 = 2.5\,\%`
the run length jumps from 40 windows at ``r = 1`` to 1,640 at 2), and a gate below its series' level spends less
still. Each rule's spend — :math:`1/\mathrm{ARL}(p, r)` with :math:`p` the breach probability at the level its
series' reference shows, at most :math:`p_0` — is subtracted from its question's budget, and the question's change
detectors share what is left (:func:`change_share`; :func:`labelgate.monitor.drift.change_limit`). A gate above its
series' level is out of control (its episodes are right), and is charged its worst in-control spend.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

#: Longest persistence the baseline rule is given (a run length beyond any stated target at ``p0 <= 1/2``).
MAX_PERSISTENCE = 64

_NORMAL = NormalDist()


def cusum_limit(change: Any, n_series: int = 1) -> float:
    """The alarm limit ``h`` of the change detector: ``change.h``, or derived from ``change.arl0`` for a monitor that
    watches ``n_series`` series (see the module docstring).

    >>> from labelgate.pipeline.config import ChangeDetector
    >>> cusum_limit(ChangeDetector())
    6.0
    >>> h = cusum_limit(ChangeDetector(arl0=1000), n_series=4)
    >>> round(run_length(0.5, h))
    4000
    """
    if change.arl0 is None:
        return float(change.h)
    return limit_for(change.k, float(change.arl0) * max(int(n_series), 1))


def limit_for(k: float, target: float) -> float:
    """The limit ``h`` whose :func:`run_length` at reference ``k`` is ``target`` windows (bisection).

    >>> round(run_length(0.5, limit_for(0.5, 300.0)))
    300
    """
    low, high = 0.0, 1.0
    while run_length(k, high) < target:  # the run length grows exponentially in h: a few doublings
        low, high = high, high * 2.0
    for _ in range(60):
        mid = (low + high) / 2.0
        low, high = (mid, high) if run_length(k, mid) < target else (low, mid)
    return high


def change_share(n_baseline: int, n_change: int, spent: float, target: float) -> float:
    r"""Run length of each of a question's ``n_change`` change detectors once its ``n_baseline`` baseline rules have
    taken the rate ``spent`` (false episodes per window, :func:`spend`) of their budget.

    The question's series hold the rate :math:`(n_b + n_c)/T` (``target`` :math:`T`: a series' run length,
    :func:`run_length` at the nominal limit). A baseline rule cannot spend its share :math:`1/T` exactly (its
    persistence is a whole number of windows) and spends less when its gate lies below the series' level, so the
    change detectors share what is left, and never less than their own shares:

    .. math::

        T_c = \frac{n_c}{\max\big(n_c/T,\ (n_b + n_c)/T - \text{spent}\big)}.

    >>> change_share(4, 2, 0.0, 720.0), change_share(4, 2, 4 / 720, 720.0)
    (240.0, 720.0)
    """
    left = max(n_change / target, (n_baseline + n_change) / target - spent)
    return n_change / left


def spend(p: float, r: int) -> float:
    """False episodes per window of a baseline rule that opens after ``r`` consecutive breaches, each with
    probability ``p`` (the inverse of :func:`runs_arl`).

    >>> round(1 / spend(0.025, 2))
    1640
    """
    return 1.0 / runs_arl(p, r)


def run_length(k: float, h: float) -> float:
    """In-control average run length of the change detector with reference ``k`` and limit ``h`` (Siegmund's
    approximation)."""
    return siegmund_arl(k, h)


def siegmund_arl(k: float, h: float, boundary: float = 1.166) -> float:
    """In-control average run length of a one-sided CUSUM with reference ``k`` and limit ``h`` on N(0, 1)
    observations (Siegmund 1985; ``boundary`` 1.166 for known parameters)."""
    b = 2.0 * k * (h + boundary)
    return (math.exp(b) - b - 1.0) / (2.0 * k * k)


def runs_arl(p: float, r: int) -> float:
    """Average number of windows until ``r`` consecutive breaches when each breaches with probability ``p``.

    >>> runs_arl(0.5, 1), runs_arl(0.5, 2)
    (2.0, 6.0)
    """
    if p <= 0.0:
        return math.inf
    if p >= 1.0:
        return float(r)
    return (1.0 - p**r) / ((1.0 - p) * p**r)


def persistence(target: float, p0: float) -> int:
    """The smallest number of consecutive breaches whose run length at breach probability ``p0`` reaches ``target``.

    >>> persistence(720, 0.025), persistence(4000, 0.025), persistence(720, 0.5)
    (2, 3, 9)
    """
    for r in range(1, MAX_PERSISTENCE + 1):
        if runs_arl(p0, r) >= target:
            return r
    return MAX_PERSISTENCE


def baseline_persistence(drift: Any, h: float, level: float, window_se: float, spread: float) -> int:
    """Consecutive breaching windows before a baseline episode opens: ``drift.open_after``, or with
    ``drift.change.arl0`` the :func:`persistence` of the series' run length (the change detector's, ``run_length(k,
    h)``) at the breach probability of a level at the threshold, never less than ``open_after``.

    ``level`` is the intervals' confidence level, ``window_se`` and ``spread`` the windows' standard error and
    window-to-window standard deviation (equal when unknown: intervals as wide as the windows vary).

    >>> from labelgate.pipeline.config import ChangeDetector, Drift
    >>> drift = Drift(change=ChangeDetector(arl0=120))
    >>> h = cusum_limit(drift.change, 6)
    >>> baseline_persistence(drift, h, 0.95, 1.0, 1.0), baseline_persistence(Drift(), 6.0, 0.95, 1.0, 1.0)
    (2, 1)
    """
    if drift.change.arl0 is None:
        return int(drift.open_after)
    p0 = breach_probability(0.0, window_se, spread, 0.0, breach_z(drift, level))  # the level at the threshold
    return max(int(drift.open_after), persistence(run_length(drift.change.k, h), p0))


def breach_z(drift: Any, level: float) -> float:
    """The interval's half-width in standard errors that the baseline rule compares: the interval's upper end
    (``ci_high``, at ``level``) or the value itself (0)."""
    return _NORMAL.inv_cdf(0.5 + level / 2.0) if drift.baseline_rule == "ci_high" else 0.0


def breach_probability(level: float, window_se: float, spread: float, threshold: float, z: float) -> float:
    r"""Chance that a stable window breaches the baseline rule: :math:`\Phi\big((t - z s - m)/\sqrt v\big)`.

    ``level`` :math:`m`, ``window_se`` :math:`s` (the interval's half-width is :math:`z s`; ``z = 0`` for the
    ``value`` rule), ``spread`` :math:`\sqrt v` the window-to-window standard deviation. A spread that is
    negligible against the scale of the numbers decides by the sign alone.
    """
    scale = max(1.0, abs(level), abs(threshold))
    if spread > 1e-12 * scale:
        return _NORMAL.cdf((threshold - z * window_se - level) / spread)
    return float(level + z * window_se < threshold)

