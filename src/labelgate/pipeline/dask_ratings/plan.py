"""The driver's plan: global codes from the partition summaries, and the combination of partition statistics.

:class:`Plan` is pure numpy on the driver: it takes what the workers returned (:class:`~.kernels.Summary` of each
partition, then :class:`~.kernels.PartitionStatistics`) and gives back what the workers need next (each
partition's local-to-global maps, a :class:`~.kernels.StatisticsRequest`) and, at the end, one
:class:`~.ratings.PoolStatistics` per pool. It raises the input errors of the in-memory builder, in its order.

Global codes: the distinct values of each partition, concatenated in partition order, keep the first appearance
of each, which is exactly the order in which pandas factorises the whole column. An item split across
partitions therefore gets one code, and codes (hence the bootstrap's item axis) are those of the in-memory path.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from labelgate.core.ratings import (
    MAX_COUNT_CELLS,
    FloatArray,
    IntArray,
    Level,
    MissingPolicy,
    _python_scalar,
    _resolve_categories,
)
from labelgate.errors import InputError, Reason
from labelgate.pipeline.dask_ratings.kernels import KeySpace, PartitionStatistics, StatisticsRequest, Summary
from labelgate.pipeline.dask_ratings.ratings import PoolStatistics


def check_missing_ids(summaries: Sequence[Summary], columns: dict[str, str]) -> None:
    """Raise on the first missing item, rater or pool id, in that order of columns."""
    for role in ("item", "rater", "pool"):
        if role in columns:
            _check_missing(summaries, role, columns[role], "id", Reason.MISSING_ID)


class Plan:
    """Global factorisation and the driver-side combination of the partition statistics.

    Parameters
    ----------
    summaries : sequence of Summary
        One per partition, in partition order.
    columns : dict
        Role (``item``, ``rater``, ``value``, optionally ``pool``) -> column name.
    level, categories
        As in :meth:`Ratings.from_long <labelgate.Ratings.from_long>`.
    pooled : bool
        One :class:`PoolStatistics` per pool (sharing items and categories) rather than one for the table.
    """

    def __init__(self, summaries: Sequence[Summary], columns: dict[str, str], level: Level,
                 categories: Sequence[Any] | None, pooled: bool) -> None:
        self.columns, self.level, self.pooled = columns, level, pooled
        self.summaries = summaries
        self.labels: dict[str, np.ndarray] = {}
        self.part_maps: dict[str, list[IntArray]] = {}
        for role in columns:
            self.labels[role], self.part_maps[role] = _global_codes([s.uniques[role] for s in summaries])
        self.n_items, self.n_raters = len(self.labels["item"]), len(self.labels["rater"])
        self.n_pools = len(self.labels["pool"]) if pooled else 1
        self.key_space = KeySpace(self.n_pools, self.n_items, self.n_raters)
        self.requested_categories = categories
        self.categories: tuple[Any, ...] = ()
        self.value_map = np.empty(0, dtype=np.int64)
        self.q = 0

    def resolve_categories(self) -> None:
        """The category list and the code of every distinct label (-1: not a category)."""
        categories, column = self.requested_categories, self.columns["value"]
        if self.pooled and categories is None:  # one list for all pools: the union of the observed labels
            categories, _ = _resolve_categories(self.labels["value"], None, self.level, column)
        self.categories, value_map = _resolve_categories(self.labels["value"], categories, self.level, column)
        self.value_map = np.asarray(value_map, dtype=np.int64)
        self.q = len(self.categories)

    @property
    def category_values(self) -> FloatArray:
        if self.level in ("interval", "ratio"):
            return np.asarray([float(c) for c in self.categories], dtype=np.float64)
        return np.arange(self.q, dtype=np.float64)

    def local_maps(self, part: int) -> dict[str, IntArray]:
        """Local code -> global code of each role in partition ``part`` (-1: a label that is not a category)."""
        maps = {role: self.part_maps[role][part] for role in self.columns if role != "value"}
        maps["value"] = self.value_map[self.part_maps["value"][part]]
        return maps

    def check_missing_values(self, missing: MissingPolicy) -> None:
        if missing == "error":
            _check_missing(self.summaries, "value", self.columns["value"], "value", Reason.MISSING_VALUE)

    def check_unknown_values(self, first_row: Callable[[int, IntArray], Any]) -> None:
        """Raise on the first row (in table order) whose label is not a category.

        ``first_row(part, local_codes)`` gives the label of the first row of partition ``part`` holding one of
        those local value codes (the rows are on the workers).
        """
        if not (self.value_map < 0).any():
            return
        column = self.columns["value"]
        for k, summary in enumerate(self.summaries):
            bad = np.flatnonzero(self.value_map[self.part_maps["value"][k]] < 0)
            if bad.size:
                row = first_row(k, bad)
                # local codes number the values by first appearance: the smallest bad one is on that row
                value = _python_scalar(summary.uniques["value"][int(bad.min())])
                raise InputError(f"Column {column!r} has value {value!r} at row {row!r}, which is not one of the "
                                 f"categories {list(self.categories)}.", Reason.UNKNOWN_CATEGORY, column=column,
                                 row=row, value=value)

    def first_and_missing(self, parts: Sequence[tuple[IntArray, IntArray]]) -> tuple[IntArray, IntArray]:
        """Each pool's first category code and missing count, from the partitions' :func:`first_values`."""
        first = np.full(self.n_pools, -1, dtype=np.int64)
        for values, _ in parts:  # the first partition holding a pool's judgement gives its first value
            first = np.where(first < 0, values, first)
        missing = np.sum([m for _, m in parts], axis=0) if parts else np.zeros(self.n_pools, np.int64)
        return first, np.asarray(missing, dtype=np.int64)

    def check_not_empty(self, first: IntArray) -> None:
        for pool in range(self.n_pools):
            if first[pool] < 0:
                raise InputError(f"Column {self.columns['value']!r} has no non-missing value.", Reason.EMPTY_INPUT)

    @property
    def with_counts(self) -> bool:
        return self.n_items * self.q <= MAX_COUNT_CELLS

    @property
    def with_moments(self) -> bool:
        """Whether the workers sum moments (else the statistics do not depend on the pools' first values)."""
        # Integer category values (ranks for nominal/ordinal): every moment is an exact integer sum, so the
        # driver derives them from the counts, in any order, without a copy per centre.
        n_rows = sum(s.n_rows for s in self.summaries)
        return not (self.with_counts and _integer_values(self.category_values, n_rows))

    def statistics_request(self, first: IntArray | None) -> StatisticsRequest:
        """What every partition computes; ``first`` (each pool's first value) is needed only with moments."""
        return StatisticsRequest(self.n_pools, self.q, self.category_values, self._centers(first), self.with_counts,
                                 self.with_moments)

    def combine(self, first: IntArray, missing_counts: IntArray,
                parts: Sequence[Sequence[PartitionStatistics | None]]) -> dict[Any, PoolStatistics]:
        """One :class:`PoolStatistics` per pool name (``None`` without a pool column), from every partition's."""
        values, centers = self.category_values, self._centers(first)
        out: dict[Any, PoolStatistics] = {}
        pool_names = self.labels["pool"] if self.pooled else [None]
        for pool, name in enumerate(pool_names):
            pieces = [piece for p in parts if (piece := p[pool]) is not None]
            out[_python_scalar(name) if self.pooled else None] = self._pool_statistics(
                pieces, pool, float(values[first[pool]]), centers, int(missing_counts[pool]))
        return out

    def _centers(self, first: IntArray | None) -> list[float]:
        if not self.with_moments or first is None:
            return []
        return sorted({float(self.category_values[f]) for f in first})

    def _pool_statistics(self, pieces: list[PartitionStatistics], pool: int, center: float, centers: list[float],
                         n_missing: int) -> PoolStatistics:
        n_items, n_raters, q = self.n_items, self.n_raters, self.q
        items = np.concatenate([p.items for p in pieces])
        raters = np.concatenate([p.raters for p in pieces])
        rater_counts = _add_cells([p.rater_cells for p in pieces], n_raters * q).reshape(n_raters, q)
        item_counts: IntArray | None = None
        item_moments: FloatArray | None = None
        rater_moments: FloatArray | None = None
        centered: dict[float, FloatArray] = {}
        if self.with_moments:
            item_moments = _add_rows(items, [p.item_moments for p in pieces], n_items)
            rater_moments = _add_rows(raters, [p.rater_moments for p in pieces], n_raters)
            per_item = item_moments[:, 0].astype(np.int64)
            used_raters = rater_moments[:, 0] > 0
            for k, c in enumerate(centers):
                sums = _add_rows(items, [p.centered[k] for p in pieces], n_items)
                centered[c] = np.column_stack([item_moments[:, 0], sums])
        if self.with_counts:
            item_counts = _add_cells([p.item_cells for p in pieces], n_items * q).reshape(n_items, q)
            per_item = item_counts.sum(axis=1)
            used_raters = rater_counts.sum(axis=1) > 0
        item_labels, item_renumber, item_keep = self.labels["item"], None, None
        if not self.pooled:  # from_long drops items left without a judgement (all their labels missing)
            item_keep = per_item > 0
            if not item_keep.all():
                item_renumber = np.cumsum(item_keep) - 1
                item_labels = item_labels[item_keep]
        return PoolStatistics(
            pool_code=pool, item_labels=np.asarray(item_labels, dtype=object),
            rater_labels=np.asarray(self.labels["rater"][used_raters], dtype=object), categories=self.categories,
            level=self.level, n_dropped_missing=n_missing, ratings_per_item=_keep_rows(per_item, item_keep),
            rater_counts=rater_counts[used_raters], moment_center=center,
            item_counts=None if item_counts is None else _keep_rows(item_counts, item_keep),
            item_moments=None if item_moments is None else _keep_rows(item_moments, item_keep),
            rater_moments=None if rater_moments is None else rater_moments[used_raters],
            centered={c: _keep_rows(m, item_keep) for c, m in centered.items()}, item_renumber=item_renumber,
            rater_renumber=None if used_raters.all() else np.cumsum(used_raters) - 1)


def _check_missing(summaries: Sequence[Summary], role: str, column: str, what: str, reason: Reason) -> None:
    total = sum(s.missing[role][0] for s in summaries)
    if total:
        row = next(s.missing[role][1] for s in summaries if s.missing[role][0])
        raise InputError(f"Column {column!r} has a missing {what} in {total} row(s), first at row {row!r}.",
                         reason, column=column, row=row)


def _global_codes(uniques: Sequence[pd.Index]) -> tuple[np.ndarray, list[IntArray]]:
    """Labels in order of first appearance over the partitions, and each partition's local-to-global map.

    One factorisation of the concatenated distinct values: its order is the order in which pandas
    factorises the whole column.
    """
    if not uniques:
        return np.empty(0, dtype=object), []
    joined = uniques[0].append(list(uniques[1:])) if len(uniques) > 1 else uniques[0]
    codes, labels = pd.factorize(joined)
    bounds = np.cumsum([0, *[len(u) for u in uniques]])
    maps = [np.asarray(codes[a:b], dtype=np.int64) for a, b in itertools.pairwise(bounds)]
    return np.asarray(labels, dtype=object), maps


def _integer_values(values: FloatArray, n_rows: int) -> bool:
    """Integer category values whose sums of squares over all rows stay exact in float64."""
    if values.size == 0 or not np.all(np.mod(values, 1.0) == 0.0):
        return False
    span = float(np.abs(values).max()) * 2.0 + 1.0  # centred values are differences of two category values
    return span * span * max(n_rows, 1) < 2.0**52


def _keep_rows(array: np.ndarray, keep: np.ndarray | None) -> np.ndarray:
    return array if keep is None or keep.all() else array[keep]


def _add_rows(codes: IntArray, blocks: Sequence[FloatArray | None], n: int) -> FloatArray:
    """Dense (n, k) sums of per-partition row blocks, added in partition order."""
    stacked = np.concatenate([b for b in blocks if b is not None], axis=0)  # None: not asked for, in every part
    return np.column_stack([np.bincount(codes, weights=stacked[:, j], minlength=n)
                            for j in range(stacked.shape[1])])


def _add_cells(cells: Sequence[tuple[IntArray, IntArray] | None], n_cells: int) -> IntArray:
    """Dense counts from the partitions' sparse (key, count) cells."""
    present = [c for c in cells if c is not None]  # None: not asked for, in every partition
    keys = np.concatenate([k for k, _ in present])
    counts = np.concatenate([n for _, n in present])
    return np.bincount(keys, weights=counts, minlength=n_cells).astype(np.int64)
