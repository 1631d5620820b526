r"""Published (analytic) standard errors of the agreement coefficients, and the tests of no agreement.

Gwet's variances (*Handbook of Inter-Rater Reliability*, 4th ed., 2014, ch. 5 for ratings with missing values;
the formulas of his R package irrCAC and its Python port ``irrCAC.raw``) share one form. With ``n`` the rated
items, ``n'`` those with two or more ratings, :math:`p_{a|i}` item ``i``'s weighted share of agreeing pairs (0 on a
single rating) and :math:`p_{e|i}` its contribution to the chance agreement,

.. math::

    \kappa_i = \frac{n}{n'} \frac{p_{a|i} - p_e 1[r_i \ge 2]}{1 - p_e}, \qquad
    \kappa^\star_i = \kappa_i - 2 (1 - \hat\kappa) \frac{p_{e|i} - p_e}{1 - p_e}, \qquad
    \widehat{\mathrm{var}}(\hat\kappa) = \frac{1}{n (n - 1)} \sum_{i=1}^{n} (\kappa^\star_i - \hat\kappa)^2,

the sample variance of the linearised item values divided by ``n`` (no finite-population correction: the items are
a sample of an unbounded population). The coefficients differ in :math:`p_{e|i}`:

* percent agreement (:math:`p_e = 0`) and Brennan–Prediger (:math:`p_e` fixed): no :math:`p_{e|i}` term;
* Fleiss/Scott: :math:`p_{e|i} = \sum_k \frac{r_{ik}}{r_i} \bar\pi^w_k`, :math:`\bar\pi^w = \tfrac12 (W + W^\top) \pi`;
* Gwet's AC1/AC2: :math:`p_{e|i} = \frac{T_w}{q (q - 1)} \sum_k \frac{r_{ik}}{r_i} (1 - \pi_k)`;
* Conger: Gwet's rater-level linearisation of the rater marginals (:func:`conger_se`);
* Krippendorff's α: the same form over the pairable items with the mean number of ratings
  :math:`\bar r` in place of :math:`r_i` (:func:`alpha_se`).

Cohen's kappa on two raters uses the large-sample variance of Fleiss, Cohen & Everitt (1969) on the contingency
table of proportions :math:`p_{kl}` (as SAS PROC FREQ and statsmodels ``cohens_kappa`` compute it), with its
variance under :math:`H_0: \kappa = 0` for the test; Fleiss' kappa on items with the same number ``m`` of ratings
has Fleiss, Nee & Landis's (1979) variance under :math:`H_0` (unweighted; statsmodels has no such test).

References
----------
K. L. Gwet, *Handbook of Inter-Rater Reliability*, 4th ed., Advanced Analytics, 2014, ch. 5.
J. L. Fleiss, J. Cohen and B. S. Everitt, "Large sample standard errors of kappa and weighted kappa",
*Psychological Bulletin* 72 (1969) 323-327.
J. L. Fleiss, J. C. M. Nee and J. R. Landis, "Large sample variance of kappa in the case of different sets of
raters", *Psychological Bulletin* 86 (1979) 974-977.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from labelgate.core.estimate import DeferredSE, StandardError
from labelgate.core.ratings import FloatArray, Ratings
from labelgate.core.tallied import is_tallied
from labelgate.metrics._blocks import vanishes
from labelgate.metrics._items import ItemView, item_agreement, rater_category_totals

GWET_2014 = "Gwet (2014), Handbook of Inter-Rater Reliability, 4th ed., ch. 5 (irrCAC)"
FLEISS_COHEN_EVERITT_1969 = "Fleiss, Cohen & Everitt (1969) (SAS PROC FREQ, statsmodels cohens_kappa)"
FLEISS_NEE_LANDIS_1979 = "Fleiss, Nee & Landis (1979), variance under H0"

_NORMAL = NormalDist()


@dataclass(frozen=True)
class Analytic:
    """An analytic standard error, its source, and the test of no agreement where one is defined.

    ``se0`` is the standard error under :math:`H_0` (no agreement beyond chance), ``z = value / se0`` and
    ``p_value`` its two-sided normal p-value; NaN when the literature defines no such test for the coefficient.
    """

    se: float
    source: str
    se0: float = math.nan
    source0: str | None = None

    def test(self, value: float) -> tuple[float, float]:
        """``(z, two-sided p)`` of ``value`` under :math:`H_0`; NaN without ``se0``."""
        if not (np.isfinite(self.se0) and self.se0 > 0 and np.isfinite(value)):
            return math.nan, math.nan
        z = value / self.se0
        return z, 2.0 * _NORMAL.cdf(-abs(z))


def judgements_elsewhere(r: Ratings) -> str | None:
    """Why a standard error that reads single judgements is not computed on ``r``: its per-judgement codes are
    not in memory (a Dask-partitioned pool whose codes were not fetched; fetching them for a standard error alone
    would move every judgement off the cluster) or not anywhere (sums aggregated in the database). None when they
    are."""
    if is_tallied(r):
        return ("the standard error reads each judgement's rater, and these ratings were aggregated in the "
                "database (each rater's category counts only): compute it on the judgements (a pandas batch)")
    if getattr(r, "judgements_in_memory", True):
        return None
    return ("the standard error reads each judgement's rater, and these ratings hold their judgements on a "
            "cluster: call fetch_codes() first (an interval fetches them too)")


def bootstrap_se(replicates: np.ndarray) -> float:
    """The bootstrap standard error: the standard deviation of the finite replicates (NaN with fewer than 2)."""
    finite = np.asarray(replicates, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    return float(np.std(finite, ddof=1)) if finite.size >= 2 else math.nan


#: ``details["se_note"]`` of a bootstrap standard error on ratings aggregated in a database (no point estimate reads
#: the judgements there, and the replicates resample them).
BOOTSTRAP_NEEDS_JUDGEMENTS = ("the standard error is the item bootstrap's, which resamples the judgements, and these "
                              "ratings hold only sums aggregated in the database: compute it on the judgements (a "
                              "pandas batch)")


def bootstrap_se_method(se: float | DeferredSE) -> str | None:
    """The ``se_method`` to pass with ``se``: ``"bootstrap"`` for a finite replicates' standard error, None for NaN
    (a :class:`DeferredSE` names its own method)."""
    return "bootstrap" if isinstance(se, float) and math.isfinite(se) else None


def pinned_seed(seed: Any) -> Any:
    """``seed`` as a deferred bootstrap draws from it whenever it is read: the replicates of the call itself.

    An integer or a ``SeedSequence`` is kept; ``None`` becomes a fresh ``SeedSequence`` (drawn now, so every read
    sees the same replicates); a ``Generator`` or ``BitGenerator`` is copied in its present state (the caller's
    stream is not consumed, and the replicates are the ones the same call with ``ci=`` would have drawn from it).
    """
    if seed is None:
        return np.random.SeedSequence()
    if isinstance(seed, (np.random.Generator, np.random.BitGenerator)):
        return copy.deepcopy(seed)
    return seed


def deferred_bootstrap_se(replicates: Callable[[], np.ndarray]) -> DeferredSE:
    """A :class:`DeferredSE` of :func:`bootstrap_se` of ``replicates()``, computed on the first read of ``se``.

    It adds nothing to ``details`` (``adds_details=False``), so reading the point estimate's components does not
    run the bootstrap; ``replicates`` must draw from a :func:`pinned_seed`.
    """
    def compute() -> StandardError:
        se = bootstrap_se(replicates())
        if math.isfinite(se):
            return se, "bootstrap", math.nan, math.nan, {}
        return math.nan, None, math.nan, math.nan, {}

    return DeferredSE(compute, adds_details=False)


def _gwet_variance(kappa_star: FloatArray, value: float, n: int, n_zero_terms: int = 0) -> float:
    r""":math:`\frac{1}{n(n-1)} \sum_i (\kappa^\star_i - \hat\kappa)^2` over the ``n`` items, ``n_zero_terms`` of which
    have :math:`\kappa^\star_i = 0` and are not in ``kappa_star`` (the single-rated items of a coefficient without
    marginals)."""
    if n < 2:
        return math.nan
    total = float(np.sum((kappa_star - value) ** 2)) + n_zero_terms * value * value
    return total / (n * (n - 1.0))


# Categories up to which the table's products below read its integer columns one at a time rather than a float copy
# of the whole items x categories table (which the point estimates avoid making).
_COLUMN_LOOP_MAX = 32


def counts_times(v: ItemView, vector: FloatArray) -> FloatArray:
    """``counts @ vector`` over the view's items (the item x category counts times a category vector)."""
    table = v.int_counts
    if "counts" in v.shared or table.shape[1] > _COLUMN_LOOP_MAX:
        return np.asarray(v.counts @ vector, dtype=np.float64)
    out = np.zeros(table.shape[0])
    for k in np.flatnonzero(vector):
        out += table[:, k] * float(vector[k])
    return out


