"""Partition kernels: what the workers run, one partition at a time (numpy and pandas only).

A partition goes through three shapes, each the input of the next kernel:

- :func:`factorize_partition`: a pandas partition becomes a :class:`Factorized` (local integer codes per
  column); the driver receives only its :func:`summarize` (a :class:`Summary`: distinct values, row count,
  missing ids).
- :func:`encode`: with the driver's local-to-global maps, the partition becomes :class:`Codes` (the kept
  judgements in global codes). These stay on the workers for the life of the ratings.
- :func:`first_values` and :func:`partition_statistics` reduce the codes to what the driver adds up
  (:class:`PartitionStatistics`); :func:`pool_codes` hands one pool's codes to the driver when a metric needs
  them.

:class:`KeySpace` and :class:`StatisticsRequest` are the small settings the driver sends with the tasks.
Nothing here imports dask: the driver wraps these functions in ``dask.delayed``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from labelgate.core.ratings import FloatArray, IntArray, _moments, _row_label
from labelgate.errors import InputError, Reason

# Judgement keys are (pool * n_items + item) * n_raters + rater; they must fit in int64.
_MAX_KEY = 2**62


@dataclass
class Factorized:
    """One partition, factorised locally: ``codes[role][j]`` indexes ``uniques[role]``; -1 is missing."""

    codes: dict[str, IntArray]
    uniques: dict[str, pd.Index]
    index: Any


@dataclass
class Summary:
    """What the driver learns of one factorised partition.

    ``missing[role]`` is the number of rows with a missing entry and the label of the first one (for error
    messages).
    """

    uniques: dict[str, pd.Index]
    n_rows: int
    missing: dict[str, tuple[int, Any]]


@dataclass
class Codes:
    """The kept judgements of one partition in global codes (rows in partition order)."""

    item: IntArray
    rater: IntArray
    value: IntArray
    pool: IntArray
    position: IntArray
    index: Any
    missing_per_pool: IntArray

    def without(self, positions: IntArray) -> Codes:
        """The same judgements without the rows at ``positions`` (row positions in the partition)."""
        keep = ~np.isin(self.position, positions)
        return Codes(self.item[keep], self.rater[keep], self.value[keep], self.pool[keep], self.position[keep],
                     self.index, self.missing_per_pool)


@dataclass(frozen=True)
class KeySpace:
    """The key of a judgement, ``(pool * n_items + item) * n_raters + rater``, in global codes.

    Raises
    ------
    InputError
        The keys would not fit in 64 bits.
    """

    n_pools: int
    n_items: int
    n_raters: int

    def __post_init__(self) -> None:
        if self.n_pools * max(self.n_items, 1) * max(self.n_raters, 1) >= _MAX_KEY:
            raise InputError(f"{self.n_pools} pools x {self.n_items} items x {self.n_raters} raters is too many "
                             "for the duplicate check's 64-bit keys.", Reason.TOO_MANY_CATEGORIES)

    def keys(self, codes: Codes) -> IntArray:
        return (codes.pool * self.n_items + codes.item) * self.n_raters + codes.rater

    def split(self, key: int) -> tuple[int, int, int]:
        """(pool, item, rater) codes of a key."""
        return key // (self.n_items * self.n_raters), (key // self.n_raters) % self.n_items, key % self.n_raters


@dataclass(frozen=True)
class StatisticsRequest:
    """Which statistics :func:`partition_statistics` computes, the same for every partition."""

    n_pools: int
    n_categories: int
    category_values: FloatArray
    centers: Sequence[float]
    with_counts: bool
    with_moments: bool


@dataclass
class PartitionStatistics:
    """One pool's statistics in one partition, sparse: only the items and raters the partition holds.

    Cells are ``(global code * n_categories + category, count)`` pairs; moment rows (count, sum, sum of squares)
    follow ``items`` / ``raters``; ``centered[k]`` holds the (sum, sum of squares) of the values minus the
    request's ``k``-th centre, per item.
    """

    items: IntArray
    raters: IntArray
    rater_cells: tuple[IntArray, IntArray]
    item_cells: tuple[IntArray, IntArray] | None
    item_moments: FloatArray | None
    rater_moments: FloatArray | None
    centered: list[FloatArray]


def factorize_partition(frame: pd.DataFrame, columns: dict[str, str]) -> Factorized:
    """Local integer codes of the ``columns`` (role -> column name) of one partition."""
    codes, uniques = {}, {}
    for role, name in columns.items():
        local, distinct = frame[name].factorize()
        codes[role] = np.asarray(local, dtype=np.int64)
        uniques[role] = distinct  # an Index of the column's dtype (pyarrow strings stay compact)
    return Factorized(codes, uniques, frame.index)


def summarize(part: Factorized) -> Summary:
    """Distinct values, row count and the first missing entry of each column."""
    missing = {}
    for role, local in part.codes.items():
        bad = np.flatnonzero(local < 0)
        missing[role] = (int(bad.size), _row_label(part.index, bad[0]) if bad.size else None)
    n_rows = len(next(iter(part.codes.values())))
    return Summary(part.uniques, n_rows, missing)


def first_row_with(part: Factorized, role: str, local_codes: IntArray) -> Any:
    """Row label of the first row whose ``role`` column has one of ``local_codes``."""
    rows = np.flatnonzero(np.isin(part.codes[role], local_codes))
    return _row_label(part.index, rows[0]) if rows.size else None


def encode(part: Factorized, maps: dict[str, IntArray], n_pools: int) -> Codes:
    """The partition's judgements with a value, in global codes (``maps``: local -> global code per role)."""
    value = part.codes["value"]
    keep = value >= 0
    rows = np.flatnonzero(keep)
    pool_all = maps["pool"][part.codes["pool"]] if "pool" in part.codes else np.zeros(value.size, np.int64)
    missing = np.bincount(pool_all[~keep], minlength=n_pools).astype(np.int64)
    return Codes(item=maps["item"][part.codes["item"][rows]], rater=maps["rater"][part.codes["rater"][rows]],
                 value=maps["value"][value[rows]], pool=pool_all[rows], position=rows.astype(np.int64),
                 index=part.index, missing_per_pool=missing)


