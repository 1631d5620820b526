"""The chance-corrected agreement family's per-item statistics: blocks, their totals and the builders.

Every coefficient of :mod:`labelgate.metrics.agreement` is ``finalize(column sums of per-item blocks)``
(:mod:`labelgate.metrics._engine`). The point estimate reads the column sums (*totals*) straight from the
statistics an item view shares — the per-item agreement, the pairable and marginal item counts, the marginal
shares as one vector-matrix product — and the (items x k) blocks are built only when an interval resamples items.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from labelgate.core.ratings import FloatArray, IntArray, Ratings
from labelgate.errors import Reason, check_option
from labelgate.metrics._blocks import ones
from labelgate.metrics._engine import Components, ItemStatistic, chance_corrected, safe_ratio
from labelgate.metrics._items import (
    MARGINALS,
    ItemView,
    Marginals,
    excluded_single,
    item_agreement,
    rater_category_block,
    rater_category_totals,
    require_rater_identity,
    view,
)
from labelgate.metrics.variance_analytic import (
    FLEISS_NEE_LANDIS_1979,
    Analytic,
    cohen_se,
    conger_se,
    fixed_chance_se,
    fleiss_null_se,
    fleiss_se,
    gwet_ac_se,
    judgements_elsewhere,
)
from labelgate.metrics.weights import Weights, unordered_weights


def _explain_chance(point: Components) -> tuple[Reason, str] | None:
    if point.get("n_pairable", np.ones(1))[0] == 0:
        return Reason.NO_PAIRABLE_ITEMS, "no item has two or more ratings"
    if "n_raters" in point and point["n_raters"][0] < 2:
        return Reason.NO_PAIRABLE_ITEMS, "fewer than two raters have ratings in the chance-agreement marginals"
    return (Reason.NO_EXPECTED_DISAGREEMENT,
            "chance agreement is 1 (a single category is used or available), so the coefficient is 0/0")


def _axis(r: Ratings, codes: IntArray | None, marginals: Marginals, function: str) -> ItemView:
    """The item axis: every rated item when single ratings enter the marginals, else the pairable items.

    The item bootstrap resamples the rows of this axis, i.e. every item the statistic depends on.
    """
    check_option(marginals, MARGINALS, "marginals", function)
    return view(r, codes, min_ratings=1 if marginals == "all_rated_items" else 2)


def _observed_block(v: ItemView, w: FloatArray, marginal: np.ndarray | None = None) -> np.ndarray:
    """Per item: weighted agreement, pairable indicator and (optionally) the marginal-item indicator.

    The indicator of the items in the marginals sits here, in a block of fixed width, rather than next to the
    category columns: the monitor widens category blocks at their end when a new category appears.
    """
    columns = [item_agreement(v, w), v.pairable.astype(np.float64)]
    if marginal is not None:
        columns.append(marginal.astype(np.float64))
    return np.column_stack(columns)


def _observed_totals(v: ItemView, w: FloatArray, marginal: np.ndarray | None = None) -> np.ndarray:
    """The column sums of :func:`_observed_block`, without building it (the point estimate needs no block)."""
    agree = item_agreement(v, w)
    totals = [float(ones(agree.size) @ agree), float(v.n_pairable)]
    if marginal is not None:
        totals.append(float(np.count_nonzero(marginal)))
    return np.asarray(totals)


def _marginal_totals(v: ItemView, marginal: np.ndarray, pooled: bool = False) -> FloatArray:
    r"""The column sums of :func:`_marginal_block` — :math:`\sum_i r_{ik} / r_i` (or :math:`\sum_i r_{ik}`) over the
    marginal items — computed once per view and shared by its metrics (read-only).

    From the integer counts when possible (:func:`_integer_marginal_totals`: exact, then rounded once), so a cold
    coefficient neither converts nor keeps a float copy of the items x categories table.
    """
    key = ("marginal_totals", id(marginal), pooled)
    cached = v.shared.get(key)
    if cached is None:
        cached = _integer_marginal_totals(v, marginal, pooled)
        if cached is None:  # a mask of no known size threshold, or sizes whose common multiple is too large
            if pooled:
                weight = marginal.astype(np.float64)
            else:
                weight = np.zeros(v.n.size)
                np.divide(1.0, v.n, out=weight, where=marginal)
            cached = weight @ v.counts
        cached.flags.writeable = False
        v.shared[key] = cached
    return cached


def _integer_marginal_totals(v: ItemView, marginal: np.ndarray, pooled: bool) -> FloatArray | None:
    r""":func:`_marginal_totals` in integer arithmetic, or None when it does not apply.

    The marginal items are those with at least 1 (every rated item) or 2 ratings (the pairable items): with
    ``L`` the least common multiple of their numbers of ratings, :math:`\sum_i r_{ik} / r_i =
    \frac{1}{L} \sum_i r_{ik} (L / r_i)`, an integer sum divided once (pooled: ``L = 1`` on every marginal item).
    The result is the exact value rounded once. It applies while the integer sum stays below :math:`2^{53}`.
    """
    if not np.issubdtype(v.int_counts.dtype, np.integer):  # weighted counts: the float sums are the only ones
        return None
    if marginal is v.pairable:
        least = 2
    elif marginal is v.shared.get("rated"):
        least = 1
    else:
        return None
    per_item = v.int_n
    present = np.bincount(per_item, minlength=least + 1)
    sizes = np.flatnonzero(present[least:]) + least
    if sizes.size == 0:  # no marginal item: every sum is 0
        return np.zeros(v.int_counts.shape[1])
    common = 1 if pooled else math.lcm(*(int(size) for size in sizes))
    if common * per_item.size * int(sizes[-1]) >= _EXACT_FLOAT_INTEGERS:
        return None
    lookup = np.zeros(present.size, dtype=np.int64)  # each number of ratings -> its integer weight L / r_i
    lookup[sizes] = 1 if pooled else common // sizes
    numerators: IntArray = lookup[per_item] @ v.int_counts
    return numerators / float(common)


# Integers up to this size are exact in float64 (and far inside int64).
_EXACT_FLOAT_INTEGERS = 2**53


def _lazy_stat(v: ItemView, w: FloatArray, finalize: Any, marginal: np.ndarray | None = None,
               pooled: bool | None = None) -> ItemStatistic:
    """An ItemStatistic whose point estimate reads totals; its per-item blocks are built only for an interval.

    ``pooled`` None: the observed block alone; else also the marginal block (pooled counts or shares).
    """
    def blocks() -> list[Any]:
        built = [_observed_block(v, w, marginal)]
        if pooled is not None and marginal is not None:
            built.append(_marginal_block(v, marginal, pooled))
        return built

    totals = [_observed_totals(v, w, marginal)]
    if pooled is not None and marginal is not None:
        totals.append(_marginal_totals(v, marginal, pooled))
    return _stat(v, None, finalize, build_blocks=blocks, totals=totals)


def _observed(sums: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(p_a, number of pairable items) from the sums of :func:`_observed_block`."""
    return safe_ratio(sums[:, 0], sums[:, 1]), sums[:, 1]


