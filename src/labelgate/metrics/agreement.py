r"""Agreement indexes on one replication: percent agreement and the chance-corrected family.

All coefficients share the observed agreement of Gwet (2014) / Girard's
``mAGREE``: the mean over *pairable* items (two or more ratings) of the
weighted share of agreeing rater pairs,

.. math::

    p_o = \frac{1}{n'} \sum_{i: n_i \ge 2}
          \frac{\sum_{c,k} n_{ic} (n_{ik} - \delta_{ck}) w_{ck}}{n_i (n_i - 1)},

and differ in the chance agreement :math:`p_e`; the coefficient is
:math:`(p_o - p_e) / (1 - p_e)`. Items with a single rating are excluded
everywhere (including from marginals) and counted in ``n_items_excluded``.

References: J. M. Girard, *Inter-rater reliability* (slides; ``seeds/``);
K. L. Gwet, *Handbook of Inter-Rater Reliability*, 4th ed., 2014.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from labelgate.core.estimate import DEFAULT_N_BOOT, Estimate
from labelgate.core.ratings import FloatArray, IntArray, Ratings
from labelgate.errors import DesignError, Reason
from labelgate.metrics._engine import (
    Components,
    ItemStatistic,
    bootstrap,
    chance_corrected,
    check_bootstrap_args,
    evaluate,
    percentile_interval,
    safe_ratio,
)
from labelgate.metrics._items import (
    ItemView,
    Weights,
    excluded_single,
    item_agreement,
    rater_category_block,
    rater_category_totals,
    view,
    weight_matrix,
)


def _explain_chance(point: Components) -> tuple[Reason, str] | None:
    if point.get("n_pairable", np.ones(1))[0] == 0:
        return Reason.NO_PAIRABLE_ITEMS, "no item has two or more ratings"
    if "n_raters" in point and point["n_raters"][0] < 2:
        return Reason.NO_PAIRABLE_ITEMS, "fewer than two raters rated pairable items"
    return (Reason.NO_EXPECTED_DISAGREEMENT,
            "chance agreement is 1 (a single category is used or available), so the coefficient is 0/0")


def _observed_block(v: ItemView, w: FloatArray) -> np.ndarray:
    return np.column_stack([item_agreement(v, w), v.pairable.astype(np.float64)])


def _observed(sums: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(p_o, number of pairable items) from the sums of :func:`_observed_block`."""
    return safe_ratio(sums[:, 0], sums[:, 1]), sums[:, 1]


def _stat(v: ItemView, blocks: list[Any] | None, finalize: Any, **kw: Any) -> ItemStatistic:
    r = v.ratings
    excluded = excluded_single(r) if v.codes.size == 0 or v.pairable.all() else int((~v.pairable).sum())
    return ItemStatistic(blocks=blocks, finalize=finalize, n_items=v.n_pairable,
                         n_ratings=v.n_ratings_pairable, n_items_excluded=excluded,
                         explain=_explain_chance, **kw)


# ---------------------------------------------------------------- builders
def build_percent_agreement(r: Ratings, codes: IntArray | None = None, weights: Weights = "identity",
                            ) -> ItemStatistic:
    v = view(r, codes)

    def finalize(sums: list[np.ndarray]) -> Components:
        p_o, n_pair = _observed(sums[0])
        return {"value": p_o, "n_pairable": n_pair}

    return _stat(v, [_observed_block(v, weight_matrix(r, weights, "percent_agreement"))], finalize)


def build_bennett_s(r: Ratings, codes: IntArray | None = None, weights: Weights = "identity") -> ItemStatistic:
    v = view(r, codes)
    w = weight_matrix(r, weights, "bennett_s")
    p_e = float(w.sum()) / r.n_categories**2

    def finalize(sums: list[np.ndarray]) -> Components:
        p_o, n_pair = _observed(sums[0])
        return {"value": chance_corrected(p_o, np.full_like(p_o, p_e)), "p_o": p_o,
                "p_e": np.full_like(p_o, p_e), "n_pairable": n_pair}

    return _stat(v, [_observed_block(v, w)], finalize)


def build_fleiss_kappa(r: Ratings, codes: IntArray | None = None, weights: Weights = "identity",
                       ) -> ItemStatistic:
    v = view(r, codes)
    w = weight_matrix(r, weights, "fleiss_kappa")
    pooled = v.counts * v.pairable[:, None]

    def finalize(sums: list[np.ndarray]) -> Components:
        p_o, n_pair = _observed(sums[0])
        total = sums[1].sum(axis=1, keepdims=True)
        pi = safe_ratio(sums[1], total)
        p_e = np.einsum("bc,ck,bk->b", pi, w, pi)
        return {"value": chance_corrected(p_o, p_e), "p_o": p_o, "p_e": p_e, "n_pairable": n_pair}

    return _stat(v, [_observed_block(v, w), pooled], finalize)


