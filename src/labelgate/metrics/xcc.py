r"""Cross-replication correlations: the parametric normalized xCC and Spearman's disattenuated correlation.

Both compare two replications (e.g. a crowd batch and a trusted pool) of the
same items through their item effects / item means, as the model-based
counterparts of normalized :math:`\kappa_x` (xRR paper eq. 12-14; the blog's
"Normalized xCC"). The moment machinery is the one of
:mod:`labelgate.metrics.variance`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from labelgate.core.estimate import DEFAULT_N_BOOT, DeferredSE, Estimate, StandardError
from labelgate.core.ratings import FloatArray, IntArray, Ratings
from labelgate.errors import ParameterError, Reason
from labelgate.metrics._engine import check_bootstrap_args
from labelgate.metrics._items import require_rater_identity
from labelgate.metrics._linear import MAX_GRADIENT_COLUMNS, linearized_se
from labelgate.metrics._resamples import resample_counts
from labelgate.metrics.cross import prepare_pair
from labelgate.metrics.variance import (
    CHUNK_CELLS,
    Arrays,
    Crossed,
    Resample,
    bootstrap_replicates,
    check_resample,
    component_sums,
    crossed,
    interval_of,
    level_of,
    numeric_values,
    solve_components,
    weighted_item_moments,
)
from labelgate.metrics.variance_analytic import (
    BOOTSTRAP_NEEDS_JUDGEMENTS,
    bootstrap_se,
    bootstrap_se_method,
    deferred_bootstrap_se,
    pinned_seed,
)

#: ``details["se_source"]`` of :func:`disattenuated_correlation`'s standard error.
DISATTENUATED_SE_SOURCE = ("delta method: infinitesimal jackknife over the common items of r_xy and the split-half "
                           "correlations, their covariances included, the splits fixed (Efron 1982, ch. 6)")


# ------------------------------------------------------------------ cross-replication xCC
def _pair_views(x: Ratings, y: Ratings, function: str) -> tuple[Crossed, Crossed]:
    for r in (x, y):
        numeric_values(r, function)
        require_rater_identity(r, function)  # a rater effect: the slots of a count table are not raters
    x, y, cx, cy = prepare_pair(x, y, function)
    return crossed(x, function, cx), crossed(y, function, cy)


def cross_sums(cx: Crossed, cy: Crossed, w: np.ndarray, vx: np.ndarray | None, vy: np.ndarray | None,
               ) -> Arrays:
    """Cross-replication covariance of the item effects (and the per-pool components), shape (B,)."""
    size = w.shape[0]
    mx = weighted_item_moments(cx, vx, size)
    my = weighted_item_moments(cy, vy, size)
    nx, sx = mx[0], mx[1]
    ny, sy = my[0], my[1]
    tot_nx, tot_ny = np.sum(w * nx, axis=1), np.sum(w * ny, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_x, mean_y = np.sum(w * sx, axis=1) / tot_nx, np.sum(w * sy, axis=1) / tot_ny
        rs = np.sum(w * nx * ny, axis=1)
        # sum_i W_i (Sx_i - R_i mean_x)(Sy_i - S_i mean_y): centred same-item cross products
        cross = (np.sum(w * sx * sy, axis=1) - mean_y * np.sum(w * sx * ny, axis=1)
                 - mean_x * np.sum(w * nx * sy, axis=1) + mean_x * mean_y * rs)
        # its expectation is cov * K (centring at the estimated means included): unbiased
        w2 = w * w
        k = (rs - np.sum(w2 * nx * ny * ny, axis=1) / tot_ny - np.sum(w2 * nx * nx * ny, axis=1) / tot_nx
             + rs * np.sum(w2 * nx * ny, axis=1) / (tot_nx * tot_ny))
        cov = np.where(k > 0, cross / k, np.nan)
    px = solve_components(component_sums(cx, w, vx, item_mom=mx))
    py = solve_components(component_sums(cy, w, vy, item_mom=my))
    with np.errstate(divide="ignore", invalid="ignore"):
        item_product = px["item"] * py["item"]
        rho = np.where(item_product > 0, cov / np.sqrt(item_product), np.nan)
        total_product = px["total"] * py["total"]
        xcc = np.where(total_product > 0, cov / np.sqrt(total_product), np.nan)
    return {"value": rho, "rho": rho, "xcc": xcc, "cov": cov, "icc_x": px["item_share"],
            "icc_y": py["item_share"], "item_var_x": px["item"], "item_var_y": py["item"]}


def _cross_reason(point: Arrays) -> tuple[Reason, str]:
    for side in ("x", "y"):
        if not np.isfinite(point[f"item_var_{side}"][0]):
            return (Reason.NO_PAIRABLE_ITEMS, f"replication {side} identifies no item variance on the common "
                    "items (it needs items with two or more ratings and raters with two or more items)")
    if not np.isfinite(point["cov"][0]):
        return Reason.NO_PAIRABLE_ITEMS, "the common items do not identify the cross-replication covariance"
    return (Reason.NONPOSITIVE_IRR_PRODUCT, "an item variance is 0 (after truncation) in a replication, so the "
            "correlation of the item effects is undefined")


def cross_correlation(x: Ratings, y: Ratings, *, ci: float | None = None, n_boot: int = DEFAULT_N_BOOT,
                      seed: Any = None,
                      resample: Resample = "items_and_raters") -> Estimate:
    r"""Parametric normalized xCC: correlation :math:`\rho` of the item effects of two replications.

    Bivariate crossed model (the blog's "Normalized xCC"): in replication
    :math:`s \in \{x, y\}`, :math:`Y^s_{ij} = \mu_s + a^s_i + b^s_j + e^s_{ij}`
    with separate item, rater and residual variances per replication,
    independent raters across replications, and
    :math:`\mathrm{corr}(a^x_i, a^y_i) = \rho`. On the items rated in both,

    .. math::

        \hat c = \frac{\sum_i \tilde S^x_i \tilde S^y_i}{K}, \qquad
        \hat\rho = \frac{\hat c}{\sqrt{\hat\sigma^2_{item,x}\,\hat\sigma^2_{item,y}}}, \qquad
        xCC = \hat\rho\sqrt{ICC_x\, ICC_y},

    where :math:`\tilde S^s_i` is the item's sum of ratings centred at the
    replication mean (the sum of the centred cross-replication products over
    the :math:`R_i S_i` same-item pairs) and
    :math:`K = \sum R_iS_i - \sum R_iS_i^2/N_y - \sum R_i^2S_i/N_x + (\sum R_iS_i)^2/(N_xN_y)`
    makes :math:`\hat c` unbiased for :math:`\mathrm{cov}(a^x_i, a^y_i)`.
    The per-replication variances are :func:`variance_components` on the
    common items. :math:`\hat\rho` is the model-based analogue of normalized
    :math:`\kappa_x`; it is reported unclipped (it can exceed 1 by noise).

    Parameters
    ----------
    x, y : Ratings
        Two replications of (some of) the same items; see :func:`variance_components`
        for the accepted labels.
    ci, n_boot, seed, resample
        Bootstrap: common items are resampled jointly in both replications,
        and (``"items_and_raters"``) each replication's raters independently.

    Returns
    -------
    Estimate
        ``value`` is :math:`\rho`; ``to_dict()`` also has ``rho``, ``xcc``,
        ``icc_x``, ``icc_y`` and ``cov`` (and their intervals with ``ci``).
        ``se`` is the standard deviation of the ``n_boot`` bootstrap
        replicates (``se_method="bootstrap"``): :math:`\hat\rho` is a ratio
        of moment estimators of a crossed model, not a Pearson correlation
        over items, and no published variance applies to it. With ``ci`` they
        are the interval's replicates; without, the same replicates (same
        ``seed``, ``n_boot``, ``resample``) drawn when ``se`` is first read
        (reading ``details`` does not draw them; ``to_dict()`` and pickling do).

    Raises
    ------
    DesignError
        When no item is rated in both replications.

    Examples
    --------
    >>> import numpy as np, labelgate as lg
    >>> rng = np.random.default_rng(0)
    >>> truth = rng.normal(size=(2000, 1))
    >>> x = lg.Ratings.from_wide(truth + rng.normal(size=(2000, 4)), level="interval")
    >>> y = lg.Ratings.from_wide(truth + rng.normal(size=(2000, 3)), level="interval")
    >>> from labelgate.metrics.xcc import cross_correlation
    >>> est = cross_correlation(x, y)
    >>> round(float(est), 2), round(est.details["icc_x"], 2)
    (1.0, 0.5)
    """
    check_bootstrap_args(ci, n_boot, seed, "cross_correlation")
    check_resample(resample, "cross_correlation")
    cx, cy = _pair_views(x, y, "cross_correlation")
    point = cross_sums(cx, cy, np.ones((1, cx.n_axis)), None, None)
    value = float(point["value"][0])
    details: dict[str, Any] = {k: float(point[k][0]) for k in ("rho", "xcc", "cov", "icc_x", "icc_y",
                                                                "item_var_x", "item_var_y")}
    details["n_common_items"] = cx.n_axis
    why = None if np.isfinite(value) else _cross_reason(point)
    interval, n_boot_used = None, 0
    se: float | DeferredSE = math.nan

    def replicates(seed: Any) -> Arrays:
        return bootstrap_replicates(lambda w, vs: cross_sums(cx, cy, w, vs[0], vs[1]), n_boot, seed,
                                    cx.n_axis, [cx.n_raters, cy.n_raters], resample)

    if ci is None and why is None and (cx.from_sums or cy.from_sums):
        details["se_note"] = BOOTSTRAP_NEEDS_JUDGEMENTS
    elif ci is None and why is None:  # the replicates of the same call with ci=, drawn when se is first read
        details["se_n_boot"] = n_boot
        pinned = pinned_seed(seed)
        se = deferred_bootstrap_se(lambda: replicates(pinned)["value"])
    if ci is not None and why is None:
        reps = replicates(seed)
        details["se_n_boot"] = n_boot
        interval, details["n_boot_undefined"] = interval_of(reps["value"], ci)
        se = bootstrap_se(reps["value"])
        for key in ("xcc", "icc_x", "icc_y", "cov"):
            part, _ = interval_of(reps[key], ci)
            details[f"{key}_ci_low"], details[f"{key}_ci_high"] = part if part else (np.nan, np.nan)
        details["resample"] = resample
        n_boot_used = n_boot if interval else 0
    n_ratings = int(cx.item_m[:, 0].sum() + cy.item_m[:, 0].sum())
    return Estimate(metric="cross_correlation", value=value if why is None else math.nan, ci=interval,
                    ci_level=level_of(ci, interval), n_items=cx.n_axis, n_ratings=n_ratings,
                    reason=why[1] if why else None, reason_code=why[0] if why else None, details=details,
                    n_boot=n_boot_used, se=se, se_method=bootstrap_se_method(se))  # type: ignore[arg-type]


# ---------------------------------------------------------- Spearman's disattenuated correlation
def _split_half_means(r: Ratings, items: IntArray, n_splits: int, rng: np.random.Generator,
                      ) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Item means and, per random split, the means of the two halves; rows align with ``items``."""
    values = numeric_values(r, "disattenuated_correlation")
    position = np.full(r.n_items, -1, dtype=np.int64)
    position[items] = np.arange(items.size)
    pos = position[r.item_codes]
    rows = np.flatnonzero(pos >= 0)
    pos, y = pos[rows], values[rows]
    n = np.bincount(pos, minlength=items.size).astype(np.float64)
    means = np.bincount(pos, weights=y, minlength=items.size) / n
    first_size = np.floor(n / 2)
    start = np.concatenate(([0.0], np.cumsum(n)[:-1]))
    h1 = np.empty((n_splits, items.size))
    h2 = np.empty((n_splits, items.size))
    for s in range(n_splits):
        order = np.lexsort((rng.random(pos.size), pos))
        rank = np.arange(pos.size) - start[pos[order]]
        first = rank < first_size[pos[order]]
        p, v = pos[order], y[order]
        h1[s] = np.bincount(p[first], weights=v[first], minlength=items.size) / first_size
        h2[s] = np.bincount(p[~first], weights=v[~first], minlength=items.size) / (n - first_size)
    return means, h1, h2


