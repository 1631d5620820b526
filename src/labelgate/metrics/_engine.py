"""The shared machinery behind every metric: item statistics and the item bootstrap.

Every metric in LabelGate is written as

* a list of **blocks**: arrays of per-item sufficient statistics whose rows
  are aligned with one *item axis* (dense ``ndarray`` or ``scipy.sparse``),
* a vectorised **finalize** function mapping the column sums of each block,
  shape ``(B, k)``, to the metric's value (and its components), shape ``(B,)``.

The point estimate is ``finalize(column sums)``. An item-block bootstrap
resample is a vector of item multiplicities ``w`` (a multinomial draw), and
its sums are ``w @ block``; we draw resamples in chunks as a ``(b, n_items)``
count matrix and apply one matrix product per block, so the data are never
re-read and no Python loop runs over resamples or items.

Because the sums are additive over items, the same statistics serve
incremental monitoring and partitioned (Dask) computation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import numpy.typing as npt

from labelgate.core.estimate import Estimate
from labelgate.errors import ParameterError, Reason

if TYPE_CHECKING:
    import scipy.sparse as sp
else:
    from labelgate.metrics._lazy import lazy

    sp = lazy("scipy.sparse")

Block: TypeAlias = "np.ndarray | sp.spmatrix | sp.sparray"
Components = dict[str, np.ndarray]
Finalize = Callable[[list[np.ndarray]], Components]
Explain = Callable[[Components], tuple[Reason, str] | None]

# Items x resamples cells per chunk of the bootstrap count matrix (float64: 8 bytes each).
_CHUNK_CELLS = 2_000_000


@dataclass
class ItemStatistic:
    """Per-item sufficient statistics and the function that turns their sums into a metric.

    Parameters
    ----------
    blocks : list of 2-D arrays
        Per-item statistics; every block has one row per item of the item axis.
    finalize : callable
        ``finalize([sums_0, sums_1, ...])`` with ``sums_j`` of shape ``(B, k_j)``
        returns a dict of arrays; key ``"value"`` holds the metric, shape
        ``(B,)`` or ``(B, K)`` for vector-valued metrics.
    n_items, n_ratings, n_items_excluded : int
        Provenance reported in the Estimate.
    explain : callable, optional
        Called on the point components when the value is NaN; returns
        ``(Reason, message)``.
    totals : list of arrays, optional
        Column sums of the blocks when they are cheaper to compute directly
        (the blocks are then only built for the bootstrap).
    build_blocks : callable, optional
        Lazily builds ``blocks`` (used with ``totals``).
    """

    blocks: list[Block] | None
    finalize: Finalize
    n_items: int
    n_ratings: int
    n_items_excluded: int = 0
    explain: Explain | None = None
    totals: list[np.ndarray] | None = None
    build_blocks: Callable[[], list[Block]] | None = None
    details: dict[str, Any] = field(default_factory=dict)
    interval_components: tuple[str, ...] = ()

    def get_blocks(self) -> list[Block]:
        if self.blocks is None:
            if self.build_blocks is None:
                raise RuntimeError("ItemStatistic has neither blocks nor build_blocks")
            self.blocks = self.build_blocks()
        return self.blocks

    def point(self) -> Components:
        totals = self.totals if self.totals is not None else [_column_sums(b) for b in self.get_blocks()]
        return self.finalize([np.atleast_2d(np.asarray(t, dtype=np.float64)) for t in totals])


def combine(parts: Sequence[ItemStatistic], finalize: Callable[[list[Components]], Components],
            n_items: int, n_ratings: int, explain: Explain | None = None,
            n_items_excluded: int = 0) -> ItemStatistic:
    """Join statistics that share one item axis (e.g. kappa_x and both IRRs)."""
    sizes: list[int] = []

    def build() -> list[Block]:
        blocks: list[Block] = []
        for p in parts:
            blocks.extend(p.get_blocks())
        return blocks

    for p in parts:
        sizes.append(len(p.totals) if p.totals is not None else len(p.get_blocks()))

    def joint_finalize(sums: list[np.ndarray]) -> Components:
        out, start = [], 0
        for p, size in zip(parts, sizes, strict=True):
            out.append(p.finalize(sums[start:start + size]))
            start += size
        return finalize(out)

    totals = [t for p in parts for t in (p.totals if p.totals is not None
                                          else [_column_sums(b) for b in p.get_blocks()])]
    return ItemStatistic(blocks=None, finalize=joint_finalize, n_items=n_items, n_ratings=n_ratings,
                         n_items_excluded=n_items_excluded, explain=explain, totals=totals,
                         build_blocks=build)


def check_bootstrap_args(ci: float | None, n_boot: int, seed: Any, function: str) -> None:
    """Validate the shared ``ci`` / ``n_boot`` / ``seed`` parameters."""
    if ci is not None and not (isinstance(ci, (float, int)) and 0 < float(ci) < 1):
        raise ParameterError(f"The 'ci' parameter of {function} must be None or a level in (0, 1), "
                             f"e.g. 0.95; got {ci!r}.", parameter="ci", value=ci)
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 2:
        raise ParameterError(f"The 'n_boot' parameter of {function} must be an integer >= 2; got {n_boot!r}.",
                             parameter="n_boot", value=n_boot)


def evaluate(metric: str, stat: ItemStatistic, *, ci: float | None, n_boot: int, seed: Any,
             value_index: int | None = None) -> Estimate:
    """Point estimate plus (optionally) the percentile item-bootstrap interval."""
    point = stat.point()
    value = _pick(point["value"], value_index)[0]
    details = {k: float(_pick(v, value_index)[0]) for k, v in point.items() if k != "value"}
    details.update(stat.details)
    reason_code, reason = None, None
    if not np.isfinite(value):
        explained = stat.explain(point) if stat.explain else None
        reason_code, reason = explained if explained else (Reason.NO_VARIANCE, "the metric is undefined")
        value = float("nan")
    interval, n_failed = None, 0
    if ci is not None and np.isfinite(value):
        level = float(ci)
        keys = ("value", *stat.interval_components)
        replicates = bootstrap_components(stat, n_boot=n_boot, seed=seed, keys=keys)
        interval, n_failed = percentile_interval(_pick(replicates["value"], value_index), level)
        details["n_boot_undefined"] = n_failed
        for key in stat.interval_components:
            part, _ = percentile_interval(replicates[key], level)
            details[f"{key}_ci_low"], details[f"{key}_ci_high"] = part if part else (np.nan, np.nan)
    return Estimate(metric=metric, value=float(value), ci=interval,
                    ci_level=float(ci) if interval is not None and ci is not None else None,
                    n_items=stat.n_items, n_ratings=stat.n_ratings, n_items_excluded=stat.n_items_excluded,
                    reason=reason, reason_code=reason_code, details=details,
                    n_boot=n_boot if interval else 0)


def bootstrap(stat: ItemStatistic, *, n_boot: int, seed: Any) -> np.ndarray:
    """``n_boot`` item-bootstrap replicates of ``stat``'s value, shape ``(n_boot,)`` or ``(n_boot, K)``."""
    return bootstrap_components(stat, n_boot=n_boot, seed=seed, keys=("value",))["value"]


