r"""Per-rater intervals of a statistic of block sums: delta method (from sums) or per-rater bootstrap (from rows)."""

from __future__ import annotations

from collections.abc import Callable
from statistics import NormalDist

import numpy as np

from labelgate.core.ratings import FloatArray, IntArray
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


def rater_bootstrap(rows: FloatArray, mask: np.ndarray, raters: IntArray, order: IntArray, n_raters: int,
                    finalize: Finalize, *, n_boot: int, rng: np.random.Generator, level: float,
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Percentile intervals of each rater's statistic, resampling each rater's own rows.

    Parameters
    ----------
    rows : ndarray, shape (N, k)
        Block rows, one per judgement (:func:`~labelgate.metrics.diagnostics.rater_item_rows`).
    mask : bool array, shape (N,)
        Rows that count (the other replication rated the item).
    raters : int array, shape (N,)
        Rater code of each row; ``order`` sorts the rows by it (stable), shared by the callers.
    n_raters : int
        Number of raters (the length of the outputs).
    finalize : callable
        ``(B, k) -> (B,)``.
    n_boot, rng, level
        Resamples, generator and confidence level.

    Returns
    -------
    low, high : ndarray, shape (n_raters,)
        NaN where the rater has no row or fewer than two finite replicates.

    Notes
    -----
    Vectorised over raters: each resample draws, for every rater at once, as many of its own rows as it has.
    """
    keep = order[mask[order]]
    rows = rows[keep]
    lengths = np.bincount(raters[keep], minlength=n_raters)
    m, k = rows.shape
    low, high = np.full(n_raters, np.nan), np.full(n_raters, np.nan)
    nonempty = np.flatnonzero(lengths > 0)
    if nonempty.size == 0 or m == 0:
        return low, high
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])[nonempty]
    seg_len = lengths[nonempty]
    base = np.repeat(starts, seg_len)
    span = np.repeat(seg_len, seg_len).astype(np.float64)
    chunk = max(1, CHUNK_CELLS // max(m * k, 1))
    reps = np.empty((n_boot, nonempty.size))
    for b0 in range(0, n_boot, chunk):
        b = min(chunk, n_boot - b0)
        idx = base + np.minimum((rng.random((b, m)) * span).astype(np.int64), span.astype(np.int64) - 1)
        sums = np.add.reduceat(rows[idx], starts, axis=1)
        reps[b0:b0 + b] = np.asarray(finalize(sums.reshape(-1, k)), dtype=np.float64).reshape(b, -1)
    alpha = (1.0 - level) / 2.0
    finite = np.isfinite(reps)
    enough = finite.sum(axis=0) >= 2
    if enough.any():
        with np.errstate(all="ignore"):
            q = np.nanquantile(np.where(finite, reps, np.nan)[:, enough], [alpha, 1.0 - alpha], axis=0)
        low[nonempty[enough]], high[nonempty[enough]] = q[0], q[1]
    return low, high
