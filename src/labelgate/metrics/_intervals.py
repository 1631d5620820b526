"""Confidence intervals from bootstrap replicates: percentile, BCa, and the fallbacks between the methods.

:func:`interval_of` is the one rule every resampled interval follows: the delta interval (from a linearised
standard error, :mod:`labelgate.metrics._linear`) falls back to BCa, and BCa (:func:`bca_interval`, its acceleration
from leave-one-item-out values, :func:`jackknife_acceleration`) to the percentile interval of the same replicates
(:func:`percentile_interval`). The replicates and the leave-one-item-out values themselves are drawn by
:mod:`labelgate.metrics._engine`; this module only reads them.
"""

from __future__ import annotations

from statistics import NormalDist
from typing import Any

import numpy as np

from labelgate.metrics._blocks import vanishes
from labelgate.metrics._linear import normal_interval


def percentile_interval(replicates: np.ndarray, level: float) -> tuple[tuple[float, float] | None, int]:
    """Percentile interval over the finite replicates, and how many were undefined."""
    finite = replicates[np.isfinite(replicates)]
    n_failed = int(replicates.size - finite.size)
    if finite.size < 2:
        return None, n_failed
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(finite, [alpha, 1.0 - alpha])
    return (float(low), float(high)), n_failed


_NORMAL = NormalDist()


def interval_of(replicates: np.ndarray, point: float, level: float, method: str,
                jackknife: np.ndarray | None = None, n_axis: int | None = None, se: float | None = None,
                se_missing: str | None = None) -> tuple[tuple[float, float] | None, int, str | None, str | None]:
    """The interval of ``method``: delta (from ``se``), BCa (replicates and leave-one-item-out values) or percentile.

    Returns ``(interval, n_undefined_replicates, method_used, note)``. The fallbacks, with ``note`` saying why: a
    delta interval without a finite linearised standard error ``se`` (``se_missing``: why it was not computed)
    falls back to BCa; a BCa interval that cannot be formed (see :func:`bca_interval`) to the percentile interval
    of the same replicates. ``"auto"`` is BCa here (:func:`labelgate.core.estimate.resolve_ci_method`: it stands
    for another method only on metrics computed through :func:`.evaluate`).
    """
    if method == "delta":
        delta = None if se is None else normal_interval(point, se, level)
        if delta is not None:
            return delta, 0, "delta", None
        interval, n_failed, used, then = interval_of(replicates, point, level, "bca", jackknife, n_axis)
        reason = se_missing or "the value is not differentiable at the data: a value next to it is undefined"
        said = f"delta interval undefined ({reason}); {then or 'BCa interval given'}" if interval else None
        return interval, n_failed, used, said
    if method in ("bca", "auto") and jackknife is not None:
        interval, n_failed, why = bca_interval(replicates, point, jackknife, level, n_axis)
        if interval is not None:
            return interval, n_failed, "bca", None
        percentile, n_failed = percentile_interval(replicates, level)
        note = f"BCa interval undefined ({why}); percentile interval given" if percentile else None
        return percentile, n_failed, "percentile" if percentile else None, note
    percentile, n_failed = percentile_interval(replicates, level)
    return percentile, n_failed, "percentile" if percentile else None, None


