r"""The change detector's alarm limit from a stated false-alarm rate (``change.arl0``).

Siegmund's approximation of the in-control average run length of a one-sided CUSUM with reference :math:`k` and
limit :math:`h` on N(0, 1) observations,

.. math::

    \mathrm{ARL}_0(h) \approx \frac{e^{2kb} - 2kb - 1}{2k^2}, \qquad b = h + 1.166,

is solved for the per-series run length ``S · arl0`` of the ``S`` series a monitor's change detector watches (false
alarms of independent series add up, so each series gets ``S`` times the monitor's run length). The achieved rate of
the self-starting detector is measured by ``benchmarks/bench_drift_calibration.py`` (docs/monitoring.md).
"""

from __future__ import annotations

import math
from typing import Any


def cusum_limit(change: Any, n_series: int = 1) -> float:
    """The alarm limit ``h`` of the change detector: ``change.h``, or derived from ``change.arl0`` for a monitor that
    watches ``n_series`` series (Siegmund's approximation; see the module docstring).

    >>> from labelgate.pipeline.config import ChangeDetector
    >>> cusum_limit(ChangeDetector())
    6.0
    >>> h = cusum_limit(ChangeDetector(arl0=1000), n_series=4)
    >>> round(h, 2), round(siegmund_arl(0.5, h))
    (6.44, 4000)
    """
    if change.arl0 is None:
        return float(change.h)
    target = float(change.arl0) * max(int(n_series), 1)
    low, high = 0.0, 1.0
    while siegmund_arl(change.k, high) < target:  # the run length grows exponentially in h: a few doublings
        low, high = high, high * 2.0
    for _ in range(60):
        mid = (low + high) / 2.0
        low, high = (mid, high) if siegmund_arl(change.k, mid) < target else (low, mid)
    return high


def siegmund_arl(k: float, h: float) -> float:
    """In-control average run length of a one-sided CUSUM with reference ``k`` and limit ``h`` on N(0, 1)
    observations (Siegmund 1985, with the 1.166 boundary correction)."""
    b = 2.0 * k * (h + 1.166)
    return (math.exp(b) - b - 1.0) / (2.0 * k * k)
