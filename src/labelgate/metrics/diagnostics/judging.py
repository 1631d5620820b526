r"""Judging raters: score intervals of a rater's agreement, one-sided tests, Benjamini-Hochberg and the workload.

A rater's kappa against the other replication (:mod:`~labelgate.metrics.diagnostics.blocks`) is
:math:`\kappa = 1 - \bar d / d_e`: :math:`\bar d` is its observed disagreement, a weighted mean of per-item
disagreements :math:`d_i \in [0, 1]` (nominal: the share of the other replication's ratings of item :math:`i`
that differ from the rater's label; ordinal: the same with Krippendorff's ordinal distance divided by its
largest value), with weights :math:`v_i = 1 + S_i` (xRR paper eq. 9, :math:`S_i` the other replication's
ratings of the item), and :math:`d_e` the expected (chance) disagreement. With :math:`d_e` held at its
estimate, every statement about :math:`\kappa` is one about the disagreement proportion :math:`\bar d`:

* **Interval.** The Wilson (1927) score interval of a proportion :math:`p` from :math:`\hat p = \bar d` and
  an effective number of trials :math:`n_e`,

  .. math::

      \frac{\hat p + \frac{z^2}{2 n_e} \pm z \sqrt{\frac{\hat p (1 - \hat p)}{n_e} + \frac{z^2}{4 n_e^2}}}
           {1 + z^2 / n_e},

  mapped to the kappa scale by :math:`\kappa = 1 - p / d_e`. Unlike the Wald or percentile-bootstrap
  interval, it keeps its level at a handful of items (Agresti & Coull 1998; Brown, Cai & DasGupta 2001).
  A rater's comparisons cluster within items (one label against the :math:`S_i` ratings of the same item),
  so the trials are items, not comparisons: :math:`n_e = (\sum_i v_i)^2 / \sum_i v_i^2` (Kish's effective
  size of the weighted mean; the number of items when :math:`S_i` is constant). A per-item disagreement
  :math:`d_i \in [0, 1]` with mean :math:`p` has variance at most :math:`p (1 - p)`, with equality for a
  0/1 outcome, so the interval is exact in the Wilson sense with one trusted rating per item and
  conservative with more.
* **Test.** The one-sided score test of :math:`H_0: \kappa \ge \kappa_{\min}`, i.e. :math:`p \le p_0 =
  (1 - \kappa_{\min})\, d_e`: :math:`z = (\hat p - p_0) / \sqrt{p_0 (1 - p_0) / n_e}`, p-value
  :math:`1 - \Phi(z)`. The p-value is below :math:`\alpha` exactly when the one-sided Wilson bound at
  level :math:`1 - \alpha` lies above :math:`p_0`.
* **Multiplicity.** :func:`benjamini_hochberg` across the raters judged in one pool and question
  (Benjamini & Hochberg 1995): the raters flagged ``low_agreement`` are the ``k`` smallest p-values, ``k``
  the largest rank with :math:`p_{(k)} \le k\, q / m`; the expected share of wrongly flagged raters among the
  flagged is at most :math:`q` (the configured ``fdr``) for independent tests.
* **Workload.** The power of the test at level :math:`\alpha` and :math:`n` trials against a true agreement
  :math:`\kappa_1 = \kappa_{\min} - \text{effect}` (:math:`p_1 = (1 - \kappa_1) d_e`) is
  :math:`\Phi\big((\sqrt{n}\, |p_1 - p_0| - z_{1-\alpha} \sigma_0) / \sigma_1\big)` with
  :math:`\sigma_j = \sqrt{p_j (1 - p_j)}`; :func:`items_needed` is the smallest :math:`n` where it reaches
  the target power, at the level Benjamini-Hochberg would apply to one more flag, :math:`q (k + 1) / m`.

Interval and ratio labels (squared differences, no bounded scale) use the delta-method (Wald) interval of
the kappa and the matching one-sided Wald test, :math:`z = (\hat\kappa - \kappa_{\min}) / \mathrm{se}`, with
the per-item standard deviation :math:`\mathrm{se} \sqrt{n}` in the power.

References
----------
Wilson, E. B. (1927). Probable inference, the law of succession, and statistical inference. *JASA* 22, 209-212.
Agresti, A. & Coull, B. A. (1998). Approximate is better than "exact" for interval estimation of binomial
proportions. *The American Statistician* 52, 119-126.
Brown, L. D., Cai, T. T. & DasGupta, A. (2001). Interval estimation for a binomial proportion. *Statistical
Science* 16, 101-133.
Benjamini, Y. & Hochberg, Y. (1995). Controlling the false discovery rate. *JRSS B* 57, 289-300.
Kish, L. (1965). *Survey Sampling*. Wiley (effective sample size of a weighted mean).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from labelgate.metrics._lazy import lazy
from labelgate.metrics.alpha import ordinal_distance
from labelgate.metrics.diagnostics.blocks import Kind, kappa_finalize
from labelgate.metrics.diagnostics.intervals import delta_interval, normal_quantile, wilson_interval

special = lazy("scipy.special")

#: Largest workload :func:`items_needed` reports; beyond it the effect cannot be found in practice.
MAX_ITEMS = 1_000_000
#: Chance disagreement below this share of its largest possible value: the kappa is undefined (everyone gave
#: the same label), so the rater cannot be judged.
_DEGENERATE = 1e-9


@dataclass
class AgreementTest:
    """Per-rater kappa, its score interval, the one-sided test and the workload parameters.

    Attributes
    ----------
    value, low, high : ndarray
        Kappa and its interval (NaN where undefined).
    p_value : ndarray
        One-sided p-value of :math:`H_0: \\kappa \\ge \\kappa_{\\min}` (NaN where the rater cannot be tested).
    trials : ndarray
        Effective number of trials :math:`n_e`.
    shift, sd_null, sd_alt : ndarray
        Per-trial shift :math:`|p_1 - p_0|` under the alternative and the standard deviations under the null
        and the alternative (the inputs of :func:`power` and :func:`items_needed`).
    """

    value: np.ndarray
    low: np.ndarray
    high: np.ndarray
    p_value: np.ndarray
    trials: np.ndarray
    shift: np.ndarray
    sd_null: np.ndarray
    sd_alt: np.ndarray


def score_p_value(p_hat: np.ndarray, n: np.ndarray, p0: np.ndarray) -> np.ndarray:
    r"""One-sided score-test p-value of :math:`H_0: p \le p_0` against :math:`p > p_0`.

    :math:`z = (\hat p - p_0) / \sqrt{p_0 (1 - p_0) / n}`, p-value :math:`1 - \Phi(z)`; NaN where ``n <= 0`` or
    :math:`p_0 \notin (0, 1)`.

    Examples
    --------
    >>> import numpy as np
    >>> round(float(score_p_value(np.array([0.8]), np.array([20.0]), np.array([0.6]))[0]), 4)
    0.0339
    """
    p, n, p0 = (np.asarray(a, dtype=np.float64) for a in (p_hat, n, p0))
    ok = (n > 0) & (p0 > 0) & (p0 < 1) & np.isfinite(p)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (p - p0) / np.sqrt(p0 * (1.0 - p0) / n)
    return np.where(ok, special.ndtr(-np.where(ok, z, 0.0)), np.nan)


def benjamini_hochberg(p_values: np.ndarray, fdr: float) -> np.ndarray:
    """Which hypotheses the Benjamini-Hochberg step-up procedure rejects at false discovery rate ``fdr``.

    NaN p-values are not hypotheses (they count neither in ``m`` nor as rejections).

    Examples
    --------
    >>> import numpy as np
    >>> benjamini_hochberg(np.array([0.01, 0.04, 0.03, 0.5, np.nan]), 0.1).tolist()
    [True, True, True, False, False]
    """
    p = np.asarray(p_values, dtype=np.float64)
    tested = np.flatnonzero(np.isfinite(p))
    out = np.zeros(p.shape, dtype=bool)
    m = tested.size
    if m == 0:
        return out
    order = tested[np.argsort(p[tested], kind="stable")]
    below = np.flatnonzero(p[order] <= fdr * np.arange(1, m + 1) / m)
    if below.size:
        out[order[: below[-1] + 1]] = True
    return out


def power(n: np.ndarray, shift: np.ndarray, sd_null: np.ndarray, sd_alt: np.ndarray, alpha: float) -> np.ndarray:
    r"""Power of the one-sided score (or Wald) test with ``n`` trials: :math:`\Phi((\sqrt n\,\delta - z_{1-\alpha}
    \sigma_0) / \sigma_1)`.

    Examples
    --------
    >>> import numpy as np
    >>> round(float(power(np.array([100.0]), np.array([0.1]), np.array([0.5]), np.array([0.5]), 0.05)[0]), 3)
    0.639
    """
    z_a = -float(special.ndtri(alpha))
    n, shift, sd0, sd1 = (np.asarray(a, dtype=np.float64) for a in (n, shift, sd_null, sd_alt))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(special.ndtr((np.sqrt(n) * shift - z_a * sd0) / sd1))


def items_needed(shift: np.ndarray, sd_null: np.ndarray, sd_alt: np.ndarray, alpha: float,
                 target: float = 0.8) -> np.ndarray:
    r"""Smallest number of trials at which :func:`power` reaches ``target`` (NaN: not within :data:`MAX_ITEMS`).

    Closed form :math:`n = \lceil ((z_{1-\alpha} \sigma_0 + z_{\text{target}} \sigma_1) / \delta)^2 \rceil`.

    Examples
    --------
    >>> import numpy as np
    >>> int(items_needed(np.array([0.1]), np.array([0.5]), np.array([0.5]), 0.05)[0])
    155
    """
    z_a, z_b = -float(special.ndtri(alpha)), float(special.ndtri(target))
    shift, sd0, sd1 = (np.asarray(a, dtype=np.float64) for a in (shift, sd_null, sd_alt))
    with np.errstate(divide="ignore", invalid="ignore"):
        n = np.ceil(((z_a * sd0 + z_b * sd1) / shift) ** 2 * (1.0 - 1e-12))
    n = np.maximum(n, 1.0)
    return np.where(np.isfinite(n) & (shift > 0) & (n <= MAX_ITEMS), n, np.nan)


def agreement_test(kind: Kind, q: int, sums: np.ndarray, second: np.ndarray, n: np.ndarray, *, level: float,
                   min_agreement: float, effect: float) -> AgreementTest:
    """Kappa, score interval, one-sided test and workload parameters of each rater from its block sums.

    Parameters
    ----------
    kind, q
        Distance and number of categories (:func:`~labelgate.metrics.diagnostics.block_width`).
    sums, second, n : ndarray, shapes (R, k), (R, k, k), (R,)
        Sums, sums of outer products and number of the rater's block rows (items with the other replication).
    level : float
        Interval level.
    min_agreement : float
        :math:`\\kappa_{\\min}` of the null hypothesis.
    effect : float
        How far below ``min_agreement`` the true kappa of the alternative lies (power and workload).

    Returns
    -------
    AgreementTest
        See the module docstring for the formulas.
    """
    sums = np.atleast_2d(np.asarray(sums, dtype=np.float64))
    n = np.asarray(n, dtype=np.float64)
    value = np.asarray(kappa_finalize(kind, q)(sums), dtype=np.float64)
    if kind == "moments":
        return _wald_test(kind, q, sums, second, n, level, min_agreement, effect, value)
    weight_obs, y_cols = _disagreement_form(kind, q, sums)
    obs = np.einsum("rk,rk->r", sums, weight_obs)  # sum of v_i d_i
    size = n + sums[:, y_cols].sum(axis=1)  # sum of v_i = sum of (1 + S_i)
    y_second = second[:, y_cols][:, :, y_cols].sum(axis=(1, 2))  # sum of S_i^2
    size_sq = n + 2.0 * sums[:, y_cols].sum(axis=1) + y_second  # sum of v_i^2
    obs_sq = np.einsum("rk,rkl,rl->r", weight_obs, second, weight_obs)  # sum of (v_i d_i)^2
    obs_size = obs + np.einsum("rk,rk->r", weight_obs, second[:, :, y_cols].sum(axis=2))  # sum of v_i^2 d_i
    with np.errstate(divide="ignore", invalid="ignore"):
        p_hat = np.clip(obs / size, 0.0, 1.0)
        trials = _trials(p_hat, n, size, size_sq, obs_sq, obs_size, sums[:, y_cols].sum(axis=1))
        chance = _chance(kind, q, sums)
        defined = np.isfinite(value) & (chance > _DEGENERATE) & (n > 0)
        p0 = (1.0 - min_agreement) * chance
        p1 = np.minimum((1.0 - min_agreement + effect) * chance, 1.0)
        lo_p, hi_p = wilson_interval(p_hat, trials, level)
        low = np.where(defined, 1.0 - hi_p / chance, np.nan)
        high = np.where(defined, 1.0 - lo_p / chance, np.nan)
        testable = defined & (p0 > 0) & (p0 < 1)
        p_value = np.where(testable, score_p_value(p_hat, trials, p0), np.nan)
        shift = np.where(testable, p1 - p0, np.nan)
        sd0 = np.sqrt(np.clip(p0 * (1.0 - p0), 0.0, None))
        sd1 = np.sqrt(np.clip(p1 * (1.0 - p1), 0.0, None))
    # the alternative at p1 = 1 has no spread: one trial more than the null's bound suffices
    sd1 = np.where(sd1 > 0, sd1, 1e-12)
    return AgreementTest(value, low, high, p_value, trials, shift, sd0, sd1)


def _trials(p_hat: np.ndarray, n: np.ndarray, size: np.ndarray, size_sq: np.ndarray, obs_sq: np.ndarray,
            obs_size: np.ndarray, other: np.ndarray) -> np.ndarray:
    r"""Effective number of trials :math:`n_e = \hat p (1 - \hat p) / \hat V`, between the items (Kish) and the
    comparisons; :math:`\hat V = \frac{n}{n-1} \sum_i v_i^2 (d_i - \hat p)^2 / (\sum_i v_i)^2`."""
    kish = size * size / size_sq
    binomial = p_hat * (1.0 - p_hat)
    spread = (obs_sq - 2.0 * p_hat * obs_size + p_hat * p_hat * size_sq) * n / (n - 1.0) / (size * size)
    empirical = binomial / spread
    per_item = np.where(n > 0, other / n, 1.0)
    # no item-to-item spread (relative to the binomial variance): nothing measures the clustering, keep the items
    measured = np.isfinite(empirical) & (spread > _DEGENERATE * binomial)
    return np.where(measured, np.clip(empirical, kish, kish * np.maximum(per_item, 1.0)), kish)


def _disagreement_form(kind: Kind, q: int, sums: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""Per rater, the vector :math:`g` with :math:`g^\top u_i = v_i d_i` (unit-scale disagreement of a block
    row), and the columns of the other replication's counts (:math:`S_i` is their total)."""
    r = sums.shape[0]
    if kind in ("nominal", "matrix"):  # the block's first column is the disagreement (set distances are <= 1)
        g = np.zeros_like(sums)
        g[:, 0] = 1.0
        return g, np.arange(1 + q, 1 + 2 * q)
    xs, ys = sums[:, q * q : q * q + q], sums[:, q * q + q :]
    delta = ordinal_distance(xs + ys)
    top = delta.reshape(r, -1).max(axis=1)
    g = np.zeros_like(sums)
    with np.errstate(divide="ignore", invalid="ignore"):
        g[:, : q * q] = np.where(top[:, None] > 0, delta.reshape(r, -1) / top[:, None], 0.0)
    return g, np.arange(q * q + q, q * q + 2 * q)