def bca_interval(replicates: np.ndarray, point: float, jackknife: np.ndarray, level: float,
                 n_axis: int | None = None) -> tuple[tuple[float, float] | None, int, str | None]:
    r"""Bias-corrected and accelerated (BCa) interval over the finite bootstrap replicates.

    With :math:`\hat\theta` the point value, :math:`\hat\theta^*_b` the ``B`` finite replicates,
    :math:`\Phi` the standard normal distribution function and :math:`z_{\beta} = \Phi^{-1}(\beta)`,

    .. math::

        z_0 = \Phi^{-1}\Big(\frac{\#\{\hat\theta^*_b < \hat\theta\}
              + \tfrac12 \#\{\hat\theta^*_b = \hat\theta\}}{B}\Big), \qquad
        \beta_{1,2} = \Phi\Big(z_0 + \frac{z_0 + z_{\beta}}{1 - a (z_0 + z_{\beta})}\Big),
        \quad \beta = \tfrac{1 \mp \mathrm{level}}{2},

    and the interval is the :math:`\beta_1`, :math:`\beta_2` quantiles of the replicates (as
    :func:`percentile_interval` takes its :math:`\tfrac{1 \mp \mathrm{level}}{2}` quantiles: with
    :math:`z_0 = a = 0` the two coincide). The acceleration :math:`a` is from the jackknife over items
    (:func:`jackknife_acceleration`). Ties count one half in :math:`z_0`, so a bootstrap distribution that is
    a point mass at :math:`\hat\theta` (e.g. perfect agreement) has :math:`z_0 = 0`.

    Parameters
    ----------
    replicates : ndarray, shape (B,)
        Bootstrap replicates; NaN ones (undefined on their resample) are left out and counted.
    point : float
        The estimate on the data.
    jackknife : ndarray
        Leave-one-item-out values (all items, or a random sample of them: see ``n_axis``).
    level : float
        Confidence level, e.g. 0.95.
    n_axis : int, optional
        Items on the resampled axis, when ``jackknife`` holds a sample of them.

    Returns
    -------
    interval : tuple of float or None
        None when BCa is undefined: fewer than 2 finite replicates, every replicate on one side of the
        estimate (:math:`z_0 = \pm\infty`), an undefined acceleration, or :math:`1 - a(z_0 + z_\beta) \le 0`.
    n_undefined : int
        Replicates left out.
    why : str or None
        Why the interval is undefined.

    References
    ----------
    B. Efron, "Better bootstrap confidence intervals", *JASA* 82 (1987) 171-185.
    T. J. DiCiccio and B. Efron, "Bootstrap confidence intervals", *Statistical Science* 11 (1996) 189-228.
    """
    finite = replicates[np.isfinite(replicates)]
    n_failed = int(replicates.size - finite.size)
    if finite.size < 2:
        return None, n_failed, "fewer than 2 resamples have a value"
    share = (np.count_nonzero(finite < point) + 0.5 * np.count_nonzero(finite == point)) / finite.size
    if share <= 0.0 or share >= 1.0:
        return None, n_failed, "every resample lies on one side of the estimate"
    accel = jackknife_acceleration(jackknife, n_axis)
    if not np.isfinite(accel):
        return None, n_failed, "fewer than 3 leave-one-item-out values are defined"
    z0 = _NORMAL.inv_cdf(share)
    betas = []
    for beta in ((1.0 - level) / 2.0, (1.0 + level) / 2.0):
        shifted = z0 + _NORMAL.inv_cdf(beta)
        room = 1.0 - accel * shifted
        if room <= 0.0:
            return None, n_failed, f"the acceleration {accel:.3g} is too large for the level"
        betas.append(_NORMAL.cdf(z0 + shifted / room))
    low, high = np.quantile(finite, betas)
    return (float(low), float(high)), n_failed, None


def jackknife_acceleration(leave_one_out: np.ndarray, n_axis: int | None = None) -> float:
    r"""BCa acceleration from leave-one-item-out values (Efron 1987, eq. 6.6; DiCiccio & Efron 1996, eq. 6.7).

    .. math::

        a = \frac{\sum_i (\bar\theta_{(\cdot)} - \hat\theta_{(i)})^3}
                  {6 \big[\sum_i (\bar\theta_{(\cdot)} - \hat\theta_{(i)})^2\big]^{3/2}}

    over the finite values :math:`\hat\theta_{(i)}` (an item whose removal leaves the statistic undefined
    is left out). When they are a random sample of ``m`` of the ``n_axis`` items, both sums are scaled by
    ``n_axis / m``, i.e. :math:`a` by :math:`\sqrt{m / n_{axis}}`. Equal values (no spread relative to
    their size, e.g. perfect agreement) give ``a = 0``; fewer than 3 finite values give NaN.
    """
    theta = np.asarray(leave_one_out, dtype=np.float64)
    theta = theta[np.isfinite(theta)]
    if theta.size < 3:
        return float("nan")
    u = theta.mean() - theta
    if vanishes(np.max(np.abs(u)), np.max(np.abs(theta))):
        return 0.0
    accel = float(np.sum(u**3) / (6.0 * np.sum(u**2) ** 1.5))
    if n_axis is not None and n_axis > leave_one_out.size:
        accel *= float(np.sqrt(leave_one_out.size / n_axis))
    return accel


def level_of(ci: float | None, interval: Any) -> float | None:
    """The Estimate's ``ci_level``: the level when an interval was computed."""
    return float(ci) if interval and ci is not None else None
