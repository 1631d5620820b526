"""From factorised columns to the arrays of a `Ratings`: missing values, categories, duplicates, compaction.

numpy only. The steps avoid copies the input does not need: without missing labels no row is gathered,
and without duplicate judgements the duplicate check is one sort of an int64 key (no argsort).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from labelgate.core.categories import Level, resolve_categories
from labelgate.core.column import Column, int64_codes, python_scalar
from labelgate.core.index import LabelIndex
from labelgate.core.strings import BLOCK
from labelgate.errors import InputError, Reason

IntArray = npt.NDArray[np.int64]
DuplicatePolicy = Literal["error", "first", "last"]
MissingPolicy = Literal["drop", "error"]


class RowSubset:
    """Labels of a subset of a table's rows (a pool), looked up only when an error names a row.

    ``subset[p]`` is the label of the table row ``positions[p]`` (its position when the table has no index).
    """

    def __init__(self, labels: Any, positions: IntArray) -> None:
        self.labels, self.positions = labels, positions

    def __getitem__(self, position: int) -> Any:
        row = int(self.positions[position])
        return row if self.labels is None else self.labels[row]


def column_names(data: Any) -> list[Any]:
    """The column names of a DataFrame, an Arrow table or a mapping of columns."""
    if hasattr(data, "columns") and not hasattr(data, "column_names"):
        return list(data.columns)
    if hasattr(data, "column_names"):  # an Arrow table: ``.columns`` are the arrays themselves
        return list(data.column_names)
    if isinstance(data, Mapping):
        return list(data.keys())
    raise InputError(f"Long ratings must be a DataFrame or a mapping of columns; got {type(data).__name__}.",
                     Reason.EMPTY_INPUT)


def require_columns(data: Any, roles: Iterable[tuple[str, str]]) -> None:
    """Raise on the first missing column (naming its role) and on an empty table."""
    columns = column_names(data)
    roles = list(roles)
    for role, name in roles:
        if name not in columns:
            raise InputError(f"Column {name!r} (the {role} column) is missing; the data has columns "
                             f"{sorted(map(str, columns))}.", Reason.MISSING_COLUMN, column=name)
    if len(data[roles[0][1]]) == 0:
        raise InputError("The ratings table is empty (0 rows).", Reason.EMPTY_INPUT)


def check_ids(columns: Iterable[tuple[str, Column]], row_labels: Any) -> None:
    """Raise on the first missing id, naming the column and the row."""
    for name, col in columns:
        if col.codes.size == 0 or int(col.codes.min()) >= 0:  # the usual case: one reduction, no mask
            continue
        bad = np.flatnonzero(col.codes < 0)
        if bad.size:
            row = row_label(row_labels, bad[0])
            raise InputError(f"Column {name!r} has a missing id in {bad.size} row(s), first at row {row!r}.",
                             Reason.MISSING_ID, column=name, row=row)


def row_label(row_labels: Any, position: int) -> Any:
    """The label of row ``position`` (the position itself without labels)."""
    if row_labels is None:
        return int(position)
    return python_scalar(row_labels[int(position)])


def assemble(items: Column, raters: Column, values: Column, *, level: Level, categories: Sequence[Any] | None,
             duplicates: DuplicatePolicy, missing: MissingPolicy, value_column: str, row_labels: Any,
             shared_item_index: LabelIndex | None = None, every_id_used: bool = False) -> dict[str, Any]:
    """The keyword arguments of ``Ratings(...)`` from three factorised columns of the same rows.

    ``shared_item_index``: the item index of the whole table, which every pool keeps (else the items the rows
    use, compacted). ``every_id_used``: the id columns were factorised from these very rows (``factorize`` keeps
    only the values the rows hold), so while no row is dropped the codes need no compaction. The item ids are
    passed as a :class:`LabelIndex`, made into Python objects when first read. The columns' codes become the
    build's own: int64 ones are renumbered in place and kept by the `Ratings`.
    """
    dropped = values.codes < 0
    n_missing = int(np.count_nonzero(dropped))
    if n_missing and missing == "error":
        row = row_label(row_labels, int(np.argmax(dropped)))
        raise InputError(f"Column {value_column!r} has a missing value in {n_missing} row(s), "
                         f"first at row {row!r}.", Reason.MISSING_VALUE, column=value_column, row=row)
    cats, value_map = resolve_categories(values.uniques, categories, level, value_column)
    code_of_unique = np.asarray(value_map, dtype=np.int64)
    bad_unique = code_of_unique < 0
    if bad_unique.any():
        first_bad = int(np.flatnonzero(bad_unique[np.maximum(values.codes, 0)] & ~dropped)[0])
        bad_value = values.uniques[values.codes[first_bad]]
        raise InputError(f"Column {value_column!r} has value {bad_value!r} at row "
                         f"{row_label(row_labels, first_bad)!r}, which is not one of the categories "
                         f"{list(cats)}.", Reason.UNKNOWN_CATEGORY, column=value_column,
                         row=row_label(row_labels, first_bad), value=bad_value)
    rows: IntArray | None = None  # positions of the kept rows; None: every row, in order (no gather)
    if n_missing:
        rows = np.flatnonzero(~dropped)
        if rows.size == 0:
            raise InputError(f"Column {value_column!r} has no non-missing value.", Reason.EMPTY_INPUT)
    del dropped  # freed before the duplicate check, the peak of the build
    # the ids as int64 (a column may keep narrower codes); the labels' codes are widened by the Ratings
    item_codes, rater_codes = int64_codes(items.codes, rows), int64_codes(raters.codes, rows)
    value_codes = values.codes if rows is None else values.codes[rows]
    if not np.array_equal(code_of_unique, np.arange(code_of_unique.size)):  # sorted uniques: the codes stand
        value_codes = code_of_unique[value_codes]
    kept = resolve_duplicates(item_codes, rater_codes, max(raters.n_uniques, 1), duplicates, rows, items,
                              raters, row_labels)
    if kept is not None:
        item_codes, rater_codes, value_codes = item_codes[kept], rater_codes[kept], value_codes[kept]
    every_used = every_id_used and rows is None and kept is None  # a dropped row may leave an id unused

    def compacted(column: Column, codes: IntArray) -> tuple[npt.NDArray[np.bool_] | None, IntArray]:
        return (None, codes) if every_used else compact_codes(column.n_uniques, codes, in_place=True)

    item_index: LabelIndex
    if shared_item_index is not None:  # pools keep the index of the whole table, so items align by code
        item_index = shared_item_index
    else:
        used, item_codes = compacted(items, item_codes)
        item_index = items.label_index(used)  # the ids as Python objects are made when first read
    used, rater_codes = compacted(raters, rater_codes)
    return {"item_codes": item_codes, "rater_codes": rater_codes, "value_codes": value_codes,
            "item_labels": item_index, "rater_labels": raters.label_index(used).labels,
            "categories": cats, "level": level, "n_dropped_missing": n_missing}


def slots_within_items(items: Column, values: Column) -> tuple[IntArray, int]:
    """Each row's position among its item's labelled rows, in row order (a stable sort), and the largest count.

    The placeholder raters of a long table without a rater column; a row without a label (dropped by the build)
    leaves no gap in its item's numbering.
    """
    item_codes = np.where(values.codes >= 0, np.asarray(items.codes, dtype=np.int64), items.n_uniques)
    order = np.argsort(item_codes, kind="stable")
    sorted_items = item_codes[order]
    per_item = np.bincount(sorted_items, minlength=items.n_uniques + 1)
    slots = np.empty(item_codes.size, dtype=np.int64)
    slots[order] = np.arange(item_codes.size, dtype=np.int64) - (np.cumsum(per_item) - per_item)[sorted_items]
    return slots, int(per_item[:-1].max(initial=0))


def resolve_duplicates(item_codes: IntArray, rater_codes: IntArray, n_raters: int, policy: DuplicatePolicy,
                       rows: IntArray | None, items: Column, raters: Column, row_labels: Any) -> IntArray | None:
    """Positions of the judgements to keep; None when no (item, rater) pair repeats.

    ``rows`` maps these positions to table rows (None: the identity).
    """
    if not _any_repeated_pair(item_codes, rater_codes, n_raters):
        return None
    pair_key = item_codes * n_raters + rater_codes  # duplicates (rare): the key again, in row order
    order = np.argsort(pair_key, kind="stable")
    sorted_key = pair_key[order]
    repeated = np.flatnonzero(sorted_key[1:] == sorted_key[:-1])
    if policy == "error":
        first, second = order[repeated[0]], order[repeated[0] + 1]
        if rows is not None:
            first, second = rows[first], rows[second]
        item = python_scalar(items.uniques[items.codes[first]])
        rater = python_scalar(raters.uniques[raters.codes[first]])
        raise InputError(
            f"Rater {rater!r} judged item {item!r} more than once (rows {row_label(row_labels, first)!r} and "
            f"{row_label(row_labels, second)!r}; {repeated.size} duplicate judgement(s) in all). Pass "
            "duplicates='first' or 'last' to keep one.", Reason.DUPLICATE_JUDGEMENT, item=item, rater=rater,
            row=row_label(row_labels, first))
    starts = np.concatenate(([True], sorted_key[1:] != sorted_key[:-1]))
    if policy == "first":
        chosen = order[starts]
    else:
        ends = np.concatenate((sorted_key[1:] != sorted_key[:-1], [True]))
        chosen = order[ends]
    return np.sort(chosen)


def _any_repeated_pair(item_codes: IntArray, rater_codes: IntArray, n_raters: int) -> bool:
    """Whether an (item, rater) pair occurs twice: one key per judgement, ``item * n_raters + rater``, sorted in
    place (an unstable SIMD sort is enough to tell). The key is uint32 when every key fits (4 bytes a row, not 8).
    """
    n_keys = (int(item_codes.max()) + 1) * n_raters if item_codes.size else 0
    pair_key: npt.NDArray[np.integer[Any]]
    if n_keys <= 2**32 and n_raters < 2**32:  # every key, and the rater count itself, fit uint32
        pair_key = item_codes.astype(np.uint32)
        pair_key *= np.uint32(n_raters)
        np.add(pair_key, rater_codes, out=pair_key, casting="unsafe")  # every sum < n_keys <= 2**32
    else:
        pair_key = item_codes * n_raters + rater_codes
    pair_key.sort()
    for start in range(0, pair_key.size, BLOCK):  # neighbours compared block by block: no n-sized mask
        block = pair_key[start:start + BLOCK + 1]
        if (block[1:] == block[:-1]).any():
            return True
    return False


def compact_codes(n_labels: int, codes: IntArray, *, in_place: bool = False,
                  ) -> tuple[npt.NDArray[np.bool_] | None, IntArray]:
    """``(used, codes)``: which of ``n_labels`` labels a code uses (None: all of them) and the codes renumbered
    over the used labels only.

    ``in_place``: ``codes`` is the caller's own array (a build's, which no one else reads), renumbered block by
    block where it lies: the pools of a table use part of its raters each, and a new row-sized array per pool
    would cost more to first touch than the pass that fills it.
    """
    used = np.bincount(codes, minlength=n_labels) > 0
    if used.all():
        return None, codes
    renumber = np.cumsum(used) - 1
    if not in_place:
        return used, renumber[codes]
    for start in range(0, codes.size, BLOCK):
        codes[start:start + BLOCK] = renumber[codes[start:start + BLOCK]]
    return used, codes