def build_gwet_ac(r: Ratings, codes: IntArray | None = None, weights: Weights = "identity") -> ItemStatistic:
    v = view(r, codes)
    w = weight_matrix(r, weights, "gwet_ac")
    q = r.n_categories
    share = np.zeros_like(v.counts)
    np.divide(v.counts, v.n[:, None], out=share, where=v.pairable[:, None])
    scale = float(w.sum()) / (q * (q - 1)) if q > 1 else np.nan

    def finalize(sums: list[np.ndarray]) -> Components:
        p_o, n_pair = _observed(sums[0])
        pi = safe_ratio(sums[1], n_pair[:, None])
        p_e = scale * (pi * (1.0 - pi)).sum(axis=1)
        return {"value": chance_corrected(p_o, p_e), "p_o": p_o, "p_e": p_e, "n_pairable": n_pair}

    return _stat(v, [_observed_block(v, w), share], finalize)


def build_conger_kappa(r: Ratings, codes: IntArray | None = None, weights: Weights = "identity",
                       function: str = "conger_kappa") -> ItemStatistic:
    v = view(r, codes)
    w = weight_matrix(r, weights, function)
    n_raters, q = r.n_raters, r.n_categories

    def finalize(sums: list[np.ndarray]) -> Components:
        p_o, n_pair = _observed(sums[0])
        p_e, active = conger_chance(sums[1].reshape(-1, n_raters, q), w)
        return {"value": chance_corrected(p_o, p_e), "p_o": p_o, "p_e": p_e, "n_pairable": n_pair,
                "n_raters": active}

    stat = _stat(v, None, finalize, build_blocks=lambda: [_observed_block(v, w), rater_category_block(v)])
    stat.totals = [_observed_block(v, w).sum(axis=0), rater_category_totals(v)]
    return stat


def conger_chance(rater_counts: np.ndarray, w: FloatArray) -> tuple[np.ndarray, np.ndarray]:
    r"""Conger's chance agreement from rater x category counts, shape (B, raters, q).

    :math:`p_e = \frac{1}{r(r-1)} \sum_{g \ne h} p_g^\top W p_h` over the raters
    with at least one rating, ``p_g`` being rater ``g``'s own marginal
    distribution. Returns ``(p_e, r)``.
    """
    n_g = rater_counts.sum(axis=2)
    active = (n_g > 0).sum(axis=1).astype(np.float64)
    p = np.zeros_like(rater_counts)
    np.divide(rater_counts, n_g[..., None], out=p, where=n_g[..., None] > 0)
    s = p.sum(axis=1)
    between = np.einsum("bc,ck,bk->b", s, w, s) - np.einsum("bgc,ck,bgk->b", p, w, p)
    return safe_ratio(between, active * (active - 1.0)), active


# ---------------------------------------------------------------- public metrics
def percent_agreement(r: Ratings, weights: Weights = "identity", *, ci: float | None = None,
                      n_boot: int = DEFAULT_N_BOOT, seed: Any = None) -> Estimate:
    r"""Percent agreement: mean over items of the (weighted) share of agreeing rater pairs.

    Parameters
    ----------
    r : Ratings
        The judgements; items with a single rating are excluded.
    weights : {"identity", "linear", "quadratic"}, default "identity"
        Partial credit for near-misses; with ``q`` categories at positions
        ``x``, linear credit is ``1 - |x_c - x_k| / (x_max - x_min)``.
    ci : float, optional
        Confidence level of the item-bootstrap percentile interval (e.g. 0.95).
    n_boot : int, default 2000
        Bootstrap resamples.
    seed : int or numpy Generator, optional
        Makes the interval reproducible.

    Returns
    -------
    Estimate

    Notes
    -----
    .. math:: p_o = \frac{1}{n'} \sum_i \frac{\sum_{c,k} n_{ic}(n_{ik} - \delta_{ck}) w_{ck}}{n_i(n_i-1)}

    Girard's slides, "Agreement: Generalized function".

    Examples
    --------
    >>> import labelgate as lg
    >>> r = lg.Ratings.from_wide([[1, 1], [0, 1], [0, 0], [1, 0], [1, 1],
    ...                           [0, 1], [1, 1], [0, 0], [0, 0], [1, 1]])
    >>> round(float(lg.percent_agreement(r)), 3)
    0.7
    """
    check_bootstrap_args(ci, n_boot, seed, "percent_agreement")
    return evaluate("percent_agreement", build_percent_agreement(r, weights=weights), ci=ci, n_boot=n_boot,
                    seed=seed)


