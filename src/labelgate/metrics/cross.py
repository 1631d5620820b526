r"""Cross-replication reliability: kappa_x and normalized kappa_x (Wong, Paritosh & Aroyo 2021), and the IRR of
two pools compared on their common items.

kappa_x (eq. 9-11) compares the disagreement between the replications X and Y with the disagreement expected from
their marginals, on the items rated in both; its per-item statistic, under each distance, is built in
:mod:`labelgate.metrics._cross_disagreement`. Normalized kappa_x (eq. 13) divides it by
:math:`\sqrt{IRR_X \cdot IRR_Y}`, both IRRs on the common items with the same distance, and one item bootstrap
resamples the common items jointly for all three. This module owns the public estimators, the preparation of a
pair (merged categories, aligned common items) and the choice of IRR.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from labelgate.core.align import on_one_index
from labelgate.core.estimate import DEFAULT_CI_METHOD, DEFAULT_N_BOOT, Estimate
from labelgate.core.ratings import IntArray, Ratings, align_items, common_categories
from labelgate.errors import DesignError, ParameterError, Reason, check_option
from labelgate.metrics._cross_disagreement import Distance, build_cross_kappa

# re-exported: labelgate.monitor.state imports kappa_x's moment block from here (with build_cross_kappa)
from labelgate.metrics._cross_disagreement import moment_cross_observed as moment_cross_observed
from labelgate.metrics._engine import Components, ItemStatistic, check_bootstrap_args, combine, evaluate, safe_ratio
from labelgate.metrics._items import require_whole_counts
from labelgate.metrics.agreement import build_conger_kappa, build_fleiss_kappa, build_gwet_ac
from labelgate.metrics.alpha import build_alpha, build_iota
from labelgate.metrics.weights import Weights, unordered_weights

IRR_BUILDERS: dict[str, Callable[..., ItemStatistic]] = {
    "krippendorff_alpha": build_alpha,
    "fleiss_kappa": build_fleiss_kappa,
    "conger_kappa": build_conger_kappa,
    "gwet_ac": build_gwet_ac,
    "janson_olsson_iota": build_iota,
}


def weighted_irr(irr: str, r: Ratings, codes: IntArray, weights: Weights | None, function: str) -> ItemStatistic:
    """The IRR ``irr`` on ``codes`` with the agreement ``weights`` (None: the coefficient's default).

    Janson–Olsson ι has a distance (``"nominal"`` / ``"interval"``), not a weighting: weights are refused for it.
    """
    if weights is None:
        return IRR_BUILDERS[irr](r, codes)
    if irr == "janson_olsson_iota":
        raise ParameterError(f"{function}: janson_olsson_iota takes no 'weights' (its distance is nominal or "
                             "interval, from the level); use irr='krippendorff_alpha', 'fleiss_kappa', "
                             "'conger_kappa' or 'gwet_ac' for a weighted IRR.", parameter="weights", value=weights)
    return IRR_BUILDERS[irr](r, codes, weights)


def prepare_pair(x: Ratings, y: Ratings, function: str) -> tuple[Ratings, Ratings, IntArray, IntArray]:
    """Common categories and the aligned codes of the items rated in both replications.

    Raises
    ------
    DesignError
        When no item is rated in both replications.
    """
    if not isinstance(x, Ratings) or not isinstance(y, Ratings):
        raise ParameterError(f"{function} takes two Ratings (one per replication); got "
                             f"{type(x).__name__} and {type(y).__name__}.", parameter="x")
    for r in (x, y):
        require_whole_counts(r, function, "pair functions are validated on counts of judgements only")
    x, y = common_categories(*on_one_index(x, y))  # separately built: put on one item index once (cached)
    cx, cy = align_items(x, y)
    if cx.size == 0:
        raise DesignError(f"{function}: no item is rated in both replications ({x.n_items} and {y.n_items} "
                          "items); check the item ids and the pool split.", Reason.NO_COMMON_ITEMS)
    return x, y, cx, cy


def _coverage(x: Ratings, y: Ratings, cx: IntArray) -> dict[str, float | int]:
    return {"n_common_items": int(cx.size),
            "coverage_x": cx.size / max(x.n_rated_items, 1),
            "coverage_y": cx.size / max(y.n_rated_items, 1)}


def _irr_with_distance(irr: str, r: Ratings, codes: IntArray, distance: Distance) -> ItemStatistic:
    """The IRR on ``codes`` with the same named distance as kappa_x, so that eq. 13 compares like with like.

    alpha takes the distance as its level (``"interval"`` on category ranks for labels that are not numbers);
    iota takes ``"nominal"`` / ``"interval"``. Other coefficients, and custom distances, use their own.
    """
    if not isinstance(distance, str):
        return IRR_BUILDERS[irr](r, codes)
    if irr == "krippendorff_alpha":
        return build_alpha(_with_level(r, distance), codes)
    if irr == "janson_olsson_iota":
        if distance == "ordinal":
            raise ParameterError("normalized_cross_kappa: janson_olsson_iota has no ordinal distance; use "
                                 "distance='nominal' or 'interval', or irr='krippendorff_alpha'.",
                                 parameter="distance", value=distance)
        return build_iota(r, codes, distance=distance)
    return IRR_BUILDERS[irr](r, codes)


def _with_level(r: Ratings, level: str) -> Ratings:
    """The same judgements read at another measurement level (interval on ranks for non-numeric labels)."""
    if level == r.level:
        return r
    categories: list[Any] = list(r.categories)
    if level in ("interval", "ratio") and not r.is_numeric:
        categories = list(range(r.n_categories))
    return Ratings(r.item_codes, r.rater_codes, r.value_codes, item_labels=r.item_index,
                   rater_labels=r.rater_labels, categories=categories, level=level)  # type: ignore[arg-type]


def cross_kappa(x: Ratings, y: Ratings, distance: Distance = None, *, ci: float | None = None,
                n_boot: int = DEFAULT_N_BOOT, seed: Any = None, ci_method: str = DEFAULT_CI_METHOD) -> Estimate:
    r"""Cross-replication kappa :math:`\kappa_x(X, Y)` with missing data (xRR paper eq. 9-11).

    Parameters
    ----------
    x, y : Ratings
        The two replications (e.g. crowd and trusted) of the same items; only
        items rated in both are used. Categories are merged.
    distance : {"nominal", "ordinal", "interval"}, callable, (q, q) array, optional
        Disagreement between two labels. Default from the level: nominal
        ``1[c != k]`` (eq. 4); ordinal: Krippendorff's ordinal metric from the
        pooled category frequencies of both replications on the common items;
        interval and ratio: squared difference (eq. 3), from moments. A
        function of two categories or a matrix gives a custom distance.
    ci, n_boot, seed, ci_method
        Item-bootstrap interval (as in :func:`labelgate.percent_agreement`):
        common items are resampled jointly in both replications.

    Raises
    ------
    DesignError
        When no item is rated in both replications.

    Examples
    --------
    With one rating per item in each replication, kappa_x is Cohen's kappa:

    >>> import labelgate as lg
    >>> x = lg.Ratings.from_wide([[1], [0], [0], [1]])
    >>> y = lg.Ratings.from_wide([[1], [1], [0], [1]])
    >>> round(float(lg.cross_kappa(x, y)), 4)
    0.5
    """
    check_bootstrap_args(ci, n_boot, seed, "cross_kappa", ci_method)
    x, y, cx, cy = prepare_pair(x, y, "cross_kappa")
    return _kappa_estimate(x, y, cx, build_cross_kappa(x, y, cx, cy, distance), ci, n_boot, seed, ci_method)


def _kappa_estimate(x: Ratings, y: Ratings, cx: IntArray, kappa: ItemStatistic, ci: float | None, n_boot: int,
                    seed: Any, ci_method: str) -> Estimate:
    """The Estimate of kappa_x from its statistic (normalized kappa_x may share it: it reads no details of it)."""
    kappa.details.update(_coverage(x, y, cx))
    return evaluate("cross_kappa", kappa, ci=ci, n_boot=n_boot, seed=seed, ci_method=ci_method)


def normalized_cross_kappa(x: Ratings, y: Ratings, irr: str = "krippendorff_alpha", distance: Distance = None,
                           *, weights: Weights | None = None, ci: float | None = None,
                           n_boot: int = DEFAULT_N_BOOT, seed: Any = None,
                           ci_method: str = DEFAULT_CI_METHOD) -> Estimate:
    r"""Normalized kappa_x: :math:`\kappa_x / \sqrt{IRR_X \cdot IRR_Y}` (xRR paper eq. 13).

    Both IRRs are computed on the items common to the two replications (each
    on its own pairable items among them) and, for alpha and iota, with the
    same named ``distance`` as kappa_x (default: the level's); the bootstrap
    resamples common items jointly and recomputes all three. ``to_dict()`` also carries
    ``cross_kappa``, ``irr_x`` and ``irr_y`` (with their intervals when
    ``ci`` is set). Values above 1 occur when the IRRs are small (estimation
    noise) and are reported, not clipped; a non-positive IRR product gives NaN
    with a reason.

    Parameters
    ----------
    irr : {"krippendorff_alpha", "fleiss_kappa", "conger_kappa", "gwet_ac", "janson_olsson_iota"}
        The IRR used for both replications.
    weights : str or array-like, optional
        A weighting of the handbook (:data:`labelgate.weights.WEIGHTS`) or a q x q matrix of credits on the merged
        categories, instead of ``distance``: both IRRs take these weights (as ``lg.krippendorff_alpha(r,
        weights=...)`` etc.) and kappa_x the distance :math:`1 - w_{kl}` (of the symmetric part), so the ratio
        still compares like with like. Not with ``irr="janson_olsson_iota"`` (ι has a distance, not weights).
    ci, n_boot, seed, ci_method
        As in :func:`labelgate.percent_agreement`, but ``ci_method="auto"`` (the default) gives the delta-method
        interval :math:`\hat\theta \pm z\,\widehat{se}` with the linearised (infinitesimal-jackknife) standard error
        of the per-item statistics: on 50-100 common items the bootstrap intervals of this ratio under-cover
        (``docs/benchmarks.md``, "Interval coverage"). ``n_boot`` and ``seed`` then serve only its BCa fallback.

    Examples
    --------
    >>> import labelgate as lg
    >>> x = lg.Ratings.from_wide([[1, 1], [0, 0], [0, 0], [1, 0], [1, 1], [0, 1]])
    >>> y = lg.Ratings.from_wide([[1, 1], [0, 0], [0, 1], [1, 1], [1, 1], [0, 0]])
    >>> est = lg.normalized_cross_kappa(x, y)
    >>> round(float(est), 4), round(est.details["cross_kappa"], 4)
    (0.9682, 0.5)
    """
    check_bootstrap_args(ci, n_boot, seed, "normalized_cross_kappa", ci_method)
    check_option(irr, tuple(IRR_BUILDERS), "irr", "normalized_cross_kappa")
    if weights is not None and distance is not None:
        raise ParameterError("normalized_cross_kappa takes 'distance' or 'weights', not both (with weights, "
                             "kappa_x's distance is 1 - w).", parameter="weights", value=weights)
    x, y, cx, cy = prepare_pair(x, y, "normalized_cross_kappa")
    if weights is not None:
        credit, _ = unordered_weights(x, weights, "normalized_cross_kappa")
        kappa = build_cross_kappa(x, y, cx, cy, 1.0 - credit)
        return _normalized_estimate(x, y, cx, cy, kappa, irr, None, ci, n_boot, seed, ci_method, weights)
    return _normalized_estimate(x, y, cx, cy, build_cross_kappa(x, y, cx, cy, distance), irr, distance, ci,
                                n_boot, seed, ci_method)


def _normalized_estimate(x: Ratings, y: Ratings, cx: IntArray, cy: IntArray, kappa: ItemStatistic, irr: str,
                         distance: Distance, ci: float | None, n_boot: int, seed: Any, ci_method: str,
                         weights: Weights | None = None) -> Estimate:
    """The Estimate of normalized kappa_x from kappa_x's statistic on the prepared pair."""
    if weights is None:
        irr_x, irr_y = _irr_with_distance(irr, x, cx, distance), _irr_with_distance(irr, y, cy, distance)
    else:
        irr_x, irr_y = (weighted_irr(irr, r, c, weights, "normalized_cross_kappa") for r, c in ((x, cx), (y, cy)))

    def finalize(parts: list[Components]) -> Components:
        kx, ix, iy = parts[0]["value"], parts[1]["value"], parts[2]["value"]
        product = ix * iy
        root = np.sqrt(np.where(product > 0, product, np.nan))
        return {"value": kx / root, "cross_kappa": kx, "irr_x": ix, "irr_y": iy}

    def explain(point: Components) -> tuple[Reason, str]:
        kx, ix, iy = (float(point[k][0]) for k in ("cross_kappa", "irr_x", "irr_y"))
        for name, value, part in (("cross_kappa", kx, kappa), ("irr_x", ix, irr_x), ("irr_y", iy, irr_y)):
            if not np.isfinite(value):
                inner = part.explain(part.point()) if part.explain else None
                code, why = inner or (Reason.NO_VARIANCE, "undefined")
                return code, f"{name} is undefined: {why}"
        return (Reason.NONPOSITIVE_IRR_PRODUCT,
                f"IRR_x * IRR_y = {ix:.4g} * {iy:.4g} <= 0, so the normalisation is undefined")

    stat = combine([kappa, irr_x, irr_y], finalize, n_items=kappa.n_items, n_ratings=kappa.n_ratings,
                   explain=explain)
    stat.interval_components = ("cross_kappa", "irr_x", "irr_y")
    stat.details.update({"irr": irr, **_coverage(x, y, cx)})
    if weights is not None:
        stat.details["weights"] = weights if isinstance(weights, str) else "custom"
    return evaluate("normalized_cross_kappa", stat, ci=ci, n_boot=n_boot, seed=seed, ci_method=ci_method)


def cross_pair(x: Ratings, y: Ratings, *, ci: float | None = None, n_boot: int = DEFAULT_N_BOOT, seed: Any = None,
               ci_method: str = DEFAULT_CI_METHOD) -> dict[str, Estimate]:
    r"""kappa_x and normalized kappa_x (Krippendorff's alpha, the level's distance) of one pair, prepared once.

    The same two Estimates as :func:`cross_kappa` and :func:`normalized_cross_kappa` called with the same
    arguments, for half the work: the categories are merged, the common items aligned and kappa_x's statistic
    built once for both (what :func:`labelgate.metrics.panel.metrics_panel` reports for two pools).

    Raises
    ------
    DesignError
        When no item is rated in both replications (named as by :func:`cross_kappa`).

    Examples
    --------
    >>> import labelgate as lg
    >>> x = lg.Ratings.from_wide([[1, 1], [0, 0], [0, 0], [1, 0], [1, 1], [0, 1]])
    >>> y = lg.Ratings.from_wide([[1, 1], [0, 0], [0, 1], [1, 1], [1, 1], [0, 0]])
    >>> both = cross_pair(x, y)
    >>> round(float(both["cross_kappa"]), 4), round(float(both["normalized_cross_kappa"]), 4)
    (0.5, 0.9682)
    """
    check_bootstrap_args(ci, n_boot, seed, "cross_pair", ci_method)
    x, y, cx, cy = prepare_pair(x, y, "cross_kappa")  # the refusal the panel gave when it called cross_kappa
    kappa = build_cross_kappa(x, y, cx, cy)
    return {"cross_kappa": _kappa_estimate(x, y, cx, kappa, ci, n_boot, seed, ci_method),
            "normalized_cross_kappa": _normalized_estimate(x, y, cx, cy, kappa, "krippendorff_alpha", None, ci,
                                                           n_boot, seed, ci_method)}


def irr_comparison(crowd: Ratings, trusted: Ratings, irr: str = "krippendorff_alpha", *,
                   weights: Weights | None = None, ci: float | None = None, n_boot: int = DEFAULT_N_BOOT,
                   seed: Any = None,
                   ci_method: str = DEFAULT_CI_METHOD) -> Estimate:
    r"""IRR of the crowd and of the trusted pool on their common items, with a joint item bootstrap.

    The value is :math:`IRR_{crowd}`; ``details`` carry :math:`IRR_{trusted}`,
    the difference :math:`IRR_{crowd} - IRR_{trusted}` and the ratio
    :math:`IRR_{crowd} / IRR_{trusted}` (NaN unless :math:`IRR_{trusted} > 0`),
    each with its interval when ``ci`` is set. Both IRRs use the same items,
    resampled jointly, so the interval of the difference accounts for their
    correlation (harder items lower both).

    Parameters
    ----------
    crowd, trusted : Ratings
        The two pools, sharing one item index (:func:`labelgate.ratings_by_pool`).
    irr : {"krippendorff_alpha", "fleiss_kappa", "conger_kappa", "gwet_ac", "janson_olsson_iota"}
        The IRR.
    weights : str or array-like, optional
        The IRR's agreement weights, as in ``lg.krippendorff_alpha(r, weights=...)`` (a weighting of the handbook,
        :data:`labelgate.weights.WEIGHTS`, or a q x q matrix on the merged categories); None: the coefficient's
        default. Not with ``irr="janson_olsson_iota"``.
    ci, n_boot, seed, ci_method
        Item-bootstrap interval (as in :func:`labelgate.percent_agreement`).

    Examples
    --------
    >>> import labelgate as lg
    >>> x = lg.Ratings.from_wide([[1, 1], [0, 0], [0, 0], [1, 0]])
    >>> y = lg.Ratings.from_wide([[1, 1], [0, 0], [0, 0], [1, 1]])
    >>> est = irr_comparison(x, y)
    >>> round(est.value, 4) == round(lg.krippendorff_alpha(x).value, 4), round(est.details["irr_y"], 4)
    (True, 1.0)
    """
    check_bootstrap_args(ci, n_boot, seed, "irr_comparison", ci_method)
    check_option(irr, tuple(IRR_BUILDERS), "irr", "irr_comparison")
    x, y, cx, cy = prepare_pair(crowd, trusted, "irr_comparison")
    parts = [weighted_irr(irr, r, c, weights, "irr_comparison") for r, c in ((x, cx), (y, cy))]

    def finalize(p: list[Components]) -> Components:
        ix, iy = p[0]["value"], p[1]["value"]
        ratio = safe_ratio(ix, np.where(iy > 0, iy, 0.0))
        return {"value": ix, "irr_y": iy, "difference": ix - iy, "ratio": ratio}

    def explain(point: Components) -> tuple[Reason, str]:
        inner = parts[0].explain(parts[0].point()) if parts[0].explain else None
        code, why = inner or (Reason.NO_VARIANCE, "undefined")
        return code, f"the crowd IRR is undefined: {why}"

    stat = combine(parts, finalize, n_items=parts[0].n_items, n_ratings=parts[0].n_ratings, explain=explain,
                   n_items_excluded=parts[0].n_items_excluded)
    stat.interval_components = ("irr_y", "difference", "ratio")
    trusted_point = parts[1].point()  # from its totals; est.details would compute the deferred standard error
    if math.isnan(float(np.atleast_1d(trusted_point["value"])[0])):
        # Say why the trusted IRR (hence the comparison) is undefined.
        inner = parts[1].explain(trusted_point) if parts[1].explain else None
        stat.details["irr_y_reason"] = f"the trusted IRR is undefined: {(inner or (None, 'undefined'))[1]}"
    return evaluate(irr, stat, ci=ci, n_boot=n_boot, seed=seed, ci_method=ci_method)