def _marginal_block(v: ItemView, marginal: np.ndarray, pooled: bool = False) -> FloatArray:
    """Per item on the marginal items: the category shares ``r_ik / r_i`` (or the counts ``r_ik`` if ``pooled``)."""
    if pooled:
        return v.counts * marginal[:, None]
    share = np.zeros_like(v.counts)
    np.divide(v.counts, v.n[:, None], out=share, where=marginal[:, None])
    return share


def _classification_probabilities(observed: np.ndarray, marginal: np.ndarray, pooled: bool = False) -> np.ndarray:
    r""":math:`\pi_k` from the sums of :func:`_observed_block` (with the indicator) and :func:`_marginal_block`.

    Item mean :math:`\pi_k = \frac{1}{n} \sum_i r_{ik}/r_i` over the ``n`` marginal items (Gwet 2014), or the
    pooled share :math:`\sum_i r_{ik} / \sum_i r_i` if ``pooled``.
    """
    if pooled:
        return safe_ratio(marginal, marginal.sum(axis=1, keepdims=True))
    return safe_ratio(marginal, observed[:, 2:3])


def _stat(v: ItemView, blocks: list[Any] | None, finalize: Any, **kw: Any) -> ItemStatistic:
    r = v.ratings
    excluded = excluded_single(r) if v.codes.size == 0 or v.pairable.all() else int((~v.pairable).sum())
    return ItemStatistic(blocks=blocks, finalize=finalize, n_items=v.n_pairable,
                         n_ratings=v.n_ratings_pairable, n_items_excluded=excluded,
                         explain=_explain_chance, **kw)


def _chance_components(sums: list[np.ndarray], p_e: np.ndarray) -> Components:
    p_a, n_pair = _observed(sums[0])
    return {"value": chance_corrected(p_a, p_e), "p_o": p_a, "p_e": p_e, "n_pairable": n_pair,
            "n_marginal_items": sums[0][:, 2]}


