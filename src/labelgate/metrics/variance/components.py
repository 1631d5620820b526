"""The result of the variance components (:class:`VarianceComponents`) and :func:`variance_components`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from labelgate.core.estimate import DEFAULT_N_BOOT
from labelgate.core.ratings import Ratings
from labelgate.errors import Reason, check_option
from labelgate.metrics._engine import check_bootstrap_args
from labelgate.metrics._intervals import level_of
from labelgate.metrics.variance.bootstrap import Resample, check_resample, interval_of
from labelgate.metrics.variance.design import crossed
from labelgate.metrics.variance.fit import COMPONENTS, ComponentFit


@dataclass(frozen=True)
class VarianceComponents:
    r"""Moment estimates of the item, rater and residual variances of a crossed design.

    Attributes
    ----------
    item, rater, residual : float
        Variance components truncated at 0 (NaN when not identifiable).
    item_raw, rater_raw, residual_raw : float
        The untruncated moment estimates (unbiased; may be negative).
    negative : tuple of str
        Components whose raw estimate was negative and was set to 0.
    mean : float
        Grand mean of the ratings used.
    n_items, n_raters, n_ratings, n_items_excluded : int
        Items (with two or more ratings), raters and ratings used; items with a
        single rating are excluded.
    within_item_pairs, within_rater_pairs, all_pairs : int
        Ordered pairs of ratings behind each U-statistic
        (:math:`\sum N_i^2 - N`, :math:`\sum M_j^2 - N`, :math:`N^2 - N`).
    ci : dict or None
        Bootstrap intervals of the components and shares, keyed by name.
    """

    item: float
    rater: float
    residual: float
    item_raw: float
    rater_raw: float
    residual_raw: float
    mean: float
    n_items: int
    n_raters: int
    n_ratings: int
    n_items_excluded: int
    within_item_pairs: int
    within_rater_pairs: int
    all_pairs: int
    negative: tuple[str, ...] = ()
    rater_plus_residual: float = math.nan
    reason: str | None = None
    reason_code: Reason | None = None
    ci: dict[str, tuple[float, float] | None] | None = None
    ci_level: float | None = None
    n_boot: int = 0
    resample: str = "items_and_raters"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def total(self) -> float:
        """Sum of the truncated components (NaN when not identifiable)."""
        if math.isnan(self.rater) and not math.isnan(self.rater_plus_residual):
            return self.item + max(self.rater_plus_residual, 0.0)
        return self.item + self.rater + self.residual

    def share(self, component: str) -> float:
        """``component / total`` (the item ICC, labeler ICC or residual share)."""
        check_option(component, COMPONENTS, "component", "VarianceComponents.share")
        total = self.total
        return getattr(self, component) / total if total > 0 else math.nan

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dictionary: ``item``, ``rater``, ``residual``, shares, raw values and counts."""
        out: dict[str, Any] = {
            "item": self.item, "rater": self.rater, "residual": self.residual, "total": self.total,
            "item_share": self.share("item"), "rater_share": self.share("rater"),
            "residual_share": self.share("residual"),
            "item_raw": self.item_raw, "rater_raw": self.rater_raw, "residual_raw": self.residual_raw,
            "rater_plus_residual": self.rater_plus_residual, "negative": list(self.negative),
            "mean": self.mean, "n_items": self.n_items, "n_raters": self.n_raters,
            "n_ratings": self.n_ratings, "n_items_excluded": self.n_items_excluded,
            "within_item_pairs": self.within_item_pairs, "within_rater_pairs": self.within_rater_pairs,
            "all_pairs": self.all_pairs, "reason": self.reason,
            "reason_code": self.reason_code.value if self.reason_code else None,
            "ci_level": self.ci_level, "n_boot": self.n_boot, "resample": self.resample if self.ci else None,
        }
        for key, bounds in (self.ci or {}).items():
            out[f"{key}_ci_low"], out[f"{key}_ci_high"] = bounds if bounds else (None, None)
        out.update(self.extra)
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}


def variance_components(r: Ratings, *, ci: float | None = None, n_boot: int = DEFAULT_N_BOOT, seed: Any = None,
                        resample: Resample = "items_and_raters") -> VarianceComponents:
    r"""Item, rater and residual variances of a crossed design by moments (Gao & Owen 2017).

    Costs O(N): three U-statistics from per-item and per-rater (count, sum,
    sum of squares), no raters x items matrix. See :mod:`labelgate.metrics.variance`
    for the model and the moment equations.

    Parameters
    ----------
    r : Ratings
        Interval/ratio values, ordinal ranks, or a binary nominal label (0/1).
    ci : float, optional
        Level of bootstrap intervals for each component and share (e.g. 0.95).
    n_boot : int, default 2000
        Bootstrap replicates.
    seed : int or numpy Generator, optional
        Seed of the bootstrap.
    resample : {"items_and_raters", "items"}, default "items_and_raters"
        Two-way (pigeonhole) bootstrap of items and raters, or items only.

    Returns
    -------
    VarianceComponents
        ``to_dict()`` has ``item``, ``rater``, ``residual`` (truncated at 0),
        their raw values, shares and the design counts.

    Examples
    --------
    On a complete design the estimates are the two-way ANOVA ones:

    >>> import labelgate as lg
    >>> r = lg.Ratings.from_wide([[1, 2, 3], [3, 3, 4], [5, 6, 6], [2, 2, 4]], level="interval")
    >>> from labelgate.metrics.variance import variance_components, item_icc, labeler_icc
    >>> vc = variance_components(r)
    >>> round(vc.item, 4), round(vc.rater, 4), round(vc.residual, 4)
    (2.4722, 0.5278, 0.2222)
    >>> round(vc.share("item"), 4)
    0.7672
    """
    check_bootstrap_args(ci, n_boot, seed, "variance_components")
    check_resample(resample, "variance_components")
    fit = ComponentFit.of(crossed(r, "variance_components"))
    why = fit.reason("total")
    intervals = None
    if ci is not None and why is None:
        reps = fit.replicates(n_boot, seed, resample)
        intervals = {k: interval_of(reps[k], ci)[0] for k in (*COMPONENTS, "item_share", "rater_share")}
    return VarianceComponents(
        item=fit.value("item"), rater=fit.value("rater"), residual=fit.value("residual"),
        item_raw=fit.value("item_raw"), rater_raw=fit.value("rater_raw"), residual_raw=fit.value("residual_raw"),
        mean=fit.c.mean, n_items=fit.n_items, n_raters=fit.n_raters, n_ratings=fit.n_ratings,
        n_items_excluded=fit.n_items_excluded, within_item_pairs=int(fit.sums["a"][0]),
        within_rater_pairs=int(fit.sums["b"][0]), all_pairs=int(fit.sums["c3"][0]), negative=fit.negative,
        rater_plus_residual=fit.value("rater_plus_residual"),
        reason=why[1] if why else None, reason_code=why[0] if why else None,
        ci=intervals, ci_level=level_of(ci, intervals), n_boot=n_boot if intervals else 0,
        resample=resample)
