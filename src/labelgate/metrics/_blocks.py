"""Per-item blocks: the arrays every metric's statistics are kept in, and the rule for rounding residue.

A *block* is a 2-D array with one row per item of the item axis (dense ``ndarray`` or ``scipy.sparse``). These
helpers are shared by the item bootstrap and jackknife (``_engine``) and the linearisation (``_linear``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

import numpy as np

if TYPE_CHECKING:
    import scipy.sparse as sp
else:
    from labelgate.metrics._lazy import lazy

    sp = lazy("scipy.sparse")

Block: TypeAlias = "np.ndarray | sp.spmatrix | sp.sparray"

#: Items x resamples (or columns) cells per chunk of a vectorised evaluation (float64: 8 bytes each).
CHUNK_CELLS = 2_000_000

#: Relative size under which a difference of sums is rounding residue, not variation (docs/degenerate-input.md).
#: Residues of ``n * sum(x^2) - sum(x)^2`` on constant data stay below 1e-10 of ``n * sum(x^2)`` up to 10^7
#: values; genuine variation is at least about ``1 / (2 N)`` of it, so the two are told apart up to ~10^8 values.
DEGENERACY_RTOL = 1e-9

#: Longest vector of ones kept for the sums below (8 bytes each: 64 MiB); longer ones are made per call.
ONES_KEPT = 1 << 23

_ones_kept = np.ones(0)


def ones(n: int) -> np.ndarray:
    """A read-only vector of ``n`` ones: the left factor of a sum written as a matrix product.

    The sums of a panel take several of them per `Ratings` (one per coefficient and block); one vector, grown to
    the longest asked for (up to :data:`ONES_KEPT`), spares making and first touching a fresh one every time.
    """
    global _ones_kept
    kept = _ones_kept  # read once: another thread may grow it meanwhile, and either vector is right
    if n <= kept.size:
        return kept[:n]
    if n > ONES_KEPT:
        return np.ones(n)
    grown = np.ones(min(max(n, 2 * kept.size), ONES_KEPT))
    grown.flags.writeable = False
    _ones_kept = grown
    return grown[:n]


def vanishes(value: np.ndarray, scale: np.ndarray | float) -> np.ndarray:
    """True where ``|value| <= DEGENERACY_RTOL * |scale|``: ``value`` is a rounding residue of its scale.

    A coefficient is undefined (0/0) when its denominator vanishes; deciding that with ``== 0`` makes the
    answer depend on rounding (constant data rescaled by 1.7156 leave a residue of ~1e-16 and turn NaN into 1),
    so every degeneracy test compares the denominator with the size of the terms it is computed from.
    """
    return np.abs(np.asarray(value, dtype=np.float64)) <= DEGENERACY_RTOL * np.abs(np.asarray(scale, dtype=np.float64))


def is_sparse(block: Block) -> bool:
    """True for a ``scipy.sparse`` block."""
    # a dense block is the common case: asking SciPy would import it (≈ 0.2 s) just to hear "no"
    return not isinstance(block, np.ndarray) and bool(sp.issparse(block))


def column_sums(block: Block) -> np.ndarray:
    """The block's column sums, shape ``(1, k)``."""
    if is_sparse(block):
        return np.asarray(block.sum(axis=0), dtype=np.float64).reshape(1, -1)
    # a matrix-vector product is several times faster than a reduction along the long axis
    return (ones(block.shape[0]) @ np.asarray(block, dtype=np.float64)).reshape(1, -1)


def table_totals(table: np.ndarray) -> np.ndarray:
    """The column totals of a dense items x categories table, in its own type (exact for integer counts).

    ``einsum`` over the long axis: numpy's ``sum(axis=0)`` of a narrow C-ordered table reduces it column by
    column with a buffered strided pass, 4-5x slower (7.3 against 1.6 ms for 333,333 x 5 int64 counts).
    """
    return np.einsum("ic->c", table)


def rows_of(block: Block, rows: np.ndarray) -> np.ndarray:
    """The given rows of the block, dense."""
    if is_sparse(block):
        return np.asarray(block[rows].toarray(), dtype=np.float64)
    return np.asarray(block, dtype=np.float64)[rows]


def weighted_sums(weights: np.ndarray, block: Block) -> np.ndarray:
    """``weights @ block`` for a ``(b, n_items)`` weight matrix: the block's sums on ``b`` resamples."""
    if is_sparse(block):
        return np.asarray((block.T @ weights.T).T)
    return weights @ block


def times(block: Block, vector: np.ndarray) -> np.ndarray:
    """``block @ vector`` as a dense array, shape ``(n_items,)`` or ``(n_items, K)``."""
    return np.asarray(block @ vector, dtype=np.float64)


def n_rows(blocks: list[Block]) -> int:
    """Items on the item axis."""
    return int(blocks[0].shape[0]) if blocks else 0