# ---------------------------------------------------------------- builders
def build_percent_agreement(r: Ratings, codes: IntArray | None = None, weights: Weights = "identity",
                            ) -> ItemStatistic:
    v = view(r, codes)

    def finalize(sums: list[np.ndarray]) -> Components:
        p_o, n_pair = _observed(sums[0])
        return {"value": p_o, "n_pairable": n_pair}

    w, note = unordered_weights(r, weights, "percent_agreement")
    stat = _lazy_stat(v, w, finalize)
    stat.analytic = lambda value: fixed_chance_se(v, w, 0.0, value, _n_rated(r, codes))
    return _noted(stat, note)


def _noted(stat: ItemStatistic, note: str | None) -> ItemStatistic:
    """``stat`` with the note of symmetrised weights in its details (see :func:`unordered_weights`)."""
    if note:
        stat.details["weights_note"] = note
    return stat


def build_bennett_s(r: Ratings, codes: IntArray | None = None, weights: Weights = "identity") -> ItemStatistic:
    v = view(r, codes)  # no marginals: single-rated items play no part
    w, note = unordered_weights(r, weights, "bennett_s")
    p_e = float(w.sum()) / r.n_categories**2

    def finalize(sums: list[np.ndarray]) -> Components:
        p_o, n_pair = _observed(sums[0])
        return {"value": chance_corrected(p_o, np.full_like(p_o, p_e)), "p_o": p_o,
                "p_e": np.full_like(p_o, p_e), "n_pairable": n_pair}

    stat = _lazy_stat(v, w, finalize)
    stat.analytic = lambda value: fixed_chance_se(v, w, p_e, value, _n_rated(r, codes))
    return _noted(stat, note)


def _n_rated(r: Ratings, codes: IntArray | None) -> int:
    """Items with at least one rating (on ``codes``): the ``n`` of Gwet's variances."""
    per_item = r.ratings_per_item if codes is None else r.ratings_per_item[codes]
    return int(np.count_nonzero(per_item))


def build_fleiss_kappa(r: Ratings, codes: IntArray | None = None, weights: Weights = "identity",
                       marginals: Marginals = "all_rated_items", function: str = "fleiss_kappa") -> ItemStatistic:
    v = _axis(r, codes, marginals, function)
    w, note = unordered_weights(r, weights, function)
    on = v.marginal_items(marginals)
    pooled = marginals == "pairable_items"  # the pre-handbook definition pooled the ratings (Fleiss 1971)

    def finalize(sums: list[np.ndarray]) -> Components:
        pi = _classification_probabilities(sums[0], sums[1], pooled)
        return _chance_components(sums, np.einsum("bc,ck,bk->b", pi, w, pi))

    stat = _lazy_stat(v, w, finalize, on, pooled)
    # the pooled variant has no published variance (the delta method's is given), but with the same number of
    # ratings on every item it is Fleiss (1971), whose test of kappa = 0 applies
    stat.analytic = ((lambda value: fleiss_se(v, w, value, _marginal_totals(v, on), _marginal_totals(v, on, True)))
                     if not pooled else
                     (lambda value: Analytic(np.nan, "", fleiss_null_se(v, w, _marginal_totals(v, on, True)),
                                             FLEISS_NEE_LANDIS_1979)))
    return _noted(stat, note)


def build_gwet_ac(r: Ratings, codes: IntArray | None = None, weights: Weights = "identity",
                  marginals: Marginals = "all_rated_items") -> ItemStatistic:
    v = _axis(r, codes, marginals, "gwet_ac")
    w, note = unordered_weights(r, weights, "gwet_ac")
    q = r.n_categories
    on = v.marginal_items(marginals)
    scale = float(w.sum()) / (q * (q - 1)) if q > 1 else np.nan

    def finalize(sums: list[np.ndarray]) -> Components:
        pi = _classification_probabilities(sums[0], sums[1])
        return _chance_components(sums, scale * (pi * (1.0 - pi)).sum(axis=1))

    stat = _lazy_stat(v, w, finalize, on, False)
    if marginals == "all_rated_items":
        stat.analytic = lambda value: gwet_ac_se(v, w, value, _marginal_totals(v, on))
    return _noted(stat, note)


def build_conger_kappa(r: Ratings, codes: IntArray | None = None, weights: Weights = "identity",
                       function: str = "conger_kappa", marginals: Marginals = "all_rated_items") -> ItemStatistic:
    require_rater_identity(r, function)  # rater-specific marginals: positions on an item are not raters
    v = _axis(r, codes, marginals, function)
    w, note = unordered_weights(r, weights, function)
    n_raters, q = r.n_raters, r.n_categories
    on = v.marginal_items(marginals)

    def finalize(sums: list[np.ndarray]) -> Components:
        p_e, active = conger_chance(sums[1].reshape(-1, n_raters, q), w)
        return {**_chance_components(sums, p_e), "n_raters": active}

    stat = _stat(v, None, finalize, build_blocks=lambda: [_observed_block(v, w, on), rater_category_block(v, on)],
                 totals=[_observed_totals(v, w, on), rater_category_totals(v, on)])
    stat.se_unavailable = lambda: judgements_elsewhere(r)
    if function == "cohen_kappa":
        stat.analytic = lambda value: cohen_se(two_rater_table(v), w)
    elif function == "conger_kappa" and marginals == "all_rated_items":
        stat.analytic = lambda value: conger_se(v, w, value)
    return _noted(stat, note)