def bennett_s(r: Ratings, weights: Weights = "identity", *, ci: float | None = None, n_boot: int = DEFAULT_N_BOOT,
              seed: Any = None) -> Estimate:
    r"""Bennett, Alpert & Goldstein's S (Brennan–Prediger): chance = uniform over categories.

    :math:`p_e = \sum_{c,k} w_{ck} / q^2` (``1/q`` with identity weights), with
    ``q`` the number of categories (explicit list, or observed).

    Examples
    --------
    >>> import labelgate as lg
    >>> r = lg.Ratings.from_wide([[1, 1, 2], [1, 2, 2], [2, 2, 2]], categories=[1, 2, 3])
    >>> round(float(lg.bennett_s(r)), 4)
    0.3333
    """
    check_bootstrap_args(ci, n_boot, seed, "bennett_s")
    return evaluate("bennett_s", build_bennett_s(r, weights=weights), ci=ci, n_boot=n_boot, seed=seed)


def fleiss_kappa(r: Ratings, *, ci: float | None = None, n_boot: int = DEFAULT_N_BOOT, seed: Any = None) -> Estimate:
    r"""Fleiss' kappa (multi-rater Scott's pi) with pooled marginals.

    :math:`p_e = \sum_c \pi_c^2` with :math:`\pi_c = \sum_i n_{ic} / \sum_i n_i`
    over pairable items: every rating weighs the same. With unequal numbers
    of ratings per item this differs from Gwet's generalisation (irrCAC),
    whose :math:`\pi_c` is the mean over items of :math:`n_{ic}/n_i`; the
    two coincide when every item has the same number of ratings
    (``docs/metrics.md``).

    Examples
    --------
    >>> import labelgate as lg
    >>> r = lg.Ratings.from_wide([[1, 1], [0, 1], [0, 0], [1, 1]])
    >>> round(float(lg.fleiss_kappa(r)), 4)
    0.4667
    """
    check_bootstrap_args(ci, n_boot, seed, "fleiss_kappa")
    return evaluate("fleiss_kappa", build_fleiss_kappa(r), ci=ci, n_boot=n_boot, seed=seed)


def scott_pi(r: Ratings, *, ci: float | None = None, n_boot: int = DEFAULT_N_BOOT, seed: Any = None) -> Estimate:
    """Scott's pi; Fleiss' kappa is its multi-rater form and is computed identically.

    Examples
    --------
    >>> import labelgate as lg
    >>> r = lg.Ratings.from_wide([[1, 1], [0, 1], [0, 0], [1, 1]])
    >>> float(lg.scott_pi(r)) == float(lg.fleiss_kappa(r))
    True
    """
    check_bootstrap_args(ci, n_boot, seed, "scott_pi")
    return evaluate("scott_pi", build_fleiss_kappa(r), ci=ci, n_boot=n_boot, seed=seed)


def gwet_ac(r: Ratings, weights: Weights = "identity", *, ci: float | None = None, n_boot: int = DEFAULT_N_BOOT,
            seed: Any = None) -> Estimate:
    r"""Gwet's AC1 (identity weights) / AC2 (linear or quadratic weights).

    :math:`p_e = \frac{\sum_{c,k} w_{ck}}{q(q-1)} \sum_c \pi_c (1 - \pi_c)`,
    :math:`\pi_c` the mean over pairable items of :math:`n_{ic}/n_i` (Gwet 2008).

    Examples
    --------
    >>> import labelgate as lg
    >>> r = lg.Ratings.from_wide([[1, 1], [0, 1], [0, 0], [1, 1]])
    >>> round(float(lg.gwet_ac(r)), 4)
    0.5294
    """
    check_bootstrap_args(ci, n_boot, seed, "gwet_ac")
    return evaluate("gwet_ac", build_gwet_ac(r, weights=weights), ci=ci, n_boot=n_boot, seed=seed)


def conger_kappa(r: Ratings, weights: Weights = "identity", *, ci: float | None = None, n_boot: int = DEFAULT_N_BOOT,
                 seed: Any = None) -> Estimate:
    r"""Conger's kappa: multi-rater Cohen's kappa with rater-specific marginals.

    :math:`p_e` is the mean over pairs of distinct raters of
    :math:`p_g^\top W p_h`, each rater's marginal taken over his own ratings
    on pairable items (Conger 1980; Girard's ``mKAPPA``, which gives −0.182 on
    the slides' five-rater example).

    Examples
    --------
    >>> import labelgate as lg
    >>> r = lg.Ratings.from_wide([[2, 2, 3, 2, 2], [2, 2, 2, 2, 2], [2, None, 2, 2, 1], [1, 2, 2, 2, 2]],
    ...                          categories=[1, 2, 3])
    >>> round(float(lg.conger_kappa(r)), 3)
    -0.182
    """
    check_bootstrap_args(ci, n_boot, seed, "conger_kappa")
    return evaluate("conger_kappa", build_conger_kappa(r, weights=weights), ci=ci, n_boot=n_boot, seed=seed)


