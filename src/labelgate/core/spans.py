r"""Text spans as unit judgements: every position of a document is a unit, labelled by the span that covers it.

A span table has one row per span: the document (item), the rater, end-exclusive offsets ``[start, end)``, the
span's label and the document's length. A rater who annotated a document and marked nothing gives one row with an
empty start and end, so that "found nothing" counts. Each rater who annotated a document judges every position
of it (a character, or a token with ``unit="token"``): the label of the span covering it, or ``"O"`` (outside).
Where spans of one rater with *different* labels overlap, that position's judgement is the set of their labels
and the whole table becomes set-valued (level ``"set"``, Jaccard distance; ``"O"`` is then the empty set).

Categorical unit judgements (no overlap of different labels) are a
:class:`~labelgate.core.spanunits.SpanUnitRatings`: their item x category and rater x category counts — all the
point estimates of the coefficients read — come from where the spans begin and end, and the per-judgement codes are
made only when a metric reads single judgements (bootstrap blocks, diagnostics): the same units and numbers, without
a pass over the judgements for a point estimate. The expansion is vectorised: the judgements of a (document,
rater) pair are one ``repeat`` of its offset plus a running position, filled block by block, and the spans fill
their ranges with one gather; no Python loop runs per character, per span or per document (only per document for
``unit="token"`` with texts split at whitespace).

numpy only.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from labelgate.core.build import check_ids, require_columns, row_label
from labelgate.core.column import Column, python_scalar
from labelgate.core.columns import factorize
from labelgate.core.index import LabelIndex
from labelgate.core.ratings import MULTI_LABEL, IntArray, Ratings
from labelgate.core.sets import SetRatings, set_ratings_type, set_sort_key
from labelgate.core.spanunits import SpanUnitRatings, UnitPlan, mixed_labels
from labelgate.errors import InputError, ParameterError, Reason, check_option

SpanUnit = Literal["char", "token"]
OUTSIDE = "O"
_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class SpanColumns:
    """The column names of a span table (the keyword arguments of :meth:`Ratings.from_spans`)."""

    item: str = "item_id"
    rater: str = "rater_id"
    start: str = "start"
    end: str = "end"
    label: str = "label"
    length: str = "length"
    tokens: str | None = None


@dataclass
class _Table:
    """A span table read and checked: per row its pair (document, rater), its unit range and label code."""

    items: Column
    raters: Column
    row_item: IntArray
    row_rater: IntArray
    marked: npt.NDArray[np.bool_]  # the row is a span (not "annotated, marked nothing")
    first: IntArray  # the span's first unit (position or token index) in its document
    stop: IntArray  # one past its last unit
    label_code: IntArray  # 0..K-1 for spans, -1 for empty rows
    labels: list[Any]
    units: IntArray  # units per document (characters or tokens)


def float_column(column: Any, name: str) -> npt.NDArray[np.float64]:
    """A numeric column as float64 with NaN for missing values (pandas nullable, Arrow, lists with None)."""
    if hasattr(column, "to_numpy"):
        try:
            return np.asarray(column.to_numpy(dtype=np.float64, na_value=np.nan), dtype=np.float64)
        except TypeError:
            column = column.to_numpy()
        except ValueError:
            pass
    try:
        return np.asarray(column, dtype=np.float64)
    except (TypeError, ValueError):
        out = np.empty(len(column), dtype=np.float64)
        for k, v in enumerate(column):
            try:
                out[k] = np.nan if v is None or v != v else float(v)
            except (TypeError, ValueError):
                raise InputError(f"Column {name!r} holds the non-numeric value {v!r} at row {k}.",
                                 Reason.NON_NUMERIC_VALUE, column=name, row=k, value=v) from None
        return out


def _offsets(values: npt.NDArray[np.float64], rows: npt.NDArray[np.bool_], name: str, row_labels: Any) -> IntArray:
    """Whole non-negative offsets on ``rows`` (0 elsewhere)."""
    bad = rows & ((values != np.round(values)) | (values < 0) | ~np.isfinite(values))
    if bad.any():
        k = int(np.argmax(bad))
        raise InputError(f"Column {name!r} must hold whole non-negative offsets; row {row_label(row_labels, k)!r} "
                         f"has {float(values[k])!r}.", Reason.NON_NUMERIC_VALUE, column=name,
                         row=row_label(row_labels, k), value=float(values[k]))
    return np.where(rows, values, 0).astype(np.int64)


def _per_item(values: npt.NDArray[np.float64], row_item: IntArray, n_items: int, name: str, items: Column,
              row_labels: Any) -> npt.NDArray[np.float64]:
    """One value per document from its rows: every row of a document must carry the same value."""
    order = np.lexsort((values, row_item))
    first = np.full(n_items, np.nan)
    last = np.full(n_items, np.nan)
    first[row_item[order[::-1]]] = values[order[::-1]]
    last[row_item[order]] = values[order]
    differ = ~((first == last) | (np.isnan(first) & np.isnan(last)))
    if differ.any():
        k = int(np.argmax(differ))
        raise InputError(f"Column {name!r} has different values ({first[k]!r} and {last[k]!r}) for document "
                         f"{python_scalar(items.uniques[k])!r}; the text length is one per document.",
                         Reason.INCOMPLETE_DESIGN, column=name, item=python_scalar(items.uniques[k]))
    if np.isnan(first).any():
        k = int(np.argmax(np.isnan(first)))
        raise InputError(f"Column {name!r} has no value for document {python_scalar(items.uniques[k])!r}; each "
                         "document needs its text length.", Reason.MISSING_VALUE, column=name,
                         item=python_scalar(items.uniques[k]))
    del row_labels
    return first


def _token_offsets(cell: Any, item: Any, column: str) -> tuple[IntArray, IntArray]:
    """A document's tokens: (starts, ends) from a sequence of offset pairs, or the words of its text."""
    if isinstance(cell, str):
        words = [m.span() for m in _WORD.finditer(cell)]
        pairs = np.asarray(words, dtype=np.int64).reshape(-1, 2)
    else:
        try:
            pairs = np.asarray([list(p) for p in cell], dtype=np.int64).reshape(-1, 2)
        except (TypeError, ValueError):
            raise InputError(f"Column {column!r} must hold, per document, a list of (start, end) token offsets or "
                             f"the text; document {item!r} has {cell!r}.", Reason.UNREADABLE_INPUT,
                             column=column, item=item) from None
    starts, ends = pairs[:, 0], pairs[:, 1]
    if (ends <= starts).any() or (starts[1:] < ends[:-1]).any() or (starts < 0).any():
        raise InputError(f"The tokens of document {item!r} (column {column!r}) must be non-empty, ordered and not "
                         "overlap.", Reason.UNREADABLE_INPUT, column=column, item=item)
    return starts, ends


