r"""Bangdiwala's B: the agreement chart's share of perfect agreement, for two raters.

On the ``q x q`` table of the items both raters judged, with :math:`n_{kk}` the items both put in ``k`` and
:math:`n_{k+}`, :math:`n_{+k}` each rater's count of ``k``,

.. math:: B = \frac{\sum_k n_{kk}^2}{\sum_k n_{k+}\, n_{+k}},

the summed area of the agreement chart's black squares over the summed area of its rectangles (Bangdiwala 1985;
Friendly & Meyer's R package vcd, ``agreementplot``). It is 1 under perfect agreement and 0 when the raters never
agree; it is not chance-corrected. Each item contributes a row of three one-hot blocks (its diagonal cell, the
first rater's and the second rater's category), so the item bootstrap and the delta method apply as to every
coefficient.

References
----------
S. I. Bangdiwala, "A graphical test for observer agreement", *Proc. 45th International Statistical Institute
Meeting*, Amsterdam, 1985, 307-308. S. I. Bangdiwala and H. E. Bryan, "Using SAS software graphical procedures for
the observer agreement chart", *Proc. SAS Users Group International Conference* 12 (1987) 1083-1088.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from labelgate.core.estimate import DEFAULT_CI_METHOD, DEFAULT_N_BOOT, Estimate
from labelgate.core.ratings import Ratings
from labelgate.errors import DesignError, Reason
from labelgate.metrics._engine import Components, ItemStatistic, check_bootstrap_args, evaluate, safe_ratio
from labelgate.metrics._items import ItemView, excluded_single, require_rater_identity, view

if TYPE_CHECKING:
    import scipy.sparse as sp
else:
    from labelgate.metrics._lazy import lazy

    sp = lazy("scipy.sparse")

__all__ = ["bangdiwala_b", "build_bangdiwala_b"]


def _explain(point: Components) -> tuple[Reason, str] | None:
    if point["n_pairable"][0] == 0:
        return Reason.NO_PAIRABLE_ITEMS, "no item is rated by both raters"
    return (Reason.NO_VARIANCE,
            "the two raters use no category in common (every n_k+ n_+k is 0), so B is 0/0")


def _labels(v: ItemView) -> tuple[np.ndarray, np.ndarray]:
    """Each pairable item's category from the first and the second rater (both rated it)."""
    r = v.ratings
    rows, axis = v.rows_on_axis()
    labels = np.full((2, v.codes.size), -1, dtype=np.int64)
    labels[r.rater_codes[rows], axis] = r.value_codes[rows]
    both = np.flatnonzero((labels >= 0).all(axis=0))
    return both, labels[:, both]


def build_bangdiwala_b(r: Ratings) -> ItemStatistic:
    """Bangdiwala's B as item statistics: per common item, one-hots of its diagonal cell and both raters' categories."""
    v = view(r)
    q = r.n_categories
    items, (first, second) = _labels(v)
    on_diagonal = first == second

    def block() -> list[Any]:
        rows = np.concatenate([items[on_diagonal], items, items])
        cols = np.concatenate([first[on_diagonal], q + first, 2 * q + second])
        one_hot = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(v.codes.size, 3 * q))
        return [one_hot, v.pairable.astype(np.float64)[:, None]]

    totals = [np.concatenate([np.bincount(first[on_diagonal], minlength=q), np.bincount(first, minlength=q),
                              np.bincount(second, minlength=q)]).astype(np.float64),
              np.array([float(items.size)])]

    def finalize(sums: list[np.ndarray]) -> Components:
        table = sums[0]
        diagonal, rows, cols = table[:, :q], table[:, q:2 * q], table[:, 2 * q:]
        squares = np.sum(diagonal**2, axis=1)
        rectangles = np.sum(rows * cols, axis=1)
        return {"value": safe_ratio(squares, rectangles), "agreement_area": squares, "chart_area": rectangles,
                "n_pairable": sums[1][:, 0]}

    return ItemStatistic(blocks=None, build_blocks=block, totals=totals, finalize=finalize, n_items=int(items.size),
                         n_ratings=2 * int(items.size), n_items_excluded=excluded_single(r), explain=_explain)


def bangdiwala_b(r: Ratings, *, ci: float | None = None, n_boot: int = DEFAULT_N_BOOT, seed: Any = None,
                 ci_method: str = DEFAULT_CI_METHOD) -> Estimate:
    r"""Bangdiwala's B of two raters: :math:`\sum_k n_{kk}^2 / \sum_k n_{k+} n_{+k}` on the items both judged.

    Parameters
    ----------
    r : Ratings
        Exactly two raters, e.g. :meth:`Ratings.from_contingency` (rows: the first rater). Items only one of them
        judged are excluded (``n_items_excluded``).
    ci, n_boot, seed, ci_method
        The interval, as in :func:`labelgate.percent_agreement`.

    Returns
    -------
    Estimate
        ``details`` holds the chart's agreement area :math:`\sum_k n_{kk}^2` and total area
        :math:`\sum_k n_{k+} n_{+k}`. ``se`` is the delta method's (no variance formula is published for B);
        ``z`` and ``p_value`` are NaN.

    Raises
    ------
    DesignError
        When the ratings do not have exactly two raters, or no rater identity (:meth:`Ratings.from_counts`).

    Notes
    -----
    Worked example: the husbands' and wives' answers to "sex is fun for me and my partner" (Hout, Duncan & Sobel
    1987; Agresti's ``SexualFun`` table, R vcd) have diagonal 7, 8, 4, 14, row totals 19, 20, 19, 33 and column
    totals 12, 28, 18, 33: :math:`B = (49 + 64 + 16 + 196) / (228 + 560 + 342 + 1089) = 325 / 2219 = 0.1465`,
    vcd's ``agreementplot(SexualFun)$Bangdiwala``.

    Examples
    --------
    >>> import labelgate as lg
    >>> table = [[7, 7, 2, 3], [2, 8, 3, 7], [1, 5, 4, 9], [2, 8, 9, 14]]
    >>> round(float(lg.bangdiwala_b(lg.Ratings.from_contingency(table))), 4)
    0.1465
    """
    check_bootstrap_args(ci, n_boot, seed, "bangdiwala_b", ci_method)
    require_rater_identity(r, "bangdiwala_b")
    if r.n_raters != 2:
        raise DesignError(f"bangdiwala_b needs exactly two raters (a contingency table); these ratings have "
                          f"{r.n_raters}.", Reason.WRONG_RATER_COUNT, n_raters=r.n_raters)
    return evaluate("bangdiwala_b", build_bangdiwala_b(r), ci=ci, n_boot=n_boot, seed=seed, ci_method=ci_method)
