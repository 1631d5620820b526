r"""Per-judgement kappa blocks: one rater's label against the other replication of the item.

A rater's kappa (against the trusted pool or against its co-raters) is a function of additive sums of these
blocks, so the batch diagnostics, their intervals and the monitor's incremental sums all share one definition.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, cast

import numpy as np

from labelgate.core.ratings import FloatArray, IntArray
from labelgate.errors import ParameterError
from labelgate.metrics._engine import one_minus_ratio
from labelgate.metrics.alpha import ordinal_distance

Kind = Literal["nominal", "ordinal", "moments", "matrix"]
# Cells (rows x block width, or resamples x rows x block width) handled per chunk: bounds the memory.
CHUNK_CELLS = 4_000_000


class MatrixKind(str):
    """The kind ``"matrix"``: a fixed q x q distance between the categories (label sets), carried with the kind.

    Its block rows have the nominal layout ``[o_i, x_i, y_i]`` with :math:`o_i = w_i x_i^\top D y_i`, and the
    expected disagreement is :math:`x^\top D y`.
    """

    distance: FloatArray

    def __new__(cls, distance: FloatArray) -> MatrixKind:
        kind = super().__new__(cls, "matrix")
        kind.distance = np.asarray(distance, dtype=np.float64)
        return kind


def distance_kind(level: str, ratings: object = None) -> Kind:
    """The kappa distance of a level: ``nominal``, ``ordinal``, ``moments`` (squared difference), or for label
    sets (``ratings`` with ``set_distances``) a :class:`MatrixKind` of their distance matrix."""
    matrix = getattr(ratings, "set_distances", None)
    if matrix is not None:
        return cast(Kind, MatrixKind(matrix))
    if level == "set":  # never squared differences of set positions: the distance matrix must come with the level
        raise ParameterError("Label sets (level 'set') are compared by their distance matrix: pass the ratings "
                             "(or the matrix) with the level.", parameter="level", value=level)
    if level == "nominal":
        return "nominal"
    if level == "ordinal":
        return "ordinal"
    return "moments"


def block_width(kind: Kind, q: int) -> int:
    """Columns of a per-item block row: observed part, the rater's part, the others' part."""
    if kind in ("nominal", "matrix"):
        return 1 + 2 * q
    if kind == "ordinal":
        return q * q + 2 * q
    return 7


def row_total(other: FloatArray, kind: Kind) -> FloatArray:
    """Ratings in the other replication of each row (a zero total: the row does not count)."""
    return other[:, 0] if kind == "moments" else other.sum(axis=1)


def rater_item_rows(kind: Kind, codes: IntArray, other: FloatArray, q: int,
                    values: FloatArray | None = None) -> FloatArray:
    r"""Block rows of one rater's kappa on items, one row per (rater, item) judgement.

    Parameters
    ----------
    kind : {"nominal", "ordinal", "moments"}
        Distance (see :func:`distance_kind`).
    codes : int array, shape (m,)
        Category code of the rater's label on each item.
    other : float array, shape (m, q) or (m, 3)
        The other replication on the item: category counts (nominal/ordinal) or centred moments
        ``(count, sum, sum of squares)`` (moments). Rows with a zero total give a zero block row.
    q : int
        Number of categories.
    values : float array, shape (m,), optional
        Centred value of the rater's label (moments only).

    Returns
    -------
    ndarray, shape (m, k)
        nominal ``[o_i, x_i, y_i]`` (``k = 1 + 2q``); ordinal ``[w_i x_i \otimes y_i, x_i, y_i]``
        (``k = q^2 + 2q``); moments ``[o_i, (1, x, x^2), (S_i, \sum y, \sum y^2)]`` (``k = 7``), with
        :math:`w_i = (1 + S_i) / S_i` and :math:`o_i = w_i\, x_i^\top D y_i`.

    Examples
    --------
    >>> import numpy as np
    >>> rater_item_rows("nominal", np.array([0]), np.array([[2.0, 1.0]]), q=2).round(4)
    array([[1.3333, 1.    , 0.    , 2.    , 1.    ]])
    """
    m = codes.size
    other = np.asarray(other, dtype=np.float64)
    total = row_total(other, kind)
    present = total > 0
    w = np.zeros(m)
    np.divide(1.0 + total, total, out=w, where=present)
    if kind == "moments":
        x = np.zeros(m) if values is None else np.asarray(values, dtype=np.float64)
        mx = np.column_stack([np.ones(m), x, x * x]) * present[:, None]
        obs = w * (other[:, 2] + total * x * x - 2.0 * x * other[:, 1])
        return np.column_stack([obs, mx, other * present[:, None]])
    onehot = np.zeros((m, q))
    onehot[np.arange(m), codes] = 1.0
    onehot *= present[:, None]
    y = other * present[:, None]
    if kind == "nominal":
        obs = w * (total - y[np.arange(m), codes])
        return np.column_stack([obs, onehot, y])
    if kind == "matrix":
        obs = w * np.einsum("mk,mk->m", cast(MatrixKind, kind).distance[codes], y)
        return np.column_stack([obs, onehot, y])
    outer = (onehot[:, :, None] * y[:, None, :] * w[:, None, None]).reshape(m, q * q)
    return np.column_stack([outer, onehot, y])


def kappa_finalize(kind: Kind, q: int) -> Callable[[np.ndarray], np.ndarray]:
    """``sums (B, k) -> kappa (B,)`` for the rows of :func:`rater_item_rows` (as :func:`cross_kappa`).

    Examples
    --------
    >>> import numpy as np
    >>> rows = rater_item_rows("nominal", np.array([0, 1]), np.array([[1.0, 0.0], [0.0, 1.0]]), q=2)
    >>> float(kappa_finalize("nominal", 2)(rows.sum(axis=0)[None, :])[0])
    1.0
    """
    def finalize(sums: np.ndarray) -> np.ndarray:
        sums = np.atleast_2d(sums)
        if kind == "moments":
            (rr, tx, qx), (ss, ty, qy) = sums[:, 1:4].T, sums[:, 4:7].T
            expected, observed = rr * qy + ss * qx - 2.0 * tx * ty, sums[:, 0]
        elif kind == "nominal":
            xs, ys = sums[:, 1:1 + q], sums[:, 1 + q:]
            rr, ss = xs.sum(axis=1), ys.sum(axis=1)
            expected, observed = rr * ss - (xs * ys).sum(axis=1), sums[:, 0]
        elif kind == "matrix":
            xs, ys = sums[:, 1:1 + q], sums[:, 1 + q:]
            rr, ss = xs.sum(axis=1), ys.sum(axis=1)
            expected = np.einsum("bc,ck,bk->b", xs, cast(MatrixKind, kind).distance, ys)
            observed = sums[:, 0]
        else:
            xs, ys = sums[:, q * q:q * q + q], sums[:, q * q + q:]
            rr, ss = xs.sum(axis=1), ys.sum(axis=1)
            delta = ordinal_distance(xs + ys)
            observed = (sums[:, :q * q].reshape(-1, q, q) * delta).sum(axis=(1, 2))
            expected = np.einsum("bc,bck,bk->b", xs, delta, ys)
        with np.errstate(divide="ignore", invalid="ignore"):
            d_o = observed / (rr + ss)
            d_e = expected / (rr * ss)
        return one_minus_ratio(d_o, d_e)

    return finalize
