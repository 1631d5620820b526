"""Category lists: resolving observed labels against an explicit or sorted list, and count tables.

numpy only. Used by every `Ratings` constructor and by the Dask build, which resolves categories the same way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from labelgate.core.column import python_scalar
from labelgate.errors import InputError, ParameterError, Reason

Level = Literal["nominal", "ordinal", "interval", "ratio"]
IntArray = npt.NDArray[np.int64]


def count_table(data: Any, what: str, fractional: bool = False,
                ) -> tuple[npt.NDArray[Any], list[Any] | None, list[Any] | None]:
    """A 2-D table of non-negative integer counts, with its row and column labels when it is a DataFrame.

    ``fractional``: non-integer (weighted) counts are accepted too; the table is then float64 unless every count
    is an integer.
    """
    rows: list[Any] | None = None
    columns: list[Any] | None = None
    if hasattr(data, "to_numpy") and hasattr(data, "columns"):
        rows = [python_scalar(x) for x in data.index]
        columns = [python_scalar(x) for x in data.columns]
        data = data.to_numpy()
    try:
        table = np.asarray(data, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"The {what} must hold numbers (counts).", Reason.NON_NUMERIC_VALUE) from None
    if table.ndim != 2 or table.size == 0:
        raise InputError(f"The {what} must be a non-empty 2-D table; got shape {table.shape}.", Reason.EMPTY_INPUT)
    whole = table == np.round(table)
    bad = np.argwhere(~np.isfinite(table) | (table < 0) | (~whole if not fractional else False))
    if bad.size:
        i, j = (int(v) for v in bad[0])
        value = float(table[i, j])
        kind = "non-negative finite" if fractional else "non-negative integer"
        raise InputError(f"The {what} must hold {kind} counts; cell ({i}, {j}) is {value!r}.",
                         Reason.NON_NUMERIC_VALUE, row=i, value=value)
    if table.sum() == 0:
        raise InputError(f"The {what} has no rating (every count is 0).", Reason.EMPTY_INPUT)
    return (table.astype(np.int64) if whole.all() else table), rows, columns


def contingency_judgements(table: Any, categories: Sequence[Any] | None, level: Level, raters: tuple[Any, Any],
                           ) -> dict[str, Any]:
    """The keyword arguments of ``Ratings(...)`` for two raters' q x q contingency table: one item per counted
    pair, judged by both (``Ratings.from_contingency``).

    Raises ``InputError`` on a table that is not square, not of non-negative integer counts, or whose row and
    column labels differ; ``ParameterError`` on ``categories`` of the wrong length and on raters that are not two
    distinct labels.
    """
    counts, row_labels, column_labels = count_table(table, "contingency table")
    if counts.shape[0] != counts.shape[1]:
        raise InputError(f"A contingency table must be square (q x q); got {counts.shape[0]} x "
                         f"{counts.shape[1]}.", Reason.EMPTY_INPUT)
    if categories is None and row_labels is not None:
        if list(row_labels) != list(column_labels or []):
            raise InputError(f"The contingency table's rows {list(row_labels)} and columns "
                             f"{list(column_labels or [])} must list the same categories in the same order "
                             "(or pass 'categories').", Reason.UNKNOWN_CATEGORY)
        categories = row_labels
    cats = count_categories(categories, counts.shape[1], level, "Ratings.from_contingency")
    if len(set(map(python_scalar, raters))) != 2:
        raise ParameterError(f"'raters' must be two distinct labels; got {raters!r}.", parameter="raters")
    q = len(cats)
    cell = np.repeat(np.arange(q * q, dtype=np.int64), counts.ravel())  # one entry per item
    n = cell.size
    items = np.arange(n, dtype=np.int64)
    return {"item_codes": np.concatenate([items, items]), "rater_codes": np.repeat(np.arange(2, dtype=np.int64), n),
            "value_codes": np.concatenate([cell // q, cell % q]), "item_labels": items.astype(object),
            "rater_labels": np.asarray([python_scalar(x) for x in raters], dtype=object), "categories": cats,
            "level": level}


def count_rows(counts: Any, categories: Sequence[Any] | None, level: Level,
               ) -> tuple[IntArray, IntArray, npt.NDArray[Any], np.ndarray, tuple[Any, ...]]:
    """The non-zero cells of an items x categories count table: ``(item codes, category codes, counts, item
    labels, categories)``, rows without a rating dropped (the aggregated rows of ``Ratings.from_counts``).

    The counts are integers, or floats when the table holds a non-integer (weighted) count.

    Raises ``InputError`` on a table that is not one of non-negative finite counts and on an item id repeated in
    a DataFrame's index; ``ParameterError`` on ``categories`` of the wrong length or type.
    """
    table, row_labels, column_labels = count_table(counts, "count table", fractional=True)
    cats = count_categories(column_labels if categories is None else categories, table.shape[1], level,
                            "Ratings.from_counts")
    rated = table.sum(axis=1) > 0
    labels = np.empty(rated.size, dtype=object)  # filled one by one: ids may be tuples (a MultiIndex)
    seen: set[Any] = set()
    for position, label in enumerate(range(rated.size) if row_labels is None else row_labels):
        if label in seen:
            raise InputError(f"The count table's index has the item id {label!r} more than once; item ids "
                             "must be unique (reset the index, or pass the counts as an array).",
                             Reason.MISSING_ID, value=label)
        seen.add(label)
        labels[position] = label
    table = table[rated]
    items, cells = np.nonzero(table)
    return items, cells, table[items, cells], labels[rated], cats


def count_categories(categories: Sequence[Any] | None, q: int, level: Level, function: str) -> tuple[Any, ...]:
    """The categories of a count table's q columns: validated like an explicit list, default ``0..q-1``."""
    given = list(range(q)) if categories is None else list(categories)
    if len(given) != q:
        raise ParameterError(f"{function}: 'categories' has {len(given)} entries but the table has {q} category "
                             "columns.", parameter="categories")
    cats, _ = resolve_categories(np.asarray(given, dtype=object), given, level, "categories")
    return cats


def resolve_categories(uniques: np.ndarray, categories: Sequence[Any] | None, level: Level,
                        value_column: str) -> tuple[tuple[Any, ...], list[int]]:
    """Return the category tuple and, for each unique value, its category code (-1 = unknown)."""
    observed = [python_scalar(u) for u in uniques]
    if level in ("interval", "ratio"):
        observed = [_as_number(v, value_column, level) for v in observed]
    if categories is None:
        cats = _sorted_categories(observed, level, value_column)
    else:
        cats = tuple(python_scalar(c) for c in categories)
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
    return tuple(sorted_distinct(observed, ordinal=level == "ordinal", column=value_column))


def sorted_distinct(values: Iterable[Any], *, ordinal: bool = False, column: str = "") -> list[Any]:
    """Sorted distinct values; mixed types (a SQLite column may hold them) by type name, then text.

    Mixed types cannot be ordered for an ordinal level: :class:`~labelgate.errors.InputError`
    (``unsortable_categories``) names ``column``.
    """
    unique = list(dict.fromkeys(values))
    try:
        return sorted(unique)
    except TypeError:
        if ordinal:
            raise InputError(f"Column {column!r} mixes value types that cannot be ordered; pass an "
                             "explicit ordered 'categories' list for an ordinal level.",
                             Reason.UNSORTABLE_CATEGORIES, column=column) from None
        return sorted(unique, key=lambda v: (type(v).__name__, str(v)))


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
