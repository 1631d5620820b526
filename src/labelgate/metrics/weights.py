r"""Agreement weights: the handbook's eight weightings and a validated custom matrix.

A weighted agreement coefficient gives a pair of ratings ``(k, l)`` the credit
:math:`w_{kl} \in [0, 1]`, with :math:`w_{kk} = 1` and :math:`w_{kl} = w_{lk}`.
With category positions :math:`x_k` (see :func:`category_positions`),
:math:`x_{min}`, :math:`x_{max}` their extremes and :math:`r_k` the rank of
:math:`x_k` (1..q), Gwet's *Handbook of Inter-Rater Reliability* (4th ed., 2014,
ch. 3) defines

================  ===================================================================================
``identity``      :math:`w_{kl} = \delta_{kl}` (unweighted)
``linear``        :math:`1 - |x_k - x_l| / (x_{max} - x_{min})`
``quadratic``     :math:`1 - (x_k - x_l)^2 / (x_{max} - x_{min})^2`
``ordinal``       :math:`1 - M_{kl} / \max M`, :math:`M_{kl} = \binom{|r_k - r_l| + 1}{2}`
``radical``       :math:`1 - \sqrt{|x_k - x_l|} / \sqrt{x_{max} - x_{min}}`
``ratio``         :math:`1 - \left(\frac{x_k - x_l}{x_k + x_l}\right)^2 \Big/
                  \left(\frac{x_{max} - x_{min}}{x_{max} + x_{min}}\right)^2` (non-negative positions)
``circular``      :math:`1 - \sin^2\!\left(\pi \frac{x_k - x_l}{U}\right) / \max`, :math:`U = x_{max} - x_{min} + 1`
``bipolar``       :math:`1 - \frac{(x_k - x_l)^2}{(x_k + x_l - 2x_{min})(2x_{max} - x_k - x_l)} \Big/ \max`
                  (:math:`k \ne l`; 1 on the diagonal)
================  ===================================================================================

where :math:`\max` is the largest off-diagonal value of the fraction it
divides, so the most distant pair gets credit 0. With fewer than two
categories every weighting is the identity. For label sets (level ``"set"``)
the default credit is :math:`w_{AB} = 1 - d(A, B)` with the level's Jaccard or
MASI distance (:mod:`labelgate.core.sets`).
"""

from __future__ import annotations

from typing import Literal, TypeAlias, get_args

import numpy as np
import numpy.typing as npt

from labelgate.core.ratings import FloatArray, Ratings
from labelgate.core.sets import SetRatings
from labelgate.errors import ParameterError

WeightName = Literal["identity", "linear", "quadratic", "ordinal", "radical", "ratio", "circular", "bipolar"]
WEIGHTS: tuple[WeightName, ...] = get_args(WeightName)
#: A weighting name, or a q x q matrix of credits in [0, 1] (symmetric, unit diagonal).
Weights: TypeAlias = "WeightName | npt.ArrayLike"

# A custom matrix may carry rounding residue (e.g. computed with sin/sqrt): asymmetry and diagonal deviations up
# to this size are taken as exact; anything larger is a user error.
_TOLERANCE = 1e-12


def category_positions(r: Ratings) -> FloatArray:
    """Positions :math:`x_k` of the categories in the weight formulas.

    The category values for interval/ratio labels; the ranks 1..q for
    nominal/ordinal labels, as the handbook numbers non-numeric categories
    (only ``ratio`` weights depend on where the ranks start; the others use
    differences and extremes only).
    """
    return r.category_values if r.is_numeric else r.category_values + 1.0


def weight_matrix(r: Ratings, weights: Weights, function: str) -> FloatArray:
    """The q x q agreement weights of ``weights`` on the categories of ``r``.

    Parameters
    ----------
    r : Ratings
        Gives the categories, their number ``q`` and their positions.
    weights : str or array-like
        One of :data:`WEIGHTS`, or a q x q matrix (validated by :func:`check_weight_matrix`).
    function : str
        The public function, named in error messages.

    Raises
    ------
    ParameterError
        Unknown name, ratio weights on negative positions, or an invalid matrix.
    """
    if not isinstance(weights, str):
        return check_weight_matrix(weights, r.categories, function)
    if isinstance(r, SetRatings):
        if weights != "identity":
            raise ParameterError(f"{function}: label sets have no positions for {weights!r} weights; their credit "
                                 f"is 1 - the {r.set_distance} distance (the default), or pass a q x q matrix.",
                                 parameter="weights", value=weights)
        return 1.0 - np.asarray(r.set_distances)  # partial credit for overlapping sets: the level's distance
    if weights not in WEIGHTS:
        options = ", ".join(repr(w) for w in WEIGHTS)
        raise ParameterError(f"The 'weights' parameter of {function} must be one of {options}, or a q x q "
                             f"matrix; got {weights!r}.", parameter="weights", value=weights)
    if weights == "ratio" and (category_positions(r) < 0).any():
        raise ParameterError(f"ratio weights in {function} need non-negative category values (a ratio scale); "
                             f"the categories include {float(category_positions(r).min())!r}.",
                             parameter="weights", value=weights)
    return named_weights(weights, category_positions(r))


