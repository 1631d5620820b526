r"""Agreement indexes on one replication: percent agreement and the chance-corrected family.

All coefficients share the observed agreement of Gwet (2014) / Girard's
``mAGREE``: the mean over *pairable* items (two or more ratings) of the
weighted share of agreeing rater pairs,

.. math::

    p_a = \frac{1}{n'} \sum_{i: r_i \ge 2}
          \frac{\sum_{k,l} r_{ik} (r_{il} - \delta_{kl}) w_{kl}}{r_i (r_i - 1)},

and differ in the chance agreement :math:`p_e`; the coefficient is
:math:`(p_a - p_e) / (1 - p_e)`. An item with a single rating says nothing
about agreement, so it is left out of :math:`p_a` (and counted in
``n_items_excluded``), but it does say how raters use the categories: by
default (``marginals="all_rated_items"``) the chance-agreement marginals use
every rated item, as in Gwet's *Handbook of Inter-Rater Reliability* and its
implementation irrCAC. ``marginals="pairable_items"`` restricts them to the
pairable items (LabelGate's earlier definition; see ``docs/metrics.md``).

References: K. L. Gwet, *Handbook of Inter-Rater Reliability*, 4th ed., 2014
(the coefficients with missing ratings); J. M. Girard,
*Inter-rater reliability* (slides; ``seeds/``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from labelgate.core.estimate import DEFAULT_CI_METHOD, DEFAULT_N_BOOT, Estimate
from labelgate.core.ratings import Ratings
from labelgate.errors import DesignError, Reason
from labelgate.metrics._chance import (
    build_bennett_s,
    build_conger_kappa,
    build_fleiss_kappa,
    build_gwet_ac,
    build_percent_agreement,
    conger_chance,
    order_cohen_kappa,
    two_rater_table,
)
from labelgate.metrics._engine import (
    Components,
    ItemStatistic,
    bootstrap,
    check_bootstrap_args,
    evaluate,
    jackknife_components,
    safe_ratio,
)
from labelgate.metrics._intervals import interval_of
from labelgate.metrics._items import (
    Marginals,
    excluded_single,
    pairable_counts,
    require_rater_identity,
    require_whole_counts,
    view,
)
from labelgate.metrics._linear import linearized_se
from labelgate.metrics._resamples import make_rng
from labelgate.metrics.variance_analytic import cohen_se
from labelgate.metrics.weights import Weights, weight_matrix

__all__ = ["bennett_s", "build_bennett_s", "build_conger_kappa", "build_fleiss_kappa", "build_gwet_ac",
           "build_percent_agreement", "cohen_kappa", "conger_chance", "conger_kappa", "fleiss_kappa", "gwet_ac",
           "percent_agreement", "scott_pi", "specific_agreement"]


# ---------------------------------------------------------------- public metrics
def percent_agreement(r: Ratings, weights: Weights = "identity", *, ci: float | None = None,
                      n_boot: int = DEFAULT_N_BOOT, seed: Any = None, ci_method: str = DEFAULT_CI_METHOD) -> Estimate:
    r"""Percent agreement: mean over items of the (weighted) share of agreeing rater pairs.

    Parameters
    ----------
    r : Ratings
        The judgements; items with a single rating are excluded.
    weights : str or array-like, default "identity"
        Partial credit for near-misses: one of Gwet's (2014) weightings
        ``"identity"``, ``"linear"``, ``"quadratic"``, ``"ordinal"``,
        ``"radical"``, ``"ratio"``, ``"circular"``, ``"bipolar"`` on the
        category positions ``x`` (ranks 1..q for nominal/ordinal labels, values
        for interval/ratio; e.g. linear credit ``1 - |x_c - x_k| / (x_max - x_min)``;
        every formula in :mod:`labelgate.metrics.weights`; ``"nominal"`` is
        ``"identity"``), or a q x q matrix in the category order: 1 on the
        diagonal, credits in [0, 1]. An asymmetric matrix enters through its
        symmetric part (pairs of ratings have no order; ``details["weights_note"]``
        says so) except in :func:`cohen_kappa`, whose raters are ordered.
    ci : float, optional
        Confidence level of the item-bootstrap interval (e.g. 0.95).
    n_boot : int, default 2000
        Bootstrap resamples.
    seed : int or numpy Generator, optional
        Makes the interval reproducible.
    ci_method : {"auto", "bca", "delta", "percentile"}, default "auto"
        The interval: bias-corrected and accelerated item bootstrap (Efron 1987; the acceleration from the
        jackknife over items), the delta-method normal interval (linearised standard error, no resampling), or
        the percentile interval of the bootstrap resamples; ``"auto"`` is BCa for every metric but normalized
        kappa_x (delta). ``Estimate.ci_method`` records the method used (see ``docs/metrics.md``, "Intervals").

    Returns
    -------
    Estimate

    Notes
    -----
    .. math:: p_a = \frac{1}{n'} \sum_{i: r_i \ge 2} \frac{\sum_{k,l} r_{ik}(r_{il} - \delta_{kl}) w_{kl}}{r_i(r_i-1)}

    Girard's slides, "Agreement: Generalized function"; Gwet (2014).

    Examples
    --------
    >>> import labelgate as lg
    >>> r = lg.Ratings.from_wide([[1, 1], [0, 1], [0, 0], [1, 0], [1, 1],
    ...                           [0, 1], [1, 1], [0, 0], [0, 0], [1, 1]])
    >>> round(float(lg.percent_agreement(r)), 3)
    0.7
    """
    check_bootstrap_args(ci, n_boot, seed, "percent_agreement", ci_method)
    return evaluate("percent_agreement", build_percent_agreement(r, weights=weights), ci=ci, n_boot=n_boot,
                    seed=seed, ci_method=ci_method)


def bennett_s(r: Ratings, weights: Weights = "identity", *, ci: float | None = None, n_boot: int = DEFAULT_N_BOOT,
              seed: Any = None, ci_method: str = DEFAULT_CI_METHOD) -> Estimate:
    r"""Bennett, Alpert & Goldstein's S (Brennan–Prediger): chance = uniform over categories.

    :math:`p_e = \sum_{k,l} w_{kl} / q^2` (``1/q`` with identity weights), with
    ``q`` the number of categories (explicit list, or observed); :math:`p_a`
    over the pairable items. It has no marginals, so single-rated items play
    no part (Gwet 2014; irrCAC ``bp``). ``weights``, ``ci``, ``n_boot``,
    ``seed``, ``ci_method``: as in :func:`percent_agreement`.

    Examples
    --------
    >>> import labelgate as lg
    >>> r = lg.Ratings.from_wide([[1, 1, 2], [1, 2, 2], [2, 2, 2]], categories=[1, 2, 3])
    >>> round(float(lg.bennett_s(r)), 4)
    0.3333
    """
    check_bootstrap_args(ci, n_boot, seed, "bennett_s", ci_method)
    return evaluate("bennett_s", build_bennett_s(r, weights=weights), ci=ci, n_boot=n_boot,
                    seed=seed, ci_method=ci_method)


def fleiss_kappa(r: Ratings, weights: Weights = "identity", *, marginals: Marginals = "all_rated_items",
                 ci: float | None = None, n_boot: int = DEFAULT_N_BOOT, seed: Any = None,
                 ci_method: str = DEFAULT_CI_METHOD) -> Estimate:
    r"""Fleiss' kappa (multi-rater Scott's pi), Gwet's generalisation to missing ratings and weights.

    .. math:: p_e = \sum_{k,l} w_{kl} \pi_k \pi_l, \qquad
              \pi_k = \frac{1}{n} \sum_{i: r_i \ge 1} \frac{r_{ik}}{r_i}

    over the ``n`` rated items (Gwet 2014, weighted generalised Fleiss; irrCAC
    ``fleiss``), and :math:`p_a` over the pairable items. Unweighted
    (:math:`p_e = \sum_k \pi_k^2`) with the same number of ratings on every
    item this is Fleiss (1971) exactly (statsmodels ``fleiss_kappa``).

    Parameters
    ----------
    r : Ratings
        The judgements (rater identity is not needed: :meth:`Ratings.from_counts` is accepted).
    weights : str or array-like, default "identity"
        As in :func:`percent_agreement`.
    marginals : {"all_rated_items", "pairable_items"}, default "all_rated_items"
        ``"pairable_items"`` is LabelGate's earlier definition: *pooled* marginals
        :math:`\pi_k = \sum_i r_{ik} / \sum_i r_i` over the pairable items
        (every rating weighs the same, as in Fleiss 1971). It differs from the
        default when items have unequal numbers of ratings.
    ci, n_boot, seed, ci_method
        As in :func:`percent_agreement`.

    Examples
    --------
    >>> import labelgate as lg
    >>> r = lg.Ratings.from_wide([[1, 1], [0, 1], [0, 0], [1, 1]])
    >>> round(float(lg.fleiss_kappa(r)), 4)
    0.4667
    """
    check_bootstrap_args(ci, n_boot, seed, "fleiss_kappa", ci_method)
    return evaluate("fleiss_kappa", build_fleiss_kappa(r, weights=weights, marginals=marginals), ci=ci,
                    n_boot=n_boot, seed=seed, ci_method=ci_method)


def scott_pi(r: Ratings, weights: Weights = "identity", *, marginals: Marginals = "all_rated_items",
             ci: float | None = None, n_boot: int = DEFAULT_N_BOOT, seed: Any = None,
             ci_method: str = DEFAULT_CI_METHOD) -> Estimate:
    """Scott's pi; Fleiss' kappa is its multi-rater form, computed identically (same ``weights``, ``marginals``).

    With two raters and complete data, weighted Scott's pi is irrCAC's ``scott`` of the contingency table
    (:meth:`Ratings.from_contingency`).

    Examples
    --------
    >>> import labelgate as lg
    >>> r = lg.Ratings.from_wide([[1, 1], [0, 1], [0, 0], [1, 1]])
    >>> float(lg.scott_pi(r)) == float(lg.fleiss_kappa(r))
    True
    """
    check_bootstrap_args(ci, n_boot, seed, "scott_pi", ci_method)
    return evaluate("scott_pi", build_fleiss_kappa(r, weights=weights, marginals=marginals, function="scott_pi"),
                    ci=ci, n_boot=n_boot, seed=seed, ci_method=ci_method)


def gwet_ac(r: Ratings, weights: Weights = "identity", *, marginals: Marginals = "all_rated_items",
            ci: float | None = None, n_boot: int = DEFAULT_N_BOOT, seed: Any = None,
            ci_method: str = DEFAULT_CI_METHOD) -> Estimate:
    r"""Gwet's AC1 (identity weights) / AC2 (any other weighting).

    .. math:: p_e = \frac{\sum_{k,l} w_{kl}}{q(q-1)} \sum_k \pi_k (1 - \pi_k), \qquad
              \pi_k = \frac{1}{n} \sum_{i: r_i \ge 1} \frac{r_{ik}}{r_i}

    over the ``n`` rated items, :math:`p_a` over the pairable items (Gwet 2008;
    Gwet 2014; irrCAC ``gwet``).

    Parameters
    ----------
    r : Ratings
        The judgements.
    weights : str or array-like, default "identity"
        As in :func:`percent_agreement` (AC2 with any weighting but identity).
    marginals : {"all_rated_items", "pairable_items"}, default "all_rated_items"
        ``"pairable_items"`` averages :math:`r_{ik}/r_i` over the pairable
        items only (LabelGate's earlier definition).
    ci, n_boot, seed, ci_method
        As in :func:`percent_agreement`.

    Examples
    --------
    >>> import labelgate as lg
    >>> r = lg.Ratings.from_wide([[1, 1], [0, 1], [0, 0], [1, 1]])
    >>> round(float(lg.gwet_ac(r)), 4)
    0.5294
    """
    check_bootstrap_args(ci, n_boot, seed, "gwet_ac", ci_method)
    return evaluate("gwet_ac", build_gwet_ac(r, weights=weights, marginals=marginals), ci=ci, n_boot=n_boot,
                    seed=seed, ci_method=ci_method)


def conger_kappa(r: Ratings, weights: Weights = "identity", *, marginals: Marginals = "all_rated_items",
                 ci: float | None = None, n_boot: int = DEFAULT_N_BOOT, seed: Any = None,
                 ci_method: str = DEFAULT_CI_METHOD) -> Estimate:
    r"""Conger's kappa: multi-rater Cohen's kappa with rater-specific marginals.

    .. math:: p_e = \frac{1}{r(r-1)} \sum_{g \ne h} \sum_{k,l} w_{kl}\, p_{gk}\, p_{hl}

    with :math:`p_{gk}` the share of rater ``g``'s ratings that are ``k``, over
    all his ratings (Conger 1980; Gwet 2014; irrCAC ``conger``);
    :math:`p_a` over the pairable items. Girard's ``mKAPPA`` gives −0.182 on
    the slides' five-rater example.

    Parameters
    ----------
    marginals : {"all_rated_items", "pairable_items"}, default "all_rated_items"
        ``"pairable_items"`` takes each rater's marginal over his ratings on
        pairable items only (LabelGate's earlier definition); then ``r`` counts the
        raters with a rating on a pairable item.
    r, weights, ci, n_boot, seed, ci_method
        As in :func:`gwet_ac`.

    Raises
    ------
    DesignError
        On ratings without rater identity (:meth:`Ratings.from_counts`).

    Examples
    --------
    >>> import labelgate as lg
    >>> r = lg.Ratings.from_wide([[2, 2, 3, 2, 2], [2, 2, 2, 2, 2], [2, None, 2, 2, 1], [1, 2, 2, 2, 2]],
    ...                          categories=[1, 2, 3])
    >>> round(float(lg.conger_kappa(r)), 3)
    -0.182
    """
    check_bootstrap_args(ci, n_boot, seed, "conger_kappa", ci_method)
    return evaluate("conger_kappa", build_conger_kappa(r, weights=weights, marginals=marginals), ci=ci,
                    n_boot=n_boot, seed=seed, ci_method=ci_method)


def cohen_kappa(r: Ratings, weights: Weights = "identity", *, ci: float | None = None, n_boot: int = DEFAULT_N_BOOT,
                seed: Any = None, ci_method: str = DEFAULT_CI_METHOD) -> Estimate:
    r"""Cohen's kappa (weighted with any weighting of :func:`percent_agreement`) for exactly two raters.

    Uses the items both raters judged, for the marginals too; equals
    scikit-learn's ``cohen_kappa_score`` on those pairs. This is
    :func:`conger_kappa` with ``marginals="pairable_items"`` (Conger's default
    also uses the items only one of the two raters judged).

    ``weights`` may be an asymmetric matrix: the raters are ordered, the first
    of ``r.rater_labels`` (the rows of :meth:`Ratings.from_contingency`) giving
    the row category, so :math:`p_o = \sum_{kl} w_{kl} p_{kl}` and
    :math:`p_e = \sum_{kl} w_{kl} p_{k\cdot} p_{\cdot l}` (irrCAC's
    ``kappa2_table``).

    Raises
    ------
    DesignError
        When the data do not have exactly two raters, or no rater identity
        (:meth:`Ratings.from_counts`; :meth:`Ratings.from_contingency` has it).

    Examples
    --------
    >>> import labelgate as lg
    >>> r = lg.Ratings.from_wide([[1, 1], [0, 1], [0, 0], [1, 1]])
    >>> round(float(lg.cohen_kappa(r)), 4)
    0.5
    """
    check_bootstrap_args(ci, n_boot, seed, "cohen_kappa", ci_method)
    require_rater_identity(r, "cohen_kappa")
    if r.n_raters != 2:
        raise DesignError(f"cohen_kappa needs exactly two raters; these ratings have {r.n_raters}. "
                          "Use conger_kappa for more raters (it equals Cohen's kappa for two).",
                          Reason.WRONG_RATER_COUNT, n_raters=r.n_raters)
    w = weight_matrix(r, weights, "cohen_kappa")
    skew = (w - w.T) / 2.0
    stat = build_conger_kappa(r, weights=w - skew, function="cohen_kappa", marginals="pairable_items")
    if np.any(skew):  # the two raters are ordered: an asymmetric matrix counts as it is
        stat = order_cohen_kappa(stat, r, None, skew)
        # Fleiss-Cohen-Everitt on the ordered table takes the whole matrix W, as irrCAC's table functions do
        table = two_rater_table(view(r, None))
        stat.analytic = lambda value: cohen_se(table, w)
    return evaluate("cohen_kappa", stat, ci=ci, n_boot=n_boot, seed=seed, ci_method=ci_method)


def specific_agreement(r: Ratings, *, ci: float | None = None, n_boot: int = DEFAULT_N_BOOT, seed: Any = None,
                       ci_method: str = DEFAULT_CI_METHOD,
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
    check_bootstrap_args(ci, n_boot, seed, "specific_agreement", ci_method)
    require_whole_counts(r, "specific_agreement", "a count below 1 makes n_ik (n_ik - 1) negative, so SA_k is no "
                         "longer a share of agreeing pairs")
    v = view(r)
    on = pairable_counts(v)
    blocks = [on * (on - 1.0), on * (v.n - 1.0)[:, None]]

    def finalize(sums: list[np.ndarray]) -> Components:
        return {"value": safe_ratio(sums[0], sums[1]), "possible": sums[1]}

    stat = ItemStatistic(blocks=blocks, finalize=finalize, n_items=v.n_pairable,
                         n_ratings=v.n_ratings_pairable, n_items_excluded=excluded_single(r))
    point = stat.point()
    level = float(ci) if ci is not None else None
    replicates, loo = None, None
    # the delta method's standard error of every category (and the delta interval's)
    se, se_missing = linearized_se(stat.get_blocks(), finalize) if v.n_pairable else (None, None)
    if level is not None and v.n_pairable:
        rng = make_rng(seed)  # one generator: the jackknife's item sample (large data) follows the resamples
        replicates = bootstrap(stat, n_boot=n_boot, seed=rng)
        loo = jackknife_components(stat, rng=rng)["value"] if ci_method != "percentile" else None
    result: dict[Any, Estimate] = {}
    for k, category in enumerate(r.categories):
        value = float(point["value"][0, k])
        interval, method, details = None, None, {"category": category}
        if replicates is not None and level is not None and np.isfinite(value):
            interval, _, method, note = interval_of(replicates[:, k], value, level, ci_method,
                                                    None if loo is None else loo[:, k], on.shape[0],
                                                    None if se is None or ci_method != "delta"
                                                    else float(se["value"][k]), se_missing)
            if note:
                details["ci_method_note"] = note
        unused = not np.isfinite(value)
        spread = float(se["value"][k]) if se is not None and not unused else float("nan")
        result[category] = Estimate(
            metric="specific_agreement", value=value if not unused else float("nan"), ci=interval,
            ci_level=level if interval else None, n_items=v.n_pairable, n_ratings=v.n_ratings_pairable,
            n_items_excluded=excluded_single(r),
            reason=f"category {category!r} is never used on an item with two or more ratings" if unused else None,
            reason_code=Reason.CATEGORY_NOT_PAIRED if unused else None,
            details=details, n_boot=n_boot if interval and method != "delta" else 0, ci_method=method,
            se=spread, se_method="delta" if np.isfinite(spread) else None)
    return result
