r"""Sparse probability of agreement (Nørregaard & Derczynski; ``seeds/spa-...``).

.. math::

    \bar P_{spa} = \frac{\sum_i k_i \hat P_i}{\sum_i k_i}, \qquad
    \hat P_i = \frac{\sum_c n_{ic}(n_{ic} - 1)}{n_i (n_i - 1)}

Weights depend on the item's number of annotations :math:`n_i` (§5):
``flat`` 1, ``annotations`` :math:`n_i`, ``annotations_m1`` :math:`n_i - 1`,
``edges`` :math:`n_i(n_i-1)/2`, ``inv_var`` and ``inv_var_class``
:math:`1/\mathrm{var}[\hat P \mid n_i]` under labels drawn independently from
the uniform / the observed class distribution. Items with one annotation get
weight 0 (§5.5).

For label sets (level ``"set"``) a pair of annotations agrees by :math:`1 - d(A, B)` with the level's Jaccard or
MASI distance, :math:`\hat P_i = \sum_{c,k} n_{ic}(n_{ik} - \delta_{ck})(1 - d_{ck}) / (n_i (n_i - 1))`; the
``inv_var`` weightings keep the variance of exact agreement.

Because every weight is a function of :math:`n_i` (and of the pooled class
distribution), the sufficient statistics are, for each distinct :math:`n`,
the sum of :math:`\hat P_i` and the number of items; the bootstrap
recomputes the weights from each resample's class distribution.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from labelgate.core.estimate import DEFAULT_CI_METHOD, DEFAULT_N_BOOT, Estimate
from labelgate.core.ratings import FloatArray, IntArray, Ratings
from labelgate.core.sets import SetRatings
from labelgate.errors import Reason, check_option
from labelgate.metrics._chance import _marginal_totals
from labelgate.metrics._engine import Components, ItemStatistic, check_bootstrap_args, evaluate, safe_ratio
from labelgate.metrics._items import ItemView, excluded_single, item_agreement, pairable_counts, view

Weighting = Literal["flat", "annotations", "annotations_m1", "edges", "inv_var", "inv_var_class"]
WEIGHTINGS: tuple[Weighting, ...] = ("flat", "annotations", "annotations_m1", "edges", "inv_var", "inv_var_class")


def agreement_variance(n: npt.ArrayLike, p: np.ndarray) -> np.ndarray:
    r"""Variance of one item's agreement :math:`\hat P` when its ``n`` labels are i.i.d. from ``p``.

    With :math:`S = \sum_c n_c(n_c - 1)` and multinomial factorial moments
    :math:`E[n_c^{(a)} n_d^{(b)}] = n^{(a+b)} p_c^a p_d^b` (falling factorials),

    .. math::

        E[S] = n^{(2)} \sum_c p_c^2, \qquad
        E[S^2] = n^{(4)} (\textstyle\sum_c p_c^2)^2 + 4 n^{(3)} \sum_c p_c^3 + 2 n^{(2)} \sum_c p_c^2,

    and :math:`\mathrm{var}[\hat P] = E[S^2] / (n^{(2)})^2 - (\sum_c p_c^2)^2`.
    This is the quantity the SPA paper's eq. 20-22 and appendix enumerate
    (the printed equations contain typos); it is tested against brute-force
    enumeration of all :math:`C^n` labelings. Infinite for ``n < 2``.

    Parameters
    ----------
    n : array_like of int
        Numbers of annotations.
    p : ndarray, shape (q,) or (B, q)
        Class distribution(s).

    Returns
    -------
    ndarray, shape (B, len(n))

    Examples
    --------
    >>> import numpy as np
    >>> float(agreement_variance([2], np.array([0.5, 0.5]))[0, 0])
    0.25
    """
    n = np.asarray(n, dtype=np.float64)[None, :]
    p = np.atleast_2d(np.asarray(p, dtype=np.float64))
    s2, s3 = (p**2).sum(axis=1)[:, None], (p**3).sum(axis=1)[:, None]
    f2, f3, f4 = n * (n - 1), n * (n - 1) * (n - 2), n * (n - 1) * (n - 2) * (n - 3)
    with np.errstate(divide="ignore", invalid="ignore"):
        second = (f4 * s2**2 + 4 * f3 * s3 + 2 * f2 * s2) / f2**2
        var = second - s2**2
    var = np.where(n >= 2, np.maximum(var, 0.0), np.inf)
    return var


def item_weights(weighting: Weighting, n: FloatArray, p: np.ndarray | None = None, q: int = 2) -> np.ndarray:
    """SPA weight for items with ``n`` annotations, shape (B, len(n)); 0 for ``n < 2``."""
    n = np.asarray(n, dtype=np.float64)
    if weighting == "flat":
        base = np.ones_like(n)
    elif weighting == "annotations":
        base = n.copy()
    elif weighting == "annotations_m1":
        base = n - 1.0
    elif weighting == "edges":
        base = n * (n - 1.0) / 2.0
    else:
        dist = np.full(q, 1.0 / q) if weighting == "inv_var" else p
        var = agreement_variance(n, dist)  # type: ignore[arg-type]
        with np.errstate(divide="ignore"):
            inv = 1.0 / var
        # A degenerate class distribution (one class) gives zero variance for every n:
        # all items then agree surely and any positive weights give the same SPA.
        return np.where(np.isinf(inv).all(axis=1, keepdims=True), (n >= 2).astype(float), inv)
    return np.where(n >= 2, base, 0.0)[None, :]


def spa_from_sums(agree: np.ndarray, count: np.ndarray, category_counts: np.ndarray, sizes: FloatArray,
                  weighting: Weighting, q: int) -> np.ndarray:
    """SPA from its sums (rows: bootstrap replicates): item agreement and number of items per item size ``sizes``,
    and the pairable items' category counts (the class prevalence of ``inv_var_class``).

    .. math:: SPA = \\frac{\\sum_n k_n A_n}{\\sum_n k_n I_n}

    with :math:`A_n` the summed agreement and :math:`I_n` the number of items of size :math:`n` and :math:`k_n` the
    weighting's item weight (:func:`item_weights`). The core and the monitor's maintained sums both finish here.
    """
    p = safe_ratio(category_counts, category_counts.sum(axis=1, keepdims=True))
    k = item_weights(weighting, np.asarray(sizes, dtype=np.float64), p, q)
    return safe_ratio((k * agree).sum(axis=1), (k * count).sum(axis=1))


def agreement_credit(r: Ratings) -> FloatArray:
    """The credit of a pair of labels: 1 for equal labels; for label sets 1 - the level's set distance."""
    if isinstance(r, SetRatings):
        return 1.0 - np.asarray(r.set_distances)
    return np.eye(r.n_categories)


