"""`PartitionedRatings`: a `Ratings` built from precomputed sufficient statistics; the codes come on demand.

The class knows nothing of Dask or partitions: it takes one pool's :class:`PoolStatistics` (combined by the
driver) and a :class:`CodeSource` that can bring the per-judgement codes when a metric reads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

import numpy as np

from labelgate.core.ratings import LEVELS, FloatArray, IntArray, Level, Ratings
from labelgate.errors import InputError, Reason, check_option


class CodeSource(Protocol):
    """Where the per-judgement codes of the pools built from one table live (e.g. a Dask cluster)."""

    def fetch(self, pool: int) -> tuple[IntArray, IntArray, IntArray]:
        """(item, rater, value) codes of the pool's judgements in table order, before any renumbering."""
        ...

    def release(self) -> None:
        """Free the codes, for every pool."""
        ...


@dataclass
class PoolStatistics:
    """One pool's sufficient statistics, the input of :class:`PartitionedRatings`.

    Attributes
    ----------
    pool_code : int
        The pool's position in its :class:`CodeSource`.
    item_counts : numpy.ndarray or None
        Item x category counts; None when there are too many cells (then built from the codes on demand).
    item_moments, rater_moments : numpy.ndarray or None
        (count, sum, sum of squares) rows; None when they are derived from the counts (integer category
        values: the sums are exact in any order).
    centered : dict
        Centre -> per-item (count, sum, sum of squares) of the values minus that centre.
    item_renumber, rater_renumber : numpy.ndarray or None
        Code in this pool of each code in the source, when the pool drops unused items or raters.
    """

    pool_code: int
    item_labels: np.ndarray
    rater_labels: np.ndarray
    categories: Sequence[Any]
    level: Level
    n_dropped_missing: int
    ratings_per_item: IntArray
    rater_counts: IntArray
    moment_center: float
    item_counts: IntArray | None = None
    item_moments: FloatArray | None = None
    rater_moments: FloatArray | None = None
    centered: dict[float, FloatArray] = field(default_factory=dict)
    item_renumber: IntArray | None = None
    rater_renumber: IntArray | None = None