def named_weights(name: WeightName, x: FloatArray) -> FloatArray:
    """The handbook's weights ``name`` for categories at positions ``x`` (formulas in the module docstring)."""
    q = x.size
    if name == "identity" or q < 2:
        return np.eye(q)
    lo, hi = float(x.min()), float(x.max())
    diff = x[:, None] - x[None, :]
    total = x[:, None] + x[None, :]
    off = ~np.eye(q, dtype=bool)
    if name == "linear":
        return 1.0 - np.abs(diff) / (hi - lo)
    if name == "quadratic":
        return 1.0 - (diff / (hi - lo)) ** 2
    if name == "radical":
        return 1.0 - np.sqrt(np.abs(diff)) / np.sqrt(hi - lo)
    if name == "ratio":
        # the diagonal is 0/0 when a position is 0: a pair of equal ratings gets full credit by definition
        share = np.divide(diff, total, out=np.zeros_like(diff), where=off)
        return 1.0 - share**2 / ((hi - lo) / (hi + lo)) ** 2
    if name == "ordinal":
        rank = np.argsort(np.argsort(x, kind="stable"), kind="stable").astype(np.float64)
        steps = np.abs(rank[:, None] - rank[None, :]) + 1.0
        return _normalised_credit(steps * (steps - 1.0) / 2.0)
    if name == "circular":
        return _normalised_credit(np.sin(np.pi * diff / (hi - lo + 1.0)) ** 2)
    # bipolar: the denominator is 0 only on the diagonal's extreme cells, which get full credit
    spread = (total - 2.0 * lo) * (2.0 * hi - total)
    return _normalised_credit(np.divide(diff**2, spread, out=np.zeros_like(diff), where=off))


def _normalised_credit(disagreement: FloatArray) -> FloatArray:
    """``1 - d / max(d)``: the most distant pair gets credit 0 (the diagonal of ``d`` is 0)."""
    return 1.0 - disagreement / disagreement.max()


def check_weight_matrix(weights: npt.ArrayLike, categories: tuple[object, ...], function: str) -> FloatArray:
    """Validate a user-supplied weight matrix and return it as float64.

    The matrix must be q x q for the q categories (in the category order of
    the ratings), finite, symmetric, with 1 on the diagonal and every credit
    in [0, 1]. Asymmetry or diagonal deviations below 1e-12 (rounding) are
    removed.

    Raises
    ------
    ParameterError
        Naming the problem and the first cell at fault.
    """
    q = len(categories)
    try:
        w = np.array(weights, dtype=np.float64)  # a copy: the caller's matrix is never modified
    except (TypeError, ValueError):
        raise ParameterError(f"The 'weights' matrix of {function} must be numeric; got {weights!r}.",
                             parameter="weights") from None
    if w.shape != (q, q):
        raise ParameterError(f"The 'weights' matrix of {function} must be {q} x {q} (one row and column per "
                             f"category, in the order {list(categories)}); got shape {w.shape}.",
                             parameter="weights")

    def cell(i: int, j: int) -> str:
        return f"({categories[i]!r}, {categories[j]!r})"

    bad = np.argwhere(~np.isfinite(w))
    if bad.size:
        i, j = bad[0]
        raise ParameterError(f"The 'weights' matrix of {function} has the non-finite value {float(w[i, j])!r} at "
                             f"{cell(i, j)}.", parameter="weights")
    bad = np.argwhere(np.abs(w - w.T) > _TOLERANCE)
    if bad.size:
        i, j = bad[0]
        raise ParameterError(f"The 'weights' matrix of {function} must be symmetric: w{cell(i, j)} = "
                             f"{float(w[i, j])!r} but w{cell(j, i)} = {float(w[j, i])!r}.", parameter="weights")
    off_diagonal = np.flatnonzero(np.abs(np.diag(w) - 1.0) > _TOLERANCE)
    if off_diagonal.size:
        k = int(off_diagonal[0])
        raise ParameterError(f"The 'weights' matrix of {function} must have 1 on its diagonal (full credit for "
                             f"equal ratings): w{cell(k, k)} = {float(w[k, k])!r}.", parameter="weights")
    bad = np.argwhere((w < -_TOLERANCE) | (w > 1.0 + _TOLERANCE))
    if bad.size:
        i, j = bad[0]
        raise ParameterError(f"The 'weights' matrix of {function} must have every credit in [0, 1]: "
                             f"w{cell(i, j)} = {float(w[i, j])!r}.", parameter="weights")
    w = np.clip((w + w.T) / 2.0, 0.0, 1.0)
    np.fill_diagonal(w, 1.0)
    return w
