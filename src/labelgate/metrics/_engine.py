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
incremental monitoring and partitioned (Dask) computation, and the
leave-one-item-out sums of the jackknife are the column sums minus one row:
the BCa interval's acceleration costs one ``finalize`` per item, no product. The delta-method interval
(:mod:`labelgate.metrics._linear`) needs no resampling: the gradient of ``finalize`` at the column sums and one
matrix-vector product per block give every item's influence. The intervals are formed from the replicates, the
leave-one-item-out values or the linearised standard error by :mod:`labelgate.metrics._intervals`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from labelgate.core.estimate import (
    CI_METHOD_OPTIONS,
    DEFAULT_CI_METHOD,
    DeferredSE,
    Estimate,
    StandardError,
    resolve_ci_method,
)
from labelgate.errors import ParameterError, Reason, check_option
from labelgate.metrics._blocks import (
    CHUNK_CELLS,
    Block,
    column_sums,
    is_sparse,
    n_rows,
    rows_of,
    vanishes,
    weighted_sums,
)
from labelgate.metrics._intervals import interval_of
from labelgate.metrics._linear import linearized_se, normal_interval
from labelgate.metrics._resamples import make_rng, resamples
from labelgate.metrics.variance_analytic import Analytic, bootstrap_se

if TYPE_CHECKING:
    import scipy.sparse as sp
else:
    from labelgate.metrics._lazy import lazy

    sp = lazy("scipy.sparse")
Components = dict[str, np.ndarray]
Intervals = dict[str, tuple[float, float] | None]
Finalize = Callable[[list[np.ndarray]], Components]
Explain = Callable[[Components], tuple[Reason, str] | None]

# Items whose leave-one-out values give the BCa acceleration: all of them up to this many, else a random sample of
# this many (see jackknife_acceleration). The jackknife's cost is one finalize per value, so this bounds it by a
# quarter of the finalize cost of the default 2,000 resamples (Conger's finalize, dense in raters x categories,
# dominates its bootstrap on large crowds). With n > 500 items a is ~ skewness / (6 sqrt(n)) < 0.01 and its
# sampling error from 500 items ~ 0.001: it moves the interval's ends by a few thousandths of a standard error.
JACKKNIFE_ITEMS = 500


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
    #: ``analytic(value)``: the published standard error of the value and its test of no agreement
    #: (:mod:`labelgate.metrics.variance_analytic`), when the metric has one; else the delta method's is reported.
    analytic: Callable[[float], Analytic | None] | None = None
    #: ``se_unavailable()``: why no standard error is computed now (None: it is), e.g. it would read judgements
    #: that are not in memory (:func:`labelgate.metrics.variance_analytic.judgements_elsewhere`).
    se_unavailable: Callable[[], str | None] | None = None

    def get_blocks(self) -> list[Block]:
        if self.blocks is None:
            if self.build_blocks is None:
                raise RuntimeError("ItemStatistic has neither blocks nor build_blocks")
            self.blocks = self.build_blocks()
        return self.blocks

    def point(self) -> Components:
        totals = self.totals if self.totals is not None else [column_sums(b) for b in self.get_blocks()]
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
                                          else [column_sums(b) for b in p.get_blocks()])]
    checks = [p.se_unavailable for p in parts if p.se_unavailable is not None]

    def unavailable() -> str | None:
        return next((why for why in (check() for check in checks) if why), None)

    return ItemStatistic(blocks=None, finalize=joint_finalize, n_items=n_items, n_ratings=n_ratings,
                         n_items_excluded=n_items_excluded, explain=explain, totals=totals,
                         build_blocks=build, se_unavailable=unavailable if checks else None)


def check_bootstrap_args(ci: float | None, n_boot: int, seed: Any, function: str,
                         ci_method: str = DEFAULT_CI_METHOD) -> None:
    """Validate the shared ``ci`` / ``n_boot`` / ``seed`` / ``ci_method`` parameters."""
    if ci is not None and not (isinstance(ci, (float, int)) and 0 < float(ci) < 1):
        raise ParameterError(f"The 'ci' parameter of {function} must be None or a level in (0, 1), "
                             f"e.g. 0.95; got {ci!r}.", parameter="ci", value=ci)
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 2:
        raise ParameterError(f"The 'n_boot' parameter of {function} must be an integer >= 2; got {n_boot!r}.",
                             parameter="n_boot", value=n_boot)
    check_option(ci_method, CI_METHOD_OPTIONS, "ci_method", function)


