r"""Co-rating pairs of raters and the collusion test on them (no raters x raters matrix)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from labelgate.core.ratings import FloatArray, IntArray
from labelgate.metrics.diagnostics.intervals import wilson_interval


@dataclass
class PairTable:
    """Aggregated co-rating pairs of raters (``a < b`` as rater codes).

    Attributes
    ----------
    a, b : int arrays
        Rater codes of the pair.
    n : float array
        Items both rated.
    agree : float array
        Items on which they gave the same label.
    """

    a: IntArray
    b: IntArray
    n: FloatArray
    agree: FloatArray

    def totals(self, n_raters: int) -> tuple[FloatArray, FloatArray]:
        """Per rater: (agreeing pairs, pairs) summed over all its partners."""
        agree = np.bincount(self.a, self.agree, n_raters) + np.bincount(self.b, self.agree, n_raters)
        pairs = np.bincount(self.a, self.n, n_raters) + np.bincount(self.b, self.n, n_raters)
        return agree.astype(np.float64), pairs.astype(np.float64)


def co_rating_pairs(item_codes: IntArray, rater_codes: IntArray, value_codes: IntArray,
                    n_raters: int) -> PairTable:
    """All pairs of raters who rated a common item, with the number of items and of agreements.

    Cost :math:`O(\\sum_i n_i^2)` (the pairs that exist), memory the same; no raters x raters matrix.

    Examples
    --------
    >>> import numpy as np
    >>> t = co_rating_pairs(np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]), np.array([2, 2, 0, 1]), 2)
    >>> t.a.tolist(), t.b.tolist(), t.n.tolist(), t.agree.tolist()
    ([0], [1], [2.0], [1.0])
    """
    order = np.lexsort((rater_codes, item_codes))
    items, raters, values = item_codes[order], rater_codes[order], value_codes[order]
    keys, agrees = [], []
    # d-th neighbours in the sorted order: every pair of ratings of one item is d apart for one d < n_i
    for d in range(1, int(np.bincount(items).max()) if items.size else 1):
        same = items[d:] == items[:-d]
        if not same.any():
            break
        lo, hi = raters[:-d][same], raters[d:][same]
        keys.append(np.minimum(lo, hi) * np.int64(n_raters) + np.maximum(lo, hi))
        agrees.append((values[:-d][same] == values[d:][same]).astype(np.float64))
    if not keys:
        empty = np.zeros(0, dtype=np.int64)
        return PairTable(empty, empty.copy(), np.zeros(0), np.zeros(0))
    key = np.concatenate(keys)
    unique, inverse = np.unique(key, return_inverse=True)
    n = np.bincount(inverse, minlength=unique.size).astype(np.float64)
    agree = np.bincount(inverse, weights=np.concatenate(agrees), minlength=unique.size).astype(np.float64)
    return PairTable(unique // n_raters, unique % n_raters, n, agree)


def evaluate_pairs(n: np.ndarray, agree: np.ndarray, agree_a: np.ndarray, pairs_a: np.ndarray,
                   agree_b: np.ndarray, pairs_b: np.ndarray, *, margin: float, min_items: int,
                   level: float = 0.95) -> dict[str, np.ndarray]:
    r"""Collusion test of rater pairs.

    A pair :math:`(g, h)` that co-rated :math:`n_{gh} \ge` ``min_items`` items is flagged when the lower
    Wilson bound of its agreement rate :math:`a_{gh} / n_{gh}` exceeds by at least ``margin`` the
    agreement of **each** rater with everyone else,

    .. math:: r_{g \setminus h} = \frac{A_g - a_{gh}}{N_g - n_{gh}},

    where :math:`A_g, N_g` are the rater's agreeing and total co-rating pairs over all partners.
    A rater with no other partner cannot be compared and is not flagged.

    Returns
    -------
    dict of arrays
        ``agreement``, ``agreement_low``, ``rest_a``, ``rest_b``, ``flag`` (bool).

    Examples
    --------
    >>> import numpy as np
    >>> out = evaluate_pairs(np.array([50.0]), np.array([50.0]), np.array([70.0]), np.array([150.0]),
    ...                      np.array([65.0]), np.array([150.0]), margin=0.3, min_items=20)
    >>> bool(out["flag"][0]), round(float(out["rest_a"][0]), 2)
    (True, 0.2)
    """
    n, agree = np.asarray(n, dtype=np.float64), np.asarray(agree, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        rest_a = np.where(pairs_a - n > 0, (agree_a - agree) / (pairs_a - n), np.nan)
        rest_b = np.where(pairs_b - n > 0, (agree_b - agree) / (pairs_b - n), np.nan)
        rate = np.where(n > 0, agree / n, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        low = wilson_interval(agree / n, n, level)[0]
    worst = np.fmax(rest_a, rest_b)
    flag = (n >= min_items) & np.isfinite(rest_a) & np.isfinite(rest_b) & (low - worst >= margin)
    return {"agreement": rate, "agreement_low": low, "rest_a": rest_a, "rest_b": rest_b, "flag": flag}


def collusion_partners(pairs: PairTable, agree: FloatArray, total: FloatArray, *, margin: float,
                       min_items: int) -> dict[int, list[int]]:
    """Flagged pairs of a :class:`PairTable` as ``{rater: [partner, ...]}`` (rater codes).

    ``agree`` and ``total`` are the per-rater totals of :meth:`PairTable.totals`.
    """
    test = evaluate_pairs(pairs.n, pairs.agree, agree[pairs.a], total[pairs.a], agree[pairs.b],
                          total[pairs.b], margin=margin, min_items=min_items)
    partners: dict[int, list[int]] = {}
    for k in np.flatnonzero(test["flag"]):
        a, b = int(pairs.a[k]), int(pairs.b[k])
        partners.setdefault(a, []).append(b)
        partners.setdefault(b, []).append(a)
    return partners
