"""The item ids of a `Ratings`, indexed by item code and made as Python objects only when read.

Making the ids Python objects (``"i0012345"`` as a ``str``) is a tenth of a build from a file and most of the
memory of a `Ratings`, and no coefficient reads them: only matching items between two separately built `Ratings`,
error messages and reports do. A :class:`LabelIndex` knows its size and makes its labels on first read; pools
of one table share one index object, so they align by code without ever making the ids (:func:`same_index`).
numpy only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np


class LabelIndex:
    """``size`` labels by code: given as an array, or made by ``make()`` on the first read of :attr:`labels`.

    Parameters
    ----------
    labels : numpy.ndarray, optional
        The labels themselves (kept as they are: callers that share one array between `Ratings` keep sharing it).
    make : callable, optional
        Returns the labels when first read (instead of ``labels``); it must return ``size`` of them.
    size : int, optional
        The number of labels; required with ``make``.

    Examples
    --------
    >>> import numpy as np
    >>> index = LabelIndex(make=lambda: np.asarray(["a", "b"], dtype=object), size=2)
    >>> len(index), index.ready
    (2, False)
    >>> index.labels.tolist(), index.ready
    (['a', 'b'], True)
    """

    __slots__ = ("_labels", "_lock", "_make", "size")

    def __init__(self, labels: np.ndarray | None = None, *, make: Callable[[], np.ndarray] | None = None,
                 size: int | None = None) -> None:
        if (labels is None) == (make is None):
            raise TypeError("LabelIndex takes either labels or make, not both or neither.")
        if labels is not None:
            self._labels: np.ndarray | None = labels
            self.size = len(labels)
        else:
            if size is None:
                raise TypeError("LabelIndex(make=...) needs its size.")
            self._labels, self.size = None, int(size)
        self._make = make
        self._lock = threading.Lock()  # pools share one index: whichever thread reads first makes the labels

    @classmethod
    def of(cls, labels: Any) -> LabelIndex:
        """``labels`` itself when it is an index, else an index holding the array as given."""
        return labels if isinstance(labels, LabelIndex) else cls(labels)

    @property
    def ready(self) -> bool:
        """Whether the labels exist (given, or made by an earlier read)."""
        return self._labels is not None

    @property
    def labels(self) -> np.ndarray:
        """The labels by code (made on the first read)."""
        if self._labels is None:
            with self._lock:
                if self._labels is None:
                    assert self._make is not None
                    labels = self._make()
                    if len(labels) != self.size:  # a wrong maker would shift every item's id: never silently
                        raise AssertionError(f"an index of {self.size} labels made {len(labels)}")
                    self._labels, self._make = labels, None
        return self._labels

    def __len__(self) -> int:
        return self.size

    def __getstate__(self) -> tuple[np.ndarray, None, int]:
        # a copy or a pickle carries the labels themselves (the maker may be a closure over the input table)
        return self.labels, None, self.size

    def __setstate__(self, state: tuple[np.ndarray, None, int]) -> None:
        self._labels, self._make, self.size = state
        self._lock = threading.Lock()


def same_index(x: LabelIndex, y: LabelIndex) -> bool:
    """Whether two indexes are one: the same object, or the same label array (callers share arrays)."""
    return x is y or (x.ready and y.ready and x.labels is y.labels)