def evaluate(metric: str, stat: ItemStatistic, *, ci: float | None, n_boot: int, seed: Any,
             value_index: int | None = None, ci_method: str = DEFAULT_CI_METHOD) -> Estimate:
    """Point estimate plus (optionally) the interval of ``ci_method`` ("auto", "bca", "delta", "percentile").

    ``"auto"`` is the metric's method (:func:`labelgate.core.estimate.resolve_ci_method`). A delta interval that
    cannot be formed falls back to BCa, and BCa to percentile (``details["ci_method_note"]`` says why). The
    interval components of ``stat`` get intervals of the same method (from the same resamples).
    """
    point = stat.point()
    value = _pick(point["value"], value_index)[0]
    details: dict[str, Any] = {k: float(_pick(v, value_index)[0]) for k, v in point.items() if k != "value"}
    details.update(stat.details)
    reason_code, reason = None, None
    if not np.isfinite(value):
        explained = stat.explain(point) if stat.explain else None
        reason_code, reason = explained if explained else (Reason.NO_VARIANCE, "the metric is undefined")
        value = float("nan")
    intervals: Intervals = {}
    method, resampled, boot_se = None, False, math.nan
    spreads: dict[str, float] = {}
    if ci is not None and np.isfinite(value):
        level = float(ci)
        points = {"value": float(value), **{k: float(point[k][0]) for k in stat.interval_components}}
        wanted = resolve_ci_method(ci_method, metric)
        spreads, why = _linearized(stat, tuple(points), value_index) if wanted == "delta" else ({}, None)
        delta = {k: normal_interval(points[k], spreads[k], level) for k in points} if spreads else {}
        if delta.get("value") is not None:
            intervals, method = delta, "delta"
        else:  # a bootstrap method, or the fallback of an undefined delta interval (in interval_of)
            intervals, method, note, n_failed, boot_se = _bootstrap_intervals(stat, points, level, wanted, n_boot,
                                                                              seed, value_index, spreads, why)
            resampled = True
            details["n_boot_undefined"] = n_failed
            if note:
                details["ci_method_note"] = note
        for key in stat.interval_components:
            part = intervals.get(key)
            details[f"{key}_ci_low"], details[f"{key}_ci_high"] = part if part else (np.nan, np.nan)
    interval = intervals.get("value")
    se: float | DeferredSE
    if ci is None and np.isfinite(value):
        # a point estimate: the standard error (per-item statistics the point avoids) waits until it is read
        se, se_method, z, p_value = DeferredSE(partial(standard_error, stat, float(value), value_index)), None, \
            math.nan, math.nan
    else:  # the interval's blocks, delta standard error or replicates are at hand
        se, se_method, z, p_value, se_details = standard_error(stat, float(value), value_index, boot_se,
                                                               spreads.get("value", math.nan))
        details.update(se_details)
    return Estimate(metric=metric, value=float(value), ci=interval,
                    ci_level=float(ci) if interval is not None and ci is not None else None,
                    n_items=stat.n_items, n_ratings=stat.n_ratings, n_items_excluded=stat.n_items_excluded,
                    reason=reason, reason_code=reason_code, details=details,
                    n_boot=n_boot if interval and resampled else 0, ci_method=method if interval else None,
                    se=se, se_method=se_method, z=z, p_value=p_value)  # type: ignore[arg-type]  # DeferredSE


def standard_error(stat: ItemStatistic, value: float, value_index: int | None, boot_se: float = math.nan,
                   delta_se: float = math.nan) -> StandardError:
    """``(se, se_method, z, p_value, details)`` of the value: analytic where published, else delta, else bootstrap.

    None of them when ``stat.se_unavailable()`` says why (then in ``details["se_note"]``).

    ``details`` holds the entries for ``Estimate.details``: the analytic formula's source (``se_source``); the
    test's standard error under the hypothesis of no agreement (``se_null``, SAS's "ASE under H0") and its source
    (``test_source``). The delta method's standard error is the linearised one of the delta interval (no
    resampling); the bootstrap's (the standard deviation of the finite replicates) is given only when an interval
    resampled and the linearisation is unavailable (e.g. too many columns). ``delta_se``: the linearised one, if
    the delta interval computed it.
    """
    details: dict[str, Any] = {}
    if not np.isfinite(value):
        return math.nan, None, math.nan, math.nan, details
    why = stat.se_unavailable() if stat.se_unavailable is not None else None
    if why:
        details["se_note"] = why
        return math.nan, None, math.nan, math.nan, details
    found = stat.analytic(value) if stat.analytic is not None else None
    z, p_value = found.test(value) if found is not None else (math.nan, math.nan)
    if found is not None and found.source0 and np.isfinite(z):
        details["se_null"], details["test_source"] = found.se0, found.source0
    if found is not None and np.isfinite(found.se):
        details["se_source"] = found.source
        return found.se, "analytic", z, p_value, details
    if not np.isfinite(delta_se):  # not computed already for a delta interval
        delta_se = _linearized(stat, ("value",), value_index)[0].get("value", math.nan)
    if np.isfinite(delta_se):
        return delta_se, "delta", z, p_value, details
    if np.isfinite(boot_se):
        return boot_se, "bootstrap", z, p_value, details
    return math.nan, None, z, p_value, details