def read_spans(data: Any, names: SpanColumns, unit: str, function: str) -> _Table:
    """Read and check a span table (every error names the column and the row or document)."""
    check_option(unit, ("char", "token"), "unit", function)
    roles = [("item", names.item), ("rater", names.rater), ("start", names.start), ("end", names.end),
             ("label", names.label), ("length", names.length)]
    if unit == "token":
        if names.tokens is None:
            raise ParameterError(f"{function}: unit='token' needs tokens= (a column with each document's token "
                                 "offsets or its text).", parameter="tokens")
        roles.append(("tokens", names.tokens))
    require_columns(data, roles)
    row_labels = getattr(data, "index", None)
    items, raters = factorize(data[names.item]), factorize(data[names.rater])
    check_ids(((names.item, items), (names.rater, raters)), row_labels)
    row_item = items.codes.astype(np.int64)
    row_rater = raters.codes.astype(np.int64)
    start, end = float_column(data[names.start], names.start), float_column(data[names.end], names.end)
    no_start, no_end = np.isnan(start), np.isnan(end)
    half = no_start != no_end
    if half.any():
        k = int(np.argmax(half))
        raise InputError(f"Row {row_label(row_labels, k)!r} has a start without an end or an end without a start "
                         f"(columns {names.start!r}, {names.end!r}); leave both empty for 'marked nothing'.",
                         Reason.MISSING_VALUE, column=names.start if no_start[k] else names.end,
                         row=row_label(row_labels, k))
    marked = ~no_start
    first_char = _offsets(start, marked, names.start, row_labels)
    stop_char = _offsets(end, marked, names.end, row_labels)
    empty = marked & (stop_char <= first_char)
    if empty.any():
        k = int(np.argmax(empty))
        raise InputError(f"Row {row_label(row_labels, k)!r} has the empty or reversed span [{first_char[k]}, "
                         f"{stop_char[k]}) (end-exclusive offsets: end > start).", Reason.NON_NUMERIC_VALUE,
                         column=names.end, row=row_label(row_labels, k))
    n_items = items.n_uniques
    length = _per_item(float_column(data[names.length], names.length), row_item, n_items, names.length, items,
                       row_labels)
    length_i = _offsets(length, np.ones(n_items, dtype=bool), names.length, None)
    beyond = marked & (stop_char > length_i[row_item])
    if beyond.any():
        k = int(np.argmax(beyond))
        raise InputError(f"Row {row_label(row_labels, k)!r}: the span [{first_char[k]}, {stop_char[k]}) ends past "
                         f"the document's length {int(length_i[row_item[k]])}.", Reason.NON_NUMERIC_VALUE,
                         column=names.end, row=row_label(row_labels, k))
    label_code, labels = code_region_labels(data[names.label], marked, names.label, row_labels, "span",
                                            OUTSIDE, "outside every span")
    if unit == "char":
        return _Table(items, raters, row_item, row_rater, marked, first_char, stop_char, label_code, labels,
                      length_i)
    return _tokenised(data, names, items, row_item, row_rater, raters, marked, first_char, stop_char, label_code,
                      labels, length_i)


