"""The sufficient statistics of a `Ratings`, computed on first use and cached on it.

Item x category and rater x category counts, ratings per item and per-item / per-rater moments of the
category values: every metric is a function of these, so each is computed once per `Ratings` and shared.
numpy only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from labelgate.core.cached import cached_statistic
from labelgate.core.index import LabelIndex, same_index
from labelgate.core.sortcodes import BLOCK
from labelgate.errors import InputError, Reason

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

# Above this many item x category cells, count-based statistics are refused
# (use level="interval" for continuous values: it works from moments).
MAX_COUNT_CELLS = 200_000_000


class SufficientStatistics:
    """Structure and cached statistics of the judgements ``(item_codes, rater_codes, value_codes)``."""

    item_codes: IntArray
    rater_codes: IntArray
    value_codes: IntArray
    item_index: LabelIndex
    rater_labels: np.ndarray
    categories: tuple[Any, ...]
    level: str
    n_dropped_missing: int

    @property
    def n_ratings(self) -> int:
        """Number of judgements."""
        return int(self.item_codes.size)

    def __setstate__(self, state: dict[str, Any]) -> None:
        # a pickle made before the item ids moved into ``item_index`` holds the array as ``item_labels``
        if "item_labels" in state and "item_index" not in state:
            state = {**state, "item_index": LabelIndex.of(state["item_labels"])}
            del state["item_labels"]
        self.__dict__.update(state)

    @property
    def item_labels(self) -> np.ndarray:
        """The item ids by item code (made as Python objects on first read: see :mod:`labelgate.core.index`)."""
        return self.item_index.labels

    @item_labels.setter
    def item_labels(self, labels: np.ndarray | LabelIndex) -> None:
        self.item_index = LabelIndex.of(labels)

    def on_item_index(self, new_codes: IntArray, item_labels: np.ndarray) -> Any:
        """The same judgements on another item index: item code ``k`` becomes ``new_codes[k]``.

        Each subclass rebuilds itself with its own constructor (a `Ratings` from per-judgement codes, an
        aggregated `Ratings` from its rows), so code that re-indexes items never needs to know which it has.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot be put on another item index")

    def shares_items_with(self, other: SufficientStatistics) -> bool:
        """Whether ``other`` has the same item index (pools of one table): items then align by code."""
        return same_index(self.item_index, other.item_index)

    @property
    def n_items(self) -> int:
        """Size of the item index (for pools of :func:`ratings_by_pool`, the whole table's items)."""
        return len(self.item_index)

    @cached_statistic
    def n_rated_items(self) -> int:
        """Items with at least one rating in these Ratings."""
        return int(np.count_nonzero(self.ratings_per_item))

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

    @cached_statistic
    def category_values(self) -> FloatArray:
        """Numeric position of each category.

        The category values themselves for interval/ratio levels, and the
        ranks 0..q-1 for nominal/ordinal levels (used by linear/quadratic weights).
        """
        if self.is_numeric:
            return np.asarray([float(c) for c in self.categories], dtype=np.float64)
        return np.arange(self.n_categories, dtype=np.float64)

    @cached_statistic
    def ratings_per_item(self) -> IntArray:
        """Number of ratings of each item, shape (n_items,).

        Nominal and ordinal coefficients read the item x category counts anyway: there, when that table is allowed
        (:data:`MAX_COUNT_CELLS`) and not larger than twice the judgements, its row sums spare a pass over every
        judgement.
        """
        cells = self.n_items * self.n_categories
        if "item_counts" in self.__dict__ or (
                not self.is_numeric and cells <= min(2 * self.n_ratings, MAX_COUNT_CELLS)):
            # einsum sums the few columns of each row without numpy's per-row reduction set-up (2.5 against
            # 1.0 ms for 111,000 items x 5 categories); integers, so the sums are exact either way
            return np.einsum("ic->i", self.item_counts)
        return np.bincount(self.item_codes, minlength=self.n_items).astype(np.int64, copy=False)

    @cached_statistic
    def item_counts(self) -> IntArray:
        """Item x category counts ``n_ic``, shape (n_items, n_categories)."""
        cells = self.n_items * self.n_categories
        if cells > MAX_COUNT_CELLS:
            raise InputError(
                f"{self.n_items} items x {self.n_categories} categories is too many cells for count-based "
                "metrics; for continuous labels use level='interval' (moment-based).",
                Reason.TOO_MANY_CATEGORIES)
        flat = np.bincount(self.item_codes * self.n_categories + self.value_codes, minlength=cells)
        return flat.reshape(self.n_items, self.n_categories).astype(np.int64, copy=False)

    @cached_statistic
    def all_items(self) -> IntArray:
        """The codes of every item in order, ``0 .. n_items - 1`` (read-only, made once): the items of a view or
        an alignment that covers them all, recognised by identity without a pass over the codes."""
        codes = np.arange(self.n_items, dtype=np.int64)
        codes.flags.writeable = False
        return codes

    @cached_statistic
    def category_counts(self) -> IntArray:
        """Ratings of each category, shape (n_categories,): the column totals of :attr:`item_counts`."""
        if "item_counts" in self.__dict__:  # einsum over the long axis (numpy's axis-0 sum is 4-5x slower)
            return np.einsum("ic->c", self.item_counts)
        return np.bincount(self.value_codes, minlength=self.n_categories).astype(np.int64, copy=False)

    @cached_statistic
    def rater_counts(self) -> IntArray:
        """Rater x category counts, shape (n_raters, n_categories)."""
        cells = self.n_raters * self.n_categories
        return pair_counts(self.rater_codes, self.value_codes, self.n_categories, cells).reshape(
            self.n_raters, self.n_categories)

    @cached_statistic
    def values(self) -> FloatArray:
        """Numeric value of each judgement (category values), shape (n_ratings,)."""
        return self.category_values[self.value_codes]

    @cached_statistic
    def item_moments(self) -> FloatArray:
        """Per-item (count, sum, sum of squares) of the values, shape (n_items, 3)."""
        return _moments(self.item_codes, self.values, self.n_items)

    @cached_statistic
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

    @cached_statistic
    def rater_moments(self) -> FloatArray:
        """Per-rater (count, sum, sum of squares) of the values, shape (n_raters, 3)."""
        return _moments(self.rater_codes, self.values, self.n_raters)