def _linearized(stat: ItemStatistic, keys: tuple[str, ...], value_index: int | None,
                ) -> tuple[dict[str, float], str | None]:
    """Key -> linearised standard error (the value's at ``value_index``); empty, with the reason, if not computed."""
    se, why = linearized_se(stat.get_blocks(), stat.finalize, keys)
    if se is None:
        return {}, why
    return {k: float(np.atleast_1d(se[k])[value_index if k == "value" and value_index is not None else 0])
            for k in keys}, None


def _bootstrap_intervals(stat: ItemStatistic, points: dict[str, float], level: float, method: str, n_boot: int,
                         seed: Any, value_index: int | None, spreads: dict[str, float], why: str | None,
                         ) -> tuple[Intervals, str | None, str | None, int, float]:
    """Bootstrap intervals of the value and the components from one set of resamples (:func:`.interval_of`).

    Returns the intervals, the method of the value's interval, its fallback note, its undefined resamples and the
    standard deviation of the value's finite replicates (the bootstrap standard error).
    """
    keys = tuple(points)
    replicates, rng = _replicates(stat, n_boot, seed, keys)
    n_axis = n_rows(stat.get_blocks())
    loo = jackknife_components(stat, keys=keys, rng=rng) if method in ("bca", "delta") else None
    out: Intervals = {}
    used, note, n_failed, spread = None, None, 0, math.nan
    for key in keys:
        index = value_index if key == "value" else None
        jack = None if loo is None else _pick(loo[key], index)
        interval, failed, how, said = interval_of(_pick(replicates[key], index), points[key], level, method, jack,
                                                  n_axis, spreads.get(key), why)
        out[key] = interval
        if key == "value":
            used, note, n_failed = how, said, failed
            spread = bootstrap_se(_pick(replicates[key], index))
    return out, used, note, n_failed, spread


def bootstrap(stat: ItemStatistic, *, n_boot: int, seed: Any) -> np.ndarray:
    """``n_boot`` item-bootstrap replicates of ``stat``'s value, shape ``(n_boot,)`` or ``(n_boot, K)``."""
    return _replicates(stat, n_boot, seed, ("value",))[0]["value"]


def _replicates(stat: ItemStatistic, n_boot: int, seed: Any, keys: Sequence[str],
                ) -> tuple[Components, np.random.Generator]:
    """Bootstrap replicates of the named components of ``stat`` (one shared resampling) and the generator after the
    resamples (the jackknife's sample follows them).

    The resamples come from :func:`labelgate.metrics._resamples.resamples`: drawn here, or — inside
    :func:`~labelgate.metrics._resamples.sharing` — the same matrices another statistic on an item axis of the
    same length drew with the same integer seed (the replicates are identical either way).
    """
    blocks = stat.get_blocks()
    n_items = n_rows(blocks)
    # bound the memory of both the count matrix (chunk x items) and the widest sums (chunk x columns)
    widest = max((int(b.shape[1]) for b in blocks), default=1)
    chunk = max(1, min(n_boot, CHUNK_CELLS // max(n_items, widest, 1)))
    out: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    weights, after = resamples(seed, n_items, n_boot, chunk)
    for w in weights:
        parts = stat.finalize([weighted_sums(w, b) for b in blocks])
        for k in keys:
            out[k].append(np.asarray(parts[k], dtype=np.float64))
    return {k: np.concatenate(v, axis=0) for k, v in out.items()}, after()


def jackknife_components(stat: ItemStatistic, *, keys: Sequence[str] = ("value",), rng: Any = None,
                         max_items: int = JACKKNIFE_ITEMS) -> Components:
    """Leave-one-item-out values of the named components: ``finalize(column sums - one item's row)``.

    One value per item of the axis, or, above ``max_items`` items, per item of a random sample of
    ``max_items`` drawn from ``rng`` (the acceleration is then of order ``1 / sqrt(n)`` and its sampling
    error smaller still). Rows are taken in chunks, so memory stays bounded for wide (sparse) blocks.
    """
    # row slicing of a sparse block needs CSR; convert once, not per chunk
    blocks: list[Block] = [sp.csr_matrix(b) if is_sparse(b) else b for b in stat.get_blocks()]
    n_items = n_rows(blocks)
    rows = np.arange(n_items)
    if n_items > max_items:
        rows = np.sort(make_rng(rng).choice(n_items, size=max_items, replace=False))
    totals = [column_sums(b) for b in blocks]
    widest = max((int(b.shape[1]) for b in blocks), default=1)
    chunk = max(1, CHUNK_CELLS // max(widest, 1))
    out: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    for start in range(0, rows.size, chunk):
        part = rows[start:start + chunk]
        parts = stat.finalize([total - rows_of(b, part) for total, b in zip(totals, blocks, strict=True)])
        for k in keys:
            out[k].append(np.asarray(parts[k], dtype=np.float64))
    return {k: np.concatenate(v, axis=0) if v else np.empty(0) for k, v in out.items()}


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