def _tokenised(data: Any, names: SpanColumns, items: Column, row_item: IntArray, row_rater: IntArray,
               raters: Column, marked: npt.NDArray[np.bool_], first_char: IntArray, stop_char: IntArray,
               label_code: IntArray, labels: list[Any], length_i: IntArray) -> _Table:
    """Spans in token units: a span covers the tokens it shares a character with."""
    assert names.tokens is not None
    n_items = items.n_uniques
    first_row = np.full(n_items, -1, dtype=np.int64)
    first_row[row_item[::-1]] = np.arange(row_item.size, dtype=np.int64)[::-1]
    column = data[names.tokens]
    cells = column.tolist() if hasattr(column, "tolist") else list(column)
    starts, ends, counts = [], [], np.empty(n_items, dtype=np.int64)
    base = np.concatenate(([0], np.cumsum(length_i)))  # documents laid end to end on one character axis
    for i in range(n_items):  # one step per document (not per character)
        s, e = _token_offsets(cells[int(first_row[i])], python_scalar(items.uniques[i]), names.tokens)
        if e.size and e[-1] > length_i[i]:
            raise InputError(f"A token of document {python_scalar(items.uniques[i])!r} ends past its length "
                             f"{int(length_i[i])}.", Reason.UNREADABLE_INPUT, column=names.tokens)
        starts.append(s + base[i])
        ends.append(e + base[i])
        counts[i] = s.size
    all_starts = np.concatenate(starts) if starts else np.zeros(0, dtype=np.int64)
    all_ends = np.concatenate(ends) if ends else np.zeros(0, dtype=np.int64)
    token_base = np.concatenate(([0], np.cumsum(counts)))
    g_first, g_stop = first_char + base[row_item], stop_char + base[row_item]
    # tokens overlapping [start, end): those ending after start and starting before end
    first_token = np.searchsorted(all_ends, g_first, side="right") - token_base[row_item]
    stop_token = np.searchsorted(all_starts, g_stop, side="left") - token_base[row_item]
    first_token = np.clip(first_token, 0, counts[row_item])
    stop_token = np.clip(stop_token, 0, counts[row_item])
    keep = marked & (stop_token > first_token)  # a span over whitespace only covers no token
    return _Table(items, raters, row_item, row_rater, keep, np.where(keep, first_token, 0),
                  np.where(keep, stop_token, 0), np.where(keep, label_code, -1), labels, counts)


def sorted_labels(values: list[Any]) -> list[Any]:
    try:
        return sorted(set(values))
    except TypeError:
        return sorted(set(values), key=lambda v: (type(v).__name__, str(v)))