def _per_rating(v: ItemView, vector: FloatArray) -> FloatArray:
    r""":math:`\sum_k \frac{r_{ik}}{r_i} v_k` per item (0 where an item has no rating)."""
    out = counts_times(v, vector)
    np.divide(out, v.n, out=out, where=v.n > 0)
    return out


def fixed_chance_se(v: ItemView, w: FloatArray, p_e: float, value: float, n_rated: int) -> Analytic:
    r"""Percent agreement (``p_e = 0``) or Brennan–Prediger (``p_e`` fixed by the weights), Gwet (2014).

    ``v`` is the pairable-items view; ``n_rated`` the number of rated items, whose single-rated ones enter the
    variance with :math:`\kappa^\star_i = 0` (irrCAC ``bp``).
    """
    pairable = v.pairable
    n2 = v.n_pairable
    if n2 == 0 or not np.isfinite(value) or bool(vanishes(np.asarray(1.0 - p_e), 1.0)):
        return Analytic(math.nan, GWET_2014)
    pa_i = item_agreement(v, w)[pairable]
    kappa = (n_rated / n2) * (pa_i - p_e) / (1.0 - p_e)
    return Analytic(math.sqrt(_gwet_variance(kappa, value, n_rated, n_rated - n2)), GWET_2014)


def _with_marginals(v: ItemView, w: FloatArray, p_e: float, value: float, pe_i: FloatArray) -> Analytic:
    """The Gwet form on the every-rated-item view ``v`` given each item's chance term ``pe_i``."""
    n, n2 = int(v.n.size), v.n_pairable
    if n2 == 0 or not np.isfinite(value) or bool(vanishes(np.asarray(1.0 - p_e), 1.0)):
        return Analytic(math.nan, GWET_2014)
    pa_i = item_agreement(v, w)
    kappa = (n / n2) * (pa_i - p_e * v.pairable) / (1.0 - p_e)
    kappa_star = kappa - 2.0 * (1.0 - value) * (pe_i - p_e) / (1.0 - p_e)
    return Analytic(math.sqrt(_gwet_variance(kappa_star, value, n)), GWET_2014)


