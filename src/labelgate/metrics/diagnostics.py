r"""Per-rater diagnostics: agreement with the trusted pool and with co-raters, volume, bias, flags.

For every rater :math:`g` of a pool (usually the crowd) this module computes, in :math:`O(N)` over the
judgements (no raters x raters matrix; only pairs of raters that actually co-rated an item are formed):

* ``kappa_vs_trusted`` — cross-replication kappa :math:`\kappa_x(g, T)` of the rater (one rating per item)
  against the trusted pool on the items both rated (xRR paper eq. 9-11 with :math:`R_i = 1`):

  .. math::

      d_o = \sum_i \frac{1 + S_i}{R + S} \frac{x_i^\top D\, y_i}{S_i}, \qquad
      d_e = \frac{x_\cdot^\top D\, y_\cdot}{R\, S}, \qquad \kappa_x = 1 - d_o / d_e,

  where :math:`x_i` is the one-hot label of :math:`g` on item :math:`i`, :math:`y_i` the trusted counts,
  :math:`S_i` their total, :math:`R` the number of shared items and :math:`S = \sum_i S_i`. The distance
  :math:`D` follows the level as in :func:`labelgate.cross_kappa`: nominal :math:`1[c \ne k]`, ordinal
  Krippendorff's ordinal metric, interval/ratio squared difference (from moments).
* ``loo_agreement`` — the same kappa of :math:`g` against its co-raters of the same pool (leave-one-out:
  :math:`y_i` = the item's counts in the pool without :math:`g`'s rating), on items with another rating.
* ``bias`` — nominal/ordinal: total-variation distance
  :math:`\tfrac12 \sum_c |p_{gc} - r_{gc}|` between the rater's label distribution and the distribution of
  the co-raters' labels **on the same items** (so item mix does not count as bias); interval/ratio: the mean
  difference (rater minus co-raters) on those items.
* ``flags`` — ``low_agreement`` when the interval of ``kappa_vs_trusted`` lies entirely below
  ``min_agreement`` (raters with fewer than ``min_shared_items`` trusted items are judged on the
  leave-one-out interval instead; ``agreement_basis`` says which); ``collusion`` when the rater belongs to a
  pair whose agreement is far above each one's agreement with everyone else (see
  :func:`evaluate_pairs`), with the partner ids in ``partners``.

Intervals are per-rater percentile bootstraps over the rater's items (``interval="bootstrap"``, vectorised:
each resample draws, for every rater at once, as many of its own items as it has) or delta-method (Wald)
intervals computed from the sums and the sums of outer products of the per-item blocks
(``interval="delta"``); the latter is what incremental monitoring maintains.

The building blocks (:func:`rater_item_rows`, :func:`kappa_finalize`, :func:`delta_interval`,
:func:`co_rating_pairs`, :func:`evaluate_pairs`, :func:`rater_rows_from_sums`) are public so that
:mod:`labelgate.monitor` maintains the same sums incrementally and gets the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Literal

import numpy as np

from labelgate.core.ratings import FloatArray, IntArray, Ratings, common_categories
from labelgate.errors import ParameterError, check_option
from labelgate.metrics._engine import make_rng, one_minus_ratio
from labelgate.metrics.alpha import ordinal_distance

__all__ = [
    "PairTable",
    "RaterSums",
    "co_rating_pairs",
    "delta_interval",
    "design_summary",
    "distance_kind",
    "evaluate_pairs",
    "kappa_finalize",
    "rater_diagnostics",
    "rater_item_rows",
    "rater_rows_from_sums",
    "rater_sums",
]

Kind = Literal["nominal", "ordinal", "moments"]
IntervalMethod = Literal["bootstrap", "delta"]
# Cells (resamples x rows x block width) gathered per bootstrap chunk.
_CHUNK_CELLS = 4_000_000
# Relative step of the central differences of the delta method (~ cube root of the machine epsilon).
_STEP = 6e-6


def distance_kind(level: str) -> Kind:
    """The kappa distance of a level: ``nominal``, ``ordinal`` or ``moments`` (squared difference)."""
    if level == "nominal":
        return "nominal"
    if level == "ordinal":
        return "ordinal"
    return "moments"


def block_width(kind: Kind, q: int) -> int:
    """Columns of a per-item block row: observed part, the rater's part, the others' part."""
    if kind == "nominal":
        return 1 + 2 * q
    if kind == "ordinal":
        return q * q + 2 * q
    return 7


# ----------------------------------------------------------------------------------------- per-item rows
def rater_item_rows(kind: Kind, codes: IntArray, other: FloatArray, q: int,
                    values: FloatArray | None = None) -> FloatArray:
    r"""Block rows of one rater's kappa on items, one row per (rater, item) judgement.

    Parameters
    ----------
    kind : {"nominal", "ordinal", "moments"}
        Distance (see :func:`distance_kind`).
    codes : int array, shape (m,)
        Category code of the rater's label on each item.
    other : float array, shape (m, q) or (m, 3)
        The other replication on the item: category counts (nominal/ordinal) or centred moments
        ``(count, sum, sum of squares)`` (moments). Rows with a zero total give a zero block row.
    q : int
        Number of categories.
    values : float array, shape (m,), optional
        Centred value of the rater's label (moments only).

    Returns
    -------
    ndarray, shape (m, k)
        nominal ``[o_i, x_i, y_i]`` (``k = 1 + 2q``); ordinal ``[w_i x_i \otimes y_i, x_i, y_i]``
        (``k = q^2 + 2q``); moments ``[o_i, (1, x, x^2), (S_i, \sum y, \sum y^2)]`` (``k = 7``), with
        :math:`w_i = (1 + S_i) / S_i` and :math:`o_i = w_i\, x_i^\top D y_i`.

    Examples
    --------
    >>> import numpy as np
    >>> rater_item_rows("nominal", np.array([0]), np.array([[2.0, 1.0]]), q=2).round(4)
    array([[1.3333, 1.    , 0.    , 2.    , 1.    ]])
    """
    m = codes.size
    other = np.asarray(other, dtype=np.float64)
    total = other[:, 0] if kind == "moments" else other.sum(axis=1)
    present = total > 0
    w = np.zeros(m)
    np.divide(1.0 + total, total, out=w, where=present)
    if kind == "moments":
        x = np.zeros(m) if values is None else np.asarray(values, dtype=np.float64)
        mx = np.column_stack([np.ones(m), x, x * x]) * present[:, None]
        obs = w * (other[:, 2] + total * x * x - 2.0 * x * other[:, 1])
        return np.column_stack([obs, mx, other * present[:, None]])
    onehot = np.zeros((m, q))
    onehot[np.arange(m), codes] = 1.0
    onehot *= present[:, None]
    y = other * present[:, None]
    if kind == "nominal":
        obs = w * (total - y[np.arange(m), codes])
        return np.column_stack([obs, onehot, y])
    outer = (onehot[:, :, None] * y[:, None, :] * w[:, None, None]).reshape(m, q * q)
    return np.column_stack([outer, onehot, y])


def kappa_finalize(kind: Kind, q: int) -> Callable[[np.ndarray], np.ndarray]:
    """``sums (B, k) -> kappa (B,)`` for the rows of :func:`rater_item_rows` (as :func:`cross_kappa`).

    Examples
    --------
    >>> import numpy as np
    >>> rows = rater_item_rows("nominal", np.array([0, 1]), np.array([[1.0, 0.0], [0.0, 1.0]]), q=2)
    >>> float(kappa_finalize("nominal", 2)(rows.sum(axis=0)[None, :])[0])
    1.0
    """
    def finalize(sums: np.ndarray) -> np.ndarray:
        sums = np.atleast_2d(sums)
        if kind == "moments":
            (rr, tx, qx), (ss, ty, qy) = sums[:, 1:4].T, sums[:, 4:7].T
            expected, observed = rr * qy + ss * qx - 2.0 * tx * ty, sums[:, 0]
        elif kind == "nominal":
            xs, ys = sums[:, 1:1 + q], sums[:, 1 + q:]
            rr, ss = xs.sum(axis=1), ys.sum(axis=1)
            expected, observed = rr * ss - (xs * ys).sum(axis=1), sums[:, 0]
        else:
            xs, ys = sums[:, q * q:q * q + q], sums[:, q * q + q:]
            rr, ss = xs.sum(axis=1), ys.sum(axis=1)
            delta = ordinal_distance(xs + ys)
            observed = (sums[:, :q * q].reshape(-1, q, q) * delta).sum(axis=(1, 2))
            expected = np.einsum("bc,bck,bk->b", xs, delta, ys)
        with np.errstate(divide="ignore", invalid="ignore"):
            d_o = observed / (rr + ss)
            d_e = expected / (rr * ss)
        return one_minus_ratio(d_o, d_e)

    return finalize


# ----------------------------------------------------------------------------------------- intervals
def delta_interval(finalize: Callable[[np.ndarray], np.ndarray], sums: np.ndarray, second: np.ndarray,
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
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    chunk = max(1, _CHUNK_CELLS // (2 * k * k))
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


def _segment_bootstrap(rows: FloatArray, lengths: IntArray, finalize: Callable[[np.ndarray], np.ndarray],
                       n_boot: int, seed: Any, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile intervals of each segment's statistic, resampling each segment's own rows."""
    m, k = rows.shape
    n_seg = lengths.size
    low, high = np.full(n_seg, np.nan), np.full(n_seg, np.nan)
    nonempty = np.flatnonzero(lengths > 0)
    if nonempty.size == 0 or m == 0:
        return low, high
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])[nonempty]
    seg_len = lengths[nonempty]
    base = np.repeat(starts, seg_len)
    span = np.repeat(seg_len, seg_len).astype(np.float64)
    rng = make_rng(seed)
    chunk = max(1, _CHUNK_CELLS // max(m * k, 1))
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


# ----------------------------------------------------------------------------------------- pairs
@dataclass
class PairTable:
    """Aggregated co-rating pairs of raters (``a < b`` as rater codes).

    Attributes
    ----------
    a, b : int arrays
        Rater codes of the pair.
    n : float array
        Items both rated.
    agree : float array
        Items on which they gave the same label.
    """

    a: IntArray
    b: IntArray
    n: FloatArray
    agree: FloatArray

    def totals(self, n_raters: int) -> tuple[FloatArray, FloatArray]:
        """Per rater: (agreeing pairs, pairs) summed over all its partners."""
        agree = np.bincount(self.a, self.agree, n_raters) + np.bincount(self.b, self.agree, n_raters)
        pairs = np.bincount(self.a, self.n, n_raters) + np.bincount(self.b, self.n, n_raters)
        return agree.astype(np.float64), pairs.astype(np.float64)


def co_rating_pairs(item_codes: IntArray, rater_codes: IntArray, value_codes: IntArray,
                    n_raters: int) -> PairTable:
    """All pairs of raters who rated a common item, with the number of items and of agreements.

    Cost :math:`O(\\sum_i n_i^2)` (the pairs that exist), memory the same; no raters x raters matrix.

    Examples
    --------
    >>> import numpy as np
    >>> t = co_rating_pairs(np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]), np.array([2, 2, 0, 1]), 2)
    >>> t.a.tolist(), t.b.tolist(), t.n.tolist(), t.agree.tolist()
    ([0], [1], [2.0], [1.0])
    """
    order = np.lexsort((rater_codes, item_codes))
    items, raters, values = item_codes[order], rater_codes[order], value_codes[order]
    keys, agrees = [], []
    for d in range(1, int(np.bincount(items).max()) if items.size else 1):
        same = items[d:] == items[:-d]
        if not same.any():
            break
        lo, hi = raters[:-d][same], raters[d:][same]
        keys.append(np.minimum(lo, hi) * np.int64(n_raters) + np.maximum(lo, hi))
        agrees.append((values[:-d][same] == values[d:][same]).astype(np.float64))
    if not keys:
        empty = np.zeros(0, dtype=np.int64)
        return PairTable(empty, empty.copy(), np.zeros(0), np.zeros(0))
    key = np.concatenate(keys)
    unique, inverse = np.unique(key, return_inverse=True)
    n = np.bincount(inverse, minlength=unique.size).astype(np.float64)
    agree = np.bincount(inverse, weights=np.concatenate(agrees), minlength=unique.size).astype(np.float64)
    return PairTable(unique // n_raters, unique % n_raters, n, agree)


def wilson_low(successes: np.ndarray, n: np.ndarray, level: float = 0.95) -> np.ndarray:
    """Lower bound of the Wilson score interval of a proportion (NaN when ``n == 0``)."""
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = successes / n
        centre = p + z * z / (2 * n)
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
        return (centre - half) / (1 + z * z / n)


def evaluate_pairs(n: np.ndarray, agree: np.ndarray, agree_a: np.ndarray, pairs_a: np.ndarray,
                   agree_b: np.ndarray, pairs_b: np.ndarray, *, margin: float, min_items: int,
                   level: float = 0.95) -> dict[str, np.ndarray]:
    r"""Collusion test of rater pairs.

    A pair :math:`(g, h)` that co-rated :math:`n_{gh} \ge` ``min_items`` items is flagged when the lower
    Wilson bound of its agreement rate :math:`a_{gh} / n_{gh}` exceeds by at least ``margin`` the
    agreement of **each** rater with everyone else,

    .. math:: r_{g \setminus h} = \frac{A_g - a_{gh}}{N_g - n_{gh}},

    where :math:`A_g, N_g` are the rater's agreeing and total co-rating pairs over all partners.
    A rater with no other partner cannot be compared and is not flagged.

    Returns
    -------
    dict of arrays
        ``agreement``, ``agreement_low``, ``rest_a``, ``rest_b``, ``flag`` (bool).

    Examples
    --------
    >>> import numpy as np
    >>> out = evaluate_pairs(np.array([50.0]), np.array([50.0]), np.array([70.0]), np.array([150.0]),
    ...                      np.array([65.0]), np.array([150.0]), margin=0.3, min_items=20)
    >>> bool(out["flag"][0]), round(float(out["rest_a"][0]), 2)
    (True, 0.2)
    """
    n, agree = np.asarray(n, dtype=np.float64), np.asarray(agree, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        rest_a = np.where(pairs_a - n > 0, (agree_a - agree) / (pairs_a - n), np.nan)
        rest_b = np.where(pairs_b - n > 0, (agree_b - agree) / (pairs_b - n), np.nan)
        rate = np.where(n > 0, agree / n, np.nan)
    low = wilson_low(agree, n, level)
    worst = np.fmax(rest_a, rest_b)
    flag = (n >= min_items) & np.isfinite(rest_a) & np.isfinite(rest_b) & (low - worst >= margin)
    return {"agreement": rate, "agreement_low": low, "rest_a": rest_a, "rest_b": rest_b, "flag": flag}


# ----------------------------------------------------------------------------------------- sums
@dataclass
class RaterSums:
    """Additive per-rater statistics (what incremental monitoring maintains).

    Attributes
    ----------
    n_ratings : (R,) ratings by the rater.
    trusted, trusted_second, trusted_n : (R, k), (R, k, k), (R,)
        Sums, sums of outer products and number of the rows of :func:`rater_item_rows` against the trusted
        pool (items the trusted pool rated).
    loo, loo_second, loo_n : (R, k), (R, k, k), (R,)
        The same against the rater's co-raters (items with another rating in the pool).
    pair_agree, pair_total : (R,)
        Agreeing and total co-rating pairs of the rater (collusion test).
    """

    n_ratings: FloatArray
    trusted: FloatArray
    trusted_second: FloatArray
    trusted_n: FloatArray
    loo: FloatArray
    loo_second: FloatArray
    loo_n: FloatArray
    pair_agree: FloatArray
    pair_total: FloatArray


def grouped_sums(group: IntArray, rows: FloatArray, n_groups: int,
                 ) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Sums, sums of outer products and counts of ``rows`` by ``group``."""
    k = rows.shape[1]
    sums = np.zeros((n_groups, k))
    np.add.at(sums, group, rows)
    counts = np.bincount(group, minlength=n_groups).astype(np.float64)
    outer = np.zeros((n_groups, k, k))
    step = max(1, _CHUNK_CELLS // max(k * k, 1))
    for start in range(0, rows.shape[0], step):
        part = rows[start:start + step]
        np.add.at(outer, group[start:start + step], part[:, :, None] * part[:, None, :])
    return sums, outer, counts


def rater_sums(pool: Ratings, trusted: Ratings | None = None, *, center: float | None = None,
               ) -> tuple[RaterSums, dict[str, Any]]:
    """:class:`RaterSums` of every rater of ``pool`` and the per-judgement rows (for the bootstrap).

    ``pool`` and ``trusted`` must share categories (see :func:`labelgate.core.ratings.common_categories`).
    """
    kind, q = distance_kind(pool.level), pool.n_categories
    center = _center(pool, center)
    values = pool.values - center if kind == "moments" else None
    n_raters = pool.n_raters
    loo_other = _loo_other(pool, kind, center)
    loo_rows = rater_item_rows(kind, pool.value_codes, loo_other, q, values)
    loo_mask = _row_total(loo_other, kind) > 0
    if trusted is not None:
        t_other = _trusted_other(pool, trusted, kind, center)
        t_rows = rater_item_rows(kind, pool.value_codes, t_other, q, values)
        t_mask = _row_total(t_other, kind) > 0
    else:
        t_rows = np.zeros((pool.n_ratings, block_width(kind, q)))
        t_mask = np.zeros(pool.n_ratings, dtype=bool)
    t_sum, t_second, _ = grouped_sums(pool.rater_codes, t_rows, n_raters)
    l_sum, l_second, _ = grouped_sums(pool.rater_codes, loo_rows, n_raters)
    pairs = co_rating_pairs(pool.item_codes, pool.rater_codes, pool.value_codes, n_raters)
    agree, total = pairs.totals(n_raters)
    sums = RaterSums(
        n_ratings=np.bincount(pool.rater_codes, minlength=n_raters).astype(np.float64),
        trusted=t_sum, trusted_second=t_second,
        trusted_n=np.bincount(pool.rater_codes, t_mask.astype(np.float64), n_raters).astype(np.float64),
        loo=l_sum, loo_second=l_second,
        loo_n=np.bincount(pool.rater_codes, loo_mask.astype(np.float64), n_raters).astype(np.float64),
        pair_agree=agree, pair_total=total)
    return sums, {"trusted_rows": t_rows, "trusted_mask": t_mask, "loo_rows": loo_rows, "loo_mask": loo_mask,
                  "pairs": pairs, "kind": kind}


def _center(pool: Ratings, center: float | None) -> float:
    return float(pool.moment_center if center is None else center)


def _row_total(other: FloatArray, kind: Kind) -> FloatArray:
    return other[:, 0] if kind == "moments" else other.sum(axis=1)


def _loo_other(pool: Ratings, kind: Kind, center: float) -> FloatArray:
    if kind == "moments":
        x = pool.values - center
        mom = pool.centered_item_moments(center)[pool.item_codes]
        return mom - np.column_stack([np.ones_like(x), x, x * x])
    counts = pool.item_counts[pool.item_codes].astype(np.float64)
    counts[np.arange(pool.n_ratings), pool.value_codes] -= 1.0
    return counts


def _trusted_other(pool: Ratings, trusted: Ratings, kind: Kind, center: float) -> FloatArray:
    position = _item_map(pool, trusted)
    width = 3 if kind == "moments" else pool.n_categories
    table = (trusted.centered_item_moments(center) if kind == "moments"
             else trusted.item_counts.astype(np.float64))
    padded = np.vstack([table, np.zeros((1, width))])  # row -1: item not in the trusted pool
    return padded[position[pool.item_codes]]


def _item_map(pool: Ratings, trusted: Ratings) -> IntArray:
    """Trusted item code of each pool item code (-1 when the trusted pool has no such item)."""
    if pool.item_labels is trusted.item_labels:
        return np.arange(pool.n_items, dtype=np.int64)
    lookup = {label: i for i, label in enumerate(trusted.item_labels.tolist())}
    return np.fromiter((lookup.get(label, -1) for label in pool.item_labels.tolist()), dtype=np.int64,
                       count=pool.n_items)


# ----------------------------------------------------------------------------------------- rows
def rater_rows_from_sums(rater_ids: Sequence[Any], sums: RaterSums, *, kind: Kind, q: int, pool_name: str,
                         ci: float | None, trusted_interval: tuple[np.ndarray, np.ndarray] | None = None,
                         loo_interval: tuple[np.ndarray, np.ndarray] | None = None,
                         partners: dict[int, list[Any]] | None = None, min_agreement: float = 0.2,
                         min_shared_items: int = 10) -> list[dict[str, Any]]:
    """Per-rater rows (the contract shape) from :class:`RaterSums`.

    Intervals are delta-method unless ``trusted_interval`` / ``loo_interval`` ``(low, high)`` are given
    (e.g. from the bootstrap). ``partners`` maps a rater position to its collusion partners.
    """
    finalize = kappa_finalize(kind, q)
    level = 0.95 if ci is None else float(ci)
    kx, kx_lo, kx_hi = delta_interval(finalize, sums.trusted, sums.trusted_second, sums.trusted_n, level)
    loo, loo_lo, loo_hi = delta_interval(finalize, sums.loo, sums.loo_second, sums.loo_n, level)
    if trusted_interval is not None:
        kx_lo, kx_hi = trusted_interval
    if loo_interval is not None:
        loo_lo, loo_hi = loo_interval
    if ci is None:
        kx_lo = kx_hi = loo_lo = loo_hi = np.full(len(rater_ids), np.nan)
    bias = _bias(kind, q, sums.loo)
    partners = partners or {}
    rows = []
    for g, rater in enumerate(rater_ids):
        has_t = sums.trusted_n[g] > 0
        row = {"rater_id": rater, "pool": pool_name, "n_ratings": int(sums.n_ratings[g]),
               "n_shared_items": int(sums.trusted_n[g]),
               "kappa_vs_trusted": _num(kx[g]) if has_t else None,
               "kappa_ci_low": _num(kx_lo[g]) if has_t else None,
               "kappa_ci_high": _num(kx_hi[g]) if has_t else None,
               "loo_agreement": _num(loo[g]) if sums.loo_n[g] > 0 else None,
               "loo_ci_low": _num(loo_lo[g]) if sums.loo_n[g] > 0 else None,
               "loo_ci_high": _num(loo_hi[g]) if sums.loo_n[g] > 0 else None,
               "n_loo_items": int(sums.loo_n[g]),
               "bias": _num(bias[g]), "flags": [], "partners": sorted(partners.get(g, []), key=str),
               "agreement_basis": None}
        _flag_low(row, min_agreement, min_shared_items)
        if row["partners"]:
            row["flags"].append("collusion")
        rows.append(row)
    return rows


def _flag_low(row: dict[str, Any], threshold: float, min_items: int) -> None:
    if row["n_shared_items"] >= min_items and row["kappa_ci_high"] is not None:
        row["agreement_basis"] = "trusted"
        high = row["kappa_ci_high"]
    elif row["n_loo_items"] >= min_items and row["loo_ci_high"] is not None:
        row["agreement_basis"] = "peers"
        high = row["loo_ci_high"]
    else:
        return
    if high < threshold:
        row["flags"].append("low_agreement")


def _bias(kind: Kind, q: int, loo: FloatArray) -> FloatArray:
    if kind == "moments":
        with np.errstate(divide="ignore", invalid="ignore"):
            return loo[:, 2] / loo[:, 1] - loo[:, 5] / loo[:, 4]
    start = 1 if kind == "nominal" else q * q
    xs, ys = loo[:, start:start + q], loo[:, start + q:start + 2 * q]
    with np.errstate(divide="ignore", invalid="ignore"):
        p = xs / xs.sum(axis=1, keepdims=True)
        r = ys / ys.sum(axis=1, keepdims=True)
        return 0.5 * np.abs(p - r).sum(axis=1)


def _num(value: Any) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def collusion_partners(pairs: PairTable, agree: FloatArray, total: FloatArray, *, margin: float,
                       min_items: int) -> tuple[dict[int, list[int]], dict[str, np.ndarray]]:
    """Flagged pairs of a :class:`PairTable` as ``{rater: [partner, ...]}`` (rater codes) and the test."""
    test = evaluate_pairs(pairs.n, pairs.agree, agree[pairs.a], total[pairs.a], agree[pairs.b],
                          total[pairs.b], margin=margin, min_items=min_items)
    partners: dict[int, list[int]] = {}
    for k in np.flatnonzero(test["flag"]):
        a, b = int(pairs.a[k]), int(pairs.b[k])
        partners.setdefault(a, []).append(b)
        partners.setdefault(b, []).append(a)
    return partners, test


# ----------------------------------------------------------------------------------------- public
def rater_diagnostics(pool: Ratings, trusted: Ratings | None = None, *, pool_name: str = "crowd",
                      ci: float | None = 0.95, n_boot: int = 1000, seed: Any = None,
                      interval: IntervalMethod = "bootstrap", min_agreement: float = 0.2,
                      min_shared_items: int = 10, collusion_margin: float = 0.3, min_pair_items: int = 20,
                      center: float | None = None) -> list[dict[str, Any]]:
    r"""One row per rater of ``pool``: agreement with the trusted pool and co-raters, volume, bias, flags.

    Parameters
    ----------
    pool : Ratings
        The raters to diagnose (e.g. the crowd).
    trusted : Ratings, optional
        The trusted replication of (some of) the same items; items are matched by id. Without it the
        trusted fields are None and ``low_agreement`` uses the leave-one-out interval.
    pool_name : str, default "crowd"
        Written in the ``pool`` field.
    ci : float or None, default 0.95
        Interval level (None: no interval, no ``low_agreement`` flag).
    n_boot : int, default 1000
        Bootstrap resamples per rater (``interval="bootstrap"``).
    seed : int or Generator, optional
        Bootstrap seed.
    interval : {"bootstrap", "delta"}, default "bootstrap"
        Per-rater percentile bootstrap over the rater's items, or delta-method (Wald) interval.
    min_agreement : float, default 0.2
        ``low_agreement`` when the agreement interval lies entirely below it.
    min_shared_items : int, default 10
        Trusted items a rater needs to be judged on its trusted kappa (else on the leave-one-out one,
        if it has that many co-rated items; else not judged).
    collusion_margin : float, default 0.3
        See :func:`evaluate_pairs`.
    min_pair_items : int, default 20
        Co-rated items a pair needs before it can be flagged.
    center : float, optional
        Centre of the values for moment sums (interval/ratio); default the first value.

    Returns
    -------
    list of dict
        Keys ``rater_id, pool, n_ratings, n_shared_items, kappa_vs_trusted, kappa_ci_low, kappa_ci_high,
        loo_agreement, bias, flags, partners`` (the report contract) and ``loo_ci_low, loo_ci_high,
        n_loo_items, agreement_basis`` ("trusted" | "peers" | None). NaN is None.

    Notes
    -----
    Cost :math:`O(N + \sum_i n_i^2)`: one row per judgement and the co-rating pairs that exist; the
    bootstrap costs ``n_boot`` gathers of the rows. See the module docstring for the definitions.

    Examples
    --------
    >>> import labelgate as lg
    >>> crowd = lg.Ratings.from_long({"item_id": [1, 1, 2, 2, 3, 3], "rater_id": list("ababab"),
    ...                               "label": list("xxyyxy")})
    >>> trusted = lg.Ratings.from_long({"item_id": [1, 2, 3], "rater_id": list("ttt"), "label": list("xyx")})
    >>> rows = rater_diagnostics(crowd, trusted, ci=None)
    >>> [(r["rater_id"], r["kappa_vs_trusted"], r["n_shared_items"]) for r in rows]
    [('a', 1.0, 3), ('b', 0.4, 3)]
    """
    check_option(interval, ("bootstrap", "delta"), "interval", "rater_diagnostics")
    if ci is not None and not (isinstance(ci, (int, float)) and 0 < float(ci) < 1):
        raise ParameterError(f"The 'ci' parameter of rater_diagnostics must be None or a level in (0, 1); "
                             f"got {ci!r}.", parameter="ci", value=ci)
    if trusted is not None:
        pool, trusted = common_categories(pool, trusted)
    kind, q = distance_kind(pool.level), pool.n_categories
    sums, extra = rater_sums(pool, trusted, center=center)
    partners, _ = collusion_partners(extra["pairs"], sums.pair_agree, sums.pair_total,
                                     margin=collusion_margin, min_items=min_pair_items)
    named = {g: [pool.rater_labels[h] for h in hs] for g, hs in partners.items()}
    t_int = l_int = None
    if ci is not None and interval == "bootstrap":
        finalize = kappa_finalize(kind, q)
        order = np.argsort(pool.rater_codes, kind="stable")
        rng = make_rng(seed)
        t_int = _rater_bootstrap(extra["trusted_rows"], extra["trusted_mask"], pool.rater_codes, order,
                                 pool.n_raters, finalize, n_boot, rng, float(ci))
        l_int = _rater_bootstrap(extra["loo_rows"], extra["loo_mask"], pool.rater_codes, order, pool.n_raters,
                                 finalize, n_boot, rng, float(ci))
    return rater_rows_from_sums([_plain(x) for x in pool.rater_labels], sums, kind=kind, q=q,
                                pool_name=pool_name, ci=ci, trusted_interval=t_int, loo_interval=l_int,
                                partners=named, min_agreement=min_agreement,
                                min_shared_items=min_shared_items)


def _rater_bootstrap(rows: FloatArray, mask: np.ndarray, raters: IntArray, order: IntArray, n_raters: int,
                     finalize: Callable[[np.ndarray], np.ndarray], n_boot: int, rng: Any, level: float,
                     ) -> tuple[np.ndarray, np.ndarray]:
    keep = order[mask[order]]
    lengths = np.bincount(raters[keep], minlength=n_raters)
    return _segment_bootstrap(rows[keep], lengths, finalize, n_boot, rng, level)


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") and getattr(value, "ndim", 1) == 0 else value


def design_summary(r: Ratings, pool: str) -> dict[str, dict[str, Any]]:
    """Ratings-per-item distribution of a pool: ``{pool: {n_items, n_ratings, ratings_per_item_hist}}``.

    Examples
    --------
    >>> import labelgate as lg
    >>> design_summary(lg.Ratings.from_wide([[1, 1, None], [0, 1, 1]]), "crowd")
    {'crowd': {'n_items': 2, 'n_ratings': 5, 'ratings_per_item_hist': {2: 1, 3: 1}}}
    """
    per_item = r.ratings_per_item[r.ratings_per_item > 0]
    sizes, counts = np.unique(per_item, return_counts=True)
    return {pool: {"n_items": int(per_item.size), "n_ratings": int(r.n_ratings),
                   "ratings_per_item_hist": {int(s): int(c) for s, c in zip(sizes, counts, strict=True)}}}
