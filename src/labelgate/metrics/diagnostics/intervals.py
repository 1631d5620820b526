r"""Intervals from sums: the delta-method interval of a statistic of block sums, the Wilson interval of a proportion."""

from __future__ import annotations

from collections.abc import Callable
from statistics import NormalDist

import numpy as np

from labelgate.metrics.diagnostics.blocks import CHUNK_CELLS

Finalize = Callable[[np.ndarray], np.ndarray]
# Relative step of the central differences of the delta method (~ cube root of the machine epsilon).
_STEP = 6e-6


def normal_quantile(level: float) -> float:
    """The two-sided normal quantile ``z`` of a confidence level (1.96 at 0.95)."""
    return NormalDist().inv_cdf(0.5 + level / 2.0)


def delta_interval(finalize: Finalize, sums: np.ndarray, second: np.ndarray,
                   n: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Delta-method (Wald) interval of ``finalize(sums)`` under the item bootstrap.

    An item-bootstrap resample reweights the item blocks :math:`u_i` by multinomial counts, so the
    resampled sums have covariance :math:`C = \sum_i u_i u_i^\top - S S^\top / n`. With the gradient
    :math:`g` of ``finalize`` at :math:`S` (central differences, relative step 6e-6), the standard error is
    :math:`\sqrt{g^\top C g}` and the interval ``value ± z se``. Everything is a function of additive sums,
    so it can be maintained incrementally.

    Parameters
    ----------
    finalize : callable
        ``(B, k) -> (B,)``.
    sums : ndarray, shape (R, k)
        :math:`S = \sum_i u_i` for each of ``R`` statistics.
    second : ndarray, shape (R, k, k)
        :math:`\sum_i u_i u_i^\top`.
    n : ndarray, shape (R,)
        Items behind each sum.
    level : float
        Confidence level.

    Returns
    -------
    value, low, high : ndarray, shape (R,)
        NaN bounds where the value is undefined, the gradient is not finite or ``n < 2``.

    Examples
    --------
    The mean of four numbers (sum, count) has standard error ``sd / sqrt(n)`` (with the 1/n variance):

    >>> import numpy as np
    >>> u = np.array([[1.0, 1.0], [2.0, 1.0], [3.0, 1.0], [4.0, 1.0]])
    >>> mean = lambda s: s[:, 0] / s[:, 1]
    >>> v, lo, hi = delta_interval(mean, u.sum(0)[None], (u.T @ u)[None], np.array([4]), 0.95)
    >>> round(float(v[0]), 6), round(float((hi[0] - lo[0]) / 2 / 1.959964), 6)
    (2.5, 0.559017)
    """
    sums = np.atleast_2d(np.asarray(sums, dtype=np.float64))
    n_stats, k = sums.shape
    value = np.asarray(finalize(sums), dtype=np.float64)
    low, high = np.full(n_stats, np.nan), np.full(n_stats, np.nan)
    if n_stats == 0:
        return value, low, high
    z = normal_quantile(level)
    chunk = max(1, CHUNK_CELLS // (2 * k * k))
    for start in range(0, n_stats, chunk):
        part = slice(start, min(n_stats, start + chunk))
        s = sums[part]
        h = _STEP * np.maximum(np.abs(s), 1.0)
        eye = np.eye(k)[None, :, :] * h[:, None, :]
        shifted = np.concatenate([s[:, None, :] + eye, s[:, None, :] - eye], axis=1)
        f = np.asarray(finalize(shifted.reshape(-1, k)), dtype=np.float64).reshape(-1, 2, k)
        grad = (f[:, 0] - f[:, 1]) / (2.0 * h)
        nn = np.asarray(n, dtype=np.float64)[part]
        with np.errstate(divide="ignore", invalid="ignore"):
            cov = second[part] - s[:, :, None] * s[:, None, :] / nn[:, None, None]
        var = np.einsum("rk,rkl,rl->r", grad, cov, grad)
        ok = np.isfinite(var) & np.isfinite(value[part]) & (nn >= 2)
        se = np.sqrt(np.maximum(np.where(ok, var, 0.0), 0.0))
        low[part] = np.where(ok, value[part] - z * se, np.nan)
        high[part] = np.where(ok, value[part] + z * se, np.nan)
    return value, low, high


def wilson_interval(p_hat: np.ndarray, n: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of a proportion (NaN where ``n <= 0`` or ``p_hat`` is NaN).

    Examples
    --------
    Brown, Cai & DasGupta (2001), 2 successes in 10 trials at 95 %:

    >>> import numpy as np
    >>> low, high = wilson_interval(np.array([0.2]), np.array([10.0]))
    >>> round(float(low[0]), 4), round(float(high[0]), 4)
    (0.0567, 0.5098)
    """
    z = normal_quantile(level)
    p = np.asarray(p_hat, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        denom = 1.0 + z * z / n
        centre = (p + z * z / (2.0 * n)) / denom
        half = z * np.sqrt(np.clip(p * (1.0 - p), 0.0, None) / n + z * z / (4.0 * n * n)) / denom
    ok = (n > 0) & np.isfinite(p)
    low = np.where(ok, np.clip(centre - half, 0.0, 1.0), np.nan)
    high = np.where(ok, np.clip(centre + half, 0.0, 1.0), np.nan)
    return low, high