class PartitionedRatings(Ratings):
    """A :class:`~labelgate.Ratings` built from partitions; per-judgement codes stay on the cluster.

    Built by :func:`ratings_from_dask` or :func:`ratings_by_pool_dask`. The sufficient statistics
    (``ratings_per_item``, ``item_counts``, ``item_moments``, ``rater_counts``, ``rater_moments``, the centred
    moments) are precomputed; ``item_codes``, ``rater_codes``, ``value_codes`` and ``values`` are fetched from the
    workers the first time a metric reads them, and cached (24 bytes per judgement).

    Parameters
    ----------
    statistics : PoolStatistics
        The pool's combined statistics.
    source : CodeSource
        Where its per-judgement codes are fetched from.
    n_partitions : int
        Partitions of the source table.

    Attributes
    ----------
    n_partitions : int
        Partitions of the source table.
    """

    def __init__(self, statistics: PoolStatistics, *, source: CodeSource, n_partitions: int) -> None:
        # Ratings.__init__ is not called: it needs the per-judgement codes, which are fetched only on demand.
        s = statistics
        check_option(s.level, LEVELS, "level", "PartitionedRatings")
        self.item_labels = s.item_labels
        self.rater_labels = s.rater_labels
        self.categories = tuple(s.categories)
        self.level: Level = s.level
        self.n_dropped_missing = s.n_dropped_missing
        self.n_partitions = n_partitions
        self._source = source
        self._pool_code = s.pool_code
        self._n_ratings = int(s.ratings_per_item.sum())
        self._centered = s.centered
        self._moments_from_counts = s.item_moments is None
        self._item_renumber = s.item_renumber
        self._rater_renumber = s.rater_renumber
        self._codes: tuple[IntArray, IntArray, IntArray] | None = None
        if self._n_ratings == 0:
            raise InputError("The ratings are empty: no judgement with a value.", Reason.EMPTY_INPUT)
        # seeds the cached properties of Ratings (functools.cached_property stores in the instance dict); the
        # ones left out are computed by the properties below, or by Ratings from the fetched codes
        seeded = {"ratings_per_item": s.ratings_per_item, "rater_counts": s.rater_counts,
                  "moment_center": s.moment_center, "item_counts": s.item_counts, "item_moments": s.item_moments,
                  "rater_moments": s.rater_moments}
        self.__dict__.update({name: value for name, value in seeded.items() if value is not None})

    # ---------------------------------------------------------------- per-judgement codes (lazy)
    def fetch_codes(self) -> PartitionedRatings:
        """Fetch the per-judgement codes from the workers now (they are cached); returns ``self``."""
        if self._codes is None:
            item, rater, value = self._source.fetch(self._pool_code)
            if self._item_renumber is not None:
                item = self._item_renumber[item]
            if self._rater_renumber is not None:
                rater = self._rater_renumber[rater]
            self._codes = (item.astype(np.int64), rater.astype(np.int64), value.astype(np.int64))
        return self

    @property
    def judgements_in_memory(self) -> bool:
        """Whether the per-judgement codes are here (fetched); metrics do not fetch them for a standard error."""
        return self._codes is not None

    def release(self) -> None:
        """Free the codes held on the workers (for every pool built from the same table)."""
        self._source.release()

    @property
    def item_codes(self) -> IntArray:  # type: ignore[override]
        """Item code of each judgement (fetched from the workers on first use)."""
        return self.fetch_codes()._codes[0]  # type: ignore[index]

    @property
    def rater_codes(self) -> IntArray:  # type: ignore[override]
        """Rater code of each judgement (fetched from the workers on first use)."""
        return self.fetch_codes()._codes[1]  # type: ignore[index]

    @property
    def value_codes(self) -> IntArray:  # type: ignore[override]
        """Category code of each judgement (fetched from the workers on first use)."""
        return self.fetch_codes()._codes[2]  # type: ignore[index]

    @property
    def n_ratings(self) -> int:
        """Number of judgements."""
        return self._n_ratings

    def centered_item_moments(self, center: float | None = None) -> FloatArray:
        """Per-item (count, sum, sum of squares) of ``values - center``, combined from the partitions.

        Precomputed for the centres of the pools built together; any other centre is computed from the
        fetched per-judgement codes, exactly as :meth:`Ratings.centered_item_moments`.
        """
        shift = self.moment_center if center is None else float(center)
        if shift in self._centered:
            return self._centered[shift].copy()
        if self._moments_from_counts:
            return _moments_from_counts(self.item_counts, self.category_values - shift)
        return super().centered_item_moments(shift)

    @cached_property
    def item_moments(self) -> FloatArray:
        """Per-item (count, sum, sum of squares) of the values, shape (n_items, 3)."""
        if self._moments_from_counts:
            return _moments_from_counts(self.item_counts, self.category_values)
        return super().item_moments

    @cached_property
    def rater_moments(self) -> FloatArray:
        """Per-rater (count, sum, sum of squares) of the values, shape (n_raters, 3)."""
        if self._moments_from_counts:
            return _moments_from_counts(self.rater_counts, self.category_values)
        return super().rater_moments

    def __repr__(self) -> str:
        return (f"PartitionedRatings(level={self.level!r}, n_items={self.n_items}, n_raters={self.n_raters}, "
                f"n_ratings={self.n_ratings}, categories={list(self.categories)[:10]}, "
                f"n_partitions={self.n_partitions})")


def _moments_from_counts(counts: IntArray, x: FloatArray) -> FloatArray:
    """(count, sum, sum of squares) rows from a code x category table; exact for integer ``x``."""
    c = counts.astype(np.float64)
    return np.column_stack([c.sum(axis=1), c @ x, c @ (x * x)])