def order_cohen_kappa(stat: ItemStatistic, r: Ratings, codes: IntArray | None, skew: FloatArray) -> ItemStatistic:
    r"""Cohen's κ of two ordered raters under an asymmetric matrix :math:`W = S + A` from its statistic under the
    symmetric part :math:`S` (``stat``, with pairable-item marginals), :math:`A = (W - W^\top)/2` (``skew``).

    With :math:`a_i, b_i` the first and second rater's categories of item ``i`` and :math:`p_1, p_2` their
    marginal distributions, :math:`p_o = \frac{1}{n}\sum_i w_{a_i b_i} = p_o^S + \frac{1}{n}\sum_i A_{a_i b_i}` and
    :math:`p_e = p_1^\top W p_2 = p_e^S + p_1^\top A p_2` (irrCAC's ``kappa2_table`` on the contingency table).
    The per-item :math:`A_{a_i b_i}` is one more block, so the item bootstrap resamples it with the rest.
    """
    v = view(r, codes, min_ratings=2)
    rows, axis_pos = v.rows_on_axis()
    category = np.zeros((v.codes.size, 2), dtype=np.int64)
    category[axis_pos, r.rater_codes[rows]] = r.value_codes[rows]
    extra = (skew[category[:, 0], category[:, 1]] * v.pairable)[:, None]
    q = r.n_categories
    build, base = stat.build_blocks, stat.finalize

    def finalize(sums: list[np.ndarray]) -> Components:
        parts = base(sums[:2])
        p_o = parts["p_o"] + safe_ratio(sums[2][:, 0], sums[0][:, 1])
        marginal = sums[1].reshape(-1, 2, q)
        p = safe_ratio(marginal, marginal.sum(axis=2, keepdims=True))
        p_e = parts["p_e"] + np.einsum("bc,ck,bk->b", p[:, 0], skew, p[:, 1])
        return {**parts, "value": chance_corrected(p_o, p_e), "p_o": p_o, "p_e": p_e}

    stat.finalize = finalize
    stat.build_blocks = lambda: [*(build() if build else []), extra]
    stat.blocks = None
    stat.totals = [*(stat.totals or []), extra.sum(axis=0)]
    stat.details.pop("weights_note", None)
    stat.details["weights_order"] = "asymmetric weights: rows are the first rater's categories"
    return stat


def two_rater_table(v: ItemView) -> np.ndarray:
    """The q x q table of counts of the pairable items of two raters (rows: the first rater's category)."""
    r = v.ratings
    q = r.n_categories
    rows, axis = v.rows_on_axis()
    labels = np.full((2, v.codes.size), -1, dtype=np.int64)
    labels[r.rater_codes[rows], axis] = r.value_codes[rows]
    both = (labels >= 0).all(axis=0)
    return np.bincount(labels[0, both] * q + labels[1, both], minlength=q * q).reshape(q, q).astype(np.float64)


def conger_chance(rater_counts: np.ndarray, w: FloatArray) -> tuple[np.ndarray, np.ndarray]:
    r"""Conger's chance agreement from rater x category counts, shape (B, raters, q).

    :math:`p_e = \frac{1}{r(r-1)} \sum_{g \ne h} p_g^\top W p_h` over the raters
    with at least one rating, ``p_g`` being rater ``g``'s own marginal
    distribution. This is Gwet's (2014) weighted form
    :math:`\sum_{k,l} w_{kl} (\bar p_k \bar p_l - s^2_{kl} / r)`, :math:`s^2_{kl}`
    the covariance of the raters' marginals. Returns ``(p_e, r)``.
    """
    n_g = rater_counts.sum(axis=2)
    active = (n_g > 0).sum(axis=1).astype(np.float64)
    p = np.zeros_like(rater_counts)
    np.divide(rater_counts, n_g[..., None], out=p, where=n_g[..., None] > 0)
    s = p.sum(axis=1)
    between = np.einsum("bc,ck,bk->b", s, w, s) - np.einsum("bgc,ck,bgk->b", p, w, p)
    return safe_ratio(between, active * (active - 1.0)), active
