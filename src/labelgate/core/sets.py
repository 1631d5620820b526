r"""Set-valued judgements (multi-label): each judgement is a set of categories, compared by a set distance.

A label cell holds a list, tuple, set or frozenset of categories, or a string split by ``sep``; the empty set
("none of the categories applies") is a judgement, a missing cell (None, NaN) is not. The distinct sets
observed are few, so they are coded as the categories of a :class:`SetRatings` and compared through a q x q
matrix of distances between them: every distance-based coefficient then runs on the existing count
statistics, exactly (Krippendorff's α, κx, normalized κx, weighted percent agreement).

Distances between two sets :math:`A, B` (Passonneau 2006):

.. math::

    d_J(A, B) = 1 - \frac{|A \cap B|}{|A \cup B|} \quad (0 \text{ when } A = B = \emptyset), \qquad
    d_M(A, B) = 1 - \frac{|A \cap B|}{|A \cup B|}\, m(A, B),

with :math:`m = 1` when :math:`A = B`, :math:`2/3` when one contains the other, :math:`1/3` when they overlap
otherwise and :math:`0` when they are disjoint (MASI).

numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from typing import Any, Literal, get_args

import numpy as np

from labelgate.core.cached import cached_statistic
from labelgate.core.column import EncodedColumn, python_scalar
from labelgate.core.ratings import MULTI_LABEL, FloatArray, IntArray, Ratings
from labelgate.errors import InputError, ParameterError, Reason, check_option

SetDistance = Literal["jaccard", "masi"]
SET_DISTANCES: tuple[SetDistance, ...] = get_args(SetDistance)

#: Most distinct sets a set-level column may hold: the q x q distance matrix is dense (5,000 sets: 200 MB).
MAX_DISTINCT_SETS = 5_000


class SetRatings(Ratings):
    """A :class:`Ratings` whose categories are sets (``frozenset``), compared by :attr:`set_distance`.

    Build it with ``Ratings.from_long(frame, level="set", distance="jaccard" | "masi")`` (or
    :func:`labelgate.ratings_by_pool` with the same arguments). ``level`` is ``"set"``; the categories are the
    distinct sets observed, in a canonical order (by size, then by their sorted elements); :attr:`set_distances`
    is their q x q distance matrix. The distance is part of the type (:func:`set_ratings_type`), so every copy of
    the ratings (a subset, another category list, another item index) keeps it.

    Examples
    --------
    >>> import labelgate as lg
    >>> r = lg.Ratings.from_long({"item_id": [1, 1, 2, 2], "rater_id": ["a", "b", "a", "b"],
    ...                           "label": [["x"], ["x", "y"], [], []]}, level="set", distance="jaccard")
    >>> r.level, r.set_distance, [sorted(c) for c in r.categories]
    ('set', 'jaccard', [[], ['x'], ['x', 'y']])
    >>> r.set_distances.round(2).tolist()
    [[0.0, 1.0, 1.0], [1.0, 0.0, 0.5], [1.0, 0.5, 0.0]]
    """

    set_distance: SetDistance = "jaccard"

    def __init__(self, item_codes: IntArray, rater_codes: IntArray, value_codes: IntArray, *,
                 item_labels: Any, rater_labels: np.ndarray, categories: Sequence[Any], level: str = "set",
                 n_dropped_missing: int = 0) -> None:
        if level != "set":
            raise ParameterError(f"{type(self).__name__} holds set-valued judgements; got level={level!r}.",
                                 parameter="level", value=level)
        if len(categories) > MAX_DISTINCT_SETS:
            raise InputError(f"{len(categories)} distinct label sets is more than {MAX_DISTINCT_SETS}: the set "
                             "distances between them would not fit in memory.", Reason.TOO_MANY_CATEGORIES)
        sets = tuple(as_frozenset(c) for c in categories)
        # the base class validates the judgements; "nominal" stands for "categories without an order"
        super().__init__(item_codes, rater_codes, value_codes, item_labels=item_labels, rater_labels=rater_labels,
                         categories=sets, level="nominal", n_dropped_missing=n_dropped_missing)
        self.level = "set"  # type: ignore[assignment]

    @cached_statistic
    def set_distances(self) -> FloatArray:
        """The q x q distances between the categories (sets) under :attr:`set_distance` (read-only)."""
        matrix = set_distance_matrix(self.categories, self.set_distance)
        matrix.flags.writeable = False
        return matrix

    @cached_statistic
    def category_values(self) -> FloatArray:
        """Positions 0..q-1 (sets have no order; only the distance matrix measures them)."""
        return np.arange(self.n_categories, dtype=np.float64)

    def subset_items(self, item_codes: Any) -> Ratings:
        """Ratings of the given item codes only, on their own item axis (as :meth:`Ratings.subset_items`; the set
        distance is kept)."""
        wanted = np.zeros(self.n_items, dtype=bool)
        wanted[np.asarray(item_codes, dtype=np.int64)] = True
        rows = wanted[self.item_codes]
        return type(self)(self._new_item_codes(wanted)[self.item_codes[rows]], self.rater_codes[rows],
                          self.value_codes[rows], item_labels=self._kept_index(wanted),
                          rater_labels=self.rater_labels, categories=self.categories)

    def on_item_index(self, new_codes: IntArray, item_labels: np.ndarray) -> Ratings:
        """The same judgements on another item index (the set distance is kept)."""
        return type(self)(new_codes[self.item_codes], self.rater_codes, self.value_codes, item_labels=item_labels,
                          rater_labels=self.rater_labels, categories=self.categories,
                          n_dropped_missing=self.n_dropped_missing)

    def with_categories(self, categories: Sequence[Any]) -> Ratings:
        """The same judgements re-coded on a superset of the current sets (the set distance is kept)."""
        sets = [as_frozenset(c) for c in categories]
        position = {c: i for i, c in enumerate(sets)}
        missing = [sorted(c, key=_element_key) for c in self.categories if c not in position]
        if missing:
            raise InputError(f"Label sets {missing} are not in the new category list.", Reason.UNKNOWN_CATEGORY,
                             value=missing[0])
        remap = np.asarray([position[c] for c in self.categories], dtype=np.int64)
        return type(self)(self.item_codes, self.rater_codes, remap[self.value_codes], item_labels=self.item_index,
                          rater_labels=self.rater_labels, categories=sets,
                          n_dropped_missing=self.n_dropped_missing)

    @staticmethod
    def category_sort_key(category: Any) -> tuple[Any, ...]:
        """The canonical order of sets: by size, then by the sorted elements (used to merge category lists)."""
        return set_sort_key(category)

    def __repr__(self) -> str:
        shown = [sorted(c, key=_element_key) for c in self.categories[:10]]
        return (f"SetRatings(distance={self.set_distance!r}, n_items={self.n_items}, n_raters={self.n_raters}, "
                f"n_ratings={self.n_ratings}, categories={shown})")


class JaccardSetRatings(SetRatings):
    """Set-valued judgements compared by the Jaccard distance."""

    set_distance: SetDistance = "jaccard"


class MasiSetRatings(SetRatings):
    """Set-valued judgements compared by the MASI distance (Passonneau 2006)."""

    set_distance: SetDistance = "masi"


_TYPES: dict[str, type[SetRatings]] = {"jaccard": JaccardSetRatings, "masi": MasiSetRatings}


def set_ratings_type(distance: str, function: str = "Ratings.from_long") -> type[SetRatings]:
    """The :class:`SetRatings` class of a set distance (``"jaccard"`` or ``"masi"``)."""
    check_option(distance, SET_DISTANCES, "distance", function)
    return _TYPES[distance]


# ---------------------------------------------------------------- cells and distances
def _element_key(element: Any) -> tuple[str, Any]:
    return (type(element).__name__, element)


def set_sort_key(category: Any) -> tuple[Any, ...]:
    """Size, then the sorted elements (by type name, then value; text when a type does not order)."""
    members = list(category)
    try:
        ordered = sorted(members, key=_element_key)
        return (len(members), 0, tuple(ordered))
    except TypeError:
        return (len(members), 1, tuple(sorted((type(m).__name__, repr(m)) for m in members)))


def as_frozenset(category: Any) -> frozenset[Any]:
    """A category of a set level as a frozenset (a list, tuple or set of elements given explicitly)."""
    if isinstance(category, frozenset):
        return category
    if isinstance(category, (list, tuple, set)):
        return frozenset(python_scalar(e) for e in category)
    raise ParameterError(f"A category of a set level must be a set of labels; got {category!r}.",
                         parameter="categories", value=category)


def set_distance_matrix(categories: Sequence[frozenset[Any]], distance: str) -> FloatArray:
    """The q x q Jaccard or MASI distances between the sets ``categories`` (formulas in the module docstring).

    One membership matrix (sets x elements) gives every intersection size as a matrix product: no pair loop.

    Examples
    --------
    >>> sets = [frozenset(), frozenset({"a"}), frozenset({"a", "b"}), frozenset({"b", "c"})]
    >>> set_distance_matrix(sets, "masi").round(4).tolist()[2]
    [1.0, 0.6667, 0.0, 0.8889]
    """
    check_option(distance, SET_DISTANCES, "distance", "set_distance_matrix")
    q = len(categories)
    elements: dict[Hashable, int] = {}
    rows: list[int] = []
    cols: list[int] = []
    for k, members in enumerate(categories):
        for element in members:
            rows.append(k)
            cols.append(elements.setdefault(element, len(elements)))
    membership = np.zeros((q, max(len(elements), 1)), dtype=np.float64)
    membership[rows, cols] = 1.0
    size = membership.sum(axis=1)
    inter = membership @ membership.T  # exact: sums of 0/1 products
    union = size[:, None] + size[None, :] - inter
    similarity = np.divide(inter, union, out=np.ones_like(inter), where=union > 0)  # two empty sets: equal
    if distance == "masi":
        equal = (inter == size[:, None]) & (inter == size[None, :])
        nested = inter == np.minimum(size[:, None], size[None, :])
        weight = np.where(equal, 1.0, np.where(nested, 2.0 / 3.0, np.where(inter > 0, 1.0 / 3.0, 0.0)))
        similarity = similarity * weight
    out = 1.0 - similarity
    np.fill_diagonal(out, 0.0)
    return out


def _cell_set(cell: Any, sep: str | None, column: str, row: Any) -> frozenset[Any] | None:
    """One label cell as a frozenset, or None for a missing cell."""
    kind = type(cell)
    if kind is frozenset:
        return cell
    if kind in (list, tuple, set) or isinstance(cell, (list, tuple, set, frozenset)):
        members = [python_scalar(e) for e in cell]
        for element in members:
            if element is None or (isinstance(element, float) and math.isnan(element)):
                raise InputError(f"Column {column!r} has a missing element in the label set at row {row!r}.",
                                 Reason.MISSING_VALUE, column=column, row=row)
        return frozenset(members)
    if isinstance(cell, str):
        if sep is None:
            raise InputError(f"Column {column!r} holds the string {cell!r} at row {row!r}; a set-level label is "
                             "a list, tuple or set of categories, or a string split by 'sep=' (pass sep).",
                             Reason.UNREADABLE_INPUT, column=column, row=row, value=cell)
        return frozenset(part.strip() for part in cell.split(sep) if part.strip())
    if isinstance(cell, np.ndarray) and cell.ndim == 1:
        return _cell_set(cell.tolist(), sep, column, row)
    if cell is None or (isinstance(cell, float) and math.isnan(cell)):
        return None
    try:
        if cell != cell:  # pandas NA / NaT
            return None
    except TypeError:
        return None
    raise InputError(f"Column {column!r} holds {cell!r} at row {row!r}; a set-level label is a list, tuple or set "
                     "of categories (empty = none applies), or a string split by 'sep='.",
                     Reason.UNREADABLE_INPUT, column=column, row=row, value=cell)


def _cells(column: Any) -> Iterable[Any]:
    if hasattr(column, "to_pylist"):  # Arrow list arrays
        return column.to_pylist()
    if hasattr(column, "tolist"):
        return column.tolist()
    return list(column)


def encode_sets(column: Any, *, sep: str | None, name: str, row_labels: Any = None) -> EncodedColumn:
    """The set-valued label column as codes into its distinct sets in canonical order (-1: missing cell).

    Each cell is read once; strings and tuples are hashable and read once per distinct value.

    Raises
    ------
    InputError
        A cell that is neither a collection, a string (with ``sep``) nor missing, or a collection holding a
        missing element; naming the column and the row.
    """
    if sep is not None and (not isinstance(sep, str) or not sep):
        raise ParameterError(f"'sep' must be a non-empty string; got {sep!r}.", parameter="sep", value=sep)
    index: dict[frozenset[Any], int] = {}
    memo: dict[Any, int] = {}
    cells = _cells(column)
    codes = np.empty(len(cells) if isinstance(cells, list) else len(column), dtype=np.int64)
    for position, cell in enumerate(cells):
        if type(cell) in (str, tuple):
            code = memo.get(cell)
            if code is not None:
                codes[position] = code
                continue
        row = position if row_labels is None else python_scalar(row_labels[position])
        members = _cell_set(cell, sep, name, row)
        code = -1 if members is None else index.setdefault(members, len(index))
        if type(cell) in (str, tuple):
            memo[cell] = code
        codes[position] = code
    sets = list(index)
    order = sorted(range(len(sets)), key=lambda k: set_sort_key(sets[k]))
    rank = np.empty(len(sets) + 1, dtype=np.int64)
    rank[np.asarray(order, dtype=np.int64)] = np.arange(len(sets), dtype=np.int64)
    rank[-1] = -1  # code -1 (missing) stays -1
    categories = np.empty(len(sets), dtype=object)
    for k, position in enumerate(order):
        categories[k] = sets[position]
    return EncodedColumn(rank[codes], categories)


def set_categories(categories: Sequence[Any] | None) -> list[frozenset[Any]] | None:
    """An explicit list of allowed sets (each a collection of elements), in canonical order."""
    if categories is None:
        return None
    sets = list(dict.fromkeys(as_frozenset(c) for c in categories))
    return sorted(sets, key=set_sort_key)


def _check_set_level(level: str, distance: str | None, function: str) -> type[SetRatings]:
    if level != "set":
        raise ParameterError(f"'distance' and 'sep' of {function} apply to level='set' (multi-label) only; got "
                             f"level={level!r}.", parameter="level", value=level)
    return set_ratings_type("jaccard" if distance is None else distance, function)


def from_long_sets(data: Any, item: str, rater: str, value: str, *, level: str, distance: str | None,
                   sep: str | None, categories: Sequence[Any] | None, duplicates: Any, missing: Any,
                   ) -> SetRatings:
    """``Ratings.from_long(..., level="set")``: the label column coded as sets, then the nominal build."""
    kind = _check_set_level(level, distance, "Ratings.from_long")
    columns, observed = _with_encoded(data, value, sep)
    base = Ratings.from_long(columns, item, rater, value, level="nominal",
                             categories=set_categories(categories) or observed, duplicates=duplicates,
                             missing=missing)
    return kind(base.item_codes, base.rater_codes, base.value_codes, item_labels=base.item_index,
                rater_labels=base.rater_labels, categories=base.categories,
                n_dropped_missing=base.n_dropped_missing)


def _with_encoded(data: Any, value: str, sep: str | None) -> tuple[dict[str, Any], list[frozenset[Any]]]:
    """The table as a mapping of columns whose label column is coded as sets (the others passed as they are),
    and the distinct sets in canonical order (the default category list: never sorted by ``<``, which for sets
    is the subset relation, not an order)."""
    from labelgate.core.build import column_names, require_columns

    require_columns(data, (("value", value),))
    row_labels = getattr(data, "index", None)
    out = _Columns({name: data[name] for name in column_names(data) if name != value})
    out.index = row_labels  # errors of the build (a duplicate judgement, a missing id) name the table's rows
    encoded = encode_sets(data[value], sep=sep, name=value, row_labels=row_labels)
    out[value] = encoded
    return out, list(encoded.categories)


class _Columns(dict[str, Any]):
    """The table's columns with its row labels (``index``), read as a mapping of columns by the build."""

    index: Any = None


def pools_of_sets(data: Any, pool: str, item: str, rater: str, value: str, *, level: str, distance: str | None,
                  sep: str | None, categories: Sequence[Any] | None, duplicates: Any, missing: Any,
                  ) -> dict[Any, SetRatings]:
    """``ratings_by_pool(..., level="set")``: one :class:`SetRatings` per pool on one item index and set list."""
    from labelgate.core.ratings import ratings_by_pool

    kind = _check_set_level(level, distance, "ratings_by_pool")
    columns, observed = _with_encoded(data, value, sep)
    pools = ratings_by_pool(columns, pool, item, rater, value, level="nominal",
                            categories=set_categories(categories) or observed, duplicates=duplicates,
                            missing=missing)
    return {name: kind(r.item_codes, r.rater_codes, r.value_codes, item_labels=r.item_index,
                       rater_labels=r.rater_labels, categories=r.categories, n_dropped_missing=r.n_dropped_missing)
            for name, r in pools.items()}


MULTI_LABEL.update({"from_long": from_long_sets, "ratings_by_pool": pools_of_sets})
