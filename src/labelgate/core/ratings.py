"""`Ratings`: the one canonical, sparse representation of a set of judgements.

A :class:`Ratings` holds one integer code per judgement (item, rater, category)
and lazily caches the sufficient statistics every metric is computed from:
item x category counts, rater x category counts and per-item / per-rater
moments of the category values. It never builds a raters x items matrix.

This module imports numpy only. Tables are read through duck typing: pandas
categoricals, Arrow dictionary columns and :class:`EncodedColumn` pass their codes
through, numeric arrays and Arrow strings of one byte width are coded without
hashing strings (:mod:`labelgate.core.strings`), pandas Series use their
``factorize`` and object arrays are grouped by their cached hashes
(:mod:`labelgate.core.columns`); :mod:`labelgate.core.build` turns the codes into a
`Ratings`, :mod:`labelgate.core.pools` splits a table by pool, the count and
contingency tables are read by :mod:`labelgate.core.categories` and
:mod:`labelgate.core.align` matches two `Ratings` item by item.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from labelgate.core.aggregated import add_up, check_rows, expand_rows, row_item_counts, row_moments
from labelgate.core.align import align_items
from labelgate.core.build import (
    DuplicatePolicy,
    MissingPolicy,
    assemble,
    check_ids,
    require_columns,
    row_label,
    slots_within_items,
)
from labelgate.core.cached import cached_statistic
from labelgate.core.categories import Level, contingency_judgements, count_rows, resolve_categories
from labelgate.core.column import Column, EncodedColumn, is_missing, python_scalar
from labelgate.core.columns import factorize, visits_objects
from labelgate.core.index import LabelIndex
from labelgate.core.parallel import run_steps
from labelgate.core.pools import pool_arguments
from labelgate.core.statistics import MAX_COUNT_CELLS, FloatArray, IntArray, SufficientStatistics
from labelgate.core.statistics import _moments as _moments  # re-exported: the Dask kernels use it
from labelgate.errors import DesignError, InputError, Reason, check_option

LEVELS: tuple[Level, ...] = ("nominal", "ordinal", "interval", "ratio")
#: The builders of set-valued (multi-label) ratings, level "set": installed by :mod:`labelgate.core.sets` (which
#: subclasses `Ratings`, so this module cannot import it; the package imports it with the core).
MULTI_LABEL: dict[str, Callable[..., Any]] = {}

__all__ = [
    "LEVELS",
    "MAX_COUNT_CELLS",
    "AggregatedRatings",
    "DuplicatePolicy",
    "EncodedColumn",
    "FloatArray",
    "IntArray",
    "Level",
    "MissingPolicy",
    "RaterSlot",
    "Ratings",
    "align_items",
    "as_ratings_list",
    "common_categories",
    "ratings_by_pool",
]

# The helpers' former private names, imported by the Dask build, the variance design and older callers.
_Column, _python_scalar, _resolve_categories, _row_label = Column, python_scalar, resolve_categories, row_label
_is_missing = is_missing



class RaterSlot(int):
    """Placeholder rater of :meth:`Ratings.from_counts`: the position of a rating on its item, not a person.

    A count table has no rater identity; metrics that need one (Conger's and Cohen's κ) recognise these labels
    and refuse the ratings.
    """

    def __repr__(self) -> str:
        return f"RaterSlot({int(self)})"


class Ratings(SufficientStatistics):
    """Judgements of items by raters on a measurement scale.

    Build it with :meth:`from_long` (one row per judgement) or :meth:`from_wide`
    (items x raters, NaN = missing); split a table with a pool column with
    :func:`ratings_by_pool`.

    Attributes
    ----------
    level : {"nominal", "ordinal", "interval", "ratio"}
        Measurement level; it selects the distance used by distance-based metrics.
    categories : tuple
        Ordered category list (explicit, or the sorted observed values).
    item_labels, rater_labels : numpy.ndarray
        Original ids, indexed by item / rater code. The item ids of a table are made into Python objects when
        ``item_labels`` is first read (no coefficient reads them); ``item_index`` holds them until then.
    n_dropped_missing : int
        Judgements dropped because their value was missing.

    Examples
    --------
    >>> import labelgate as lg
    >>> r = lg.Ratings.from_wide([[1, 1], [0, 1], [0, 0]], level="nominal")
    >>> r.n_items, r.n_raters, r.n_ratings, r.categories
    (3, 2, 6, (0, 1))
    """

    def __init__(self, item_codes: IntArray, rater_codes: IntArray, value_codes: IntArray, *,
                 item_labels: np.ndarray | LabelIndex, rater_labels: np.ndarray, categories: Sequence[Any],
                 level: Level, n_dropped_missing: int = 0) -> None:
        check_option(level, LEVELS, "level", "Ratings")
        self.item_codes = np.asarray(item_codes, dtype=np.int64)
        self.rater_codes = np.asarray(rater_codes, dtype=np.int64)
        self.value_codes = np.asarray(value_codes, dtype=np.int64)
        self.item_labels = item_labels
        self.rater_labels = rater_labels
        self.categories = tuple(categories)
        self.level: Level = level
        self.n_dropped_missing = n_dropped_missing
        if self.item_codes.size == 0:
            raise InputError("The ratings are empty: no judgement with a value.", Reason.EMPTY_INPUT)

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_long(cls, data: Any, item: str = "item_id", rater: str | None = "rater_id", value: str = "label", *,
                  level: Level | Literal["set"] = "nominal", categories: Sequence[Any] | None = None,
                  duplicates: DuplicatePolicy = "error", missing: MissingPolicy = "drop",
                  distance: str | None = None, sep: str | None = None) -> Ratings:
        """Build from long data: one row per judgement.

        Parameters
        ----------
        data : DataFrame, Arrow table or mapping of column name to 1-D array
            The judgements. Each column is coded by the cheapest route its
            form allows: categorical, Arrow dictionary and
            :class:`EncodedColumn` columns pass their codes through; ids of
            one byte width up to 8 (``"i0012345"``, Arrow strings, or ASCII
            Python strings of one length) are coded from their bytes without
            hashing strings (:mod:`labelgate.core.strings`).
        item, rater, value : str
            Column names of the item id, rater id and label. ``rater=None``:
            the table has no rater column — each row is an (item, label) pair,
            as the xRR tool reads them. The raters are then numbered within each
            item in row order (placeholder raters, :class:`RaterSlot`): they are
            taken as **exchangeable**, the ``k``-th rating of one item and of
            another are not the same person, so the coefficients that need rater
            identity (Conger's, Cohen's κ, the crossed-model correlations) refuse
            these ratings as they refuse a count table, and everything else
            equals the same ratings with any rater ids. Level ``"set"`` needs a
            rater column.
        level : {"nominal", "ordinal", "interval", "ratio", "set"}, default "nominal"
            Measurement level of the label. ``"set"``: each label is a set of
            categories (multi-label), compared by ``distance``; the result is a
            :class:`labelgate.core.sets.SetRatings`.
        categories : sequence, optional
            Explicit (ordered) category list. A label outside it is an error.
            Default: the sorted observed labels.
        duplicates : {"error", "first", "last"}, default "error"
            What to do when one rater judged one item more than once.
        missing : {"drop", "error"}, default "drop"
            Rows whose label is missing are dropped (and counted in
            ``n_dropped_missing``) or rejected.
        distance : {"jaccard", "masi"}, optional
            Level ``"set"`` only (default ``"jaccard"``): the distance between two
            label sets (:mod:`labelgate.core.sets`).
        sep : str, optional
            Level ``"set"`` only: a label given as a string is split at ``sep``
            (``"a|b"``; an empty string is the empty set). A list, tuple, set
            or frozenset cell is a set as it is; an empty one means "none
            applies" (a judgement), a missing cell (None, NaN) no judgement.

        Raises
        ------
        InputError
            Empty input, missing column, missing item or rater id, unknown
            category, non-numeric value for interval/ratio, duplicate judgement.
        """
        if level == "set" or distance is not None or sep is not None:
            if rater is None:
                raise InputError("Ratings.from_long: label sets (level 'set') need a rater column; rater=None "
                                 "numbers raters within items, which a set distance between raters cannot use.",
                                 Reason.MISSING_COLUMN)
            return MULTI_LABEL["from_long"](data, item, rater, value, level=level, distance=distance, sep=sep,
                                            categories=categories, duplicates=duplicates, missing=missing)
        check_option(level, LEVELS, "level", "Ratings.from_long")
        check_option(duplicates, ("error", "first", "last"), "duplicates", "Ratings.from_long")
        check_option(missing, ("drop", "error"), "missing", "Ratings.from_long")
        if rater is None:
            return cls._from_item_label_pairs(data, item, value, level=level, categories=categories,
                                              missing=missing)
        require_columns(data, (("item", item), ("rater", rater), ("value", value)))
        row_labels = getattr(data, "index", None)
        names = (item, rater, value)
        columns = [data[name] for name in names]
        items, raters, values = run_steps(
            [partial(factorize, column, ordered=name != value) for name, column in zip(names, columns, strict=True)],
            len(columns[0]), holds_interpreter_lock=[visits_objects(column) for column in columns])
        check_ids(((item, items), (rater, raters)), row_labels)
        return cls(**assemble(items, raters, values, level=level, categories=categories, duplicates=duplicates,
                              missing=missing, value_column=value, row_labels=row_labels, every_id_used=True))

    @classmethod
    def from_spans(cls, data: Any, item: str = "item_id", rater: str = "rater_id", start: str = "start",
                   end: str = "end", label: str = "label", length: str = "length", *,
                   unit: Literal["char", "token"] = "char", tokens: str | None = None) -> Ratings:
        """Build unit judgements from text spans: one row per span, every position of a document a unit.

        Each rater who annotated a document judges each of its positions (characters, or tokens with
        ``unit="token"``): the label of the span covering it, or ``"O"`` (outside every span). The result is a
        nominal `Ratings` whose items are the units ``(document id, position)``, so every coefficient, interval
        and diagnostic applies; where spans of one rater with different labels overlap, the judgements are label
        sets (a :class:`labelgate.core.sets.SetRatings`, Jaccard distance, ``"O"`` the empty set). Built without a
        loop per character (:mod:`labelgate.core.spans`); categorical units are counted from the spans and their
        single judgements made only when a metric reads them (:mod:`labelgate.core.spanunits`); pools on one unit
        index: :func:`labelgate.core.spans.spans_by_pool`.

        Parameters
        ----------
        data : DataFrame or mapping of columns
            One row per span.
        item, rater : str
            The document id and rater id columns.
        start, end : str
            End-exclusive character offsets ``[start, end)`` (as Label Studio's). A row with both empty: the
            rater annotated the document and marked nothing.
        label : str
            The span's label (any value but ``"O"``).
        length : str
            The document's length in characters (one value per document).
        unit : {"char", "token"}, default "char"
            The unit of agreement. ``"token"``: a span covers the tokens it shares a character with.
        tokens : str, optional
            With ``unit="token"``: the column holding, per document, a list of ``(start, end)`` token offsets or
            the document's text (split at whitespace).

        Raises
        ------
        InputError
            A missing column or id, a half-empty, empty, reversed or out-of-range span, a span without a label,
            different lengths for one document, unreadable tokens.

        Examples
        --------
        >>> import labelgate as lg
        >>> spans = {"item_id": ["d1", "d1", "d1"], "rater_id": ["a", "b", "b"], "start": [0, 0, 4],
        ...          "end": [3, 3, 6], "label": ["PER", "PER", "LOC"], "length": [8, 8, 8]}
        >>> r = lg.Ratings.from_spans(spans)
        >>> r.n_items, r.n_ratings, r.categories
        (8, 16, ('O', 'LOC', 'PER'))
        >>> round(float(lg.percent_agreement(r)), 3)
        0.75
        """
        return MULTI_LABEL["from_spans"](data, item, rater, start, end, label, length, unit=unit,
                                         tokens=tokens)

    @classmethod
    def from_boxes(cls, data: Any, item: str = "item_id", rater: str = "rater_id", x: str = "x", y: str = "y",
                   width: str = "width", height: str = "height", label: str = "label", *, iou: float = 0.5,
                   ) -> Ratings:
        """Build object judgements from bounding boxes: per image, the boxes of different raters are grouped into
        objects, and each object is a unit.

        The grouping rule (:mod:`labelgate.core.boxes`): pairs of boxes of different raters with IoU >= ``iou``,
        taken in decreasing IoU (ties by row order), merge their objects unless the merged object would hold two
        boxes of one rater. Each rater who annotated the image judges every object of it: the label of their box
        in it, or ``"none"`` (missed). Pools on one object index: :func:`labelgate.core.boxes.boxes_by_pool`; the
        mean IoU of the matched boxes: :func:`labelgate.matched_iou`.

        Parameters
        ----------
        data : DataFrame or mapping of columns
            One row per box; a row whose x, y, width and height are all empty: the rater annotated the image and
            drew nothing.
        item, rater, label : str
            The image id, rater id and box label columns.
        x, y, width, height : str
            The box: its top-left corner and its size, in one unit per image (pixels, or Label Studio's percent).
        iou : float, default 0.5
            The smallest intersection over union at which two boxes may be one object, in (0, 1].

        Examples
        --------
        >>> import labelgate as lg
        >>> boxes = {"item_id": ["i1"] * 3, "rater_id": ["a", "b", "b"], "x": [0, 1, 50], "y": [0, 0, 50],
        ...          "width": [10, 10, 5], "height": [10, 10, 5], "label": ["car", "car", "dog"]}
        >>> r = lg.Ratings.from_boxes(boxes)
        >>> r.n_items, r.categories, r.value_codes.tolist()
        (2, ('none', 'car', 'dog'), [1, 0, 1, 2])
        """
        return MULTI_LABEL["from_boxes"](data, item, rater, x, y, width, height, label,
                                         iou=iou)

    @classmethod
    def _from_item_label_pairs(cls, data: Any, item: str, value: str, *, level: Level,
                               categories: Sequence[Any] | None, missing: MissingPolicy) -> Ratings:
        """:meth:`from_long` without a rater column: placeholder raters numbered within each item, in row order."""
        require_columns(data, (("item", item), ("value", value)))
        row_labels = getattr(data, "index", None)
        items = factorize(data[item], ordered=True)
        values = factorize(data[value], ordered=False)
        check_ids(((item, items),), row_labels)
        slots, n_slots = slots_within_items(items, values)
        raters = Column(slots, np.asarray([RaterSlot(k) for k in range(max(n_slots, 1))], dtype=object))
        return cls(**assemble(items, raters, values, level=level, categories=categories, duplicates="error",
                              missing=missing, value_column=value, row_labels=row_labels))

    @classmethod
    def from_wide(cls, data: Any, *, level: Level = "nominal", categories: Sequence[Any] | None = None,
                  ) -> Ratings:
        """Build from wide data: rows are items, columns are raters, NaN/None = missing.

        Parameters
        ----------
        data : DataFrame, 2-D array or nested sequence
            Items x raters. A DataFrame's index gives the item ids and its
            columns the rater ids; otherwise positions are used.
        level, categories
            As in :meth:`from_long`.
        """
        check_option(level, LEVELS, "level", "Ratings.from_wide")
        if hasattr(data, "to_numpy") and hasattr(data, "columns"):
            matrix = data.to_numpy(dtype=object)
            item_labels = np.asarray(list(data.index), dtype=object)
            rater_labels = np.asarray(list(data.columns), dtype=object)
        else:
            matrix = np.asarray(data, dtype=object)
            if matrix.ndim != 2:
                raise InputError(f"Wide ratings must be 2-D (items x raters); got {matrix.ndim} dimension(s).",
                                 Reason.EMPTY_INPUT)
            item_labels = np.arange(matrix.shape[0], dtype=np.int64).astype(object)
            rater_labels = np.arange(matrix.shape[1], dtype=np.int64).astype(object)
        if matrix.size == 0:
            raise InputError("The wide ratings table is empty.", Reason.EMPTY_INPUT)
        present = ~is_missing(matrix)
        item_idx, rater_idx = np.nonzero(present)
        values = factorize(matrix[present])
        items = Column(item_idx.astype(np.int64), item_labels)
        raters = Column(rater_idx.astype(np.int64), rater_labels)
        return cls(**assemble(items, raters, values, level=level, categories=categories, duplicates="error",
                              missing="drop", value_column="value", row_labels=None))

    @classmethod
    def from_contingency(cls, table: Any, categories: Sequence[Any] | None = None, *, level: Level = "nominal",
                         raters: tuple[Any, Any] = (0, 1)) -> Ratings:
        r"""Build two raters' ratings from their q x q contingency table.

        Cell ``(k, l)`` is the number of items the first rater (rows) put in
        category ``k`` and the second (columns) in category ``l``; every item is
        rated by both (the input of irrCAC's ``*.table`` functions, Gwet 2014,
        ch. 2). The result holds ``2 n`` judgements on :math:`n = \sum_{kl} n_{kl}`
        items, so every metric applies; Cohen's κ of it is the table's κ.

        Parameters
        ----------
        table : DataFrame, 2-D array or nested sequence
            Non-negative integer counts, square. A DataFrame's index (equal to
            its columns) gives the categories unless ``categories`` is passed.
        categories : sequence, optional
            The q categories of the rows and columns, in order. Default: the
            DataFrame's index, else ``0..q-1``.
        level : {"nominal", "ordinal", "interval", "ratio"}, default "nominal"
            Measurement level; interval/ratio categories must be numbers.
        raters : pair, default (0, 1)
            Labels of the row rater and the column rater.

        Raises
        ------
        InputError
            Not a square table of non-negative integer counts, or no count.
        ParameterError
            ``categories`` of the wrong length, with duplicates, or not numbers for interval/ratio.

        Examples
        --------
        >>> import labelgate as lg
        >>> r = lg.Ratings.from_contingency([[13, 0, 0], [0, 20, 7], [0, 4, 56]],
        ...                                 categories=["Ectopic", "AIU", "NIU"])
        >>> r.n_items, r.n_raters, round(float(lg.cohen_kappa(r)), 4)
        (100, 2, 0.7964)
        """
        check_option(level, LEVELS, "level", "Ratings.from_contingency")
        return cls(**contingency_judgements(table, categories, level, raters))

    @classmethod
    def from_counts(cls, counts: Any, categories: Sequence[Any] | None = None, *, level: Level = "nominal",
                    ) -> Ratings:
        r"""Build from an items x categories count table: how many raters put each item in each category.

        The input of irrCAC's ``*.dist`` functions (Gwet 2014): row ``i`` is an
        item, cell ``(i, k)`` the number :math:`r_{ik}` of its ratings in
        category ``k``; rows may have different totals (missing ratings) and
        rows without a rating are dropped. The table says nothing about *who*
        rated: the judgements are given placeholder raters (:class:`RaterSlot`,
        the rating's position on its item), so only coefficients that need no
        rater identity accept these ratings — percent agreement, specific
        agreement, Brennan–Prediger, Fleiss' κ / Scott's π, Gwet's AC1/AC2,
        Krippendorff's α, SPA. Conger's and Cohen's κ raise ``DesignError``.

        The item x category counts are taken from the table as they are (the
        sufficient statistic of these coefficients), through
        :meth:`from_aggregates`: no per-judgement array is built.

        Parameters
        ----------
        counts : DataFrame, 2-D array or nested sequence
            Non-negative counts, items x categories. A DataFrame's
            index gives the item ids and its columns the categories.
            Non-integer (weighted) counts are accepted, as statsmodels'
            ``fleiss_kappa`` accepts them: percent agreement, Brennan–Prediger,
            Fleiss' κ / Scott's π, Gwet's AC1/AC2 and Krippendorff's α are
            defined on them (algebraic in the counts); specific agreement, SPA,
            the pair functions and everything that reads single judgements
            refuse them (``DesignError``; docs/metrics.md).
        categories : sequence, optional
            The q categories of the columns, in order. Default: the
            DataFrame's columns, else ``0..q-1``.
        level : {"nominal", "ordinal", "interval", "ratio"}, default "nominal"
            Measurement level; interval/ratio categories must be numbers.

        Raises
        ------
        InputError
            Not a table of non-negative finite counts, no count, or a repeated item id in the index.
        ParameterError
            ``categories`` of the wrong length, with duplicates, or not numbers for interval/ratio.

        Examples
        --------
        >>> import labelgate as lg
        >>> r = lg.Ratings.from_counts([[0, 0, 0, 6, 0], [0, 3, 0, 0, 3], [0, 1, 4, 0, 1]])
        >>> r.n_items, r.n_ratings, r.item_counts[2].tolist()
        (3, 18, [0, 1, 4, 0, 1])
        """
        check_option(level, LEVELS, "level", "Ratings.from_counts")
        items, cells, cell_counts, labels, cats = count_rows(counts, categories, level)
        return cls.from_aggregates(items, cells, cell_counts, item_labels=labels, categories=cats, level=level)

    @classmethod
    def from_aggregates(cls, item_codes: npt.ArrayLike, category_codes: npt.ArrayLike, counts: npt.ArrayLike, *,
                        item_labels: Sequence[Any] | np.ndarray, categories: Sequence[Any], level: Level = "nominal",
                        n_dropped_missing: int = 0) -> Ratings:
        r"""Build from aggregated rows: row ``j`` says that ``counts[j]`` judgements put item ``item_codes[j]`` in
        category ``category_codes[j]`` — what ``GROUP BY item, label`` returns.

        The one entry point from aggregates (a database's, a partitioned table's): the item x category counts
        :math:`n_{ic}` are one ``bincount`` of the rows and the per-item moments
        :math:`(r_i, \sum_c n_{ic} v_c, \sum_c n_{ic} v_c^2)` weighted sums over them; no per-judgement array is
        built, so the memory is that of the rows and of the statistics. Rows may repeat a pair (the counts add
        up) and hold zero counts (ignored). As with :meth:`from_counts` the raters are placeholders
        (:class:`RaterSlot`): coefficients that need rater identity (Conger's, Cohen's κ) refuse the result.

        Parameters
        ----------
        item_codes, category_codes, counts : 1-D arrays of equal length (integer codes; integer counts, or
            floating counts for weighted judgements as in :meth:`from_counts`)
            The rows: item code (a position in ``item_labels``), category code (a position in ``categories``)
            and the number of judgements (non-negative).
        item_labels : sequence
            The item index: ``item_labels[k]`` is the id of item code ``k``. Items without a row are unrated.
            A 1-D object array is kept as it is (not copied): pools built with the same array share one item
            index and align items by code.
        categories : sequence
            The ordered categories; interval/ratio categories are the numeric label values.
        level : {"nominal", "ordinal", "interval", "ratio"}, default "nominal"
        n_dropped_missing : int, default 0
            Judgements without a label that were left out of the rows (reported, not used).

        Raises
        ------
        InputError
            Rows of different lengths or not integers, a code outside the index or the categories, a negative
            count, or no judgement at all.

        Examples
        --------
        >>> import labelgate as lg
        >>> r = lg.Ratings.from_aggregates([0, 0, 1], [0, 1, 1], [3, 1, 4], item_labels=["a", "b"],
        ...                                categories=["neg", "pos"])
        >>> r.n_items, r.n_ratings, r.item_counts.tolist()
        (2, 8, [[3, 1], [0, 4]])
        """
        check_option(level, LEVELS, "level", "Ratings.from_aggregates")
        if isinstance(item_labels, np.ndarray) and item_labels.dtype == object and item_labels.ndim == 1:
            labels = item_labels  # kept as it is: pools built on one index share the object (items align by code)
        else:
            labels = np.empty(len(item_labels), dtype=object)  # filled one by one: ids may be tuples
            for position, label in enumerate(item_labels):
                labels[position] = label
        rows = check_rows(item_codes, category_codes, counts, len(labels), len(categories))
        return AggregatedRatings(*rows, item_labels=labels, categories=categories, level=level,
                                 n_dropped_missing=n_dropped_missing)

    def subset_items(self, item_codes: npt.ArrayLike) -> Ratings:
        """The judgements of the given items only, on an item axis of these items alone.

        The kept items are renumbered ``0..m-1`` in their code order and keep their ids (``item_labels``, made
        only when read, as the original's); the raters, categories and level are kept. So a design restricted to
        its complete items *is* complete (``lg.icc`` accepts it), and ``n_items`` counts the chosen items only.
        Two subsets no longer share an item index: pair functions then match their items by id.

        Examples
        --------
        >>> import labelgate as lg
        >>> r = lg.Ratings.from_wide([[1, 2], [2, None], [3, 3]], level="interval")
        >>> sub = r.subset_items([0, 2])
        >>> sub.n_items, list(sub.item_labels), round(float(lg.icc(sub, "A1")), 4)
        (2, [0, 2], 0.8)
        """
        wanted = np.zeros(self.n_items, dtype=bool)
        wanted[np.asarray(item_codes, dtype=np.int64)] = True
        rows = wanted[self.item_codes]
        return Ratings(self._new_item_codes(wanted)[self.item_codes[rows]], self.rater_codes[rows],
                       self.value_codes[rows], item_labels=self._kept_index(wanted), rater_labels=self.rater_labels,
                       categories=self.categories, level=self.level)

    def _new_item_codes(self, wanted: np.ndarray) -> IntArray:
        """Code of each item on the axis of the ``wanted`` items (in code order; -1 for the others)."""
        return np.where(wanted, np.cumsum(wanted) - 1, -1).astype(np.int64)

    def _kept_index(self, wanted: np.ndarray) -> LabelIndex:
        """The item index of the ``wanted`` items: the same index when all are kept; made lazily like this one."""
        if wanted.all():
            return self.item_index
        kept, parent = np.flatnonzero(wanted), self.item_index
        if parent.ready:
            return LabelIndex(parent.labels[kept])
        return LabelIndex(make=lambda: parent.labels[kept], size=kept.size)

    def on_item_index(self, new_codes: IntArray, item_labels: np.ndarray) -> Ratings:
        """The same judgements on another item index: item code ``k`` becomes ``new_codes[k]``."""
        return Ratings(new_codes[self.item_codes], self.rater_codes, self.value_codes, item_labels=item_labels,
                       rater_labels=self.rater_labels, categories=self.categories, level=self.level,
                       n_dropped_missing=self.n_dropped_missing)

    def _category_remap(self, categories: Sequence[Any]) -> IntArray:
        """New code of each current category in ``categories`` (a superset of the current ones)."""
        position = {c: i for i, c in enumerate(categories)}
        missing = [c for c in self.categories if c not in position]
        if missing:
            raise InputError(f"Categories {missing} are not in the new category list {list(categories)}.",
                             Reason.UNKNOWN_CATEGORY, value=missing[0])
        return np.asarray([position[c] for c in self.categories], dtype=np.int64)

    def with_categories(self, categories: Sequence[Any]) -> Ratings:
        """The same judgements re-coded on a superset of the current categories."""
        remap = self._category_remap(categories)
        return Ratings(self.item_codes, self.rater_codes, remap[self.value_codes], item_labels=self.item_index,
                       rater_labels=self.rater_labels, categories=categories, level=self.level,
                       n_dropped_missing=self.n_dropped_missing)

    def __repr__(self) -> str:
        return (f"Ratings(level={self.level!r}, n_items={self.n_items}, n_raters={self.n_raters}, "
                f"n_ratings={self.n_ratings}, categories={list(self.categories)[:10]})")


class JudgementsOnRead:
    """Per-judgement codes of ratings held in another form (aggregated rows, spans): ``_expanded`` makes them when a
    metric first reads single judgements, and they are kept; a metric that reads only counts never makes them."""

    _expanded: tuple[IntArray, IntArray, IntArray]

    @property
    def item_codes(self) -> IntArray:
        """Item code of each judgement (expanded on first read)."""
        return self._expanded[0]

    @property
    def rater_codes(self) -> IntArray:
        """Rater code of each judgement (expanded on first read; for aggregated rows, the rating's position on its
        item, a placeholder)."""
        return self._expanded[1]

    @property
    def value_codes(self) -> IntArray:
        """Category code of each judgement (expanded on first read)."""
        return self._expanded[2]


class AggregatedRatings(JudgementsOnRead, Ratings):  # type: ignore[override]  # codes made on first read
    """A :class:`Ratings` whose judgements are aggregated rows ``(item, category, count)``
    (:meth:`Ratings.from_aggregates`; :mod:`labelgate.core.aggregated` computes from them).

    The item x category counts, ratings per item and per-item moments come from the rows; ``item_codes``,
    ``rater_codes`` (placeholder :class:`RaterSlot` positions) and ``value_codes`` are expanded on first read
    (:attr:`expanded`), which none of the count-based coefficients does.
    """

    def __init__(self, row_items: IntArray, row_categories: IntArray, row_counts: IntArray, *,
                 item_labels: np.ndarray | LabelIndex, categories: Sequence[Any], level: Level,
                 n_dropped_missing: int = 0,
                 ) -> None:
        # Ratings.__init__ is not called: it takes per-judgement codes, which this class never needs to hold.
        self.row_items, self.row_categories, self.row_counts = row_items, row_categories, row_counts
        self.item_labels, self.categories, self.level = item_labels, tuple(categories), level
        self.n_dropped_missing = n_dropped_missing
        self._n_ratings = round(float(row_counts.sum()))
        self.rater_labels = np.asarray([RaterSlot(k) for k in range(int(np.ceil(self.ratings_per_item.max())))],
                                       dtype=object)

    @property
    def n_ratings(self) -> int:
        """Number of judgements (the sum of the counts; rounded to an integer for weighted counts)."""
        return self._n_ratings

    @property
    def weighted(self) -> bool:
        """Whether the counts are weighted (non-integer): there are then no single judgements to read."""
        return bool(np.issubdtype(self.row_counts.dtype, np.floating))

    @cached_statistic
    def ratings_per_item(self) -> IntArray:
        """Number of ratings of each item, shape (n_items,)."""
        return add_up(self.row_items, self.row_counts, self.n_items)

    @cached_statistic
    def item_counts(self) -> IntArray:
        """Item x category counts ``n_ic``, shape (n_items, n_categories)."""
        return row_item_counts(self.row_items, self.row_categories, self.row_counts, self.n_items,
                               self.n_categories)

    @cached_statistic
    def moment_center(self) -> float:
        """An observed value (the first row's category) subtracted before shift-invariant moment sums."""
        return float(self.category_values[self.row_categories[0]])

    @cached_statistic
    def item_moments(self) -> FloatArray:
        """Per-item (count, sum, sum of squares) of the values, from the rows."""
        return self.centered_item_moments(0.0)

    def centered_item_moments(self, center: float | None = None) -> FloatArray:
        """Per-item (count, sum, sum of squares) of ``values - center`` (default :attr:`moment_center`)."""
        shift = self.moment_center if center is None else float(center)
        return row_moments(self.row_items, self.category_values[self.row_categories] - shift, self.row_counts,
                           self.n_items)

    @cached_statistic
    def _expanded(self) -> tuple[IntArray, IntArray, IntArray]:
        if self.weighted:
            raise DesignError("These ratings come from a count table with non-integer (weighted) counts, which has "
                              "no single judgements; this metric reads them. The coefficients defined on weighted "
                              "counts are percent_agreement, bennett_s, fleiss_kappa / scott_pi, gwet_ac and "
                              "krippendorff_alpha.", Reason.INCOMPATIBLE_RATINGS)
        return expand_rows(self.row_items, self.row_categories, self.row_counts, self.ratings_per_item)

    def on_item_index(self, new_codes: IntArray, item_labels: np.ndarray) -> Ratings:
        """The same rows on another item index: item code ``k`` becomes ``new_codes[k]`` (still aggregated)."""
        return AggregatedRatings(new_codes[self.row_items], self.row_categories, self.row_counts,
                                 item_labels=item_labels, categories=self.categories, level=self.level,
                                 n_dropped_missing=self.n_dropped_missing)

    def subset_items(self, item_codes: npt.ArrayLike) -> Ratings:
        """The rows of the given items only, on an item axis of these items alone (still aggregated)."""
        wanted = np.zeros(self.n_items, dtype=bool)
        wanted[np.asarray(item_codes, dtype=np.int64)] = True
        keep = wanted[self.row_items]
        if not keep.any():
            raise InputError("The ratings are empty: no judgement with a value.", Reason.EMPTY_INPUT)
        return AggregatedRatings(self._new_item_codes(wanted)[self.row_items[keep]], self.row_categories[keep],
                                 self.row_counts[keep], item_labels=self._kept_index(wanted),
                                 categories=self.categories, level=self.level)

    def with_categories(self, categories: Sequence[Any]) -> Ratings:
        """The same rows re-coded on a superset of the current categories (still aggregated)."""
        return AggregatedRatings(self.row_items, self._category_remap(categories)[self.row_categories],
                                 self.row_counts, item_labels=self.item_index, categories=categories,
                                 level=self.level, n_dropped_missing=self.n_dropped_missing)

    @property
    def expanded(self) -> bool:
        """Whether a metric has read single judgements (the per-judgement codes exist)."""
        return "_expanded" in self.__dict__


def ratings_by_pool(data: Any, pool: str = "pool", item: str = "item_id", rater: str = "rater_id",
                    value: str = "label", *, level: Level | Literal["set"] = "nominal",
                    categories: Sequence[Any] | None = None, duplicates: DuplicatePolicy = "error",
                    missing: MissingPolicy = "drop", distance: str | None = None, sep: str | None = None,
                    ) -> dict[Any, Ratings]:
    """Split one long table with a pool/replication column into one `Ratings` per pool.

    ``level="set"`` with ``distance`` and ``sep`` reads multi-label judgements as :meth:`Ratings.from_long` does.
    All pools share one category list (explicit, or the union of observed labels) and one item index
    (every item of the table, rated by the pool or not), so cross-replication metrics align items by
    code without re-hashing ids. Each column is factorised once for the whole table.

    Examples
    --------
    >>> import labelgate as lg
    >>> data = {"item_id": [1, 1, 2, 2], "rater_id": ["a", "b", "a", "b"],
    ...         "label": ["x", "y", "x", "x"], "pool": ["crowd", "trusted", "crowd", "trusted"]}
    >>> pools = lg.ratings_by_pool(data)
    >>> sorted(pools), pools["crowd"].n_ratings
    (['crowd', 'trusted'], 2)
    """
    if level == "set" or distance is not None or sep is not None:  # multi-label: as Ratings.from_long
        return dict(MULTI_LABEL["ratings_by_pool"](data, pool, item, rater, value, level=level, distance=distance,
                                                   sep=sep, categories=categories, duplicates=duplicates,
                                                   missing=missing))
    check_option(level, LEVELS, "level", "ratings_by_pool")
    return {name: Ratings(**arguments) for name, arguments in pool_arguments(
        data, pool, item, rater, value, level=level, categories=categories, duplicates=duplicates,
        missing=missing).items()}


def common_categories(x: Ratings, y: Ratings) -> tuple[Ratings, Ratings]:
    """Re-code two replications on one category list (the union, ordered)."""
    if x.level != y.level:
        raise InputError(f"The two replications have different levels ({x.level!r} vs {y.level!r}).",
                         Reason.INCOMPATIBLE_RATINGS)
    if getattr(x, "set_distance", None) != getattr(y, "set_distance", None):
        raise InputError(f"The two replications compare label sets by different distances "
                         f"({getattr(x, 'set_distance', None)!r} vs {getattr(y, 'set_distance', None)!r}).",
                         Reason.INCOMPATIBLE_RATINGS)
    if x.categories == y.categories:
        return x, y
    merged = list(dict.fromkeys([*x.categories, *y.categories]))
    try:
        sort_key = getattr(x, "category_sort_key", None)  # sets: "<" is the subset relation, not an order
        merged = sorted(merged, key=sort_key)
    except TypeError:
        if x.level == "ordinal":
            raise InputError("The two ordinal replications have different, unorderable category lists; "
                             "pass the same explicit 'categories' to both.", Reason.INCOMPATIBLE_RATINGS) from None
    return x.with_categories(merged), y.with_categories(merged)


def as_ratings_list(values: Iterable[Ratings]) -> list[Ratings]:
    """Materialise an iterable of `Ratings` (helper for type checkers)."""
    return list(values)
