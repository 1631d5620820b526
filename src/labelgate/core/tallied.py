r"""Aggregated ratings with each rater's category counts: what rater-specific statistics need, without judgements.

Three statistics need to know who gave a label, yet only through sums over raters: Conger's κ and Janson–Olsson's
nominal ι (each rater's category counts over the items of the chance term), the interval ι (each rater's count, sum
and sum of squares) and the variance components of the labeler ICC (the same moments per rater over the pairable
items, besides the per-item ones). A database returns those sums from ``GROUP BY rater, label`` restricted to the
items concerned; :class:`TalliedRatings` holds them beside the item x category rows of
:class:`~labelgate.core.ratings.AggregatedRatings`.

The items a rater sum covers are fixed by the query, so the counts are kept per **item class**: bit 0 set for an
item with two or more ratings in this pool (pairable), bit 1 for an item the other pool also rated (common). Every
item set the metrics ask for — every rated item, the pairable ones, the common ones, the pairable common ones — is
a union of classes; :meth:`TalliedRatings.rater_category_table` answers exactly those and refuses any other set
rather than approximate it. Nothing here holds one entry per judgement: a metric that resamples judgements (an
interval) reads :attr:`~TalliedRatings.rater_codes`, which raises.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeGuard

import numpy as np

from labelgate.core.ratings import AggregatedRatings, Ratings
from labelgate.core.statistics import IntArray
from labelgate.errors import DesignError, InputError, Reason

#: Item class bits: two or more ratings in this pool; rated in the other pool too.
PAIRABLE, COMMON = 1, 2
#: The number of item classes (every combination of the bits).
N_CLASSES = 4


def item_classes(own: IntArray, other: IntArray | None) -> IntArray:
    """Each item's class from its ratings in this pool (``own``) and in the other pool (``other``, None without
    one); -1 for an item this pool did not rate.

    >>> item_classes(np.array([2, 1, 0, 3]), np.array([1, 0, 4, 0])).tolist()
    [3, 0, -1, 1]
    """
    classes = np.where(own >= 2, PAIRABLE, 0) + (np.where(other > 0, COMMON, 0) if other is not None else 0)
    return np.where(own > 0, classes, -1).astype(np.int64)


class TalliedRatings(AggregatedRatings):
    """:class:`~labelgate.core.ratings.AggregatedRatings` plus each rater's category counts per item class.

    Parameters
    ----------
    base : AggregatedRatings
        The pool's item x category rows (shared, not copied).
    rater_labels : sequence
        The raters' ids (rater code = position).
    tallies : (4, n_raters, n_categories) int array
        ``tallies[c, j, k]``: judgements of rater ``j`` in category ``k`` on the items of class ``c``.
    classes : (n_items,) int array
        Each item's class (:func:`item_classes`; -1 for an unrated item).

    Raises
    ------
    InputError
        The tallies do not add up to the item rows (per class): the two were read from different rows.
    """

    def __init__(self, base: AggregatedRatings, rater_labels: Sequence[Any], tallies: IntArray,
                 classes: IntArray) -> None:
        super().__init__(base.row_items, base.row_categories, base.row_counts, item_labels=base.item_labels,
                         categories=base.categories, level=base.level, n_dropped_missing=base.n_dropped_missing)
        labels = np.empty(len(rater_labels), dtype=object)
        labels[:] = list(rater_labels)
        self.rater_labels = labels
        self.tallies = np.asarray(tallies, dtype=np.int64)
        self.classes = np.asarray(classes, dtype=np.int64)
        if self.tallies.shape != (N_CLASSES, len(labels), self.n_categories) or self.classes.shape != (
                self.n_items,):
            raise InputError(f"TalliedRatings: tallies of shape {self.tallies.shape} and classes of shape "
                             f"{self.classes.shape} do not fit {len(labels)} raters, {self.n_categories} categories "
                             f"and {self.n_items} items.", Reason.UNREADABLE_INPUT)
        rated = self.classes >= 0
        per_class = np.bincount(self.classes[rated], weights=self.ratings_per_item[rated], minlength=N_CLASSES)
        if not np.array_equal(per_class.astype(np.int64), self.tallies.sum(axis=(1, 2))):
            raise InputError("The raters' counts do not add up to the item counts of the same items (per item "
                             f"class: {self.tallies.sum(axis=(1, 2)).tolist()} vs {per_class.astype(int).tolist()} "
                             "judgements); the batch changed between the queries: validate a batch that is not "
                             "being written to.", Reason.UNREADABLE_INPUT)

    def rater_category_table(self, items: IntArray) -> IntArray:
        """Rater x category counts of the judgements on the items ``items`` (codes), shape (n_raters, q).

        Raises
        ------
        DesignError
            ``items`` is not a union of item classes (part of a class only): its raters' counts are not among
            the aggregates.
        """
        classes = self.classes[np.asarray(items, dtype=np.int64)]
        asked = np.bincount(classes[classes >= 0], minlength=N_CLASSES)
        whole = np.bincount(self.classes[self.classes >= 0], minlength=N_CLASSES)
        if np.any((asked > 0) & (asked < whole)):
            raise DesignError("The raters' category counts of these items are not among the database's aggregates "
                              "(they cover every rated, pairable or common item of a pool, not a sample of items); "
                              "compute this statistic on the judgements (a pandas batch).",
                              Reason.INCOMPATIBLE_RATINGS)
        return self.tallies[asked > 0].sum(axis=0)

    @property
    def rater_counts(self) -> IntArray:
        """Rater x category counts over every rated item, shape (n_raters, n_categories)."""
        return self.tallies.sum(axis=0)

    @property
    def rater_codes(self) -> IntArray:  # type: ignore[override]
        """Refused: the aggregates hold each rater's sums, not which rater gave each judgement."""
        raise DesignError("These ratings were aggregated in the database: they hold each rater's category counts, "
                          "not which rater gave each judgement, which this computation (e.g. a bootstrap interval "
                          "resampling the judgements) needs. Compute it on the judgements (a pandas batch).",
                          Reason.INCOMPATIBLE_RATINGS)


def is_tallied(r: Ratings) -> TypeGuard[TalliedRatings]:
    """Whether ``r`` holds rater sums instead of judgements (:class:`TalliedRatings`)."""
    return isinstance(r, TalliedRatings)
