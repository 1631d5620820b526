r"""The delta-method interval: a normal interval with the linearised standard error of the per-item blocks.

A metric is :math:`\hat\theta = F(S)` with :math:`S = \sum_i x_i` the column sums of its per-item blocks
(:mod:`labelgate.metrics._engine`). Reweighting the items, :math:`S(w) = \sum_i w_i x_i`, the empirical influence
of item :math:`i` is the derivative of :math:`F` when weight moves towards that item (Efron & Tibshirani 1993,
ch. 21, the infinitesimal jackknife; Efron 1982, ch. 6):

.. math::

    U_i = \nabla F(S) \cdot \Big(x_i - \frac{S}{n}\Big), \qquad \sum_i U_i = 0, \qquad
    \widehat{\mathrm{se}} = \Big(\sum_i U_i^2\Big)^{1/2},

(for a mean, :math:`F(S) = S_1 / n`, this is the plug-in standard error :math:`s / \sqrt n`), and the interval is
:math:`\hat\theta \pm z_{(1 + \mathrm{level})/2}\, \widehat{\mathrm{se}}`. The gradient is taken by central
differences of ``finalize`` on the column sums: two ``finalize`` rows per column of the blocks, evaluated together,
and the :math:`U_i` are one matrix-vector product per block; there is no resampling.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from statistics import NormalDist

import numpy as np

from labelgate.metrics._blocks import CHUNK_CELLS, Block, column_sums, n_rows, times, vanishes

#: Columns (summed over the blocks) up to which the gradient is computed: two ``finalize`` rows per column. Wider
#: statistics (Conger's kappa as the IRR of normalized kappa_x on thousands of raters) fall back to BCa.
MAX_GRADIENT_COLUMNS = 4096
#: Central-difference step, relative to the column's sum (or, for an empty column, to its block's largest sum).
RELATIVE_STEP = 1e-5

_NORMAL = NormalDist()


def linearized_se(blocks: list[Block], finalize: Callable[[list[np.ndarray]], dict[str, np.ndarray]],
                  keys: Sequence[str] = ("value",)) -> tuple[dict[str, np.ndarray] | None, str | None]:
    r"""Linearised (infinitesimal-jackknife) standard errors of the named components of ``finalize``.

    Parameters
    ----------
    blocks : list of 2-D arrays
        Per-item statistics, one row per item (dense or sparse).
    finalize : callable
        ``finalize([sums_0, ...])`` with ``sums_j`` of shape ``(B, k_j)`` returns a dict of arrays of shape
        ``(B,)`` or ``(B, K)``.
    keys : sequence of str
        Components to linearise.

    Returns
    -------
    se : dict or None
        Key -> standard error, shape ``()`` or ``(K,)``; NaN where the component is not differentiable at the
        data (a non-finite central difference: the value, or a value next to it, is undefined), 0 where the
        influence values are rounding residue of their terms (every item contributes alike: e.g. perfect
        agreement). None when it cannot be computed.
    why : str or None
        Why ``se`` is None: fewer than 2 items, or more than :data:`MAX_GRADIENT_COLUMNS` columns.
    """
    n = n_rows(blocks)
    widths = [int(b.shape[1]) for b in blocks]
    width = sum(widths)
    if n < 2:
        return None, "fewer than 2 items"
    if width > MAX_GRADIENT_COLUMNS:
        return None, (f"the item statistics have {width} columns; the gradient is computed up to "
                      f"{MAX_GRADIENT_COLUMNS}")
    sums = [column_sums(b) for b in blocks]
    steps = np.concatenate([_steps(s[0]) for s in sums])
    gradients = _gradients(sums, widths, steps, finalize, keys)
    out: dict[str, np.ndarray] = {}
    offsets = np.cumsum([0, *widths])
    for key in keys:
        grad = gradients[key]  # (width,) or (width, K)
        parts = [grad[offsets[j]:offsets[j + 1]] for j in range(len(blocks))]
        dot = sum(np.tensordot(s[0], g, axes=(0, 0)) for s, g in zip(sums, parts, strict=True))
        terms = sum(times(b, g) for b, g in zip(blocks, parts, strict=True))
        influence = terms - np.asarray(dot) / n
        # the size of the products the influence values are differences of: their residue is not variation
        scale = sum(times(abs(b), np.abs(g)) for b, g in zip(blocks, parts, strict=True))
        se = np.sqrt(np.sum(influence**2, axis=0))
        residue = vanishes(np.max(np.abs(influence), axis=0), np.max(np.abs(scale), axis=0))
        finite = np.all(np.isfinite(grad), axis=0)
        out[key] = np.where(finite, np.where(residue, 0.0, se), np.nan)
    return out, None


def normal_interval(point: float, se: float, level: float) -> tuple[float, float] | None:
    r""":math:`\hat\theta \pm z_{(1 + \mathrm{level})/2}\,\widehat{\mathrm{se}}`, None when ``se`` is undefined."""
    if not (np.isfinite(point) and np.isfinite(se)):
        return None
    half = _NORMAL.inv_cdf((1.0 + level) / 2.0) * float(se)
    return float(point) - half, float(point) + half


def _steps(sums: np.ndarray) -> np.ndarray:
    """Central-difference steps of one block's columns: relative to the column's sum, floored by the block's."""
    largest = float(np.max(np.abs(sums), initial=0.0))
    floor = 1e-3 * largest if largest > 0 else 1.0
    return RELATIVE_STEP * np.maximum(np.abs(sums), floor)


def _gradients(sums: list[np.ndarray], widths: list[int], steps: np.ndarray,
               finalize: Callable[[list[np.ndarray]], dict[str, np.ndarray]],
               keys: Sequence[str]) -> dict[str, np.ndarray]:
    """Central differences of ``finalize`` in every column: rows ``2c`` / ``2c + 1`` move column ``c`` up / down."""
    width = sum(widths)
    offsets = np.cumsum([0, *widths])
    per_chunk = max(1, CHUNK_CELLS // max(2 * width, 1))
    out: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    for start in range(0, width, per_chunk):
        cols = np.arange(start, min(width, start + per_chunk))
        up = 2 * (cols - start)
        perturbed = [np.repeat(s, 2 * cols.size, axis=0) for s in sums]
        for j, block_sums in enumerate(perturbed):
            mine = (cols >= offsets[j]) & (cols < offsets[j + 1])
            local, col = up[mine], cols[mine] - offsets[j]
            block_sums[local, col] += steps[cols[mine]]
            block_sums[local + 1, col] -= steps[cols[mine]]
        with np.errstate(all="ignore"):
            parts = finalize(perturbed)
            for k in keys:
                values = np.asarray(parts[k], dtype=np.float64)
                h = steps[cols].reshape(-1, *([1] * (values.ndim - 1)))
                out[k].append((values[0::2] - values[1::2]) / (2.0 * h))
    return {k: np.concatenate(v, axis=0) for k, v in out.items()}
