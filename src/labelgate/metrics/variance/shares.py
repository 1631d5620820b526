"""The item ICC and the labeler ICC: shares of the item and the rater variance in the total."""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np

from labelgate.core.estimate import DEFAULT_N_BOOT, DeferredSE, Estimate
from labelgate.core.ratings import Ratings
from labelgate.errors import check_option
from labelgate.metrics._engine import check_bootstrap_args
from labelgate.metrics._intervals import level_of
from labelgate.metrics.variance.bootstrap import Resample, check_resample, interval_of
from labelgate.metrics.variance.design import crossed
from labelgate.metrics.variance.fit import ComponentFit
from labelgate.metrics.variance_analytic import (
    BOOTSTRAP_NEEDS_JUDGEMENTS,
    bootstrap_se,
    bootstrap_se_method,
    deferred_bootstrap_se,
    pinned_seed,
)

Scale = Literal["observed", "latent"]
SCALES: tuple[Scale, ...] = ("observed", "latent")
# the Estimate's name and details key of each share
_NAMES = {"item_share": "item_icc", "rater_share": "labeler_icc"}


def item_icc(r: Ratings, *, scale: Scale = "observed", ci: float | None = None, n_boot: int = DEFAULT_N_BOOT,
             seed: Any = None, resample: Resample = "items_and_raters") -> Estimate:
    r"""Item ICC: the share of the item ("true score") variance in the total.

    .. math::

        ICC = \frac{\sigma^2_{item}}{\sigma^2_{item} + \sigma^2_{rater} + \sigma^2_{residual}}

    (the blog's ICC, a variance partition coefficient; Girard's agreement ICC
    for a single rating). Works on sparse crossed designs.

    Parameters
    ----------
    r : Ratings
        Numeric, ordinal or binary labels (see :func:`variance_components`).
    scale : {"observed", "latent"}, default "observed"
        ``"observed"``: moment estimates of the linear model on the label
        values (for 0/1 labels: the observed, probability scale).
        ``"latent"``: binary labels only — the logistic crossed random-effects
        model fitted by Laplace approximation, with residual variance
        :math:`\pi^2/3` (metric name ``item_icc_latent``).
    ci, n_boot, seed
        Interval level, replicates and seed. Observed scale: percentile
        bootstrap; latent scale: Wald interval of the standard deviations
        propagated by ``n_boot`` normal draws.
    resample : {"items_and_raters", "items"}, default "items_and_raters"
        Bootstrap scheme on the observed scale (two-way or items only).

    Returns
    -------
    Estimate
        ``details`` carries the three variances, ``item_icc`` and
        ``labeler_icc`` (so a gate can compare them), and with ``ci`` the
        interval of ``icc_minus_labeler_icc``.

        Observed scale: ``se`` is the standard deviation of the ``n_boot``
        bootstrap replicates (``se_method="bootstrap"``, ``details["se_n_boot"]``;
        no published variance applies to the moment estimators on a sparse
        crossed design). With ``ci`` they are the interval's replicates; without,
        the same replicates (same ``seed``, ``n_boot`` and ``resample``) drawn
        when ``se`` is first read, so a point estimate whose ``se`` is never
        read (``details`` may be) runs no bootstrap; ``to_dict()`` and pickling
        read it. ``seed=None`` fixes fresh entropy when the estimate is made; a
        ``Generator`` is copied, not consumed. The latent scale has no ``se``.

    Examples
    --------
    >>> import labelgate as lg
    >>> r = lg.Ratings.from_wide([[1, 2, 3], [3, 3, 4], [5, 6, 6], [2, 2, 4]], level="interval")
    >>> from labelgate.metrics.variance import item_icc, labeler_icc
    >>> round(float(item_icc(r)), 4), round(float(labeler_icc(r)), 4)
    (0.7672, 0.1638)
    >>> est = item_icc(r, seed=0, n_boot=200)
    >>> est.se == item_icc(r, ci=0.9, seed=0, n_boot=200).se, est.se_method
    (True, 'bootstrap')
    """
    return _icc("item_icc", "item", r, scale, ci, n_boot, seed, resample)


