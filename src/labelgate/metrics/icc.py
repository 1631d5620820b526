r"""Intraclass correlations of complete designs (McGraw & Wong 1996; Girard's slides).

Every rater rates every item (:math:`n` items, :math:`k` raters). From the
two-way ANOVA mean squares — items :math:`MS_R` (rows), raters :math:`MS_C`
(columns), residual :math:`MS_E` and within items
:math:`MS_W = (SS_C + SS_E) / (n(k-1))` —

========  =====================================================================
form      formula
========  =====================================================================
``1``     :math:`(MS_R - MS_W) / (MS_R + (k-1) MS_W)`  (one-way random)
``A1``    :math:`(MS_R - MS_E) / (MS_R + (k-1) MS_E + k (MS_C - MS_E)/n)`  (agreement)
``C1``    :math:`(MS_R - MS_E) / (MS_R + (k-1) MS_E)`  (consistency)
``1k``    :math:`(MS_R - MS_W) / MS_R`
``Ak``    :math:`(MS_R - MS_E) / (MS_R + (MS_C - MS_E)/n)`
``Ck``    :math:`(MS_R - MS_E) / MS_R`
========  =====================================================================

Confidence intervals are McGraw & Wong's F-distribution intervals (the
agreement forms use Satterthwaite's approximate degrees of freedom), as in
pingouin's ``intraclass_corr`` and R's ``psych::ICC``.

Standard errors (``Estimate.se``; :func:`icc_se`). The one-way forms have
Fisher's (1925) large-sample variance (Smith 1956 for the balanced one-way
design; R ``DMAR::var_icc``), for ``1k`` through the Spearman–Brown relation
:math:`\rho_k = k\rho / (1 + (k-1)\rho)`:

.. math::

    \widehat{\mathrm{var}}(\hat\rho_1) = \frac{2 (1-\hat\rho_1)^2 (1 + (k-1)\hat\rho_1)^2}{k (k-1) (n-1)},
    \qquad
    \widehat{\mathrm{var}}(\hat\rho_k) = \frac{2 k (1-\hat\rho_k)^2}{(k-1)(n-1)}

(``se_method="analytic"``). The two-way forms have the delta-method variance
over the independent mean squares of the normal two-way model that the F
intervals assume, :math:`\mathrm{var}(MS_j) \approx 2 MS_j^2 / df_j`: a form
:math:`\rho = \sum_j a_j MS_j / \sum_j b_j MS_j` has

.. math::

    \widehat{\mathrm{var}}(\hat\rho) = \sum_j \frac{(a_j - \hat\rho\, b_j)^2}{D^2}
    \frac{2 MS_j^2}{df_j}, \qquad D = \sum_j b_j MS_j

(``se_method="delta"``); for ``C1`` it is Fisher's expression above with the
residual mean square. Both are checked against the spread of the estimates
over simulated normal designs (``tests/metrics/test_icc_se.py``). For sparse crowd
designs use :func:`~labelgate.metrics.variance.variance_components`,
:func:`~labelgate.metrics.variance.item_icc` and
:func:`~labelgate.metrics.variance.labeler_icc`.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np

from labelgate.core.estimate import DEFAULT_N_BOOT, Estimate
from labelgate.core.ratings import Ratings
from labelgate.errors import DesignError, Reason, check_option
from labelgate.metrics._engine import check_bootstrap_args
from labelgate.metrics._items import require_rater_identity
from labelgate.metrics._lazy import lazy
from labelgate.metrics.variance import level_of, numeric_values

f_dist = lazy("scipy.stats", "f")  # F distribution, imported on first use

Form = Literal["1", "A1", "C1", "1k", "Ak", "Ck"]
FORMS: tuple[Form, ...] = ("1", "A1", "C1", "1k", "Ak", "Ck")


def mean_squares(r: Ratings, function: str = "icc") -> dict[str, float]:
    """Two-way ANOVA mean squares of a complete items x raters design.

    Raises
    ------
    DesignError
        When some rater did not rate some item (incomplete design).
    """
    values = numeric_values(r, function)
    n, k = r.n_items, r.n_raters
    if r.n_ratings != n * k:
        missing = n * k - r.n_ratings
        raise DesignError(
            f"{function} needs a complete design (every rater rates every item); {missing} of the {n} x {k} "
            "item-rater cells are missing. For sparse or unbalanced crowd designs use "
            "labelgate.variance_components, labelgate.item_icc and labelgate.labeler_icc.",
            Reason.INCOMPLETE_DESIGN, n_items=n, n_raters=k, missing_cells=missing)
    y = values - values.mean()
    item_sums = np.bincount(r.item_codes, weights=y, minlength=n)
    rater_sums = np.bincount(r.rater_codes, weights=y, minlength=k)
    ss_total = float(y @ y)
    ss_items = float(item_sums @ item_sums) / k
    ss_raters = float(rater_sums @ rater_sums) / n
    ss_error = ss_total - ss_items - ss_raters
    with np.errstate(divide="ignore", invalid="ignore"):
        return {
            "n": float(n), "k": float(k),
            "ms_items": ss_items / (n - 1) if n > 1 else math.nan,
            "ms_raters": ss_raters / (k - 1) if k > 1 else math.nan,
            "ms_error": ss_error / ((n - 1) * (k - 1)) if n > 1 and k > 1 else math.nan,
            "ms_within": (ss_raters + ss_error) / (n * (k - 1)) if k > 1 else math.nan,
        }


def _values(ms: dict[str, float]) -> dict[str, float]:
    n, k = ms["n"], ms["k"]
    msb, msj, mse, msw = ms["ms_items"], ms["ms_raters"], ms["ms_error"], ms["ms_within"]
    with np.errstate(divide="ignore", invalid="ignore"):
        return {
            "1": _div(msb - msw, msb + (k - 1) * msw),
            "A1": _div(msb - mse, msb + (k - 1) * mse + k * (msj - mse) / n),
            "C1": _div(msb - mse, msb + (k - 1) * mse),
            "1k": _div(msb - msw, msb),
            "Ak": _div(msb - mse, msb + (msj - mse) / n),
            "Ck": _div(msb - mse, msb),
        }


def _div(num: float, den: float) -> float:
    return num / den if den != 0 and math.isfinite(den) and math.isfinite(num) else math.nan


def _interval(form: str, ms: dict[str, float], value: float, level: float) -> tuple[float, float]:
    """McGraw & Wong (1996) F intervals, as pingouin / psych compute them."""
    n, k = ms["n"], ms["k"]
    msb, msj, mse, msw = ms["ms_items"], ms["ms_raters"], ms["ms_error"], ms["ms_within"]
    q = 1 - (1 - level) / 2
    df1, df_w, df_e = n - 1, n * (k - 1), (n - 1) * (k - 1)
    if form in ("1", "1k"):
        f_obs = msb / msw
        f_low, f_up = f_obs / f_dist.ppf(q, df1, df_w), f_obs * f_dist.ppf(q, df_w, df1)
        if form == "1":
            return (f_low - 1) / (f_low + k - 1), (f_up - 1) / (f_up + k - 1)
        return 1 - 1 / f_low, 1 - 1 / f_up
    if form in ("C1", "Ck"):
        f_obs = msb / mse
        f_low, f_up = f_obs / f_dist.ppf(q, df1, df_e), f_obs * f_dist.ppf(q, df_e, df1)
        if form == "C1":
            return (f_low - 1) / (f_low + k - 1), (f_up - 1) / (f_up + k - 1)
        return 1 - 1 / f_low, 1 - 1 / f_up
    # agreement: Satterthwaite degrees of freedom for the denominator (McGraw & Wong, Table 7)
    icc_a1 = _values(ms)["A1"]
    fj = msj / mse
    vn = df_e * (k * icc_a1 * fj + n * (1 + (k - 1) * icc_a1) - k * icc_a1) ** 2
    vd = df1 * k**2 * icc_a1**2 * fj**2 + (n * (1 + (k - 1) * icc_a1) - k * icc_a1) ** 2
    v = vn / vd
    f_up, f_low = f_dist.ppf(q, df1, v), f_dist.ppf(q, v, df1)
    low = n * (msb - f_up * mse) / (f_up * (k * msj + (k * n - k - n) * mse) + n * msb)
    up = n * (f_low * msb - mse) / (k * msj + (k * n - k - n) * mse + n * f_low * msb)
    if form == "A1":
        return low, up
    return low * k / (1 + low * (k - 1)), up * k / (1 + up * (k - 1))


FISHER_1925 = ("Fisher (1925), large-sample variance of the intraclass correlation (Smith 1956; R DMAR::var_icc); "
               "the average of k ratings through the Spearman-Brown relation")
DELTA_MEAN_SQUARES = ("delta method over the independent ANOVA mean squares of the normal two-way model, "
                      "var(MS) = 2 MS^2 / df (the model of McGraw & Wong's F intervals)")

# Each two-way form as (numerator, denominator) coefficients of (MS_items, MS_raters, MS_error).
_TWO_WAY = ("ms_items", "ms_raters", "ms_error")


def _two_way_coefficients(form: str, n: float, k: float) -> tuple[tuple[float, ...], tuple[float, ...]]:
    numerator = (1.0, 0.0, -1.0)
    return numerator, {"C1": (1.0, 0.0, k - 1.0), "Ck": (1.0, 0.0, 0.0),
                       "A1": (1.0, k / n, k - 1.0 - k / n), "Ak": (1.0, 1.0 / n, -1.0 / n)}[form]


def icc_se(form: str, ms: dict[str, float], value: float) -> tuple[float, str | None, str | None]:
    r"""Standard error of an ICC form, its method and source (see the module docstring).

    ``(se, se_method, se_source)``; ``(nan, None, None)`` when the value is undefined or the design has fewer
    than two items or two raters.

    >>> ms = {"n": 10.0, "k": 3.0, "ms_items": 5.0, "ms_raters": 1.0, "ms_error": 0.5, "ms_within": 0.6}
    >>> rho = (5.0 - 0.6) / (5.0 + 2 * 0.6)
    >>> se, method, _ = icc_se("1", ms, rho)
    >>> method, round(se, 6), round(math.sqrt(2 * (1 - rho)**2 * (1 + 2 * rho)**2 / (3 * 2 * 9)), 6)
    ('analytic', 0.135176, 0.135176)
    """
    n, k = ms["n"], ms["k"]
    if not (math.isfinite(value) and n >= 2 and k >= 2):
        return math.nan, None, None
    if form == "1":
        var = 2.0 * (1.0 - value) ** 2 * (1.0 + (k - 1.0) * value) ** 2 / (k * (k - 1.0) * (n - 1.0))
        return math.sqrt(var), "analytic", FISHER_1925
    if form == "1k":
        return math.sqrt(2.0 * k * (1.0 - value) ** 2 / ((k - 1.0) * (n - 1.0))), "analytic", FISHER_1925
    dfs = (n - 1.0, k - 1.0, (n - 1.0) * (k - 1.0))
    numerator, denominator = _two_way_coefficients(form, n, k)
    squares = [ms[name] for name in _TWO_WAY]
    scale = sum(b * m for b, m in zip(denominator, squares, strict=True))
    if not (math.isfinite(scale) and scale != 0):
        return math.nan, None, None
    var = sum((a - value * b) ** 2 * 2.0 * m * m / df
              for a, b, m, df in zip(numerator, denominator, squares, dfs, strict=True)) / scale**2
    return math.sqrt(var), "delta", DELTA_MEAN_SQUARES


MissingPolicy = Literal["raise", "omit"]


def complete_items(r: Ratings, function: str = "icc") -> tuple[Ratings, int]:
    """The items every rater (with a rating) rated, as a complete design, and the number of rated items left out.

    Raters without a rating are dropped from the rater axis; the kept items keep their ids.

    Raises
    ------
    DesignError
        When no item is rated by every rater.
    """
    active = r.rater_counts.sum(axis=1) > 0
    k = int(active.sum())
    per_item = r.ratings_per_item
    complete = np.flatnonzero(per_item == k)
    omitted = int(np.count_nonzero(per_item > 0)) - complete.size
    if complete.size == 0:
        raise DesignError(f"{function}(missing='omit'): no item is rated by all {k} raters, so no complete item is "
                          "left. For sparse crowd designs use labelgate.variance_components, labelgate.item_icc "
                          "and labelgate.labeler_icc.", Reason.INCOMPLETE_DESIGN, n_items=r.n_items, n_raters=k)
    if omitted == 0 and complete.size == r.n_items and k == r.n_raters:
        return r, 0
    sub = r.subset_items(complete)
    if k < r.n_raters:  # a rater who rated none of the items: not a column of the design
        code = np.cumsum(active) - 1
        sub = Ratings(sub.item_codes, code[sub.rater_codes], sub.value_codes, item_labels=sub.item_index,
                      rater_labels=r.rater_labels[active], categories=r.categories, level=r.level)
    return sub, omitted


def icc(r: Ratings, form: Form = "A1", *, missing: MissingPolicy = "raise", ci: float | None = None,
        n_boot: int = DEFAULT_N_BOOT, seed: Any = None) -> Estimate:
    r"""Intraclass correlation of a complete items x raters design (McGraw & Wong 1996).

    Parameters
    ----------
    r : Ratings
        Complete design: every rater rated every item. Interval/ratio values,
        ordinal ranks 0..q-1, or a binary label coded 0/1.
    form : {"1", "A1", "C1", "1k", "Ak", "Ck"}, default "A1"
        ``1``: one-way random effects; ``A``: two-way, absolute agreement
        (Girard's agreement ICC); ``C``: two-way, consistency; suffix ``1`` a
        single rating, ``k`` the mean of the ``k`` raters. See the module
        docstring for the formulas. Ratings without rater identity (a count
        table, ``from_long(rater=None)``: exchangeable raters) have the one-way
        forms only; the two-way forms raise ``DesignError``.
    missing : {"raise", "omit"}, default "raise"
        An incomplete design raises ``DesignError`` (``"raise"``), or
        (``"omit"``) the ICC is that of the items rated by every rater, the
        others left out — pingouin's ``intraclass_corr(..., nan_policy="omit")``.
        ``details["n_items_omitted"]`` counts the rated items left out.
    ci : float, optional
        Level of the F-distribution confidence interval (e.g. 0.95).
    n_boot, seed
        Accepted for a uniform metric signature; the interval is analytic.

    Returns
    -------
    Estimate
        ``details``: the mean squares, ``f``, ``df1``, ``df2``, ``p_value``
        (F test of no item variance), ``n_raters``, ``form`` and ``se_source``.
        ``se``: Fisher's (1925) large-sample standard error for the one-way
        forms (``se_method="analytic"``), the delta method over the mean
        squares for the two-way forms (``"delta"``); see the module docstring.
        ``Estimate.z`` and ``Estimate.p_value`` are NaN (the test of no item
        variance is the F test in ``details``). NaN with a reason when a mean
        square is undefined (one item, one rater) or all ratings are equal.

    Raises
    ------
    DesignError
        On an incomplete design (use ``variance_components`` / ``item_icc``).
    ParameterError
        On an unknown ``form`` or a nominal label with more than two categories.

    Examples
    --------
    >>> import labelgate as lg
    >>> from labelgate.metrics.icc import icc
    >>> r = lg.Ratings.from_wide([[1, 2, 3], [3, 3, 4], [5, 6, 6], [2, 2, 4]], level="interval")
    >>> round(float(icc(r, "C1")), 4), round(float(icc(r, "A1")), 4)
    (0.9175, 0.7672)
    >>> est = icc(r, "Ak", ci=0.95)
    >>> round(est.ci[0], 4), round(est.ci[1], 4)
    (0.3385, 0.9936)
    >>> est = icc(r, "1")
    >>> est.se_method, round(est.se, 4)
    ('analytic', 0.2058)
    >>> gap = lg.Ratings.from_wide([[1, 2, 3], [3, 3, 4], [5, 6, 6], [2, 2, 4], [4, None, 5]], level="interval")
    >>> est = icc(gap, "C1", missing="omit")
    >>> round(float(est), 4), est.n_items, est.details["n_items_omitted"]
    (0.9175, 4, 1)
    """
    check_option(form, FORMS, "form", "icc")
    check_option(missing, ("raise", "omit"), "missing", "icc")
    check_bootstrap_args(ci, n_boot, seed, "icc")
    if form not in ("1", "1k"):  # the two-way forms have a rater effect; the one-way forms take raters as exchangeable
        require_rater_identity(r, f"icc(form={form!r})")
    omitted = 0
    if missing == "omit":
        r, omitted = complete_items(r)
    ms = mean_squares(r)
    value = _values(ms)[form]
    one_way = form in ("1", "1k")
    df1, df2 = ms["n"] - 1, (ms["n"] * (ms["k"] - 1) if one_way else (ms["n"] - 1) * (ms["k"] - 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        f_obs = _div(ms["ms_items"], ms["ms_within"] if one_way else ms["ms_error"])
    p_value = float(f_dist.sf(f_obs, df1, df2)) if math.isfinite(f_obs) and df1 > 0 and df2 > 0 else math.nan
    details: dict[str, Any] = {"form": form, **{k: v for k, v in ms.items() if k.startswith("ms_")}, "f": f_obs,
               "df1": df1, "df2": df2, "p_value": p_value, "n_raters": int(ms["k"])}
    if missing == "omit":
        details["n_items_omitted"] = omitted
    reason = None
    if not math.isfinite(value):
        reason = _reason(ms)
        value = math.nan
    se, se_method, se_source = icc_se(form, ms, value) if reason is None else (math.nan, None, None)
    if se_source is not None:
        details["se_source"] = se_source
    interval = None
    if ci is not None and reason is None:
        with np.errstate(divide="ignore", invalid="ignore"):
            low, high = _interval(form, ms, value, float(ci))
        interval = (float(low), float(high))
    return Estimate(metric="icc", value=float(value), ci=interval, ci_level=level_of(ci, interval),
                    n_items=r.n_items, n_ratings=r.n_ratings, reason=reason[1] if reason else None,
                    reason_code=reason[0] if reason else None, details=details, se=se, se_method=se_method)


def _reason(ms: dict[str, float]) -> tuple[Reason, str]:
    if ms["k"] < 2:
        return Reason.NO_PAIRABLE_ITEMS, "a single rater: no item has two ratings"
    if ms["n"] < 2:
        return Reason.NO_VARIANCE, "a single item: the between-item mean square is undefined"
    return (Reason.NO_EXPECTED_DISAGREEMENT,
            "all ratings are equal (zero mean squares), so the ICC is 0/0")
