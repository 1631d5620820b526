"""A factorised column (codes and the values they stand for), a column given already encoded, and what counts as
a missing value: the types every coding route of :mod:`labelgate.core.columns` returns. numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from labelgate.core.index import LabelIndex
from labelgate.core.sortcodes import BLOCK

IntArray = npt.NDArray[np.int64]
#: Codes as a column keeps them: any signed integer type (narrow for columns of few values, see :func:`code_type`).
CodeArray = npt.NDArray[np.signedinteger[Any]]

_NEVER_MISSING = {str, bytes, int, bool}


class Column:
    """A factorised column: ``codes[j]`` indexes ``uniques``; -1 marks missing.

    The codes are signed integers of any width: a column of few values (labels, pools) keeps one or two bytes a
    row (:func:`code_type`), and :func:`int64_codes` widens them where a `Ratings` is built.

    The uniques may be given as a function that makes them (:meth:`deferred`), called on the first read of
    :attr:`uniques`: a build reads an item column's labels — Python strings, most of the memory of a `Ratings`
    — only after its duplicate check, so that the two never coexist at the build's peak.
    """

    __slots__ = ("_index", "codes")

    def __init__(self, codes: CodeArray, uniques: np.ndarray | LabelIndex) -> None:
        self.codes = codes
        self._index = LabelIndex.of(uniques)  # made once, under its lock: the pools of one table share it

    @classmethod
    def deferred(cls, codes: CodeArray, make: Callable[[], np.ndarray], n_uniques: int) -> Column:
        """A column of ``n_uniques`` uniques (an object array) that ``make()`` returns when first read."""
        return cls(codes, LabelIndex(make=make, size=n_uniques))

    def with_codes(self, codes: CodeArray) -> Column:
        """The same uniques (made once for both) with other codes: a pool's rows of a table's column."""
        return Column(codes, self._index)

    @property
    def n_uniques(self) -> int:
        """The number of uniques (known before they are made)."""
        return len(self._index)

    @property
    def uniques(self) -> np.ndarray:
        """The value of each code (made on first read for a :meth:`deferred` column)."""
        return self._index.labels

    def label_index(self, used: npt.NDArray[np.bool_] | None = None) -> LabelIndex:
        """The uniques (those ``used``, in order) as an object-array :class:`LabelIndex`, made when first read.

        The index holds the column's index (a maker of the distinct values), not the column: the codes are not
        kept alive by the `Ratings` it labels.
        """
        index = self._index
        if index.ready:
            labels = np.asarray(index.labels, dtype=object)
            return LabelIndex(labels if used is None else labels[used])
        if used is None:
            return index  # deferred uniques are object arrays: the same index, made once for the column too
        return LabelIndex(make=lambda: index.labels[used], size=int(np.count_nonzero(used)))


@dataclass(frozen=True)
class EncodedColumn:
    """A column given already encoded: integer ``codes`` into ``categories`` (-1 = missing).

    Pass it as a column of :meth:`Ratings.from_long` when ids were encoded upstream (a database's
    dictionary, a previous factorisation): it is read like a pandas categorical, without hashing the ids.

    Examples
    --------
    >>> import labelgate as lg
    >>> from labelgate.core.column import EncodedColumn
    >>> items = EncodedColumn([0, 0, 1, 1], ["q1", "q2"])
    >>> lg.Ratings.from_long({"item_id": items, "rater_id": [0, 1, 0, 1], "label": [1, 1, 0, 1]}).n_items
    2
    """

    codes: Any
    categories: Any

    def __len__(self) -> int:
        return len(self.codes)


def code_type(n_codes: int) -> np.dtype[Any]:
    """The narrowest signed integer type that holds the codes ``-1 .. n_codes - 1``.

    Examples
    --------
    >>> code_type(5), code_type(300), code_type(10**6)
    (dtype('int8'), dtype('int16'), dtype('int32'))
    """
    for kind in (np.int8, np.int16, np.int32):
        if n_codes <= np.iinfo(kind).max:
            return np.dtype(kind)
    return np.dtype(np.int64)


def int64_codes(codes: CodeArray, rows: npt.NDArray[np.integer[Any]] | None = None) -> IntArray:
    """``codes`` (or ``codes[rows]``) as int64, the type of a `Ratings`' codes.

    A gather of narrow codes is written block by block into the int64 result: no row-sized array of the narrow
    type is made first. Without ``rows`` int64 codes are returned as they are (no copy).

    Examples
    --------
    >>> int64_codes(np.array([2, -1, 0], dtype=np.int8), np.array([2, 0]))
    array([0, 2])
    """
    if rows is None:
        return codes.astype(np.int64, copy=False)
    if codes.dtype == np.int64:
        return codes[rows]
    out = np.empty(rows.size, dtype=np.int64)
    for start in range(0, rows.size, BLOCK):
        out[start:start + BLOCK] = codes[rows[start:start + BLOCK]]
    return out


def used_codes(codes: CodeArray, n_codes: int) -> npt.NDArray[np.bool_]:
    """Which of the codes ``0 .. n_codes - 1`` occur in ``codes`` (-1, missing, ignored; :func:`code_counts`).

    Examples
    --------
    >>> used_codes(np.array([2, -1, 0, 2], dtype=np.int8), 4)
    array([ True, False,  True, False])
    """
    missing = codes.size > 0 and int(codes.min()) < 0
    return code_counts(codes[codes >= 0] if missing else codes, n_codes) > 0


def code_counts(codes: CodeArray, n_codes: int) -> IntArray:
    """``np.bincount(codes, minlength=n_codes)`` of codes in ``0 .. n_codes - 1``.

    ``np.bincount`` first copies codes that are narrow or read-only (pandas hands out read-only arrays) into a
    row-sized int64 array; with few codes they are counted block by block instead, each block's copy in the cache.

    Examples
    --------
    >>> code_counts(np.array([2, 0, 2], dtype=np.int8), 4)
    array([1, 0, 2, 0])
    """
    as_is = codes.dtype == np.intp and codes.flags.writeable and codes.flags.c_contiguous
    if as_is or n_codes * 64 > BLOCK:  # no copy to spare, or too many codes for a count per block
        return np.bincount(codes, minlength=n_codes)
    counts = np.zeros(n_codes, dtype=np.int64)
    for start in range(0, codes.size, BLOCK):
        counts += np.bincount(codes[start:start + BLOCK], minlength=n_codes)
    return counts


def is_missing(arr: np.ndarray) -> npt.NDArray[np.bool_]:
    """None, float NaN and pandas' NA / NaT (recognised without importing pandas), elementwise."""
    flat = arr.ravel()
    if set(map(type, flat)) <= _NEVER_MISSING:  # one C-level pass settles the usual all-strings case
        return np.zeros(arr.shape, dtype=bool)
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


def python_scalar(value: Any) -> Any:
    """A numpy scalar as the Python scalar it holds; anything else unchanged."""
    return value.item() if hasattr(value, "item") and getattr(value, "ndim", 1) == 0 else value