def first_values(codes: Codes, n_pools: int) -> tuple[IntArray, IntArray]:
    """Category code of each pool's first kept judgement (-1: none) and the missing counts."""
    first = np.full(n_pools, -1, dtype=np.int64)
    for pool in range(n_pools):
        rows = np.flatnonzero(codes.pool == pool) if n_pools > 1 else np.arange(min(codes.pool.size, 1))
        if rows.size:
            first[pool] = codes.value[rows[0]]
    return first, codes.missing_per_pool


def pool_codes(codes: Codes, pool: int, n_pools: int) -> tuple[IntArray, IntArray, IntArray]:
    """(item, rater, value) codes of one pool's judgements in this partition."""
    if n_pools == 1:
        return codes.item, codes.rater, codes.value
    sel = codes.pool == pool
    return codes.item[sel], codes.rater[sel], codes.value[sel]


def partition_statistics(codes: Codes, request: StatisticsRequest) -> list[PartitionStatistics | None]:
    """Per pool: the statistics of this partition's judgements (None: the pool has none here)."""
    out: list[PartitionStatistics | None] = []
    q = request.n_categories
    for pool in range(request.n_pools):
        item, rater, value = pool_codes(codes, pool, request.n_pools)
        if item.size == 0:
            out.append(None)
            continue
        local, items = _local_codes(item)
        rlocal, raters = _local_codes(rater)
        stats = PartitionStatistics(items=items, raters=raters, rater_cells=_sparse_counts(raters, rlocal, value, q),
                                    item_cells=None, item_moments=None, rater_moments=None, centered=[])
        if request.with_counts:
            stats.item_cells = _sparse_counts(items, local, value, q)
        if request.with_moments:
            x = request.category_values[value]
            stats.item_moments = _moments(local, x, items.size)
            stats.rater_moments = _moments(rlocal, x, raters.size)
            stats.centered = [_moments(local, x - center, items.size)[:, 1:] for center in request.centers]
        out.append(stats)
    return out


def _local_codes(codes: IntArray) -> tuple[IntArray, IntArray]:
    """Dense local codes and the global code of each (hash-based: the order does not matter)."""
    local, distinct = pd.factorize(codes)
    return local.astype(np.int64), np.asarray(distinct, dtype=np.int64)


def _sparse_counts(global_codes: IntArray, local: IntArray, value: IntArray, q: int) -> tuple[IntArray, IntArray]:
    """Non-zero (global code * q + category, count) cells of a local code x category table."""
    cells = global_codes.size * q
    if cells <= 4 * local.size + 65_536:
        flat = np.bincount(local * q + value, minlength=cells)
        nz = np.flatnonzero(flat)
        return global_codes[nz // q] * q + nz % q, flat[nz].astype(np.int64)
    keys, counts = np.unique(local * q + value, return_counts=True)
    return global_codes[keys // q] * q + keys % q, counts.astype(np.int64)