def bootstrap_components(stat: ItemStatistic, *, n_boot: int, seed: Any,
                         keys: Sequence[str] = ("value",)) -> Components:
    """Bootstrap replicates of the named components of ``stat`` (one shared resampling)."""
    blocks = stat.get_blocks()
    n_items = _n_rows(blocks)
    rng = make_rng(seed)
    # bound the memory of both the count matrix (chunk x items) and the widest sums (chunk x columns)
    widest = max((int(b.shape[1]) for b in blocks), default=1)
    chunk = max(1, min(n_boot, _CHUNK_CELLS // max(n_items, widest, 1)))
    out: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    for start in range(0, n_boot, chunk):
        size = min(chunk, n_boot - start)
        weights = resample_counts(rng, n_items, size)
        parts = stat.finalize([_weighted_sums(weights, b) for b in blocks])
        for k in keys:
            out[k].append(np.asarray(parts[k], dtype=np.float64))
    return {k: np.concatenate(v, axis=0) for k, v in out.items()}


def make_rng(seed: Any) -> np.random.Generator:
    """The bootstrap's generator: SFC64 (fast, PractRand-clean), or the Generator passed in."""
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.Generator(np.random.SFC64(seed))


def resample_counts(rng: np.random.Generator, n_items: int, size: int) -> npt.NDArray[np.float64]:
    """``size`` bootstrap resamples of ``n_items`` items as a (size, n_items) multiplicity matrix."""
    dtype = np.int32 if n_items < 2**31 else np.int64
    draws = rng.integers(0, n_items, size=(size, n_items), dtype=dtype)
    counts = np.empty((size, n_items), dtype=np.float64)
    for row in range(size):  # one cache-sized bincount per resample beats one scattered bincount over all
        counts[row] = np.bincount(draws[row], minlength=n_items)
    return counts


def percentile_interval(replicates: np.ndarray, level: float) -> tuple[tuple[float, float] | None, int]:
    """Percentile interval over the finite replicates, and how many were undefined."""
    finite = replicates[np.isfinite(replicates)]
    n_failed = int(replicates.size - finite.size)
    if finite.size < 2:
        return None, n_failed
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(finite, [alpha, 1.0 - alpha])
    return (float(low), float(high)), n_failed


def _weighted_sums(weights: np.ndarray, block: Block) -> np.ndarray:
    if sp.issparse(block):
        return np.asarray((block.T @ weights.T).T)
    return weights @ block


def _column_sums(block: Block) -> np.ndarray:
    if sp.issparse(block):
        return np.asarray(block.sum(axis=0), dtype=np.float64).reshape(1, -1)
    # a matrix-vector product is several times faster than a reduction along the long axis
    return (np.ones(block.shape[0]) @ np.asarray(block, dtype=np.float64)).reshape(1, -1)


def _n_rows(blocks: list[Block]) -> int:
    return int(blocks[0].shape[0]) if blocks else 0


def _pick(values: np.ndarray, index: int | None) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if index is None:
        return arr.reshape(arr.shape[0], *arr.shape[1:]) if arr.ndim > 1 else arr
    return arr[:, index]


def safe_ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """``num / den`` with NaN where ``den`` is 0 (no warning)."""
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    out = np.full(np.broadcast(num, den).shape, np.nan)
    np.divide(num, den, out=out, where=den != 0)
    return out


#: Relative size under which a difference of sums is rounding residue, not variation (docs/degenerate-input.md).
#: Residues of ``n * sum(x^2) - sum(x)^2`` on constant data stay below 1e-10 of ``n * sum(x^2)`` up to 10^7
#: values; genuine variation is at least about ``1 / (2 N)`` of it, so the two are told apart up to ~10^8 values.
DEGENERACY_RTOL = 1e-9


def vanishes(value: np.ndarray, scale: np.ndarray | float) -> np.ndarray:
    """True where ``|value| <= DEGENERACY_RTOL * |scale|``: ``value`` is a rounding residue of its scale.

    A coefficient is undefined (0/0) when its denominator vanishes; deciding that with ``== 0`` makes the
    answer depend on rounding (constant data rescaled by 1.7156 leave a residue of ~1e-16 and turn NaN into 1),
    so every degeneracy test compares the denominator with the size of the terms it is computed from.
    """
    return np.abs(np.asarray(value, dtype=np.float64)) <= DEGENERACY_RTOL * np.abs(np.asarray(scale, dtype=np.float64))


def chance_corrected(p_o: np.ndarray, p_e: np.ndarray) -> np.ndarray:
    """``(p_o - p_e) / (1 - p_e)``, NaN when ``1 - p_e`` vanishes (its scale is 1: ``p_e`` is a probability)."""
    room = 1.0 - np.asarray(p_e, dtype=np.float64)
    return safe_ratio(p_o - p_e, np.where(vanishes(room, 1.0), 0.0, room))


def one_minus_ratio(d_o: np.ndarray, d_e: np.ndarray, scale: np.ndarray | None = None) -> np.ndarray:
    """``1 - d_o / d_e``, NaN when ``d_e`` vanishes relative to ``scale`` (exactly 0 when no scale is given).

    ``scale`` is the size of the terms ``d_e`` is a difference of (e.g. ``n * sum(x^2)`` for a variance from
    moments), in the units of ``d_e``.
    """
    d_e = np.asarray(d_e, dtype=np.float64)
    if scale is not None:
        d_e = np.where(vanishes(d_e, scale), 0.0, d_e)
    return 1.0 - safe_ratio(d_o, d_e)


def level_of(ci: float | None, interval: Any) -> float | None:
    """The Estimate's ``ci_level``: the level when an interval was computed."""
    return float(ci) if interval and ci is not None else None