def _chance(kind: Kind, q: int, sums: np.ndarray) -> np.ndarray:
    """Expected disagreement :math:`d_e` on the unit scale of :func:`_disagreement_form`."""
    if kind == "nominal":
        xs, ys = sums[:, 1 : 1 + q], sums[:, 1 + q :]
        rr, ss = xs.sum(axis=1), ys.sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray((rr * ss - (xs * ys).sum(axis=1)) / (rr * ss))
    if kind == "matrix":
        xs, ys = sums[:, 1 : 1 + q], sums[:, 1 + q :]
        rr, ss = xs.sum(axis=1), ys.sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(np.einsum("bc,ck,bk->b", xs, kind.distance, ys) / (rr * ss))  # type: ignore[attr-defined]
    xs, ys = sums[:, q * q : q * q + q], sums[:, q * q + q :]
    delta = ordinal_distance(xs + ys)
    top = delta.max(axis=(1, 2))
    rr, ss = xs.sum(axis=1), ys.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(np.einsum("bc,bck,bk->b", xs, delta, ys) / (rr * ss * top))


def _wald_test(kind: Kind, q: int, sums: np.ndarray, second: np.ndarray, n: np.ndarray, level: float,
               min_agreement: float, effect: float, value: np.ndarray) -> AgreementTest:
    """Delta-method interval and one-sided Wald test (interval and ratio labels)."""
    _, low, high = delta_interval(kappa_finalize(kind, q), sums, second, n, level)
    z = normal_quantile(level)
    se = (high - low) / (2.0 * z)
    ok = np.isfinite(se) & (se > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_value = np.where(ok, special.ndtr((value - min_agreement) / np.where(ok, se, 1.0)), np.nan)
        sd = np.where(ok, se * np.sqrt(n), np.nan)
    shift = np.where(ok, effect, np.nan)
    return AgreementTest(value, low, high, p_value, n.astype(np.float64), shift, sd, sd)


def level_for_next_flag(fdr: float, n_flagged: int, n_tested: int) -> float:
    """The level Benjamini-Hochberg applies to one more rejection: ``fdr * (k + 1) / m`` (at most ``fdr``).

    >>> level_for_next_flag(0.1, 0, 50)
    0.002
    """
    return min(fdr, fdr * (n_flagged + 1) / max(n_tested, 1))