def _spa_sums(v: ItemView) -> tuple[FloatArray, IntArray, IntArray, list[np.ndarray]]:
    """The weighting-free part of SPA on a view, computed once per view: the six weightings share it.

    Returns the distinct item sizes, each item's size group, the pairable rows and the totals (per size: summed
    agreement and number of items; the pairable items' category counts, summed from the integer table).
    """
    cached = v.shared.get("spa_sums")
    if cached is not None:
        return cached
    agree = item_agreement(v, agreement_credit(v.ratings))
    whole = v.n_pairable == v.n.size  # every item pairable: no gathers, no masked copy of the counts
    if v.n_pairable:  # the distinct sizes (small integers) by a count, not a sort of the items
        n_pairable = v.n.astype(np.int64) if whole else v.n[v.pairable].astype(np.int64)
        sizes = np.flatnonzero(np.bincount(n_pairable)).astype(np.float64)
    else:
        sizes = np.asarray([2.0])
    group = np.searchsorted(sizes, v.n)
    rows = np.flatnonzero(v.pairable)
    in_group, weights = (group, agree) if whole else (group[rows], agree[rows])
    totals = [np.bincount(in_group, weights=weights, minlength=sizes.size),
              np.bincount(in_group, minlength=sizes.size).astype(np.float64),
              _marginal_totals(v, v.pairable, pooled=True)]
    v.shared["spa_sums"] = (sizes, group, rows, totals)
    return sizes, group, rows, totals


def build_spa(r: Ratings, codes: IntArray | None = None, weighting: Weighting = "annotations_m1",
              ) -> ItemStatistic:
    v = view(r, codes)
    sizes, group, rows, totals = _spa_sums(v)
    q = r.n_categories

    def blocks() -> list[np.ndarray]:  # dense one-hot blocks only for the bootstrap
        agree = item_agreement(v, agreement_credit(r))
        onehot = np.zeros((v.n.size, sizes.size))
        onehot[rows, group[rows]] = 1.0
        return [onehot * agree[:, None], onehot, pairable_counts(v)]

    def finalize(sums: list[np.ndarray]) -> Components:
        return {"value": spa_from_sums(sums[0], sums[1], sums[2], sizes, weighting, q),
                "n_pairable": sums[1].sum(axis=1)}

    def explain(point: Components) -> tuple[Reason, str]:
        return Reason.NO_PAIRABLE_ITEMS, "no item has two or more annotations"

    return ItemStatistic(blocks=None, build_blocks=blocks, totals=[t.copy() for t in totals], finalize=finalize,
                         n_items=v.n_pairable, n_ratings=v.n_ratings_pairable,
                         n_items_excluded=excluded_single(r), explain=explain,
                         details={"weighting": weighting})


def spa(r: Ratings, weighting: Weighting = "annotations_m1", *, ci: float | None = None, n_boot: int = DEFAULT_N_BOOT,
        seed: Any = None, ci_method: str = DEFAULT_CI_METHOD) -> Estimate:
    """Sparse probability of agreement (SPA paper eq. 7) with a weighting from §5.

    Parameters
    ----------
    r : Ratings
        Nominal treatment of the labels (exact agreement).
    weighting : {"flat", "annotations", "annotations_m1", "edges", "inv_var", "inv_var_class"}
        Item weights; default ``annotations_m1`` (the paper's recommendation,
        §6.4). ``inv_var`` uses the uniform distribution over the ``q``
        categories of ``r``; ``inv_var_class`` the pooled class distribution
        of the pairable annotations.
    ci, n_boot, seed, ci_method
        Item-bootstrap interval, as in :func:`labelgate.percent_agreement`.

    Examples
    --------
    Figure 1 of the paper: one item, 11 annotations split 5/3/2/1.

    >>> import labelgate as lg
    >>> r = lg.Ratings.from_wide([["b"] * 5 + ["r"] * 3 + ["g"] * 2 + ["p"]])
    >>> round(float(lg.spa(r)), 4)
    0.2545
    """
    check_bootstrap_args(ci, n_boot, seed, "spa", ci_method)
    check_option(weighting, WEIGHTINGS, "weighting", "spa")
    return evaluate("spa", build_spa(r, weighting=weighting), ci=ci, n_boot=n_boot, seed=seed, ci_method=ci_method)
