"""`Ratings`: the one canonical, sparse representation of a set of judgements.

A :class:`Ratings` holds one integer code per judgement (item, rater, category)
and lazily caches the sufficient statistics every metric is computed from:
item x category counts, rater x category counts and per-item / per-rater
moments of the category values. It never builds a raters x items matrix.

This module imports numpy only. Tables are read through duck typing: a column
object that has a ``factorize`` method (a pandas Series) is factorised by it,
anything else goes through numpy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from labelgate.errors import InputError, ParameterError, Reason, check_option

Level = Literal["nominal", "ordinal", "interval", "ratio"]
LEVELS: tuple[Level, ...] = ("nominal", "ordinal", "interval", "ratio")
DuplicatePolicy = Literal["error", "first", "last"]
MissingPolicy = Literal["drop", "error"]

# Above this many item x category cells, count-based statistics are refused
# (use level="interval" for continuous values: it works from moments).
MAX_COUNT_CELLS = 200_000_000

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


class RaterSlot(int):
    """Placeholder rater of :meth:`Ratings.from_counts`: the position of a rating on its item, not a person.

    A count table has no rater identity; metrics that need one (Conger's and Cohen's κ) recognise these labels
    and refuse the ratings.
    """

    def __repr__(self) -> str:
        return f"RaterSlot({int(self)})"


@dataclass(frozen=True)
class _Column:
    """A factorised column: ``codes[j]`` indexes ``uniques``; -1 marks missing."""

    codes: IntArray
    uniques: np.ndarray


class Ratings:
    """Judgements of items by raters on a measurement scale.

    Build it with :meth:`from_long` (one row per judgement) or :meth:`from_wide`
    (items x raters, NaN = missing); split a table with a pool column with
    :func:`ratings_by_pool`.

    Attributes
    ----------
    level : {"nominal", "ordinal", "interval", "ratio"}
        Measurement level; it selects the distance used by distance-based metrics.
    categories : tuple
        Ordered category list (explicit, or the sorted observed values).
    item_labels, rater_labels : numpy.ndarray
        Original ids, indexed by item / rater code.
    n_dropped_missing : int
        Judgements dropped because their value was missing.

    Examples
    --------
    >>> import labelgate as lg
    >>> r = lg.Ratings.from_wide([[1, 1], [0, 1], [0, 0]], level="nominal")
    >>> r.n_items, r.n_raters, r.n_ratings, r.categories
    (3, 2, 6, (0, 1))
    """

    def __init__(self, item_codes: IntArray, rater_codes: IntArray, value_codes: IntArray, *,
                 item_labels: np.ndarray, rater_labels: np.ndarray, categories: Sequence[Any],
                 level: Level, n_dropped_missing: int = 0) -> None:
        check_option(level, LEVELS, "level", "Ratings")
        self.item_codes = np.asarray(item_codes, dtype=np.int64)
        self.rater_codes = np.asarray(rater_codes, dtype=np.int64)
        self.value_codes = np.asarray(value_codes, dtype=np.int64)
        self.item_labels = item_labels
        self.rater_labels = rater_labels
        self.categories = tuple(categories)
        self.level: Level = level
        self.n_dropped_missing = n_dropped_missing
        if self.item_codes.size == 0:
            raise InputError("The ratings are empty: no judgement with a value.", Reason.EMPTY_INPUT)

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_long(cls, data: Any, item: str = "item_id", rater: str = "rater_id", value: str = "label", *,
                  level: Level = "nominal", categories: Sequence[Any] | None = None,
                  duplicates: DuplicatePolicy = "error", missing: MissingPolicy = "drop") -> Ratings:
        """Build from long data: one row per judgement.

        Parameters
        ----------
        data : DataFrame or mapping of column name to 1-D array
            The judgements.
        item, rater, value : str
            Column names of the item id, rater id and label.
        level : {"nominal", "ordinal", "interval", "ratio"}, default "nominal"
            Measurement level of the label.
        categories : sequence, optional
            Explicit (ordered) category list. A label outside it is an error.
            Default: the sorted observed labels.
        duplicates : {"error", "first", "last"}, default "error"
            What to do when one rater judged one item more than once.
        missing : {"drop", "error"}, default "drop"
            Rows whose label is missing are dropped (and counted in
            ``n_dropped_missing``) or rejected.

        Raises
        ------
        InputError
            Empty input, missing column, missing item or rater id, unknown
            category, non-numeric value for interval/ratio, duplicate judgement.
        """
        check_option(level, LEVELS, "level", "Ratings.from_long")
        check_option(duplicates, ("error", "first", "last"), "duplicates", "Ratings.from_long")
        check_option(missing, ("drop", "error"), "missing", "Ratings.from_long")
        columns = _column_names(data)
        for role, name in (("item", item), ("rater", rater), ("value", value)):
            if name not in columns:
                raise InputError(f"Column {name!r} (the {role} column) is missing; the data has columns "
                                 f"{sorted(map(str, columns))}.", Reason.MISSING_COLUMN, column=name)
        if _n_rows(data, item) == 0:
            raise InputError("The ratings table is empty (0 rows).", Reason.EMPTY_INPUT)
        row_labels = getattr(data, "index", None)
        items, raters, values = (_factorize(data[c]) for c in (item, rater, value))
        _check_ids(((item, items), (rater, raters)), row_labels)
        return cls._from_factorized(items, raters, values, level=level, categories=categories,
                                    duplicates=duplicates, missing=missing, value_column=value,
                                    row_labels=row_labels)

    @classmethod
    def from_wide(cls, data: Any, *, level: Level = "nominal", categories: Sequence[Any] | None = None,
                  ) -> Ratings:
        """Build from wide data: rows are items, columns are raters, NaN/None = missing.

        Parameters
        ----------
        data : DataFrame, 2-D array or nested sequence
            Items x raters. A DataFrame's index gives the item ids and its
            columns the rater ids; otherwise positions are used.
        level, categories
            As in :meth:`from_long`.
        """
        check_option(level, LEVELS, "level", "Ratings.from_wide")
        if hasattr(data, "to_numpy") and hasattr(data, "columns"):
            matrix = data.to_numpy(dtype=object)
            item_labels = np.asarray(list(data.index), dtype=object)
            rater_labels = np.asarray(list(data.columns), dtype=object)
        else:
            matrix = np.asarray(data, dtype=object)
            if matrix.ndim != 2:
                raise InputError(f"Wide ratings must be 2-D (items x raters); got {matrix.ndim} dimension(s).",
                                 Reason.EMPTY_INPUT)
            item_labels = np.arange(matrix.shape[0], dtype=np.int64).astype(object)
            rater_labels = np.arange(matrix.shape[1], dtype=np.int64).astype(object)
        if matrix.size == 0:
            raise InputError("The wide ratings table is empty.", Reason.EMPTY_INPUT)
        present = ~_is_missing(matrix)
        item_idx, rater_idx = np.nonzero(present)
        values = _factorize(matrix[present])
        items = _Column(item_idx.astype(np.int64), item_labels)
        raters = _Column(rater_idx.astype(np.int64), rater_labels)
        return cls._from_factorized(items, raters, values, level=level, categories=categories,
                                    duplicates="error", missing="drop", value_column="value",
                                    row_labels=None)

    @classmethod
    def from_contingency(cls, table: Any, categories: Sequence[Any] | None = None, *, level: Level = "nominal",
                         raters: tuple[Any, Any] = (0, 1)) -> Ratings:
        r"""Build two raters' ratings from their q x q contingency table.

        Cell ``(k, l)`` is the number of items the first rater (rows) put in
        category ``k`` and the second (columns) in category ``l``; every item is
        rated by both (the input of irrCAC's ``*.table`` functions, Gwet 2014,
        ch. 2). The result holds ``2 n`` judgements on :math:`n = \sum_{kl} n_{kl}`
        items, so every metric applies; Cohen's κ of it is the table's κ.

        Parameters
        ----------
        table : DataFrame, 2-D array or nested sequence
            Non-negative integer counts, square. A DataFrame's index (equal to
            its columns) gives the categories unless ``categories`` is passed.
        categories : sequence, optional
            The q categories of the rows and columns, in order. Default: the
            DataFrame's index, else ``0..q-1``.
        level : {"nominal", "ordinal", "interval", "ratio"}, default "nominal"
            Measurement level; interval/ratio categories must be numbers.
        raters : pair, default (0, 1)
            Labels of the row rater and the column rater.

        Raises
        ------
        InputError
            Not a square table of non-negative integer counts, or no count.
        ParameterError
            ``categories`` of the wrong length, with duplicates, or not numbers for interval/ratio.

        Examples
        --------
        >>> import labelgate as lg
        >>> r = lg.Ratings.from_contingency([[13, 0, 0], [0, 20, 7], [0, 4, 56]],
        ...                                 categories=["Ectopic", "AIU", "NIU"])
        >>> r.n_items, r.n_raters, round(float(lg.cohen_kappa(r)), 4)
        (100, 2, 0.7964)
        """
        check_option(level, LEVELS, "level", "Ratings.from_contingency")
        counts, row_labels, column_labels = _count_table(table, "contingency table")
        if counts.shape[0] != counts.shape[1]:
            raise InputError(f"A contingency table must be square (q x q); got {counts.shape[0]} x "
                             f"{counts.shape[1]}.", Reason.EMPTY_INPUT)
        if categories is None and row_labels is not None:
            if list(row_labels) != list(column_labels or []):
                raise InputError(f"The contingency table's rows {list(row_labels)} and columns "
                                 f"{list(column_labels or [])} must list the same categories in the same order "
                                 "(or pass 'categories').", Reason.UNKNOWN_CATEGORY)
            categories = row_labels
        cats = _count_categories(categories, counts.shape[1], level, "Ratings.from_contingency")
        if len(set(map(_python_scalar, raters))) != 2:
            raise ParameterError(f"'raters' must be two distinct labels; got {raters!r}.", parameter="raters")
        q = len(cats)
        cell = np.repeat(np.arange(q * q, dtype=np.int64), counts.ravel())  # one entry per item
        n = cell.size
        items = np.arange(n, dtype=np.int64)
        return cls(np.concatenate([items, items]), np.repeat(np.arange(2, dtype=np.int64), n),
                   np.concatenate([cell // q, cell % q]), item_labels=items.astype(object),
                   rater_labels=np.asarray([_python_scalar(x) for x in raters], dtype=object),
                   categories=cats, level=level)

    @classmethod
    def from_counts(cls, counts: Any, categories: Sequence[Any] | None = None, *, level: Level = "nominal",
                    ) -> Ratings:
        r"""Build from an items x categories count table: how many raters put each item in each category.

        The input of irrCAC's ``*.dist`` functions (Gwet 2014): row ``i`` is an
        item, cell ``(i, k)`` the number :math:`r_{ik}` of its ratings in
        category ``k``; rows may have different totals (missing ratings) and
        rows without a rating are dropped. The table says nothing about *who*
        rated: the judgements are given placeholder raters (:class:`RaterSlot`,
        the rating's position on its item), so only coefficients that need no
        rater identity accept these ratings — percent agreement, specific
        agreement, Brennan–Prediger, Fleiss' κ / Scott's π, Gwet's AC1/AC2,
        Krippendorff's α, SPA. Conger's and Cohen's κ raise ``DesignError``.

        The item x category counts are taken from the table as they are (the
        sufficient statistic of these coefficients); the per-judgement codes
        hold one entry per rating, never a raters x items array.

        Parameters
        ----------
        counts : DataFrame, 2-D array or nested sequence
            Non-negative integer counts, items x categories. A DataFrame's
            index gives the item ids and its columns the categories.
        categories : sequence, optional
            The q categories of the columns, in order. Default: the
            DataFrame's columns, else ``0..q-1``.
        level : {"nominal", "ordinal", "interval", "ratio"}, default "nominal"
            Measurement level; interval/ratio categories must be numbers.

        Raises
        ------
        InputError
            Not a table of non-negative integer counts, no count, or a repeated item id in the index.
        ParameterError
            ``categories`` of the wrong length, with duplicates, or not numbers for interval/ratio.

        Examples
        --------
        >>> import labelgate as lg
        >>> r = lg.Ratings.from_counts([[0, 0, 0, 6, 0], [0, 3, 0, 0, 3], [0, 1, 4, 0, 1]])
        >>> r.n_items, r.n_ratings, r.item_counts[2].tolist()
        (3, 18, [0, 1, 4, 0, 1])
        """
        check_option(level, LEVELS, "level", "Ratings.from_counts")
        table, row_labels, column_labels = _count_table(counts, "count table")
        cats = _count_categories(column_labels if categories is None else categories, table.shape[1], level,
                                 "Ratings.from_counts")
        n_per_item = table.sum(axis=1)
        rated = n_per_item > 0
        table, n_per_item = table[rated], n_per_item[rated]
        labels = np.empty(rated.size, dtype=object)  # filled one by one: ids may be tuples (a MultiIndex)
        seen: set[Any] = set()
        for position, label in enumerate(range(rated.size) if row_labels is None else row_labels):
            if label in seen:
                raise InputError(f"The count table's index has the item id {label!r} more than once; item ids "
                                 "must be unique (reset the index, or pass the counts as an array).",
                                 Reason.MISSING_ID, value=label)
            seen.add(label)
            labels[position] = label
        q = len(cats)
        cell = np.repeat(np.arange(table.size, dtype=np.int64), table.ravel())  # item-major: item = cell // q
        item_codes = cell // q
        first = np.cumsum(n_per_item) - n_per_item  # position of each item's first rating
        slots = np.arange(cell.size, dtype=np.int64) - first[item_codes]
        r = cls(item_codes, slots, cell % q, item_labels=labels[rated],
                rater_labels=np.asarray([RaterSlot(k) for k in range(int(n_per_item.max()))], dtype=object),
                categories=cats, level=level)
        # the table is the item x category count statistic itself: no need to re-count the judgements
        r.__dict__["item_counts"] = table
        r.__dict__["ratings_per_item"] = n_per_item
        return r

    @classmethod
    def _from_factorized(cls, items: _Column, raters: _Column, values: _Column, *, level: Level,
                         categories: Sequence[Any] | None, duplicates: DuplicatePolicy,
                         missing: MissingPolicy, value_column: str, row_labels: Any,
                         shared_item_index: bool = False) -> Ratings:
        missing_rows = np.flatnonzero(values.codes < 0)
        if missing_rows.size and missing == "error":
            row = _row_label(row_labels, missing_rows[0])
            raise InputError(f"Column {value_column!r} has a missing value in {missing_rows.size} row(s), "
                             f"first at row {row!r}.", Reason.MISSING_VALUE, column=value_column, row=row)
        cats, value_map = _resolve_categories(values.uniques, categories, level, value_column)
        code_of_unique = np.asarray(value_map, dtype=np.int64)
        keep = values.codes >= 0
        bad_unique = code_of_unique < 0
        if bad_unique.any():
            first_bad = int(np.flatnonzero(bad_unique[np.maximum(values.codes, 0)] & keep)[0])
            bad_value = values.uniques[values.codes[first_bad]]
            raise InputError(f"Column {value_column!r} has value {bad_value!r} at row "
                             f"{_row_label(row_labels, first_bad)!r}, which is not one of the categories "
                             f"{list(cats)}.", Reason.UNKNOWN_CATEGORY, column=value_column,
                             row=_row_label(row_labels, first_bad), value=bad_value)
        rows = np.flatnonzero(keep)
        item_codes, rater_codes = items.codes[rows], raters.codes[rows]
        value_codes = code_of_unique[values.codes[rows]]
        if rows.size == 0:
            raise InputError(f"Column {value_column!r} has no non-missing value.", Reason.EMPTY_INPUT)
        n_raters = max(len(raters.uniques), 1)
        pair_key = item_codes * n_raters + rater_codes
        keep_rows = _resolve_duplicates(pair_key, duplicates, rows, items, raters, row_labels)
        item_codes, rater_codes = item_codes[keep_rows], rater_codes[keep_rows]
        value_codes = value_codes[keep_rows]
        if shared_item_index:  # pools keep the index of the whole table, so items align by code
            item_labels = items.uniques
        else:
            item_labels, item_codes = _compact(items.uniques, item_codes)
        rater_labels, rater_codes = _compact(raters.uniques, rater_codes)
        return cls(item_codes, rater_codes, value_codes, item_labels=item_labels, rater_labels=rater_labels,
                   categories=cats, level=level, n_dropped_missing=int(missing_rows.size))

    # --------------------------------------------------------------- structure
    @property
    def n_ratings(self) -> int:
        """Number of judgements."""
        return int(self.item_codes.size)

    @property
    def n_items(self) -> int:
        """Size of the item index (for pools of :func:`ratings_by_pool`, the whole table's items)."""
        return len(self.item_labels)

    @property
    def n_rated_items(self) -> int:
        """Items with at least one rating in these Ratings."""
        return int((self.ratings_per_item > 0).sum())

    @property
    def n_raters(self) -> int:
        """Number of distinct raters."""
        return len(self.rater_labels)

    @property
    def n_categories(self) -> int:
        """Number of categories (explicit or observed)."""
        return len(self.categories)

    @property
    def is_numeric(self) -> bool:
        """True for interval and ratio levels (labels are numbers)."""
        return self.level in ("interval", "ratio")

    @cached_property
    def category_values(self) -> FloatArray:
        """Numeric position of each category.

        The category values themselves for interval/ratio levels, and the
        ranks 0..q-1 for nominal/ordinal levels (used by linear/quadratic weights).
        """
        if self.is_numeric:
            return np.asarray([float(c) for c in self.categories], dtype=np.float64)
        return np.arange(self.n_categories, dtype=np.float64)

    @cached_property
    def ratings_per_item(self) -> IntArray:
        """Number of ratings of each item, shape (n_items,)."""
        return np.bincount(self.item_codes, minlength=self.n_items).astype(np.int64)

    @cached_property
    def item_counts(self) -> IntArray:
        """Item x category counts ``n_ic``, shape (n_items, n_categories)."""
        cells = self.n_items * self.n_categories
        if cells > MAX_COUNT_CELLS:
            raise InputError(
                f"{self.n_items} items x {self.n_categories} categories is too many cells for count-based "
                "metrics; for continuous labels use level='interval' (moment-based).",
                Reason.TOO_MANY_CATEGORIES)
        flat = np.bincount(self.item_codes * self.n_categories + self.value_codes, minlength=cells)
        return flat.reshape(self.n_items, self.n_categories).astype(np.int64)

    @cached_property
    def rater_counts(self) -> IntArray:
        """Rater x category counts, shape (n_raters, n_categories)."""
        cells = self.n_raters * self.n_categories
        flat = np.bincount(self.rater_codes * self.n_categories + self.value_codes, minlength=cells)
        return flat.reshape(self.n_raters, self.n_categories).astype(np.int64)

    @cached_property
    def values(self) -> FloatArray:
        """Numeric value of each judgement (category values), shape (n_ratings,)."""
        return self.category_values[self.value_codes]

    @cached_property
    def item_moments(self) -> FloatArray:
        """Per-item (count, sum, sum of squares) of the values, shape (n_items, 3)."""
        return _moments(self.item_codes, self.values, self.n_items)

    @cached_property
    def moment_center(self) -> float:
        """An observed value subtracted before shift-invariant moment sums (avoids cancellation)."""
        return float(self.values[0])

    def centered_item_moments(self, center: float | None = None) -> FloatArray:
        """Per-item (count, sum, sum of squares) of ``values - center`` (default :attr:`moment_center`).

        Distance-based metrics with squared differences are shift-invariant; computing them on
        values centred at an observed value keeps ``n * sum_sq - sum**2`` exact (zero) on constant data.
        """
        shift = self.moment_center if center is None else center
        return _moments(self.item_codes, self.values - shift, self.n_items)

    @cached_property
    def rater_moments(self) -> FloatArray:
        """Per-rater (count, sum, sum of squares) of the values, shape (n_raters, 3)."""
        return _moments(self.rater_codes, self.values, self.n_raters)

    def subset_items(self, item_codes: npt.ArrayLike) -> Ratings:
        """Ratings restricted to the given item codes (codes and labels are kept)."""
        wanted = np.zeros(self.n_items, dtype=bool)
        wanted[np.asarray(item_codes, dtype=np.int64)] = True
        rows = wanted[self.item_codes]
        return Ratings(self.item_codes[rows], self.rater_codes[rows], self.value_codes[rows],
                       item_labels=self.item_labels, rater_labels=self.rater_labels,
                       categories=self.categories, level=self.level)

    def with_categories(self, categories: Sequence[Any]) -> Ratings:
        """The same judgements re-coded on a superset of the current categories."""
        position = {c: i for i, c in enumerate(categories)}
        missing = [c for c in self.categories if c not in position]
        if missing:
            raise InputError(f"Categories {missing} are not in the new category list {list(categories)}.",
                             Reason.UNKNOWN_CATEGORY, value=missing[0])
        remap = np.asarray([position[c] for c in self.categories], dtype=np.int64)
        return Ratings(self.item_codes, self.rater_codes, remap[self.value_codes], item_labels=self.item_labels,
                       rater_labels=self.rater_labels, categories=categories, level=self.level,
                       n_dropped_missing=self.n_dropped_missing)

    def __repr__(self) -> str:
        return (f"Ratings(level={self.level!r}, n_items={self.n_items}, n_raters={self.n_raters}, "
                f"n_ratings={self.n_ratings}, categories={list(self.categories)[:10]})")


def ratings_by_pool(data: Any, pool: str = "pool", item: str = "item_id", rater: str = "rater_id",
                    value: str = "label", *, level: Level = "nominal", categories: Sequence[Any] | None = None,
                    duplicates: DuplicatePolicy = "error", missing: MissingPolicy = "drop") -> dict[Any, Ratings]:
    """Split one long table with a pool/replication column into one `Ratings` per pool.

    All pools share one category list (explicit, or the union of observed labels) and one item index
    (every item of the table, rated by the pool or not), so cross-replication metrics align items by
    code without re-hashing ids. Each column is factorised once for the whole table.

    Examples
    --------
    >>> import labelgate as lg
    >>> data = {"item_id": [1, 1, 2, 2], "rater_id": ["a", "b", "a", "b"],
    ...         "label": ["x", "y", "x", "x"], "pool": ["crowd", "trusted", "crowd", "trusted"]}
    >>> pools = lg.ratings_by_pool(data)
    >>> sorted(pools), pools["crowd"].n_ratings
    (['crowd', 'trusted'], 2)
    """
    check_option(level, LEVELS, "level", "ratings_by_pool")
    columns = _column_names(data)
    for role, name in (("pool", pool), ("item", item), ("rater", rater), ("value", value)):
        if name not in columns:
            raise InputError(f"Column {name!r} (the {role} column) is missing; the data has columns "
                             f"{sorted(map(str, columns))}.", Reason.MISSING_COLUMN, column=name)
    if _n_rows(data, item) == 0:
        raise InputError("The ratings table is empty (0 rows).", Reason.EMPTY_INPUT)
    row_labels = getattr(data, "index", None)
    items, raters, values, pools = (_factorize(data[c]) for c in (item, rater, value, pool))
    _check_ids(((item, items), (rater, raters), (pool, pools)), row_labels)
    if categories is None:  # one category list for all pools: the union of the observed labels
        present = np.unique(values.codes[values.codes >= 0])
        categories, _ = _resolve_categories(values.uniques[present], None, level, value)
    result: dict[Any, Ratings] = {}
    positions = np.arange(len(pools.codes))
    for code, name in enumerate(pools.uniques):
        rows = pools.codes == code
        labels = positions[rows] if row_labels is None else np.asarray(row_labels)[rows]
        result[_python_scalar(name)] = Ratings._from_factorized(
            _Column(items.codes[rows], items.uniques), _Column(raters.codes[rows], raters.uniques),
            _Column(values.codes[rows], values.uniques), level=level, categories=categories,
            duplicates=duplicates, missing=missing, value_column=value, row_labels=labels,
            shared_item_index=True)
    return result


# ---------------------------------------------------------------------- helpers
def _column_names(data: Any) -> list[Any]:
    if hasattr(data, "columns"):
        return list(data.columns)
    if isinstance(data, Mapping):
        return list(data.keys())
    raise InputError(f"Long ratings must be a DataFrame or a mapping of columns; got {type(data).__name__}.",
                     Reason.EMPTY_INPUT)


def _check_ids(columns: Iterable[tuple[str, _Column]], row_labels: Any) -> None:
    """Raise on the first missing id, naming the column and the row."""
    for name, col in columns:
        bad = np.flatnonzero(col.codes < 0)
        if bad.size:
            row = _row_label(row_labels, bad[0])
            raise InputError(f"Column {name!r} has a missing id in {bad.size} row(s), first at row {row!r}.",
                             Reason.MISSING_ID, column=name, row=row)


def _n_rows(data: Any, column: str) -> int:
    return len(data[column])


def _factorize(column: Any) -> _Column:
    """Integer codes and uniques; missing (None / NaN / pd.NA) coded -1."""
    if hasattr(column, "factorize"):
        codes, uniques = column.factorize()
        return _Column(np.asarray(codes, dtype=np.int64), np.asarray(uniques, dtype=object))
    arr = np.asarray(column, dtype=object).ravel()
    missing = _is_missing(arr)
    codes = np.full(arr.size, -1, dtype=np.int64)
    present = arr[~missing]
    if present.size == 0:
        return _Column(codes, np.asarray([], dtype=object))
    try:
        uniques, inverse = np.unique(present, return_inverse=True)
    except TypeError:  # mixed, unorderable types: fall back to first-appearance order
        lookup: dict[Any, int] = {}
        inverse = np.asarray([lookup.setdefault(v, len(lookup)) for v in present], dtype=np.int64)
        uniques = np.asarray(list(lookup), dtype=object)
    codes[~missing] = inverse
    return _Column(codes, np.asarray(uniques, dtype=object))


def _count_table(data: Any, what: str) -> tuple[IntArray, list[Any] | None, list[Any] | None]:
    """A 2-D table of non-negative integer counts, with its row and column labels when it is a DataFrame."""
    rows: list[Any] | None = None
    columns: list[Any] | None = None
    if hasattr(data, "to_numpy") and hasattr(data, "columns"):
        rows = [_python_scalar(x) for x in data.index]
        columns = [_python_scalar(x) for x in data.columns]
        data = data.to_numpy()
    try:
        table = np.asarray(data, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"The {what} must hold numbers (counts).", Reason.NON_NUMERIC_VALUE) from None
    if table.ndim != 2 or table.size == 0:
        raise InputError(f"The {what} must be a non-empty 2-D table; got shape {table.shape}.", Reason.EMPTY_INPUT)
    bad = np.argwhere(~np.isfinite(table) | (table < 0) | (table != np.round(table)))
    if bad.size:
        i, j = (int(v) for v in bad[0])
        value = float(table[i, j])
        raise InputError(f"The {what} must hold non-negative integer counts; cell ({i}, {j}) is {value!r}.",
                         Reason.NON_NUMERIC_VALUE, row=i, value=value)
    if table.sum() == 0:
        raise InputError(f"The {what} has no rating (every count is 0).", Reason.EMPTY_INPUT)
    return table.astype(np.int64), rows, columns


def _count_categories(categories: Sequence[Any] | None, q: int, level: Level, function: str) -> tuple[Any, ...]:
    """The categories of a count table's q columns: validated like an explicit list, default ``0..q-1``."""
    given = list(range(q)) if categories is None else list(categories)
    if len(given) != q:
        raise ParameterError(f"{function}: 'categories' has {len(given)} entries but the table has {q} category "
                             "columns.", parameter="categories")
    cats, _ = _resolve_categories(np.asarray(given, dtype=object), given, level, "categories")
    return cats


def _is_missing(arr: np.ndarray) -> npt.NDArray[np.bool_]:
    flat = arr.ravel()
    out = np.fromiter((v is None or (isinstance(v, float) and math.isnan(v)) or _is_na(v) for v in flat),
                      dtype=bool, count=flat.size)
    return out.reshape(arr.shape)


def _is_na(value: Any) -> bool:
    # pandas.NA / NaT without importing pandas: they refuse to be truth-tested
    # or compare unequal to themselves.
    if isinstance(value, (str, bytes, int, bool)):
        return False
    try:
        return bool(value != value)
    except TypeError:
        return True


def _row_label(row_labels: Any, position: int) -> Any:
    if row_labels is None:
        return int(position)
    return _python_scalar(row_labels[int(position)])


def _python_scalar(value: Any) -> Any:
    return value.item() if hasattr(value, "item") and getattr(value, "ndim", 1) == 0 else value


def _resolve_categories(uniques: np.ndarray, categories: Sequence[Any] | None, level: Level,
                        value_column: str) -> tuple[tuple[Any, ...], list[int]]:
    """Return the category tuple and, for each unique value, its category code (-1 = unknown)."""
    observed = [_python_scalar(u) for u in uniques]
    if level in ("interval", "ratio"):
        observed = [_as_number(v, value_column, level) for v in observed]
    if categories is None:
        cats = _sorted_categories(observed, level, value_column)
    else:
        cats = tuple(_python_scalar(c) for c in categories)
        if len(set(cats)) != len(cats):
            raise ParameterError(f"The 'categories' list has duplicates: {list(cats)}.", parameter="categories")
        if level in ("interval", "ratio"):
            cats = tuple(_as_number(c, "categories", level) for c in cats)
        if not cats:
            raise ParameterError("The 'categories' list is empty.", parameter="categories")
    if level == "ratio" and any(c < 0 for c in cats):
        raise InputError(f"Ratio-level values must be non-negative; got {min(cats)!r}.",
                         Reason.NON_NUMERIC_VALUE, column=value_column, value=min(cats))
    position = {c: i for i, c in enumerate(cats)}
    return cats, [position.get(v, -1) for v in observed]


def _sorted_categories(observed: list[Any], level: Level, value_column: str) -> tuple[Any, ...]:
    unique = list(dict.fromkeys(observed))
    try:
        return tuple(sorted(unique))
    except TypeError:
        if level == "ordinal":
            raise InputError(f"Column {value_column!r} mixes value types that cannot be ordered; pass an "
                             "explicit ordered 'categories' list for an ordinal level.",
                             Reason.UNSORTABLE_CATEGORIES, column=value_column) from None
        return tuple(sorted(unique, key=lambda v: (type(v).__name__, str(v))))


def _as_number(value: Any, column: str, level: str) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise InputError(f"Column {column!r} has the non-numeric value {value!r}, but level={level!r} "
                             "needs numbers.", Reason.NON_NUMERIC_VALUE, column=column, value=value) from None
        if isinstance(value, str):
            raise InputError(f"Column {column!r} has the string value {value!r}, but level={level!r} needs "
                             "numbers; convert the column first.", Reason.NON_NUMERIC_VALUE,
                             column=column, value=value)
        value = number
    if not math.isfinite(float(value)):
        raise InputError(f"Column {column!r} has the non-finite value {value!r}.", Reason.NON_NUMERIC_VALUE,
                         column=column, value=value)
    as_int = int(value)
    return as_int if as_int == value else float(value)


def _resolve_duplicates(pair_key: IntArray, policy: DuplicatePolicy, rows: IntArray, items: _Column,
                        raters: _Column, row_labels: Any) -> IntArray:
    plain = np.sort(pair_key)  # an unstable sort is enough to tell whether any pair repeats
    if not (plain[1:] == plain[:-1]).any():
        return np.arange(pair_key.size, dtype=np.int64)
    order = np.argsort(pair_key, kind="stable")
    sorted_key = pair_key[order]
    repeated = np.flatnonzero(sorted_key[1:] == sorted_key[:-1])
    if policy == "error":
        first, second = order[repeated[0]], order[repeated[0] + 1]
        item = items.uniques[items.codes[rows[first]]]
        rater = raters.uniques[raters.codes[rows[first]]]
        raise InputError(
            f"Rater {_python_scalar(rater)!r} judged item {_python_scalar(item)!r} more than once (rows "
            f"{_row_label(row_labels, rows[first])!r} and {_row_label(row_labels, rows[second])!r}; "
            f"{repeated.size} duplicate judgement(s) in all). Pass duplicates='first' or 'last' to keep one.",
            Reason.DUPLICATE_JUDGEMENT, item=_python_scalar(item), rater=_python_scalar(rater),
            row=_row_label(row_labels, rows[first]))
    starts = np.concatenate(([True], sorted_key[1:] != sorted_key[:-1]))
    if policy == "first":
        chosen = order[starts]
    else:
        ends = np.concatenate((sorted_key[1:] != sorted_key[:-1], [True]))
        chosen = order[ends]
    return np.sort(chosen)


def _compact(labels: np.ndarray, codes: IntArray) -> tuple[np.ndarray, IntArray]:
    """Drop labels that no remaining judgement uses and renumber the codes (O(N), no sort)."""
    used = np.bincount(codes, minlength=len(labels)) > 0
    if used.all():
        return np.asarray(labels, dtype=object), codes
    renumber = np.cumsum(used) - 1
    return np.asarray(labels, dtype=object)[used], renumber[codes].astype(np.int64)

def _moments(codes: IntArray, values: FloatArray, n: int) -> FloatArray:
    out = np.empty((n, 3), dtype=np.float64)
    out[:, 0] = np.bincount(codes, minlength=n)
    out[:, 1] = np.bincount(codes, weights=values, minlength=n)
    out[:, 2] = np.bincount(codes, weights=values * values, minlength=n)
    return out


def align_items(x: Ratings, y: Ratings) -> tuple[IntArray, IntArray]:
    """Codes, in ``x`` and in ``y``, of the items rated in both (same order).

    Items are matched by code when the two share one item index (as produced
    by :func:`ratings_by_pool`), by id otherwise.
    """
    in_x = np.flatnonzero(x.ratings_per_item > 0)
    if x.item_labels is y.item_labels:
        common = in_x[y.ratings_per_item[in_x] > 0]
        return common, common
    lookup = {label: i for i, label in enumerate(y.item_labels.tolist())}
    y_codes = np.fromiter((lookup.get(label, -1) for label in x.item_labels[in_x].tolist()),
                          dtype=np.int64, count=in_x.size)
    keep = y_codes >= 0
    keep[keep] &= y.ratings_per_item[y_codes[keep]] > 0
    return in_x[keep], y_codes[keep]


def common_categories(x: Ratings, y: Ratings) -> tuple[Ratings, Ratings]:
    """Re-code two replications on one category list (the union, ordered)."""
    if x.level != y.level:
        raise InputError(f"The two replications have different levels ({x.level!r} vs {y.level!r}).",
                         Reason.INCOMPATIBLE_RATINGS)
    if x.categories == y.categories:
        return x, y
    merged = list(dict.fromkeys([*x.categories, *y.categories]))
    try:
        merged = sorted(merged)
    except TypeError:
        if x.level == "ordinal":
            raise InputError("The two ordinal replications have different, unorderable category lists; "
                             "pass the same explicit 'categories' to both.", Reason.INCOMPATIBLE_RATINGS) from None
    return x.with_categories(merged), y.with_categories(merged)


def as_ratings_list(values: Iterable[Ratings]) -> list[Ratings]:
    """Materialise an iterable of `Ratings` (helper for type checkers)."""
    return list(values)