def fleiss_se(v: ItemView, w: FloatArray, value: float, shares: FloatArray, pooled: FloatArray) -> Analytic:
    r"""Fleiss' kappa / Scott's pi with Gwet's marginals (every rated item), and Fleiss' test where it applies.

    ``shares`` are :math:`\sum_i r_{ik} / r_i` and ``pooled`` :math:`\sum_i r_{ik}` over the view's items (the
    point estimate's column sums).
    """
    pi = shares / max(v.n.size, 1)
    p_e = float(pi @ w @ pi)
    pe_i = _per_rating(v, 0.5 * (w + w.T) @ pi)
    out = _with_marginals(v, w, p_e, value, pe_i)
    se0 = fleiss_null_se(v, w, pooled)
    return Analytic(out.se, out.source, se0, FLEISS_NEE_LANDIS_1979 if np.isfinite(se0) else None)


def fleiss_null_se(v: ItemView, w: FloatArray, pooled: FloatArray) -> float:
    r"""Fleiss, Nee & Landis's (1979) standard error of Fleiss' kappa under :math:`H_0: \kappa = 0`.

    .. math::

        \mathrm{se}_0 = \frac{\sqrt{2}}{\sum_j p_j q_j \sqrt{n m (m - 1)}}
        \Big[\Big(\sum_j p_j q_j\Big)^2 - \sum_j p_j q_j (q_j - p_j)\Big]^{1/2}

    with ``m`` ratings on each of the ``n`` items, :math:`p_j` the share of ratings in category ``j`` (``pooled``: the
    category totals) and
    :math:`q_j = 1 - p_j`. Defined for identity weights and the same number of ratings on every item (NaN
    otherwise), as R's ``irr::kappam.fleiss`` computes it.
    """
    if not np.array_equal(w, np.eye(w.shape[0])) or v.n.size == 0:
        return math.nan
    m = float(v.n[0])
    if m < 2 or not np.all(v.n == m):
        return math.nan
    n = float(v.n.size)
    p = pooled / (n * m)
    pq = p * (1.0 - p)
    total = float(pq.sum())
    if total <= 0:
        return math.nan
    inner = total**2 - float(np.sum(pq * ((1.0 - p) - p)))
    return math.sqrt(2.0 * max(inner, 0.0) / (n * m * (m - 1.0))) / total


