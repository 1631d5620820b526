r"""Additive per-rater sums: each rater's kappa blocks against the trusted pool and against its co-raters."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from labelgate.core.ratings import FloatArray, IntArray, Ratings
from labelgate.metrics.diagnostics.blocks import (
    CHUNK_CELLS,
    Kind,
    block_width,
    distance_kind,
    rater_item_rows,
    row_total,
)
from labelgate.metrics.diagnostics.pairs import PairTable, co_rating_pairs


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


def grouped_sums(group: IntArray, rows: FloatArray, n_groups: int, weights: FloatArray | None = None,
                 ) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Sums, sums of outer products and counts of ``rows`` by ``group``; row ``j`` counts ``weights[j]`` times
    (default once): rows aggregated by the database, one per distinct (rater, label, item context)."""
    k = rows.shape[1]
    w = np.ones(rows.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
    sums = np.zeros((n_groups, k))
    np.add.at(sums, group, rows * w[:, None])
    counts = np.bincount(group, weights=w, minlength=n_groups).astype(np.float64)
    outer = np.zeros((n_groups, k, k))
    step = max(1, CHUNK_CELLS // max(k * k, 1))
    for start in range(0, rows.shape[0], step):
        part = rows[start:start + step]
        np.add.at(outer, group[start:start + step],
                  part[:, :, None] * part[:, None, :] * w[start:start + step, None, None])
    return sums, outer, counts


def rater_sums(pool: Ratings, trusted: Ratings | None = None, *, center: float | None = None,
               ) -> tuple[RaterSums, PairTable]:
    """:class:`RaterSums` of every rater of ``pool`` and its co-rating pairs (:class:`PairTable`).

    ``pool`` and ``trusted`` must share categories (see :func:`labelgate.core.ratings.common_categories`).
    """
    kind, q = distance_kind(pool.level, pool), pool.n_categories
    center = float(pool.moment_center if center is None else center)
    values = pool.values - center if kind == "moments" else None
    t_other = _trusted_other(pool, trusted, kind, center) if trusted is not None else None
    pairs = co_rating_pairs(pool.item_codes, pool.rater_codes, pool.value_codes, pool.n_raters)
    sums = judgement_sums(kind, q, pool.n_raters, pool.rater_codes, pool.value_codes,
                          _loo_other(pool, kind, center), t_other, values, pairs)
    return sums, pairs


def judgement_sums(kind: Kind, q: int, n_raters: int, raters: IntArray, codes: IntArray, loo_other: FloatArray,
                   t_other: FloatArray | None, values: FloatArray | None, pairs: PairTable,
                   weights: FloatArray | None = None) -> RaterSums:
    """:class:`RaterSums` from judgements (rater code, category code, the item's other ratings in the pool and in
    the trusted pool), each counted ``weights[j]`` times (default once), and the co-rating :class:`PairTable`.

    The one definition of the sums: :func:`rater_sums` passes one row per judgement, :func:`context_sums` one row
    per distinct (rater, label, item counts) that a database aggregated.
    """
    m = raters.size
    w = np.ones(m) if weights is None else np.asarray(weights, dtype=np.float64)
    loo_rows = rater_item_rows(kind, codes, loo_other, q, values)
    loo_mask = row_total(loo_other, kind) > 0
    if t_other is not None:
        t_rows = rater_item_rows(kind, codes, t_other, q, values)
        t_mask = row_total(t_other, kind) > 0
    else:
        t_rows = np.zeros((m, block_width(kind, q)))
        t_mask = np.zeros(m, dtype=bool)
    # rows outside the mask are zero rows: leaving them out changes no sum, only the counts
    t_sum, t_second, t_n = grouped_sums(raters[t_mask], t_rows[t_mask], n_raters, w[t_mask])
    l_sum, l_second, l_n = grouped_sums(raters[loo_mask], loo_rows[loo_mask], n_raters, w[loo_mask])
    agree, total = pairs.totals(n_raters)
    return RaterSums(n_ratings=np.bincount(raters, weights=w, minlength=n_raters).astype(np.float64),
                     trusted=t_sum, trusted_second=t_second, trusted_n=t_n,
                     loo=l_sum, loo_second=l_second, loo_n=l_n, pair_agree=agree, pair_total=total)


def context_sums(level: str, category_values: FloatArray, n_raters: int, raters: IntArray, codes: IntArray,
                 crowd_counts: FloatArray, trusted_counts: FloatArray | None, weights: FloatArray,
                 pairs: PairTable, *, center: float) -> RaterSums:
    r""":class:`RaterSums` from judgements aggregated by their context: row ``j`` stands for ``weights[j]``
    judgements by rater ``raters[j]`` with category ``codes[j]`` on items whose label counts are ``crowd_counts[j]``
    in the rater's pool (the judgement included) and ``trusted_counts[j]`` in the trusted pool.

    Every sum of :class:`RaterSums` is a sum over a rater's judgements of a function of (its label, its item's
    counts), so these rows — a ``GROUP BY rater, label, counts`` of the judgements joined to their items' counts —
    give the same sums as :func:`rater_sums` on the judgements (moments: :math:`(n, \sum n_c v_c,
    \sum n_c v_c^2)` of ``category_values - center``).
    """
    kind, q = distance_kind(level), len(category_values)
    crowd = np.asarray(crowd_counts, dtype=np.float64)
    values = None
    if kind == "moments":
        v = np.asarray(category_values, dtype=np.float64) - center
        values = v[codes]

        def moments(counts: FloatArray) -> FloatArray:
            # category by category, as the per-item moments of the rows add up (the same rounding)
            out = np.zeros((counts.shape[0], 3))
            for c in range(q):
                weighted = counts[:, c] * v[c]
                out += np.column_stack([counts[:, c], weighted, weighted * v[c]])
            return out

        loo_other = moments(crowd) - np.column_stack([np.ones_like(values), values, values * values])
        t_other = moments(np.asarray(trusted_counts, dtype=np.float64)) if trusted_counts is not None else None
    else:
        loo_other = crowd.copy()
        loo_other[np.arange(codes.size), codes] -= 1.0
        t_other = np.asarray(trusted_counts, dtype=np.float64) if trusted_counts is not None else None
    return judgement_sums(kind, q, n_raters, raters, codes, loo_other, t_other, values, pairs, weights)


def _loo_other(pool: Ratings, kind: Kind, center: float) -> FloatArray:
    """The item's ratings in the pool without the judgement itself (counts, or centred moments)."""
    if kind == "moments":
        x = pool.values - center
        mom = pool.centered_item_moments(center)[pool.item_codes]
        return mom - np.column_stack([np.ones_like(x), x, x * x])
    counts = pool.item_counts[pool.item_codes].astype(np.float64)
    counts[np.arange(pool.n_ratings), pool.value_codes] -= 1.0
    return counts


def _trusted_other(pool: Ratings, trusted: Ratings, kind: Kind, center: float) -> FloatArray:
    """The trusted pool's ratings of each judgement's item (zero where it did not rate the item)."""
    position = _item_map(pool, trusted)
    width = 3 if kind == "moments" else pool.n_categories
    table = (trusted.centered_item_moments(center) if kind == "moments"
             else trusted.item_counts.astype(np.float64))
    padded = np.vstack([table, np.zeros((1, width))])  # row -1: item not in the trusted pool
    return padded[position[pool.item_codes]]


def _item_map(pool: Ratings, trusted: Ratings) -> IntArray:
    """Trusted item code of each pool item code (-1 when the trusted pool has no such item)."""
    if pool.shares_items_with(trusted):
        return np.arange(pool.n_items, dtype=np.int64)
    lookup = {label: i for i, label in enumerate(trusted.item_labels.tolist())}
    return np.fromiter((lookup.get(label, -1) for label in pool.item_labels.tolist()), dtype=np.int64,
                       count=pool.n_items)
