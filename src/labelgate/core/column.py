"""A factorised column (codes and the values they stand for), a column given already encoded, and what counts as
a missing value: the types every coding route of :mod:`labelgate.core.columns` returns. numpy only.
"""

from __future__ import annotations

import math
import threading
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

    __slots__ = ("_lock", "_make", "_uniques", "codes", "n_uniques")

    def __init__(self, codes: IntArray, uniques: np.ndarray) -> None:
        self.codes = codes
        self._uniques: np.ndarray | None = uniques
        self._make: Callable[[], np.ndarray] | None = None
        self.n_uniques = len(uniques)
        self._lock = threading.Lock()  # the pools of one table, built on threads, share their columns' uniques

    @classmethod
    def deferred(cls, codes: IntArray, make: Callable[[], np.ndarray], n_uniques: int) -> Column:
        """A column of ``n_uniques`` uniques that ``make()`` returns when first read."""
        column = cls(codes, np.zeros(0, dtype=object))
        column._uniques, column._make, column.n_uniques = None, make, int(n_uniques)
        return column

    def label_index(self, used: npt.NDArray[np.bool_] | None = None) -> LabelIndex:
        """The uniques (those ``used``, in order) as an object-array :class:`LabelIndex`, made when first read.

        The index holds the maker, not the column: the codes are not kept alive by the `Ratings` it labels.
        """
        if self._uniques is not None:
            labels = np.asarray(self._uniques, dtype=object)
            return LabelIndex(labels if used is None else labels[used])
        make = self._make
        assert make is not None
        if used is None:
            return LabelIndex(make=lambda: np.asarray(make(), dtype=object), size=self.n_uniques)
        return LabelIndex(make=lambda: np.asarray(make(), dtype=object)[used], size=int(np.count_nonzero(used)))

    @property
    def uniques(self) -> np.ndarray:
        """The value of each code (made on first read for a :meth:`deferred` column)."""
        if self._uniques is None:
            with self._lock:  # made once, whichever thread reads first
                if self._uniques is None:
                    assert self._make is not None
                    self._uniques, self._make = self._make(), None
        return self._uniques


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