def gwet_ac_se(v: ItemView, w: FloatArray, value: float, shares: FloatArray) -> Analytic:
    """Gwet's AC1/AC2 with marginals over every rated item (``shares`` as in :func:`fleiss_se`)."""
    q = w.shape[0]
    pi = shares / max(v.n.size, 1)
    scale = float(w.sum()) / (q * (q - 1.0)) if q > 1 else math.nan
    p_e = scale * float(np.sum(pi * (1.0 - pi)))
    pe_i = scale * _per_rating(v, 1.0 - pi)
    return _with_marginals(v, w, p_e, value, pe_i)


def conger_se(v: ItemView, w: FloatArray, value: float) -> Analytic:
    r"""Conger's kappa with each rater's marginal over all his ratings (Gwet 2014; irrCAC ``conger``).

    The chance term of item ``i`` linearises the rater marginals :math:`p_{gk}` (rater ``g`` on ``n_g`` items):

    .. math::

        p_{e|i} = \frac{1}{r(r-1)} \sum_g \sum_l A_{gl}
                  \big(\delta_{igl} - (\epsilon_{ig} - n_g / n)\, p_{gl}\big), \qquad
        A_{gl} = \frac{n}{n_g} \sum_k (r \bar p_k - p_{gk})\, w_{kl},

    with :math:`\delta_{igl}` rater ``g`` putting item ``i`` in ``l`` and :math:`\epsilon_{ig}` rater ``g`` rating
    item ``i``. It is computed from the judgements (one scatter-add per term): no items x raters array.
    """
    r = v.ratings
    n = int(v.n.size)
    q = w.shape[0]
    # raters x categories arrays only (as Conger's chance term itself), updated in place: two of them at the peak
    p_gk = rater_category_totals(v, v.marginal_items("all_rated_items")).reshape(r.n_raters, q)
    n_g = p_gk.sum(axis=1)
    active = n_g > 0
    raters = int(active.sum())
    if raters < 2 or n < 2:
        return Analytic(math.nan, GWET_2014)
    np.divide(p_gk, n_g[:, None], out=p_gk, where=active[:, None])
    total = p_gk.sum(axis=0)
    a = p_gk @ w
    p_e = (float(total @ w @ total) - float(np.einsum("gl,gl->", a, p_gk))) / (raters * (raters - 1.0))
    np.subtract(total @ w, a, out=a)  # sum_k (r pbar_k - p_gk) w_kl, with r pbar_k = sum_g p_gk
    scale = np.zeros(n_g.size)
    np.divide(float(n), n_g, out=scale, where=active)
    a *= scale[:, None]
    c_g = np.einsum("gl,gl->g", a, p_gk)
    constant = float(n_g @ c_g) / n
    rows, axis = v.rows_on_axis(v.marginal_items("all_rated_items"))
    every = rows.size == r.n_ratings  # every judgement, in order: no gather
    g = r.rater_codes if every else r.rater_codes[rows]
    s1 = np.bincount(axis, weights=a[g, r.value_codes if every else r.value_codes[rows]], minlength=n)
    s2 = np.bincount(axis, weights=c_g[g], minlength=n)
    pe_i: FloatArray = np.asarray((s1 - s2 + constant) / (raters * (raters - 1.0)), dtype=np.float64)
    return _with_marginals(v, w, p_e, value, pe_i)


