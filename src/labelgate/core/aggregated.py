"""Aggregated rows ``(item code, category code, count)``: their checks and the statistics computed from them.

A database (or any engine that can ``GROUP BY``) returns, per item and category, how many judgements put the item
in the category. Those rows are the sufficient statistic of every coefficient that needs no rater identity
(percent agreement, Fleiss' κ, Gwet's AC1/AC2, Krippendorff's α, κx, normalized κx, SPA): the item x category
counts are one ``bincount`` of them and the per-item moments of the category values are weighted sums over them
(:math:`\\sum_c n_{ic} v_c`, :math:`\\sum_c n_{ic} v_c^2`). Nothing here builds one entry per judgement unless
asked to (:func:`expand_rows`). :class:`labelgate.core.ratings.AggregatedRatings` holds the rows; numpy only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from labelgate.core.statistics import MAX_COUNT_CELLS, FloatArray, IntArray
from labelgate.errors import InputError, Reason


def check_rows(item_codes: npt.ArrayLike, category_codes: npt.ArrayLike, counts: npt.ArrayLike, n_items: int,
               n_categories: int) -> tuple[IntArray, IntArray, npt.NDArray[Any]]:
    """The rows as int64 arrays (float64 counts when they are weighted), without zero counts, after checking
    their shape, type, codes and counts.

    Integer counts stay integers. Floating counts are weighted judgements (a non-integer count table): they are
    kept as float64 when one is not an integer, else made integers.

    Raises
    ------
    InputError
        Rows of different lengths, not one-dimensional, codes not integers, a code outside ``0..n-1``, a negative
        or non-finite count; the message names the row.
    """
    arrays: list[npt.NDArray[Any]] = []
    for name, values in (("item_codes", item_codes), ("category_codes", category_codes), ("counts", counts)):
        array = np.asarray(values)
        if array.ndim != 1:
            raise InputError(f"Ratings.from_aggregates: {name} must be one-dimensional; got shape {array.shape}.",
                             Reason.EMPTY_INPUT)
        weighted = name == "counts" and np.issubdtype(array.dtype, np.floating)
        if array.size and not np.issubdtype(array.dtype, np.integer) and not weighted:
            raise InputError(f"Ratings.from_aggregates: {name} must hold integers; got dtype {array.dtype}.",
                             Reason.EMPTY_INPUT)
        if weighted:
            bad = np.flatnonzero(~np.isfinite(array))
            if bad.size:
                raise InputError(f"Ratings.from_aggregates: counts has the non-finite count {float(array[bad[0]])!r}"
                                 f" at row {int(bad[0])}.", Reason.NON_NUMERIC_VALUE, row=int(bad[0]))
            whole = bool((array == np.round(array)).all())
            arrays.append(array.astype(np.int64) if whole else array.astype(np.float64, copy=False))
        else:
            arrays.append(array.astype(np.int64, copy=False))
    items, cats, n = arrays
    if not items.size == cats.size == n.size:
        raise InputError(f"Ratings.from_aggregates: item_codes, category_codes and counts must have one entry per "
                         f"row; got {items.size}, {cats.size} and {n.size}.", Reason.EMPTY_INPUT)
    for name, codes, bound in (("item_codes", items, n_items), ("category_codes", cats, n_categories)):
        bad = np.flatnonzero((codes < 0) | (codes >= bound))
        if bad.size:
            raise InputError(f"Ratings.from_aggregates: {name} has the code {int(codes[bad[0]])} at row "
                             f"{int(bad[0])}, outside 0..{bound - 1}.", Reason.UNKNOWN_CATEGORY, row=int(bad[0]))
    negative = np.flatnonzero(n < 0)
    if negative.size:
        raise InputError(f"Ratings.from_aggregates: counts has the negative count {n[negative[0]]} at row "
                         f"{int(negative[0])}.", Reason.EMPTY_INPUT, row=int(negative[0]))
    keep = n > 0
    if not keep.all():
        items, cats, n = items[keep], cats[keep], n[keep]
    if n.size == 0:
        raise InputError("The ratings are empty: no judgement with a value.", Reason.EMPTY_INPUT)
    return items, cats, n


def add_up(codes: IntArray, counts: npt.NDArray[Any], size: int) -> npt.NDArray[Any]:
    """Sums of ``counts`` per code: integers for integer counts (exact: float64 bincount is exact below 2**53
    judgements), floats for weighted ones."""
    sums = np.bincount(codes, weights=counts, minlength=size)
    return sums if np.issubdtype(counts.dtype, np.floating) else sums.astype(np.int64)


def row_item_counts(items: IntArray, cats: IntArray, counts: npt.NDArray[Any], n_items: int, q: int,
                    ) -> npt.NDArray[Any]:
    """Item x category counts ``n_ic`` of the rows, shape (n_items, q)."""
    if n_items * q > MAX_COUNT_CELLS:
        raise InputError(f"{n_items} items x {q} categories is too many cells for count-based metrics; for "
                         "continuous labels use level='interval' (moment-based).", Reason.TOO_MANY_CATEGORIES)
    return add_up(items * q + cats, counts, n_items * q).reshape(n_items, q)


def row_moments(items: IntArray, x: FloatArray, counts: npt.NDArray[Any], n_items: int) -> FloatArray:
    r"""Per-item :math:`(\sum_c n_{ic}, \sum_c n_{ic} x_c, \sum_c n_{ic} x_c^2)`; ``x`` is each row's value."""
    weight = counts.astype(np.float64)
    out = np.empty((n_items, 3), dtype=np.float64)
    out[:, 0] = np.bincount(items, weights=weight, minlength=n_items)
    out[:, 1] = np.bincount(items, weights=weight * x, minlength=n_items)
    out[:, 2] = np.bincount(items, weights=weight * x * x, minlength=n_items)
    return out


def expand_rows(items: IntArray, cats: IntArray, counts: IntArray, per_item: IntArray,
                ) -> tuple[IntArray, IntArray, IntArray]:
    """(item, slot, category) codes of every judgement, item-major; the slot is the rating's position on its item."""
    order = np.lexsort((cats, items))
    item_codes = np.repeat(items[order], counts[order])
    value_codes = np.repeat(cats[order], counts[order])
    first = np.cumsum(per_item) - per_item  # position of each item's first rating
    slots = np.arange(item_codes.size, dtype=np.int64) - first[item_codes]
    return item_codes, slots, value_codes


__all__: list[Any] = ["add_up", "check_rows", "expand_rows", "row_item_counts", "row_moments"]