def code_region_labels(values: Any, present: npt.NDArray[np.bool_], column: str, row_labels: Any, region: str,
                       reserved: str, meaning: str) -> tuple[IntArray, list[Any]]:
    """The label code of each row with a region (span or box; -1 elsewhere) and the sorted labels used.

    A region without a label, or a label equal to the ``reserved`` one (which stands for ``meaning``), is an
    :class:`InputError` naming the row or the value. One rule for spans and boxes.
    """
    labels_col = factorize(values)
    unlabelled = present & (labels_col.codes < 0)
    if unlabelled.any():
        k = int(np.argmax(unlabelled))
        raise InputError(f"Row {row_label(row_labels, k)!r} is a {region} without a label (column {column!r}).",
                         Reason.MISSING_VALUE, column=column, row=row_label(row_labels, k))
    used = np.unique(labels_col.codes[present])
    labels = sorted_labels([python_scalar(labels_col.uniques[c]) for c in used])
    if reserved in labels:
        raise InputError(f"Column {column!r} uses the label {reserved!r}, which stands for '{meaning}'.",
                         Reason.UNKNOWN_CATEGORY, column=column, value=reserved)
    position = {label: k for k, label in enumerate(labels)}
    remap = np.full(labels_col.n_uniques + 1, -1, dtype=np.int64)
    for c in used:
        remap[c] = position[python_scalar(labels_col.uniques[c])]
    return np.where(present, remap[labels_col.codes], -1), labels



def unit_index(items: Column, units: IntArray) -> LabelIndex:
    """The unit ids ``(document id, position)``, made as Python tuples only when first read."""
    def make() -> np.ndarray:
        ids = items.uniques
        out = np.empty(int(units.sum()), dtype=object)
        out[:] = [(python_scalar(ids[i]), p) for i in range(units.size) for p in range(int(units[i]))]
        return out

    return LabelIndex(make=make, size=int(units.sum()))


def expand(table: _Table, rows: npt.NDArray[np.bool_] | None, index: LabelIndex, distance: str,
           ) -> Ratings:
    """The unit judgements of the rows ``rows`` (None: every row) of a span table, on the unit index ``index``.

    Categorical judgements (no overlap of different labels: the common case) are a :class:`SpanUnitRatings`, which
    counts them from the spans and expands them one by one only for a metric that reads single judgements.
    """
    take: Callable[[np.ndarray], np.ndarray] = (lambda a: a) if rows is None else (lambda a: a[rows])
    row_item, row_rater = take(table.row_item), take(table.row_rater)
    n_raters = table.raters.n_uniques
    pair_key, row_pair = np.unique(row_item * n_raters + row_rater, return_inverse=True)
    pair_item, pair_rater = pair_key // n_raters, pair_key % n_raters
    raters_used, pair_rater_code = np.unique(pair_rater, return_inverse=True)
    marked = take(table.marked)
    span_pair = row_pair.ravel()[marked]
    first, stop, code = take(table.first)[marked], take(table.stop)[marked], take(table.label_code)[marked]
    order = np.lexsort((first, span_pair))
    plan = UnitPlan(np.concatenate(([0], np.cumsum(table.units))), pair_item, pair_rater_code.ravel().astype(np.int64),
                    span_pair[order], first[order], stop[order], code[order])
    rater_labels = np.asarray(table.raters.uniques, dtype=object)[raters_used]
    combined = mixed_labels(plan)
    if combined is None:
        return SpanUnitRatings(plan, item_labels=index, rater_labels=rater_labels,
                               categories=[OUTSIDE, *table.labels])
    item_codes, rater_codes, values = plan.judgements()
    at, masks = combined
    return _as_sets(item_codes, rater_codes, values, at, masks, table.labels, index, rater_labels, distance)