def labeler_icc(r: Ratings, *, scale: Scale = "observed", ci: float | None = None, n_boot: int = DEFAULT_N_BOOT,
                seed: Any = None, resample: Resample = "items_and_raters") -> Estimate:
    r"""Labeler ICC: the share of the rater (labeler bias) variance in the total.

    .. math::

        ICC_l = \frac{\sigma^2_{rater}}{\sigma^2_{item} + \sigma^2_{rater} + \sigma^2_{residual}}

    The blog's "Labeler ICC": data are suspect when it exceeds the item ICC
    (the gate "labeler ICC < ICC"). Parameters and the standard error (the
    item bootstrap's, computed when first read without ``ci``) as
    :func:`item_icc`; the latent variant is named ``labeler_icc_latent``.

    Examples
    --------
    >>> import labelgate as lg
    >>> r = lg.Ratings.from_wide([[1, 2, 3], [3, 3, 4], [5, 6, 6], [2, 2, 4]], level="interval")
    >>> from labelgate.metrics.variance import labeler_icc
    >>> est = labeler_icc(r)
    >>> est.details["labeler_icc"] < est.details["item_icc"]
    True
    """
    return _icc("labeler_icc", "rater", r, scale, ci, n_boot, seed, resample)


def _icc(metric: str, component: str, r: Ratings, scale: str, ci: float | None, n_boot: int, seed: Any,
         resample: str) -> Estimate:
    """Check the parameters, then the ``component`` share on the observed or the latent scale."""
    check_bootstrap_args(ci, n_boot, seed, metric)
    check_resample(resample, metric)
    check_option(scale, SCALES, "scale", metric)
    if scale == "latent":
        # imported on use: _logit imports SciPy at module level and `import labelgate` stays numpy-only
        from labelgate.metrics._logit import latent_share_estimate
        return latent_share_estimate(f"{metric}_latent", r, component, ci=ci, n_boot=n_boot, seed=seed)
    return _share_estimate(metric, r, f"{component}_share", ci, n_boot, seed, resample)


def _share_estimate(metric: str, r: Ratings, want: str, ci: float | None, n_boot: int, seed: Any,
                    resample: str) -> Estimate:
    """The observed-scale share ``want`` with the other share (and their difference) in the details."""
    fit = ComponentFit.of(crossed(r, metric))
    value = fit.value(want)
    details: dict[str, Any] = {
        "scale": "observed", "item_variance": fit.value("item"), "rater_variance": fit.value("rater"),
        "residual_variance": fit.value("residual"), "total_variance": fit.value("total"),
        "item_icc": fit.value("item_share"), "labeler_icc": fit.value("rater_share"),
        "negative": list(fit.negative), "n_raters": fit.n_raters,
    }
    why = None if np.isfinite(value) else fit.reason(want)
    interval, n_failed = None, 0
    se: float | DeferredSE = math.nan
    if ci is None and why is None and fit.c.from_sums:
        details["se_note"] = BOOTSTRAP_NEEDS_JUDGEMENTS
    elif ci is None and why is None:  # the same replicates as with ci=, drawn when se is first read
        pinned = pinned_seed(seed)
        se = deferred_bootstrap_se(lambda: fit.replicates(n_boot, pinned, resample)[want])
        details["se_n_boot"] = n_boot
    if ci is not None and why is None:
        reps = fit.replicates(n_boot, seed, resample)
        interval, n_failed = interval_of(reps[want], ci)
        se = bootstrap_se(reps[want])
        details["se_n_boot"] = n_boot
        other = "rater_share" if want == "item_share" else "item_share"
        part, _ = interval_of(reps[other], ci)
        name = _NAMES[other]
        details[f"{name}_ci_low"], details[f"{name}_ci_high"] = part if part else (np.nan, np.nan)
        diff, _ = interval_of(reps["item_share"] - reps["rater_share"], ci)
        details["icc_minus_labeler_icc_ci_low"], details["icc_minus_labeler_icc_ci_high"] = (
            diff if diff else (np.nan, np.nan))
        details["n_boot_undefined"] = n_failed
        details["resample"] = resample
    return Estimate(metric=metric, value=value if why is None else math.nan, ci=interval,
                    ci_level=level_of(ci, interval), n_items=fit.n_items, n_ratings=fit.n_ratings,
                    n_items_excluded=fit.n_items_excluded, reason=why[1] if why else None,
                    reason_code=why[0] if why else None, details=details, n_boot=n_boot if interval else 0,
                    se=se, se_method=bootstrap_se_method(se))  # type: ignore[arg-type]  # DeferredSE

