"""Views of a `Ratings` restricted to an item axis (pairable or common items)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from labelgate.core.ratings import FloatArray, IntArray, RaterSlot, Ratings
from labelgate.core.tallied import is_tallied
from labelgate.errors import DesignError, Reason
from labelgate.metrics._blocks import table_totals

if TYPE_CHECKING:
    import scipy.sparse as sp
else:
    from labelgate.metrics._lazy import lazy

    sp = lazy("scipy.sparse")

#: Which items feed the chance-agreement marginals: every rated item (Gwet 2014) or only the pairable ones.
Marginals = Literal["all_rated_items", "pairable_items"]
MARGINALS: tuple[Marginals, ...] = ("all_rated_items", "pairable_items")


@dataclass(frozen=True)
class ItemView:
    """Counts of the items on one axis; rows align with ``codes``.

    ``pairable`` marks the items with two or more ratings: only they carry
    within-pool agreement information (the degenerate-input policy). Items
    with one rating still carry information on the raters' category use,
    which Gwet's chance agreement takes into account (:meth:`marginal_items`).

    The item x category counts are kept as the Ratings' integers (:attr:`int_counts`) and converted to floats
    (:attr:`counts`) only for the metrics that need the float table: the point estimates of the agreement
    family read integer sums of it, and a cold single coefficient need not copy the whole table.
    """

    ratings: Ratings
    codes: IntArray
    n: FloatArray
    pairable: np.ndarray
    #: Statistics derived from the counts, shared by the metrics on this view (read-only arrays).
    shared: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def int_counts(self) -> IntArray:
        """Item x category counts of the axis items as integers (read-only; the Ratings' own on the whole view)."""
        cached = self.shared.get("int_counts")
        if cached is None:
            table = self.ratings.item_counts
            cached = table if self.shared.get("whole") else table[self.codes]
            if cached is not table:
                cached.flags.writeable = False
            self.shared["int_counts"] = cached
        return cached

    @property
    def int_n(self) -> IntArray:
        """Ratings per axis item as integers (the Ratings' own on the whole view)."""
        cached = self.shared.get("int_n")
        if cached is None:
            cached = self.ratings.ratings_per_item if self.shared.get("whole") else self.n.astype(
                self.ratings.ratings_per_item.dtype)  # floats for weighted counts
            self.shared["int_n"] = cached
        return cached

    @property
    def counts(self) -> FloatArray:
        """Item x category counts of the axis items as floats, converted once per view (read-only).

        The whole view shares the conversion of the Ratings (:func:`item_statistics` reads the same array).
        """
        cached = self.shared.get("counts")
        if cached is None:
            cached = _float_counts(self.ratings) if self.shared.get("whole") else self.int_counts.astype(np.float64)
            cached.flags.writeable = False
            self.shared["counts"] = cached
        return cached

    @property
    def n_pairable(self) -> int:
        if "n_pairable" not in self.shared:
            self.shared["n_pairable"] = int(self.pairable.sum())
        return int(self.shared["n_pairable"])

    @property
    def n_ratings_pairable(self) -> int:
        if "n_ratings_pairable" not in self.shared:
            # an integer dot product: exact like the masked float sum it replaces, without the gathered copy
            self.shared["n_ratings_pairable"] = round(float(np.dot(self.int_n, self.pairable)))
        return int(self.shared["n_ratings_pairable"])

    def marginal_items(self, marginals: Marginals) -> np.ndarray:
        """Mask of the axis items whose ratings enter the chance-agreement marginals (one array per view)."""
        if marginals != "all_rated_items":
            return self.pairable
        if "rated" not in self.shared:
            rated = self.n > 0
            rated.flags.writeable = False
            self.shared["rated"] = rated
        return self.shared["rated"]

    def rows_on_axis(self, mask: np.ndarray | None = None) -> tuple[IntArray, IntArray]:
        """(row positions in the Ratings, axis position) of judgements on the axis items in ``mask``.

        ``mask`` defaults to the pairable items. For the view's own masks (pairable, :meth:`marginal_items`)
        the result is computed once and shared.
        """
        on = self.pairable if mask is None else mask
        own = on is self.pairable or on is self.shared.get("rated")
        key = ("rows_on_axis", id(on))
        if own and key in self.shared:
            return self.shared[key]
        if own and self.shared.get("whole") and on.all():  # every judgement, on its own item code
            result = np.arange(self.ratings.n_ratings, dtype=np.int64), self.ratings.item_codes
            self.shared[key] = result
            return result
        position = np.full(self.ratings.n_items, -1, dtype=np.int64)
        position[self.codes[on]] = np.flatnonzero(on)
        axis_pos = position[self.ratings.item_codes]
        rows = np.flatnonzero(axis_pos >= 0)
        result = rows, axis_pos[rows]
        if own:
            for array in result:
                array.flags.writeable = False
            self.shared[key] = result
        return result


def view(r: Ratings, codes: IntArray | None = None, *, min_ratings: int = 2) -> ItemView:
    """Item view on ``codes``; by default the items of ``r`` with at least ``min_ratings`` ratings (cached on ``r``).

    ``min_ratings=2`` (pairable items) is the axis of statistics that use only within-item agreement;
    ``min_ratings=1`` (every rated item) the axis of those whose chance agreement also uses single ratings.
    """
    if codes is None:
        key = f"_view_min_{min_ratings}"
        cached = r.__dict__.get(key)
        if cached is not None:
            return cached
        keep = r.ratings_per_item >= min_ratings
        if keep.all():  # every item: the view is the Ratings' own counts, shared, without a gather
            made = _whole_view(r)
        else:
            made = view(r, np.flatnonzero(keep))
        r.__dict__[key] = made
        return made
    if is_whole_axis(r, codes):  # every item, in order: the shared view of the Ratings' own counts
        return _whole_view(r)
    n = _float_n(r)[codes]
    return ItemView(r, codes, n, n >= 2)


def is_whole_axis(r: Ratings, codes: IntArray) -> bool:
    """Whether ``codes`` is ``0, 1, ..., n_items - 1`` (every item in order: no gather is needed).

    Strictly increasing codes in ``[0, n_items)``, ``n_items`` of them, are exactly that range.
    """
    if codes is r.__dict__.get("all_items"):  # made for this (the whole view, an alignment of every item)
        return True
    n = r.n_items
    if codes.size != n or n == 0:
        return codes.size == n
    if int(codes[0]) != 0 or int(codes[-1]) != n - 1:
        return False
    return all(bool((block[1:] > block[:-1]).all()) for block in
               (codes[start:start + _BLOCK + 1] for start in range(0, n - 1, _BLOCK)))


def integer_item_counts(r: Ratings, codes: IntArray) -> IntArray:
    """The integer item x category counts of the items ``codes`` (the Ratings' own table, read as it is, when
    ``codes`` is every item in order)."""
    return r.item_counts if is_whole_axis(r, codes) else r.item_counts[codes]


def category_totals(r: Ratings, codes: IntArray, counts: IntArray) -> IntArray:
    """The category totals of the items ``codes`` (``counts``: their integer item x category counts): the
    Ratings' own (cached) totals when ``codes`` is every item in order."""
    return r.category_counts if is_whole_axis(r, codes) else table_totals(counts)


def n_ratings_of(r: Ratings, codes: IntArray) -> int:
    """The judgements of the items ``codes``."""
    return r.n_ratings if is_whole_axis(r, codes) else int(r.ratings_per_item[codes].sum())


def item_sizes(r: Ratings, codes: IntArray) -> FloatArray:
    """The ratings per item (floats) of the items ``codes``, as :func:`item_statistics` reads them."""
    n = _float_n(r)
    return n if is_whole_axis(r, codes) else n[codes]


def item_statistics(r: Ratings, codes: IntArray) -> tuple[FloatArray, FloatArray]:
    """Item x category counts and ratings per item (floats) of the items ``codes``, without a gather (read-only
    arrays of the Ratings) when ``codes`` is every item in order."""
    counts, n = _float_counts(r), _float_n(r)
    if is_whole_axis(r, codes):
        return counts, n
    return counts[codes], n[codes]


def _whole_view(r: Ratings) -> ItemView:
    """The view on every item of ``r`` (cached; also the default views when every item qualifies)."""
    made = r.__dict__.get("_view_whole")
    if made is None:
        n = _float_n(r)
        made = ItemView(r, r.all_items, n, n >= 2)
        made.shared["whole"] = True
        r.__dict__["_view_whole"] = made
    return made


# Rows per block of a check that would otherwise make a row-sized temporary.
_BLOCK = 1 << 16


# Keys of the float conversions cached on a Ratings (shared by every view and metric of it).
_FLOAT_COUNTS = "_float_item_counts"
_FLOAT_N = "_float_ratings_per_item"


def _float_counts(r: Ratings) -> FloatArray:
    """The item x category counts as floats, converted once per `Ratings` (read-only)."""
    return _float_once(r, _FLOAT_COUNTS, "item_counts")


def _float_n(r: Ratings) -> FloatArray:
    """The ratings per item as floats, converted once per `Ratings` (read-only)."""
    return _float_once(r, _FLOAT_N, "ratings_per_item")


def _float_once(r: Ratings, key: str, attribute: str) -> FloatArray:
    """``r.<attribute>`` as a read-only float64 array, cached on ``r`` under ``key``."""
    cached = r.__dict__.get(key)
    if cached is None:
        cached = getattr(r, attribute).astype(np.float64)
        cached.flags.writeable = False
        r.__dict__[key] = cached
    return cached


def pairable_counts(v: ItemView) -> FloatArray:
    """The float item x category counts of the view with the rows of unpairable items zeroed (the view's own table
    when every item is pairable), made once per view (read-only): the blocks of α, SPA and the cross-replication
    statistics that sum over pairable items only."""
    cached = v.shared.get("pairable_counts")
    if cached is None:
        cached = v.counts if v.n_pairable == v.n.size else v.counts * v.pairable[:, None]
        cached.flags.writeable = False
        v.shared["pairable_counts"] = cached
    return cached


def excluded_single(r: Ratings) -> int:
    """Items with exactly one rating (excluded from within-pool agreement), counted once per `Ratings`."""
    shared = _whole_view(r).shared
    if "excluded_single" not in shared:
        shared["excluded_single"] = int(np.count_nonzero(r.ratings_per_item == 1))
    return int(shared["excluded_single"])


def item_agreement(v: ItemView, w: FloatArray) -> FloatArray:
    """Weighted share of agreeing ordered rater pairs on each item (0 when not pairable).

    ``P_i = (n_i' W n_i - n_i) / (n_i (n_i - 1))`` since ``w_cc = 1``. Computed once per view and
    weight matrix: percent agreement, Fleiss, AC1, Conger and every SPA weighting read the same values.
    """
    w = np.asarray(w, dtype=np.float64)
    if w.size > _SHARED_WEIGHTS_MAX:
        return agreement_from_counts(v.counts, v.n, w)
    key = ("item_agreement", w.shape, w.tobytes())
    cached = v.shared.get(key)
    if cached is None:
        # exact agreement reads the integer square sums; only a weighted agreement needs the float table
        cached = (_pair_agreement(square_sums(v), v.n) if _is_identity(w)
                  else agreement_from_counts(v.counts, v.n, w))
        cached.flags.writeable = False
        v.shared[key] = cached
    return cached


# Weight matrices up to this many cells key the shared item agreements by their bytes.
_SHARED_WEIGHTS_MAX = 4096


def square_sums(v: ItemView) -> FloatArray:
    r""":math:`\sum_c n_{ic}^2` of every item of the view, computed once per view (read-only).

    Exact agreement (percent agreement, Fleiss, AC1, SPA) and the nominal disagreements of α and κx read it:
    :math:`n_i^\top (1 - I) n_i = n_i^2 - \sum_c n_{ic}^2`, integers, so no matrix product is needed.
    """
    cached = v.shared.get("square_sums")
    if cached is None:
        # integers: the same values as the float sum (each below 2**53), without a float copy of the table;
        # vecdot is about twice as fast as einsum on the short rows of a few categories
        table = v.int_counts
        cached = np.vecdot(table, table).astype(np.float64)
        cached.flags.writeable = False
        v.shared["square_sums"] = cached
    return cached


def agreement_from_counts(counts: np.ndarray, n: FloatArray, w: FloatArray) -> FloatArray:
    r""":func:`item_agreement` from item x category counts ``counts`` and ratings per item ``n`` (any rows)."""
    if _is_identity(w):  # exact agreement: no product
        return _pair_agreement(np.einsum("ic,ic->i", counts, counts), n)
    weighted = np.einsum("ic,ic->i", counts @ w, counts)
    weighted[n < 2] = n[n < 2]  # a matrix whose diagonal is not 1 must still give 0 on an unpairable item
    return _pair_agreement(weighted, n)


def _is_identity(w: FloatArray) -> bool:
    return bool(w.shape[0] == w.shape[1] and np.array_equal(w, np.eye(w.shape[0])))


def _pair_agreement(weighted_squares: FloatArray, n: FloatArray) -> FloatArray:
    r"""``(n_i' W n_i - n_i) / (n_i (n_i - 1))`` from ``n_i' W n_i``; 0 on an item with fewer than two ratings."""
    # n_i' W n_i - n_i is 0 on an item with fewer than two ratings (0 - 0, or 1 - 1, with w_cc = 1; callers with
    # another diagonal set it so), so the masked quotient leaves exactly the 0 there: one array, no extra copies
    out = np.subtract(weighted_squares, n)
    den = n - 1.0
    den *= n
    np.divide(out, den, out=out, where=n >= 2)
    return out


def rater_category_block(v: ItemView, mask: np.ndarray | None = None) -> sp.csr_matrix:
    """Sparse (axis items x raters*categories) one-hot of the judgements on ``mask`` items (default: pairable)."""
    r = v.ratings
    rows, axis_pos = v.rows_on_axis(mask)
    columns = r.rater_codes[rows] * r.n_categories + r.value_codes[rows]
    data = np.ones(rows.size, dtype=np.float64)
    shape = (v.codes.size, r.n_raters * r.n_categories)
    return sp.csr_matrix((data, (axis_pos, columns)), shape=shape)


def rater_category_totals(v: ItemView, mask: np.ndarray | None = None) -> FloatArray:
    """Column sums of :func:`rater_category_block`, computed without building it."""
    r = v.ratings
    on = v.pairable if mask is None else mask
    if is_tallied(r):  # aggregated in a database: the raters' counts of these items come from its sums
        return r.rater_category_table(v.codes[on]).ravel().astype(np.float64)
    # every item of the Ratings, hence every judgement: no positions; else positions, and every judgement only if
    # they cover them all
    rows = None if v.shared.get("whole") and on.all() else v.rows_on_axis(mask)[0]
    if rows is None or rows.size == r.n_ratings:
        return r.rater_counts.ravel().astype(np.float64)
    columns = r.rater_codes[rows] * r.n_categories + r.value_codes[rows]
    return np.bincount(columns, minlength=r.n_raters * r.n_categories).astype(np.float64)


def require_rater_identity(r: Ratings, function: str) -> None:
    """Refuse ratings without rater identity (:meth:`Ratings.from_counts`) in a coefficient that needs it.

    Conger's and Cohen's chance agreement use each rater's own marginal distribution; the count table says how
    many raters chose each category on an item, not who did.
    """
    if r.n_raters and isinstance(r.rater_labels[0], RaterSlot):
        raise DesignError(f"{function} needs to know which rater gave each rating (rater-specific marginals), "
                          "but these ratings have no rater identity: they come from an items x categories count "
                          "table (Ratings.from_counts / from_aggregates) or a long table without a rater column "
                          "(Ratings.from_long(rater=None)). Use fleiss_kappa, gwet_ac, "
                          "bennett_s or krippendorff_alpha, or build the Ratings with from_long / from_wide / "
                          "from_contingency.", Reason.INCOMPATIBLE_RATINGS, function=function)


def require_whole_counts(r: Ratings, function: str, why: str) -> None:
    """Refuse a count table with non-integer (weighted) counts in a coefficient not defined on them (``why``)."""
    if getattr(r, "weighted", False):
        raise DesignError(f"{function} is not defined on a count table with non-integer (weighted) counts: {why}. "
                          "The coefficients defined on weighted counts are percent_agreement, bennett_s, "
                          "fleiss_kappa / scott_pi, gwet_ac and krippendorff_alpha.", Reason.INCOMPATIBLE_RATINGS,
                          function=function)