def alpha_se(r_i: FloatArray, within_i: FloatArray, expected_i: FloatArray, d_e: float, value: float) -> Analytic:
    r"""Krippendorff's α (Gwet 2014; irrCAC ``krippendorff``), from per-item disagreements.

    On the ``n`` pairable items with :math:`r_i` values, :math:`\bar r` their mean and :math:`N = n \bar r`, with the
    distance :math:`\delta` of α (Gwet writes it as the weights :math:`w = 1 - \delta / c`; the variance does not
    depend on ``c``): ``within_i`` :math:`= \sum_{k,l} r_{ik} r_{il} \delta_{kl} / (r_i - 1)`, ``expected_i``
    :math:`= \sum_k r_{ik} (\delta \pi)_k` with :math:`\pi_k = \sum_i r_{ik} / N`, and
    :math:`D_e = \pi^\top \delta \pi`. Then :math:`p'_a = 1 - \sum_i \mathrm{within}_i / N`,
    :math:`p_a = (1 - 1/N) p'_a + 1/N`, :math:`\alpha' = (p'_a - p_e)/(1 - p_e)` and

    .. math::

        \kappa_i = \frac{(r_i - \mathrm{within}_i)/\bar r - p_a (r_i - \bar r)/\bar r - p_e}{1 - p_e}, \quad
        p_{e|i} - p_e = \frac{r_i D_e - \mathrm{expected}_i}{\bar r}, \quad
        \kappa^\star_i = \kappa_i - 2 (1 - \alpha') \frac{p_{e|i} - p_e}{1 - p_e},

    :math:`\widehat{\mathrm{var}} = \sum_i (\kappa^\star_i - \alpha')^2 / (n (n - 1))`, all in units where
    :math:`p_e = 1 - D_e`.
    """
    n = int(r_i.size)
    if n < 2 or not np.isfinite(value) or not d_e > 0:
        return Analytic(math.nan, GWET_2014)
    total = float(r_i.sum())
    r_bar = total / n
    p_e = 1.0 - d_e
    pa_prime = 1.0 - float(within_i.sum()) / total
    pa = (1.0 - 1.0 / total) * pa_prime + 1.0 / total
    alpha_prime = (pa_prime - p_e) / d_e
    kappa = ((r_i - within_i) / r_bar - pa * (r_i - r_bar) / r_bar - p_e) / d_e
    kappa_star = kappa - 2.0 * (1.0 - alpha_prime) * ((r_i * d_e - expected_i) / r_bar) / d_e
    return Analytic(math.sqrt(_gwet_variance(kappa_star, alpha_prime, n)), GWET_2014)


def cohen_se(table: FloatArray, w: FloatArray) -> Analytic:
    r"""Cohen's (weighted) kappa on a two-rater table of counts: Fleiss, Cohen & Everitt (1969).

    With :math:`p_{kl}` the table's proportions (rows: the first rater), :math:`\bar w_{k\cdot} = \sum_l p_{\cdot l}
    w_{kl}`, :math:`\bar w_{\cdot l} = \sum_k p_{k\cdot} w_{kl}` and :math:`p_e = \sum_{kl} w_{kl} p_{k\cdot}
    p_{\cdot l}`,

    .. math::

        \widehat{\mathrm{var}}(\hat\kappa) = \frac{\sum_{kl} p_{kl} \big(w_{kl} - (\bar w_{k\cdot} + \bar w_{\cdot l})
        (1 - \hat\kappa)\big)^2 - \big(\hat\kappa - p_e (1 - \hat\kappa)\big)^2}{n (1 - p_e)^2}, \qquad
        \widehat{\mathrm{var}}_0 = \frac{\sum_{kl} p_{k\cdot} p_{\cdot l} \big(w_{kl} - (\bar w_{k\cdot} +
        \bar w_{\cdot l})\big)^2 - p_e^2}{n (1 - p_e)^2}.
    """
    n = float(table.sum())
    if n <= 0:
        return Analytic(math.nan, FLEISS_COHEN_EVERITT_1969)
    p = table / n
    row, col = p.sum(axis=1), p.sum(axis=0)
    p_e = float(row @ w @ col)
    if 1.0 - p_e <= 0:
        return Analytic(math.nan, FLEISS_COHEN_EVERITT_1969)
    p_a = float(np.sum(p * w))
    kappa = (p_a - p_e) / (1.0 - p_e)
    w_row = w @ col
    w_col = row @ w
    bar = w_row[:, None] + w_col[None, :]
    fac = n * (1.0 - p_e) ** 2
    var = (float(np.sum(p * (w - bar * (1.0 - kappa)) ** 2)) - (kappa - p_e * (1.0 - kappa)) ** 2) / fac
    var0 = (float(np.sum(np.outer(row, col) * (w - bar) ** 2)) - p_e**2) / fac
    return Analytic(math.sqrt(max(var, 0.0)), FLEISS_COHEN_EVERITT_1969, math.sqrt(max(var0, 0.0)),
                    FLEISS_COHEN_EVERITT_1969)
