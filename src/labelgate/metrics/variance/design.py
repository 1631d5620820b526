"""The data view of the variance components: centred values of one replication and their per-item / per-rater sums."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from labelgate.core.ratings import FloatArray, IntArray, Ratings, _moments
from labelgate.core.tallied import TalliedRatings, is_tallied
from labelgate.errors import DesignError, ParameterError, Reason

if TYPE_CHECKING:
    import scipy.sparse as sp
else:
    from labelgate.metrics._lazy import lazy

    sp = lazy("scipy.sparse")


def numeric_values(r: Ratings, function: str, *, read: bool = True) -> FloatArray:
    """Numeric value of each rating for the model-based metrics.

    Interval/ratio: the values; ordinal: ranks 0..q-1; nominal with at most two
    categories: 0/1 in category order. Other nominal labels have no numeric
    scale and raise :class:`ParameterError`. ``read=False``: check only, and return the categories' values.
    """
    if not isinstance(r, Ratings):
        raise ParameterError(f"{function} takes a Ratings; got {type(r).__name__}.", parameter="r")
    if r.level == "nominal" and r.n_categories > 2:
        raise ParameterError(
            f"{function} needs numeric labels (interval/ratio), ordinal ranks or a binary label; got a nominal "
            f"label with {r.n_categories} categories. Build the Ratings with level='ordinal' or 'interval' if "
            "the categories are ordered.", parameter="level", value=r.level)
    return r.values if read else r.category_values


@dataclass
class Crossed:
    """One replication on an item axis: centred values and their per-item / per-rater sums.

    Rows of the item arrays align with ``axis`` (item codes of the Ratings).
    ``pairable`` marks axis items with two or more ratings: only they enter the
    variance components; all axis items enter cross-replication sums.
    """

    axis: IntArray
    pos: IntArray          # axis position of each kept rating
    rater: IntArray        # compact rater code of each kept rating
    y: FloatArray          # centred values of the kept ratings
    mean: float
    n_raters: int
    pairable: np.ndarray
    #: Built from per-item and per-rater sums (:func:`crossed_from_sums`): no judgement to resample.
    from_sums: bool = False

    @property
    def n_axis(self) -> int:
        return int(self.axis.size)

    @cached_property
    def item_m(self) -> FloatArray:
        """(count, sum, sum of squares) per axis item, shape (n_axis, 3)."""
        return _moments(self.pos, self.y, self.n_axis)

    @cached_property
    def rater_m(self) -> FloatArray:
        """(count, sum, sum of squares) per rater over pairable items, shape (n_raters, 3)."""
        keep = self.pairable[self.pos]
        return _moments(self.rater[keep], self.y[keep], self.n_raters)

    def _judgements(self) -> None:
        """Refuse what needs the judgements (the bootstrap's weighted moments) on a view built from sums."""
        if self.from_sums:
            raise DesignError("The variance components' bootstrap resamples items and raters, which needs every "
                              "judgement; these ratings hold only per-item and per-rater sums (aggregated in a "
                              "database). Compute the interval on the judgements (a pandas batch).",
                              Reason.INCOMPATIBLE_RATINGS)

    @cached_property
    def by_item(self) -> sp.csr_matrix:
        """Stacked (3 n_axis, n_raters) matrix of 1, y, y^2: times rater weights gives item moments."""
        self._judgements()
        return _stacked(self.pos, self.rater, self.y, self.n_axis, self.n_raters)

    @cached_property
    def by_rater(self) -> sp.csr_matrix:
        """Stacked (3 n_raters, n_axis) matrix: times item weights gives rater moments."""
        self._judgements()
        return _stacked(self.rater, self.pos, self.y, self.n_raters, self.n_axis)


def crossed(r: Ratings, function: str, axis: IntArray | None = None) -> Crossed:
    """Build the :class:`Crossed` view of ``r`` on ``axis`` (default: every item)."""
    if is_tallied(r):
        return crossed_from_sums(r, function, axis)
    values = numeric_values(r, function)
    if axis is None:
        axis = np.flatnonzero(r.ratings_per_item > 0)
    position = np.full(r.n_items, -1, dtype=np.int64)
    position[axis] = np.arange(axis.size)
    pos = position[r.item_codes]
    rows = np.flatnonzero(pos >= 0)
    pos = pos[rows]
    rater, n_raters = _compact_codes(r.rater_codes[rows], r.n_raters)
    counts = np.bincount(pos, minlength=axis.size)
    pairable = counts >= 2
    y = values[rows]
    kept = pairable[pos]
    mean = float(y[kept].mean()) if kept.any() else (float(y.mean()) if y.size else 0.0)
    return Crossed(axis=axis, pos=pos, rater=rater, y=y - mean, mean=mean, n_raters=n_raters, pairable=pairable)


def crossed_from_sums(r: TalliedRatings, function: str, axis: IntArray | None = None) -> Crossed:
    """The :class:`Crossed` view of ratings aggregated in a database, from their item x category counts and their
    raters' category counts on the pairable items: the same centred moments as :func:`crossed` on the judgements,
    without them (so :attr:`Crossed.by_item` / :attr:`Crossed.by_rater`, the bootstrap's, are refused).

    Raises
    ------
    DesignError
        ``axis`` is not every rated item (the rater sums cover a pool's rated items).
    """
    numeric_values(r, function, read=False)
    rated = np.flatnonzero(r.ratings_per_item > 0)
    if axis is not None and not np.array_equal(np.asarray(axis), rated):
        raise DesignError(f"{function}: the raters' sums aggregated in the database cover every rated item of the "
                          "pool, not a subset of items; compute it on the judgements (a pandas batch).",
                          Reason.INCOMPATIBLE_RATINGS)
    counts = r.item_counts[rated].astype(np.float64)
    n = counts.sum(axis=1)
    pairable = n >= 2
    values = r.category_values
    kept = float(n[pairable].sum())
    mean = float(counts[pairable].sum(axis=0) @ values / kept) if kept else float(counts.sum(axis=0) @ values
                                                                                  / max(float(n.sum()), 1.0))
    y = values - mean
    powers = np.column_stack([np.ones_like(y), y, y * y])
    raters = r.rater_category_table(rated[pairable]).astype(np.float64)
    empty = np.zeros(0, dtype=np.int64)
    c = Crossed(axis=rated, pos=empty, rater=empty, y=np.zeros(0), mean=mean, n_raters=r.n_raters,
                pairable=pairable, from_sums=True)
    # cached_property reads the instance dict first: the moments are the sums, not computed from judgements
    c.__dict__["item_m"] = counts @ powers
    c.__dict__["rater_m"] = raters @ powers
    return c


def _compact_codes(codes: IntArray, n: int) -> tuple[IntArray, int]:
    """Renumber the codes that occur as 0..k-1 (in code order) without sorting: O(N)."""
    used = np.bincount(codes, minlength=n) > 0
    if used.all():
        return codes.astype(np.int64, copy=False), n
    new = np.cumsum(used) - 1
    return new[codes].astype(np.int64), int(used.sum())


def _stacked(rows: IntArray, cols: IntArray, y: FloatArray, n_rows: int, n_cols: int) -> sp.csr_matrix:
    r3 = np.concatenate([rows, rows + n_rows, rows + 2 * n_rows])
    c3 = np.concatenate([cols, cols, cols])
    data = np.concatenate([np.ones_like(y), y, y * y])
    return sp.csr_matrix((data, (r3, c3)), shape=(3 * n_rows, n_cols))