def _pearson(sums: np.ndarray) -> np.ndarray:
    """Pearson r from columns (n, a, b, a^2, b^2, ab), shape (B, 6) -> (B,)."""
    n, a, b, aa, bb, ab = sums.T
    den = (n * aa - a * a) * (n * bb - b * b)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, (n * ab - a * b) / np.sqrt(np.where(den > 0, den, 1.0)), np.nan)


def _pair_columns(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per-item columns (1, a, b, a^2, b^2, ab) of one pair of per-item series; a, b shape (n,)."""
    return np.column_stack([np.ones_like(a), a, b, a * a, b * b, a * b])


def disattenuated_correlation(x: Ratings, y: Ratings, *, n_splits: int = 20, ci: float | None = None,
                              n_boot: int = DEFAULT_N_BOOT, seed: Any = None) -> Estimate:
    r"""Spearman's correction for attenuation of the correlation between item means (xRR paper eq. 12).

    .. math::

        \rho_{xy} = \frac{r_{xy}}{\sqrt{rel_x\, rel_y}}, \qquad
        rel = \frac{2\bar r_{half}}{1 + \bar r_{half}},

    where :math:`r_{xy}` is the Pearson correlation of the per-item mean
    ratings of the two replications and :math:`\bar r_{half}` the mean over
    ``n_splits`` random split halves (each item's ratings shuffled and cut in
    two; odd counts give halves differing by one) of the correlation between
    the two half means, stepped up by Spearman–Brown with :math:`k = 2`.
    Items need two ratings in each replication.

    Parameters
    ----------
    x, y : Ratings
        The two replications (numeric, ordinal ranks or binary labels).
    n_splits : int, default 20
        Random split halves averaged per replication (drawn from ``seed``).
    ci, n_boot, seed
        Item bootstrap (common items resampled jointly; the splits are kept).

    Returns
    -------
    Estimate
        ``details``: ``r_xy``, ``reliability_x``, ``reliability_y``,
        ``split_half_x``, ``split_half_y``.

        ``se`` (``se_method="delta"``, source in ``details["se_source"]``) is
        the infinitesimal jackknife over the common items, the splits fixed:
        with :math:`U_i` the influence of item :math:`i` on each correlation
        (for Pearson's r of standardised series :math:`\tilde a, \tilde b`,
        :math:`(\tilde a_i \tilde b_i - r(\tilde a_i^2 + \tilde b_i^2)/2)/n`),

        .. math::

            U_i(\hat\rho) = \hat\rho\Big(\frac{U_i(r_{xy})}{r_{xy}}
              - \frac{U_i(rel_x)}{2\,rel_x} - \frac{U_i(rel_y)}{2\,rel_y}\Big),
            \quad U_i(rel) = \frac{2\,U_i(\bar r_{half})}{(1 + \bar r_{half})^2},
            \quad \widehat{se} = \Big(\sum_i U_i(\hat\rho)^2\Big)^{1/2}.

        :math:`r_{xy}` and the split-half correlations are correlations over
        the same items; the item-level influences carry their covariances, so
        none is assumed (items independent, as the bootstrap assumes). It is
        computed when first read, with or without ``ci``. Past 340 splits
        (more item columns than the gradient takes) it is the item bootstrap's
        (``se_method="bootstrap"``): the interval's replicates with ``ci``,
        else the same replicates drawn when ``se`` is first read.

    Examples
    --------
    >>> import numpy as np, labelgate as lg
    >>> rng = np.random.default_rng(1)
    >>> truth = rng.normal(size=(400, 1))
    >>> x = lg.Ratings.from_wide(truth + rng.normal(size=(400, 6)), level="interval")
    >>> y = lg.Ratings.from_wide(truth + rng.normal(size=(400, 6)), level="interval")
    >>> from labelgate.metrics.xcc import disattenuated_correlation
    >>> round(float(disattenuated_correlation(x, y, seed=0)), 1)
    1.0
    """
    check_bootstrap_args(ci, n_boot, seed, "disattenuated_correlation")
    if isinstance(n_splits, bool) or not isinstance(n_splits, (int, np.integer)) or n_splits < 1:
        raise ParameterError("The 'n_splits' parameter of disattenuated_correlation must be an integer >= 1; "
                             f"got {n_splits!r}.", parameter="n_splits", value=n_splits)
    numeric_values(x, "disattenuated_correlation")
    numeric_values(y, "disattenuated_correlation")
    x, y, cx, cy = prepare_pair(x, y, "disattenuated_correlation")
    keep = (x.ratings_per_item[cx] >= 2) & (y.ratings_per_item[cy] >= 2)
    cx, cy = cx[keep], cy[keep]
    rng = np.random.default_rng(seed)
    mean_x, h1x, h2x = _split_half_means(x, cx, n_splits, rng)
    mean_y, h1y, h2y = _split_half_means(y, cy, n_splits, rng)
    block = np.hstack([_pair_columns(mean_x, mean_y)]
                      + [_pair_columns(h1[s], h2[s]) for h1, h2 in ((h1x, h2x), (h1y, h2y))
                         for s in range(n_splits)])

    def finalize(sums: np.ndarray) -> Arrays:
        r_xy = _pearson(sums[:, :6])
        halves = [_pearson(sums[:, 6 + 6 * s: 12 + 6 * s]) for s in range(2 * n_splits)]
        half_x = np.mean(halves[:n_splits], axis=0)
        half_y = np.mean(halves[n_splits:], axis=0)
        rel_x, rel_y = 2 * half_x / (1 + half_x), 2 * half_y / (1 + half_y)
        product = rel_x * rel_y
        value = np.where(product > 0, r_xy / np.sqrt(np.where(product > 0, product, 1.0)), np.nan)
        return {"value": value, "r_xy": r_xy, "reliability_x": rel_x, "reliability_y": rel_y,
                "split_half_x": half_x, "split_half_y": half_y}

    point = finalize(block.sum(axis=0, keepdims=True))
    value = float(point["value"][0])
    details: dict[str, Any] = {k: float(v[0]) for k, v in point.items() if k != "value"}
    details["n_splits"] = n_splits
    why = None
    if not np.isfinite(value):
        why = ((Reason.NO_PAIRABLE_ITEMS, "fewer than two common items have two ratings in each replication")
               if cx.size < 2 else
               (Reason.NONPOSITIVE_IRR_PRODUCT, "a split-half reliability is not positive (or a mean is "
                "constant), so the correction is undefined"))
    interval = None
    se: float | DeferredSE = math.nan

    def replicates(after_splits: np.random.Generator) -> np.ndarray:
        boot_rng = np.random.default_rng(after_splits.integers(2**63))
        chunk = max(1, CHUNK_CELLS // max(cx.size, 1))
        return np.concatenate([finalize(resample_counts(boot_rng, cx.size, min(chunk, n_boot - start)) @ block)
                               ["value"] for start in range(0, n_boot, chunk)])

    delta = why is None and block.shape[1] <= MAX_GRADIENT_COLUMNS
    if delta:  # the linearised standard error over the items, computed when read (with or without an interval)
        se = DeferredSE(functools.partial(_disattenuated_delta_se, block, finalize))
    elif ci is None and why is None:  # too many splits to differentiate: the bootstrap's, when first read
        details["se_n_boot"] = n_boot
        pinned = pinned_seed(rng)  # the generator after the splits, copied (it may be the caller's)
        se = deferred_bootstrap_se(lambda: replicates(pinned))
    if ci is not None and why is None:
        reps = replicates(rng)
        interval, details["n_boot_undefined"] = interval_of(reps, ci)
        if not delta:
            se, details["se_n_boot"] = bootstrap_se(reps), n_boot
    n_ratings = int(x.ratings_per_item[cx].sum() + y.ratings_per_item[cy].sum())
    return Estimate(metric="disattenuated_correlation", value=value if why is None else math.nan, ci=interval,
                    ci_level=level_of(ci, interval), n_items=int(cx.size), n_ratings=n_ratings,
                    n_items_excluded=int((~keep).sum()), reason=why[1] if why else None,
                    reason_code=why[0] if why else None, details=details, n_boot=n_boot if interval else 0,
                    se=se, se_method=bootstrap_se_method(se))  # type: ignore[arg-type]  # DeferredSE


def _disattenuated_delta_se(block: np.ndarray, finalize: Callable[[np.ndarray], Arrays]) -> StandardError:
    """The deferred standard error of :func:`disattenuated_correlation`: the infinitesimal jackknife of its item
    columns (:func:`labelgate.metrics._linear.linearized_se`), the split halves fixed."""
    out, _ = linearized_se([block], lambda sums: finalize(sums[0]))
    se = float(out["value"]) if out is not None else math.nan
    if math.isfinite(se):
        return se, "delta", math.nan, math.nan, {"se_source": DISATTENUATED_SE_SOURCE}
    return math.nan, None, math.nan, math.nan, {"se_note": "the corrected correlation is not differentiable "
                                                "at the data (a reliability or a mean is at its boundary): no "
                                                "standard error"}