def pair_counts(first: IntArray, second: IntArray, n_second: int, cells: int) -> IntArray:
    """The counts of the pairs ``(first, second)``, flat: ``np.bincount(first * n_second + second, minlength=cells)``.

    With fewer cells than rows (raters x categories), the keys are made and counted block by block (blocks of at
    least 16 times the cells, so that zeroing each block's counts stays a small part of the pass): no row-sized
    key array, whose first touch costs more than the pass that fills it.

    Examples
    --------
    >>> pair_counts(np.array([0, 1, 1]), np.array([1, 0, 0]), 2, 4)
    array([0, 1, 2, 0])
    """
    step = max(BLOCK, 16 * cells)  # at least a block whose keys stay in the cache
    if first.size <= step:
        return np.bincount(first * n_second + second, minlength=cells).astype(np.int64, copy=False)
    counts = np.zeros(cells, dtype=np.int64)
    for start in range(0, first.size, step):
        key = first[start:start + step] * n_second
        key += second[start:start + step]
        counts += np.bincount(key, minlength=cells)
    return counts


def _moments(codes: IntArray, values: FloatArray, n: int) -> FloatArray:
    out = np.empty((n, 3), dtype=np.float64)
    out[:, 0] = np.bincount(codes, minlength=n)
    out[:, 1] = np.bincount(codes, weights=values, minlength=n)
    out[:, 2] = np.bincount(codes, weights=values * values, minlength=n)
    return out
