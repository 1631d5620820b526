r"""The moment equations in O(N): weighted U-statistics and their pair-count coefficients, and their solution.

See :mod:`labelgate.metrics.variance` for the model and ``docs/variance-components.md`` for the derivation.
"""

from __future__ import annotations

import numpy as np

from labelgate.metrics.variance.design import Crossed

Arrays = dict[str, np.ndarray]


def weighted_item_moments(c: Crossed, v: np.ndarray | None, size: int) -> np.ndarray:
    """Item moments with rater multiplicities ``v`` (None = 1), shape (4, size, n_axis).

    Rows: weighted count, sum, sum of squares, and the sum of squared rater
    weights (the weight of same-observation pairs, excluded from the U-statistics).
    """
    if v is None:
        base = np.concatenate([c.item_m.T, c.item_m[:, :1].T])
        return np.broadcast_to(base[:, None, :], (4, size, c.n_axis))
    prod = np.asarray(c.by_item @ v.T).reshape(3, c.n_axis, -1)
    squares = np.asarray(c.by_item[:c.n_axis] @ (v * v).T)[None]
    return np.concatenate([prod, squares]).transpose(0, 2, 1)


def component_sums(c: Crossed, w: np.ndarray, v: np.ndarray | None, item_mom: np.ndarray | None = None,
                   ) -> Arrays:
    """Weighted U-statistics and their pair-count coefficients, each shape (B,).

    Observation :math:`(i, j)` has weight :math:`\\omega_{ij} = W_i V_j` (item
    multiplicities ``w`` (B, n_axis), rater multiplicities ``v`` (B, n_raters),
    None = 1). Every U-statistic sums over pairs of *distinct original*
    observations with weight :math:`\\omega\\omega'`, so that duplicated items
    or raters of a bootstrap resample never form zero-difference pairs; with
    unit weights the sums are the plain U-statistics. Only pairable items count.
    """
    w = w * c.pairable
    size = w.shape[0]
    n, s, q, n2 = weighted_item_moments(c, v, size) if item_mom is None else item_mom
    if v is None and size == 1 and np.all(w == c.pairable):
        m, t, rr = (c.rater_m[:, k][None, :] for k in range(3))
        m2 = m
        v_eff: np.ndarray | float = 1.0
    else:
        m, t, rr = np.asarray(c.by_rater @ w.T).reshape(3, c.n_raters, -1).transpose(0, 2, 1)
        m2 = np.asarray(c.by_rater[:c.n_raters] @ (w * w).T).T
        v_eff = 1.0 if v is None else v
    omega = np.sum(w * n, axis=1)
    total_s = np.sum(w * s, axis=1)
    total_q = np.sum(w * q, axis=1)
    w2 = w * w
    return {
        "N": omega,
        "a": np.sum(w * (n * n - n2), axis=1),              # same item, different rater
        "b": np.sum(v_eff * (m * m - m2), axis=1),          # same rater, different item
        "c1": omega * omega - np.sum(w2 * n * n, axis=1),   # different items
        "c2": omega * omega - np.sum(v_eff * v_eff * m * m, axis=1),  # different raters
        "c3": omega * omega - np.sum(w2 * n2, axis=1),      # distinct observations
        "u_item": np.sum(w * (n * q - s * s), axis=1),
        "u_rater": np.sum(v_eff * (m * rr - t * t), axis=1),
        "u_all": omega * total_q - total_s * total_s,
    }


def solve_components(sums: Arrays) -> Arrays:
    """Solve the moment equations; vectorised over resamples.

    Returns raw and truncated (at 0) ``item``, ``rater``, ``residual``, their
    truncated ``total`` and the shares ``item_share`` / ``rater_share``. When no
    rater has two ratings the rater and residual variances are confounded:
    ``rater`` and ``residual`` are NaN and their sum is used in the total.
    """
    a, b, c1, c2, c3 = (sums[k] for k in ("a", "b", "c1", "c2", "c3"))
    d = c1 + c2 - c3  # ordered pairs differing in both item and rater
    with np.errstate(divide="ignore", invalid="ignore"):
        s_be = np.where(a > 0, sums["u_item"] / a, np.nan)    # rater + residual
        s_ae = np.where(b > 0, sums["u_rater"] / b, np.nan)   # item + residual
        full = (a > 0) & (b > 0) & (d > 0)
        residual = np.where(full, (c1 * s_ae + c2 * s_be - sums["u_all"]) / d, np.nan)
        item = np.where(full, s_ae - residual, np.nan)
        rater = np.where(full, s_be - residual, np.nan)
        # no rater with two ratings (b == 0): item identifiable, rater + residual confounded
        one_way = (a > 0) & (b <= 0) & (c1 > 0)
        item = np.where(one_way, (sums["u_all"] - c3 * s_be) / c1, item)
        pos = {k: np.maximum(v, 0.0) for k, v in (("item", item), ("rater", rater), ("residual", residual))}
        total = np.where(full, pos["item"] + pos["rater"] + pos["residual"],
                         np.where(one_way, pos["item"] + np.maximum(s_be, 0.0), np.nan))
        item_share = np.where(total > 0, pos["item"] / total, np.nan)
        rater_share = np.where(total > 0, pos["rater"] / total, np.nan)
    return {"item_raw": item, "rater_raw": rater, "residual_raw": residual, "item": pos["item"],
            "rater": pos["rater"], "residual": pos["residual"], "rater_plus_residual": s_be,
            "total": total, "item_share": item_share, "rater_share": rater_share}
