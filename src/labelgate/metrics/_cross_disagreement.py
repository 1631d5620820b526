r"""kappa_x's item statistic: the cross-replication disagreement of two replications under each distance.

On the items rated in both replications X and Y (Wong, Paritosh & Aroyo 2021, eq. 9-11),

.. math::

    d_o = \sum_i \frac{R_i + S_i}{\mathbf{R} + \mathbf{S}}
          \frac{x_i^\top D\, y_i}{R_i S_i}, \qquad
    d_e = \frac{x_\cdot^\top D\, y_\cdot}{\mathbf{R}\,\mathbf{S}}, \qquad
    \kappa_x = 1 - d_o / d_e,

where :math:`x_i, y_i` are the item's category counts in each replication,
:math:`R_i, S_i` their totals and :math:`x_\cdot, y_\cdot` the marginal counts
over the common items. The double sum over item pairs of eq. 10 is a product
of marginals, so the cost is linear in the number of judgements.

:func:`build_cross_kappa` picks the cheapest form of the sums for the distance: integer category counts for the
nominal distance, per-item moments for squared distances, Krippendorff's ordinal metric from the pooled category
frequencies, or any fixed (q, q) matrix (a custom distance, or the Jaccard / MASI distance of label sets). The
estimators built on it (kappa_x, normalized kappa_x, one pair of both) are in :mod:`labelgate.metrics.cross`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from labelgate.core.cached import keep_pair_entry, pair_entry
from labelgate.core.ratings import FloatArray, IntArray, Ratings
from labelgate.core.sets import SetRatings
from labelgate.errors import ParameterError, Reason, check_option
from labelgate.metrics._blocks import column_sums, table_totals, vanishes
from labelgate.metrics._engine import Components, ItemStatistic, one_minus_ratio
from labelgate.metrics._items import (
    category_totals,
    integer_item_counts,
    is_whole_axis,
    item_sizes,
    item_statistics,
    n_ratings_of,
)
from labelgate.metrics.alpha import ordinal_distance

DistanceName = Literal["nominal", "ordinal", "interval"]
Distance = DistanceName | Callable[[Any, Any], float] | np.ndarray | None

def _explain_cross(point: Components) -> tuple[Reason, str] | None:
    return (Reason.NO_EXPECTED_DISAGREEMENT,
            "expected cross-replication disagreement is 0 (one value in both replications)")


def _resolve_distance(x: Ratings, distance: Distance) -> tuple[str, FloatArray | None]:
    """('nominal' | 'ordinal' | 'moments' | 'matrix', fixed matrix or None)."""
    if distance is None and isinstance(x, SetRatings):  # label sets: the level's Jaccard / MASI distance
        return "matrix", np.asarray(x.set_distances)
    if distance is None:
        distance = "nominal" if x.level == "nominal" else "ordinal" if x.level == "ordinal" else "interval"
    if isinstance(distance, str):
        check_option(distance, ("nominal", "ordinal", "interval"), "distance", "cross_kappa")
        if distance == "interval":
            return ("moments", None) if x.is_numeric else ("matrix", _squared(x.category_values))
        return str(distance), None
    q = x.n_categories
    if callable(distance):
        matrix = np.asarray([[float(distance(a, b)) for b in x.categories] for a in x.categories])
    else:
        matrix = np.asarray(distance, dtype=np.float64)
    if matrix.shape != (q, q) or not np.all(np.isfinite(matrix)) or np.any(matrix < 0):
        raise ParameterError(f"The 'distance' parameter of cross_kappa must be 'nominal', 'ordinal', 'interval', a "
                             f"function of two categories, or a non-negative {q}x{q} matrix; got shape "
                             f"{matrix.shape}.", parameter="distance")
    return "matrix", matrix


def _squared(values: FloatArray) -> FloatArray:
    return (values[:, None] - values[None, :]) ** 2


def build_cross_kappa(x: Ratings, y: Ratings, cx: IntArray, cy: IntArray, distance: Distance = None,
                      ) -> ItemStatistic:
    """kappa_x on the common items (rows aligned with ``cx`` / ``cy``)."""
    kind, matrix = _resolve_distance(x, distance)
    n_ratings = n_ratings_of(x, cx) + n_ratings_of(y, cy)
    if kind == "moments":
        return _cross_moments(x, y, cx, cy, n_ratings)
    if kind == "nominal":
        return _cross_nominal(x, y, cx, cy, n_ratings)
    xc, r_i = item_statistics(x, cx)  # read-only floats, without a gather when the codes are every item
    yc, s_i = item_statistics(y, cy)
    w = (r_i + s_i) / (r_i * s_i)
    if kind == "ordinal":
        def blocks() -> list[Any]:
            return [(xc[:, :, None] * yc[:, None, :] * w[:, None, None]).reshape(cx.size, -1), xc, yc]

        def finalize_ord(sums: list[np.ndarray]) -> Components:
            q = x.n_categories
            delta = ordinal_distance(sums[1] + sums[2])
            observed = (sums[0].reshape(-1, q, q) * delta).sum(axis=(1, 2))
            expected = np.einsum("bc,bck,bk->b", sums[1], delta, sums[2])
            return _cross_components(observed, expected, sums[1].sum(axis=1), sums[2].sum(axis=1))

        totals = [((xc * w[:, None]).T @ yc).reshape(1, -1), table_totals(xc), table_totals(yc)]
        return ItemStatistic(blocks=None, build_blocks=blocks, totals=totals, finalize=finalize_ord,
                             n_items=int(cx.size), n_ratings=n_ratings, explain=_explain_cross)
    delta: np.ndarray = 1.0 - np.eye(x.n_categories) if matrix is None else matrix
    observed_i = np.einsum("ic,ic->i", xc @ delta, yc) * w
    return ItemStatistic(blocks=[observed_i[:, None], xc, yc], finalize=_matrix_finalize(delta), n_items=int(cx.size),
                         n_ratings=n_ratings, explain=_explain_cross)


def _matrix_finalize(delta: np.ndarray) -> Callable[[list[np.ndarray]], Components]:
    """κx from the column sums ``[observed disagreement, x's counts, y's counts]`` under distance ``delta``."""

    def finalize(sums: list[np.ndarray]) -> Components:
        expected = np.einsum("bc,ck,bk->b", sums[1], delta, sums[2])
        return _cross_components(sums[0][:, 0], expected, sums[1].sum(axis=1), sums[2].sum(axis=1))

    return finalize


def _cross_nominal(x: Ratings, y: Ratings, cx: IntArray, cy: IntArray, n_ratings: int) -> ItemStatistic:
    r"""Nominal κx from the integer counts: :math:`x_i^\top (1 - I) y_i = r_i s_i - \sum_c x_{ic} y_{ic}` per item
    and the category totals of both replications, integer sums (the same values as the float tables', exact); the
    float tables are made only for an interval's blocks."""
    x_counts, y_counts = integer_item_counts(x, cx), integer_item_counts(y, cy)
    observed_i, observed_total = _nominal_observed(x, y, cx, cy, x_counts, y_counts)

    def blocks() -> list[Any]:
        return [observed_i[:, None], item_statistics(x, cx)[0], item_statistics(y, cy)[0]]

    totals = [observed_total, category_totals(x, cx, x_counts), category_totals(y, cy, y_counts)]
    return ItemStatistic(blocks=None, build_blocks=blocks, totals=totals,
                         finalize=_matrix_finalize(1.0 - np.eye(x.n_categories)), n_items=int(cx.size),
                         n_ratings=n_ratings, explain=_explain_cross)


def _nominal_observed(x: Ratings, y: Ratings, cx: IntArray, cy: IntArray, x_counts: IntArray, y_counts: IntArray,
                      ) -> tuple[FloatArray, np.ndarray]:
    """Each common item's weighted nominal cross disagreement (read-only) and their sum.

    When the common items are every item of both, in order (:func:`~labelgate.metrics._items.is_whole_axis`), they are
    made once per pair and kept on ``x`` for ``y`` (both `Ratings` are immutable; the entry holds ``y`` weakly):
    κx and normalized κx read them on every call.
    """
    whole = is_whole_axis(x, cx) and is_whole_axis(y, cy)
    hit = pair_entry(x, "_cross_observed", y) if whole else None
    if hit is not None:
        return hit[0], hit[1]
    r_i, s_i = item_sizes(x, cx), item_sizes(y, cy)
    w = (r_i + s_i) / (r_i * s_i)
    observed_i = (r_i * s_i - np.vecdot(x_counts, y_counts).astype(np.float64)) * w
    total = column_sums(observed_i[:, None])
    observed_i.flags.writeable = total.flags.writeable = False
    if whole:
        keep_pair_entry(x, "_cross_observed", y, observed_i, total)
    return observed_i, total


def moment_cross_observed(mx: np.ndarray, my: np.ndarray) -> np.ndarray:
    r"""Each common item's weighted squared cross differences from the two pools' moments ``(count, sum, sum of
    squares)``: :math:`\frac{r_i + s_i}{r_i s_i} (r_i Q^y_i + s_i Q^x_i - 2 T^x_i T^y_i)` (xRR eq. 10, squared
    distance). The block of interval/ratio κx (the core) and of the monitor's maintained sums.
    """
    r_i, s_i = mx[:, 0], my[:, 0]
    w = (r_i + s_i) / (r_i * s_i)
    return w * (r_i * my[:, 2] + s_i * mx[:, 2] - 2.0 * mx[:, 1] * my[:, 1])


def _cross_moments(x: Ratings, y: Ratings, cx: IntArray, cy: IntArray, n_ratings: int) -> ItemStatistic:
    center = x.moment_center  # one centre for both replications: the distance is shift-invariant
    mx, my = x.centered_item_moments(center)[cx], y.centered_item_moments(center)[cy]
    observed_i = moment_cross_observed(mx, my)

    def finalize(sums: list[np.ndarray]) -> Components:
        (rr, tx, qx), (ss, ty, qy) = sums[1].T, sums[2].T
        expected = rr * qy + ss * qx - 2.0 * tx * ty
        # a difference of sums: constant common values leave a rounding residue, not an expected disagreement
        expected = np.where(vanishes(expected, rr * qy + ss * qx), 0.0, expected)
        return _cross_components(sums[0][:, 0], expected, rr, ss)

    return ItemStatistic(blocks=[observed_i[:, None], mx, my], finalize=finalize, n_items=int(cx.size),
                         n_ratings=n_ratings, explain=_explain_cross)


def _cross_components(observed: np.ndarray, expected: np.ndarray, r_tot: np.ndarray, s_tot: np.ndarray,
                      ) -> Components:
    d_o = observed / (r_tot + s_tot)
    d_e = expected / (r_tot * s_tot)
    return {"value": one_minus_ratio(d_o, d_e), "d_o": d_o, "d_e": d_e}
