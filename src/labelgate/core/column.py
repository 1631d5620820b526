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

IntArray = npt.NDArray[np.int64]

_NEVER_MISSING = {str, bytes, int, bool}


class Column:
    """A factorised column: ``codes[j]`` indexes ``uniques``; -1 marks missing.

    The uniques may be given as a function that makes them (:meth:`deferred`), called on the first read of
    :attr:`uniques`: a build reads an item column's labels — Python strings, most of the memory of a `Ratings`
    — only after its duplicate check, so that the two never coexist at the build's peak.
    """

    __slots__ = ("_index", "codes")

    def __init__(self, codes: IntArray, uniques: np.ndarray | LabelIndex) -> None:
        self.codes = codes
        self._index = LabelIndex.of(uniques)  # made once, under its lock: the pools of one table share it

    @classmethod
    def deferred(cls, codes: IntArray, make: Callable[[], np.ndarray], n_uniques: int) -> Column:
        """A column of ``n_uniques`` uniques (an object array) that ``make()`` returns when first read."""
        return cls(codes, LabelIndex(make=make, size=n_uniques))

    def with_codes(self, codes: IntArray) -> Column:
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
