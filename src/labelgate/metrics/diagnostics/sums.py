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


def grouped_sums(group: IntArray, rows: FloatArray, n_groups: int,
                 ) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Sums, sums of outer products and counts of ``rows`` by ``group``."""
    k = rows.shape[1]
    sums = np.zeros((n_groups, k))
    np.add.at(sums, group, rows)
    counts = np.bincount(group, minlength=n_groups).astype(np.float64)
    outer = np.zeros((n_groups, k, k))
    step = max(1, CHUNK_CELLS // max(k * k, 1))
    for start in range(0, rows.shape[0], step):
        part = rows[start:start + step]
        np.add.at(outer, group[start:start + step], part[:, :, None] * part[:, None, :])
    return sums, outer, counts


def rater_sums(pool: Ratings, trusted: Ratings | None = None, *, center: float | None = None,
               ) -> tuple[RaterSums, PairTable]:
    """:class:`RaterSums` of every rater of ``pool`` and its co-rating pairs (:class:`PairTable`).

    ``pool`` and ``trusted`` must share categories (see :func:`labelgate.core.ratings.common_categories`).
    """
    kind, q = distance_kind(pool.level), pool.n_categories
    center = float(pool.moment_center if center is None else center)
    values = pool.values - center if kind == "moments" else None
    n_raters, raters = pool.n_raters, pool.rater_codes
    loo_other = _loo_other(pool, kind, center)
    loo_rows = rater_item_rows(kind, pool.value_codes, loo_other, q, values)
    loo_mask = row_total(loo_other, kind) > 0
    if trusted is not None:
        t_other = _trusted_other(pool, trusted, kind, center)
        t_rows = rater_item_rows(kind, pool.value_codes, t_other, q, values)
        t_mask = row_total(t_other, kind) > 0
    else:
        t_rows = np.zeros((pool.n_ratings, block_width(kind, q)))
        t_mask = np.zeros(pool.n_ratings, dtype=bool)
    # rows outside the mask are zero rows: leaving them out changes no sum, only the counts
    t_sum, t_second, t_n = grouped_sums(raters[t_mask], t_rows[t_mask], n_raters)
    l_sum, l_second, l_n = grouped_sums(raters[loo_mask], loo_rows[loo_mask], n_raters)
    pairs = co_rating_pairs(pool.item_codes, raters, pool.value_codes, n_raters)
    agree, total = pairs.totals(n_raters)
    sums = RaterSums(n_ratings=np.bincount(raters, minlength=n_raters).astype(np.float64),
                     trusted=t_sum, trusted_second=t_second, trusted_n=t_n,
                     loo=l_sum, loo_second=l_second, loo_n=l_n, pair_agree=agree, pair_total=total)
    return sums, pairs


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
    if pool.item_labels is trusted.item_labels:
        return np.arange(pool.n_items, dtype=np.int64)
    lookup = {label: i for i, label in enumerate(trusted.item_labels.tolist())}
    return np.fromiter((lookup.get(label, -1) for label in pool.item_labels.tolist()), dtype=np.int64,
                       count=pool.n_items)