def cohen_kappa(r: Ratings, weights: Weights = "identity", *, ci: float | None = None, n_boot: int = DEFAULT_N_BOOT,
                seed: Any = None) -> Estimate:
    """Cohen's kappa (weighted with linear/quadratic weights) for exactly two raters.

    Uses the items both raters judged; equals scikit-learn's
    ``cohen_kappa_score`` on those pairs. For more raters use
    :func:`conger_kappa`, which reduces to this coefficient for two.

    Raises
    ------
    DesignError
        When the data do not have exactly two raters.

    Examples
    --------
    >>> import labelgate as lg
    >>> r = lg.Ratings.from_wide([[1, 1], [0, 1], [0, 0], [1, 1]])
    >>> round(float(lg.cohen_kappa(r)), 4)
    0.5
    """
    check_bootstrap_args(ci, n_boot, seed, "cohen_kappa")
    if r.n_raters != 2:
        raise DesignError(f"cohen_kappa needs exactly two raters; these ratings have {r.n_raters}. "
                          "Use conger_kappa for more raters (it equals Cohen's kappa for two).",
                          Reason.WRONG_RATER_COUNT, n_raters=r.n_raters)
    stat = build_conger_kappa(r, weights=weights, function="cohen_kappa")
    return evaluate("cohen_kappa", stat, ci=ci, n_boot=n_boot, seed=seed)


def specific_agreement(r: Ratings, *, ci: float | None = None, n_boot: int = DEFAULT_N_BOOT, seed: Any = None,
                       ) -> dict[Any, Estimate]:
    r"""Category-specific agreement :math:`SA_k` for every category.

    .. math:: SA_k = \frac{\sum_i n_{ik}(n_{ik} - 1)}{\sum_i n_{ik}(n_i - 1)}

    the probability that a random second rater puts an item in ``k`` given
    that a first did (Dice 1945; Girard's ``mSPECIFIC``). A category never
    used on a pairable item gets NaN with a reason.

    Returns
    -------
    dict
        Category -> Estimate, in category order.

    Examples
    --------
    >>> import labelgate as lg
    >>> r = lg.Ratings.from_wide([[2, 2, 3, 2, 2], [2, 2, 2, 2, 2], [2, None, 2, 2, 1], [1, 2, 2, 2, 2]],
    ...                          categories=[1, 2, 3])
    >>> {k: round(float(v), 3) for k, v in lg.specific_agreement(r).items()}
    {1: 0.0, 2: 0.82, 3: 0.0}
    """
    check_bootstrap_args(ci, n_boot, seed, "specific_agreement")
    v = view(r)
    on = v.counts * v.pairable[:, None]
    blocks = [on * (on - 1.0), on * (v.n - 1.0)[:, None]]

    def finalize(sums: list[np.ndarray]) -> Components:
        return {"value": safe_ratio(sums[0], sums[1]), "possible": sums[1]}

    stat = ItemStatistic(blocks=blocks, finalize=finalize, n_items=v.n_pairable,
                         n_ratings=v.n_ratings_pairable, n_items_excluded=excluded_single(r))
    point = stat.point()
    level = float(ci) if ci is not None else None
    replicates = bootstrap(stat, n_boot=n_boot, seed=seed) if level is not None and v.n_pairable else None
    result: dict[Any, Estimate] = {}
    for k, category in enumerate(r.categories):
        value = float(point["value"][0, k])
        interval = None
        if replicates is not None and level is not None and np.isfinite(value):
            interval, _ = percentile_interval(replicates[:, k], level)
        unused = not np.isfinite(value)
        result[category] = Estimate(
            metric="specific_agreement", value=value if not unused else float("nan"), ci=interval,
            ci_level=level if interval else None, n_items=v.n_pairable, n_ratings=v.n_ratings_pairable,
            n_items_excluded=excluded_single(r),
            reason=f"category {category!r} is never used on an item with two or more ratings" if unused else None,
            reason_code=Reason.CATEGORY_NOT_PAIRED if unused else None,
            details={"category": category}, n_boot=n_boot if interval else 0)
    return result
