r"""The unit judgements of a span table, counted from the spans and expanded only when a metric reads them.

Every position of a document is a unit (:mod:`labelgate.core.spans`), so a span table of :math:`D` documents of
:math:`L` positions, each annotated by :math:`R` raters, holds :math:`D L R` judgements — 6·10⁷ per pool for
10⁴ documents of 2,000 characters and 3 raters — from a table of a few spans per document. The coefficients read
the judgements through their counts: the item x category counts :math:`n_{uc}` (:math:`D L \times q`) and the
rater x category counts. Both follow from the spans without a pass over the judgements: along the positions of a
document, :math:`n_{uc}` changes only where a span (or the document) begins or ends, so a table of those changes
(+1 and −1 per category) summed down the items is :math:`n_{uc}` (:func:`item_unit_counts`); a rater's count of label
:math:`k` is the width of their spans of that label, and of "O" the rest of their documents' positions.

:class:`SpanUnitRatings` is a `Ratings` that holds the recipe of the judgements (:class:`UnitPlan`) and makes
each of those counts, and the per-judgement codes (``item_codes``, ``rater_codes``, ``value_codes``), when first
read: the codes only for the metrics that read single judgements (bootstrap blocks, per-rater diagnostics) and the
gate's unit table. Every statistic is the same integer table either way, so every coefficient is the same number;
the units are the same per-position units.

Positions covered by overlapping spans of one rater with *different* labels make set judgements
(:func:`mixed_labels`; :mod:`labelgate.core.spans` builds those on the judgements). numpy only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from labelgate.core.cached import cached_statistic
from labelgate.core.index import LabelIndex
from labelgate.core.ratings import IntArray, JudgementsOnRead, Ratings
from labelgate.core.statistics import MAX_COUNT_CELLS
from labelgate.errors import InputError, Reason

#: Labels of overlapping spans are combined as bits of one integer: at most this many span labels.
MAX_OVERLAP_LABELS = 62

#: Judgements filled per step of the expansion: its temporaries stay this small, whatever the table's size.
FILL_BLOCK = 1 << 20


@dataclass(frozen=True)
class UnitPlan:
    """The judgements of one pool of a span table, as pairs (document, rater) and the spans of each pair.

    Pair ``p`` is the rater ``pair_rater[p]`` (a code among the pool's raters) on the document ``pair_item[p]``,
    whose units are ``offset[d] .. offset[d + 1] - 1`` on the unit index; pairs are sorted by (document, rater).
    The spans (of marked rows) are sorted by (pair, first unit), with end-exclusive unit ranges and label codes
    ``0 .. K-1``.
    """

    offset: IntArray
    pair_item: IntArray
    pair_rater: IntArray
    span_pair: IntArray
    first: IntArray
    stop: IntArray
    code: IntArray

    @property
    def size(self) -> IntArray:
        """Units (judgements) of each pair: its document's length in units."""
        return self.offset[self.pair_item + 1] - self.offset[self.pair_item]

    @property
    def pair_start(self) -> IntArray:
        """Where each pair's judgements begin (and, last, their number)."""
        return np.concatenate(([0], np.cumsum(self.size)))

    @property
    def n_judgements(self) -> int:
        return int(self.size.sum())

    def covered(self) -> tuple[IntArray, IntArray]:
        """(judgement position, span) of every unit each span covers, in span order."""
        width = self.stop - self.first
        begin = self.pair_start[self.span_pair] + self.first
        positions = np.repeat(begin - np.concatenate(([0], np.cumsum(width)[:-1])), width)
        positions += np.arange(positions.size, dtype=np.int64)
        return positions, np.repeat(np.arange(self.code.size), width)

    def judgements(self) -> tuple[IntArray, IntArray, IntArray]:
        """The per-judgement (item, rater, value) codes: value 0 is "O", label ``k`` is ``k + 1``; a position
        covered by several spans of a rater takes the label of the last of them (by start)."""
        item_codes, rater_codes = pair_codes(self.offset[self.pair_item], self.pair_rater, self.size,
                                             self.pair_start)
        values = np.zeros(item_codes.size, dtype=np.int64)
        positions, span_of = self.covered()
        values[positions] = self.code[span_of] + 1
        return item_codes, rater_codes, values


def pair_codes(pair_offset: IntArray, pair_rater: IntArray, size: IntArray, pair_start: IntArray,
               ) -> tuple[IntArray, IntArray]:
    """The item and rater code of every judgement: pair ``p`` holds the units ``pair_offset[p] ..`` of its
    document, ``size[p]`` of them, at judgements ``pair_start[p] ..``.

    Filled block by block of pairs (about :data:`FILL_BLOCK` judgements each; one Python step per block, not per
    pair): the only arrays as long as the judgements are the two results. A large temporary costs about as much as
    a result, most of it in the first touch of its memory.

    Examples
    --------
    >>> items, raters = pair_codes(np.array([0, 0, 3]), np.array([0, 1, 0]), np.array([3, 3, 2]),
    ...                            np.array([0, 3, 6, 8]))
    >>> items.tolist(), raters.tolist()
    ([0, 1, 2, 0, 1, 2, 3, 4], [0, 0, 0, 1, 1, 1, 0, 0])
    """
    n = int(pair_start[-1])
    item_codes = np.empty(n, dtype=np.int64)
    rater_codes = np.empty(n, dtype=np.int64)
    cuts = np.searchsorted(pair_start, np.arange(FILL_BLOCK, n, FILL_BLOCK), side="left")
    bounds = np.unique(np.concatenate(([0], cuts, [size.size])))
    widest = int((pair_start[bounds[1:]] - pair_start[bounds[:-1]]).max()) if bounds.size > 1 else 0
    running = np.arange(widest, dtype=np.int64)
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        low, high = int(pair_start[a]), int(pair_start[b])
        np.add(np.repeat(pair_offset[a:b] - (pair_start[a:b] - low), size[a:b]), running[:high - low],
               out=item_codes[low:high])
        rater_codes[low:high] = np.repeat(pair_rater[a:b], size[a:b])
    return item_codes, rater_codes


def cluster_starts(plan: UnitPlan) -> npt.NDArray[np.bool_]:
    """Per span, whether it starts a cluster: a run of spans of one pair each of which overlaps an earlier span of
    the run (spans that only touch, one ending where the next begins, are separate clusters)."""
    span_pair, first, stop = plan.span_pair, plan.first, plan.stop
    if span_pair.size == 0:
        return np.zeros(0, dtype=bool)
    scale = int(stop.max()) + 1
    # a span overlaps an earlier span of its pair iff it starts before the furthest end so far (a running maximum
    # within the pair: the pair's code keeps pairs apart)
    reach = np.maximum.accumulate(span_pair * scale + stop)
    overlaps = (span_pair[1:] == span_pair[:-1]) & (first[1:] < reach[:-1] - span_pair[1:] * scale)
    return np.concatenate(([True], ~overlaps))


def mixed_labels(plan: UnitPlan) -> tuple[IntArray, IntArray] | None:
    """Judgement positions covered by overlapping spans of one rater with different labels, and their label bit
    masks; None when no two overlapping spans of a rater differ in label (the common case: one pass over the
    spans)."""
    starts = cluster_starts(plan)
    if starts.all():
        return None
    code = plan.code
    head = np.flatnonzero(starts)
    mixed_cluster = np.minimum.reduceat(code, head) != np.maximum.reduceat(code, head)
    if not mixed_cluster.any():
        return None
    if int(code.max()) >= MAX_OVERLAP_LABELS:
        raise InputError(f"Spans with different labels overlap, and there are more than {MAX_OVERLAP_LABELS} span "
                         "labels: too many to combine into label sets.", Reason.TOO_MANY_CATEGORIES)
    positions, span_of = plan.covered()
    in_mixed = mixed_cluster[np.cumsum(starts) - 1][span_of]
    at, inverse = np.unique(positions[in_mixed], return_inverse=True)
    masks = np.zeros(at.size, dtype=np.int64)
    np.bitwise_or.at(masks, inverse.ravel(), np.left_shift(1, code[span_of[in_mixed]]))
    return at, masks


def item_unit_counts(plan: UnitPlan, q: int) -> IntArray:
    r"""The item x category counts :math:`n_{uc}` of categorical unit judgements, from the spans.

    Each cluster of overlapping spans of a rater holds one label here (:func:`mixed_labels` is None), so it covers
    the union of its spans with that label. At a unit :math:`u` (a position of document :math:`d`),
    :math:`n_{u,k}` is the raters of the pool covering :math:`u` with label :math:`k` and :math:`n_{u,O}` the
    other raters who annotated :math:`d`. Along the unit index these change only where a document or a covered
    range begins or ends: the changes (+1 / −1 in the column of a label, the opposite in "O") summed cumulatively
    down the items give the table. Column 0 is "O", column ``k + 1`` label ``k``.

    Examples
    --------
    One document of 4 characters; rater 0 marks [1, 3) with label 0, rater 1 marks nothing:

    >>> plan = UnitPlan(np.array([0, 4]), np.array([0, 0]), np.array([0, 1]), np.array([0]), np.array([1]),
    ...                 np.array([3]), np.array([0]))
    >>> item_unit_counts(plan, 2).tolist()
    [[2, 0], [1, 1], [1, 1], [2, 0]]
    """
    offset, pair_item = plan.offset, plan.pair_item
    pair, first, stop, label = _covered_ranges(plan)
    base = offset[pair_item[pair]]
    n_items = int(offset[-1])
    one_pair, one_span = np.ones(pair_item.size, dtype=np.int64), np.ones(pair.size, dtype=np.int64)
    rows = np.concatenate((offset[pair_item], offset[pair_item + 1], base + first, base + first, base + stop,
                           base + stop))
    cols = np.concatenate((0 * one_pair, 0 * one_pair, label, 0 * one_span, label, 0 * one_span))
    step = np.concatenate((one_pair, -one_pair, one_span, -one_span, -one_span, one_span))
    inside = rows < n_items  # a change at the end of the last document is followed by nothing
    counts = np.zeros((n_items, q), dtype=np.int64)
    np.add.at(counts.reshape(-1), rows[inside] * q + cols[inside], step[inside])
    np.cumsum(counts, axis=0, out=counts)
    return counts


def rater_unit_counts(plan: UnitPlan, n_raters: int, q: int) -> IntArray:
    """The rater x category counts of categorical unit judgements, from the spans: a rater's count of label
    ``k`` is the width of the ranges they cover with it, of "O" the rest of their documents' units.

    Examples
    --------
    >>> plan = UnitPlan(np.array([0, 4]), np.array([0, 0]), np.array([0, 1]), np.array([0]), np.array([1]),
    ...                 np.array([3]), np.array([0]))
    >>> rater_unit_counts(plan, 2, 2).tolist()
    [[2, 2], [4, 0]]
    """
    pair, first, stop, label = _covered_ranges(plan)
    width = stop - first
    raters = np.zeros(n_raters * q, dtype=np.int64)
    np.add.at(raters, plan.pair_rater * q, plan.size)
    np.add.at(raters, plan.pair_rater[pair] * q + label, width)
    np.add.at(raters, plan.pair_rater[pair] * q, -width)
    return raters.reshape(n_raters, q)


def _covered_ranges(plan: UnitPlan) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """(pair, first unit, stop, category code = label + 1) of each cluster of overlapping spans of one label."""
    heads = np.flatnonzero(cluster_starts(plan))
    stop = np.maximum.reduceat(plan.stop, heads) if heads.size else plan.stop[:0]
    return plan.span_pair[heads], plan.first[heads], stop, plan.code[heads] + 1


class SpanUnitRatings(JudgementsOnRead, Ratings):  # type: ignore[override]  # codes made on first read
    """Categorical unit judgements of a span table (level ``"nominal"``): a :class:`Ratings` whose item x category,
    rater x category and category counts come from the spans (:func:`item_unit_counts`, :func:`rater_unit_counts`)
    and whose per-judgement codes are expanded on first read (:meth:`UnitPlan.judgements`); each is made when
    first read, so a route that reads only the judgements (the gate's unit table) makes no count table.

    Examples
    --------
    >>> plan = UnitPlan(np.array([0, 4]), np.array([0, 0]), np.array([0, 1]), np.array([0]), np.array([1]),
    ...                 np.array([3]), np.array([0]))
    >>> r = SpanUnitRatings(plan, item_labels=np.arange(4), rater_labels=np.array(["a", "b"], dtype=object),
    ...                     categories=["O", "PER"])
    >>> r.n_ratings, r.expanded, r.value_codes.tolist(), r.expanded
    (8, False, [0, 1, 1, 0, 0, 0, 0, 0], True)
    """

    def __init__(self, plan: UnitPlan, *, item_labels: np.ndarray | LabelIndex, rater_labels: np.ndarray,
                 categories: Sequence[Any]) -> None:
        # Ratings.__init__ is not called: it takes the per-judgement codes, made here only when read
        self.plan = plan
        self.item_labels, self.rater_labels = item_labels, rater_labels
        self.categories, self.level, self.n_dropped_missing = tuple(categories), "nominal", 0
        self._n_ratings = plan.n_judgements
        if self._n_ratings == 0:
            raise InputError("The ratings are empty: no judgement with a value.", Reason.EMPTY_INPUT)

    @cached_statistic
    def item_counts(self) -> IntArray:
        """Item x category counts ``n_ic``, shape (n_items, n_categories), from the spans (:func:`item_unit_counts`)."""
        if self.n_items * self.n_categories > MAX_COUNT_CELLS:  # refused as for any Ratings, with its message
            return Ratings.item_counts.func(self)
        return item_unit_counts(self.plan, self.n_categories)

    @cached_statistic
    def rater_counts(self) -> IntArray:
        """Rater x category counts, from the spans (:func:`rater_unit_counts`)."""
        return rater_unit_counts(self.plan, self.n_raters, self.n_categories)

    @cached_statistic
    def category_counts(self) -> IntArray:
        """Ratings of each category: the column totals of :attr:`rater_counts`."""
        return self.rater_counts.sum(axis=0)

    @property
    def n_ratings(self) -> int:
        """Number of judgements (positions of the documents times their raters)."""
        return self._n_ratings

    @cached_statistic
    def _expanded(self) -> tuple[IntArray, IntArray, IntArray]:
        return self.plan.judgements()

    @property
    def expanded(self) -> bool:
        """Whether a metric has read single judgements (the per-judgement codes exist)."""
        return "_expanded" in self.__dict__