def _as_sets(item_codes: IntArray, rater_codes: IntArray, values: IntArray, at: IntArray, masks: IntArray,
             labels: list[Any], index: LabelIndex, rater_labels: np.ndarray, distance: str) -> SetRatings:
    """Set-valued unit judgements: "O" the empty set, a label its singleton, overlapping labels their set."""
    single = values != 0
    bits = np.zeros(values.size, dtype=np.int64)
    bits[single] = np.left_shift(1, values[single] - 1)
    bits[at] = masks
    distinct, codes = np.unique(bits, return_inverse=True)
    sets = [frozenset(labels[k] for k in range(len(labels)) if int(m) >> k & 1) for m in distinct]
    order = sorted(range(len(sets)), key=lambda k: set_sort_key(sets[k]))
    rank = np.empty(len(sets), dtype=np.int64)
    rank[np.asarray(order, dtype=np.int64)] = np.arange(len(sets))
    kind = set_ratings_type(distance, "Ratings.from_spans")
    return kind(item_codes, rater_codes, rank[codes.ravel()], item_labels=index, rater_labels=rater_labels,
                categories=[sets[k] for k in order])


def from_spans(data: Any, names: SpanColumns, *, unit: SpanUnit = "char", distance: str = "jaccard") -> Ratings:
    """:meth:`Ratings.from_spans` (documented there)."""
    table = read_spans(data, names, unit, "Ratings.from_spans")
    return expand(table, None, unit_index(table.items, table.units), distance)


def spans_by_pool(data: Any, pool: str = "pool", item: str = "item_id", rater: str = "rater_id",
                  start: str = "start", end: str = "end", label: str = "label", length: str = "length", *,
                  unit: SpanUnit = "char", tokens: str | None = None, distance: str = "jaccard",
                  ) -> dict[Any, Ratings]:
    """One unit `Ratings` per pool of a span table, on one unit index (every position of every document).

    As :meth:`Ratings.from_spans`, with a ``pool`` column. The pools share the unit index (units align by code
    in κx) and one category list; when any pool has overlapping spans with different labels every pool is
    set-valued.

    Examples
    --------
    >>> import labelgate as lg
    >>> from labelgate.core.spans import spans_by_pool
    >>> table = {"pool": ["crowd", "trusted"], "item_id": ["d1", "d1"], "rater_id": ["a", "t"],
    ...          "start": [0, 0], "end": [3, 4], "label": ["PER", "PER"], "length": [6, 6]}
    >>> pools = spans_by_pool(table)
    >>> round(float(lg.cross_kappa(pools["crowd"], pools["trusted"])), 4)
    0.6667
    """
    names = SpanColumns(item, rater, start, end, label, length, tokens)
    require_columns(data, (("pool", pool),))
    table = read_spans(data, names, unit, "spans_by_pool")
    pools = factorize(data[pool])
    check_ids(((pool, pools),), getattr(data, "index", None))
    index = unit_index(table.items, table.units)
    out = {python_scalar(pools.uniques[k]): expand(table, pools.codes == k, index, distance)
           for k in range(pools.n_uniques)}
    if any(isinstance(r, SetRatings) for r in out.values()):
        out = {name: r if isinstance(r, SetRatings) else _singletons(r, distance) for name, r in out.items()}
    categories = tuple(sorted({c for r in out.values() for c in r.categories}, key=_category_key))
    return {name: r if r.categories == categories else r.with_categories(categories) for name, r in out.items()}


def _category_key(category: Any) -> tuple[Any, ...]:
    if isinstance(category, frozenset):
        return set_sort_key(category)
    return (category != OUTSIDE, type(category).__name__, str(category))


def _singletons(r: Ratings, distance: str) -> SetRatings:
    """A categorical unit `Ratings` read as sets: "O" the empty set, a label its singleton."""
    sets = [frozenset() if c == OUTSIDE else frozenset([c]) for c in r.categories]
    kind = set_ratings_type(distance, "spans_by_pool")
    return kind(r.item_codes, r.rater_codes, r.value_codes, item_labels=r.item_index, rater_labels=r.rater_labels,
                categories=sets)


def _from_spans_method(data: Any, item: str, rater: str, start: str, end: str, label: str, length: str, *,
                       unit: SpanUnit, tokens: str | None) -> Ratings:
    return from_spans(data, SpanColumns(item, rater, start, end, label, length, tokens), unit=unit)


MULTI_LABEL["from_spans"] = _from_spans_method
