r"""Variance components of sparse crossed item x rater designs, by the method of moments in O(N).

Model (the blog's "parametric" section; Girard's ICC slides): the value given
by rater :math:`j` to item :math:`i` is

.. math::

    Y_{ij} = \mu + a_i + b_j + e_{ij}, \qquad
    a_i \sim (0, \sigma^2_{item}),\; b_j \sim (0, \sigma^2_{rater}),\;
    e_{ij} \sim (0, \sigma^2_{residual}),

all independent, observed on an arbitrary (sparse, unbalanced) set of
:math:`N` cells. Following Gao & Owen (2017, "Efficient moment calculations
for variance components in large unbalanced crossed random effects models",
Electron. J. Statist. 11), three U-statistics — half the sum of squared
differences over ordered pairs of ratings of the same item, of the same rater,
and over all pairs —

.. math::

    U_{item} = \sum_i (N_i Q_i - S_i^2), \quad
    U_{rater} = \sum_j (M_j R_j - T_j^2), \quad
    U_{all} = N Q - S^2

(:math:`N_i, S_i, Q_i` count, sum and sum of squares of item :math:`i`;
:math:`M_j, T_j, R_j` the same for rater :math:`j`) have expectations linear in
the three variances with coefficients from the design counts:

.. math::

    E U_{item}  &= (\textstyle\sum_i N_i^2 - N)(\sigma^2_{rater} + \sigma^2_{residual}) \\
    E U_{rater} &= (\textstyle\sum_j M_j^2 - N)(\sigma^2_{item} + \sigma^2_{residual}) \\
    E U_{all}   &= (N^2 - \textstyle\sum_i N_i^2)\sigma^2_{item}
                 + (N^2 - \textstyle\sum_j M_j^2)\sigma^2_{rater} + (N^2 - N)\sigma^2_{residual}.

Solving this 3 x 3 system gives unbiased estimators that cost a few
``bincount`` passes over the ratings (derivation in
``docs/variance-components.md``). On a complete design they equal the two-way
ANOVA (expected mean squares) estimators.

Policies
--------
* Labels must be numeric: interval/ratio values, ordinal ranks 0..q-1, or a
  binary nominal label coded 0/1 (category order). Other nominal labels raise.
* Items with a single rating are excluded (the core's within-pool policy) and
  reported in ``n_items_excluded``.
* **Negative estimates** (sampling noise when a component is small) are
  reported as ``*_raw`` and truncated at 0; shares (ICCs) use the truncated
  components. ``negative`` lists what was truncated.
* Intervals: the two-way ("pigeonhole", Owen 2007) bootstrap by default —
  items *and* raters are resampled independently (multiplicities ``W_i``,
  ``V_j``) and rating (i, j) gets weight ``W_i * V_j``; ``resample="items"``
  resamples items only. Each replicate is the weighted U-statistic over pairs
  of distinct *original* ratings (so copies never form zero-difference pairs),
  evaluated from sparse products of per-item / per-rater sums, never by
  re-reading the data. See ``docs/variance-components.md`` §3.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from labelgate.core.estimate import DEFAULT_N_BOOT, Estimate
from labelgate.core.ratings import FloatArray, IntArray, Ratings
from labelgate.errors import ParameterError, Reason, check_option
from labelgate.metrics._engine import check_bootstrap_args, level_of, percentile_interval, resample_counts

if TYPE_CHECKING:
    import scipy.sparse as sp
else:
    from labelgate.metrics._lazy import lazy

    sp = lazy("scipy.sparse")

Resample = Literal["items_and_raters", "items"]
RESAMPLE: tuple[Resample, ...] = ("items_and_raters", "items")
Scale = Literal["observed", "latent"]
SCALES: tuple[Scale, ...] = ("observed", "latent")
Arrays = dict[str, np.ndarray]

# float64 cells per bootstrap chunk (weights and weighted moments)
CHUNK_CELLS = 4_000_000


# ----------------------------------------------------------------------------- data views
def numeric_values(r: Ratings, function: str) -> FloatArray:
    """Numeric value of each rating for the model-based metrics.

    Interval/ratio: the values; ordinal: ranks 0..q-1; nominal with at most two
    categories: 0/1 in category order. Other nominal labels have no numeric
    scale and raise :class:`ParameterError`.
    """
    if not isinstance(r, Ratings):
        raise ParameterError(f"{function} takes a Ratings; got {type(r).__name__}.", parameter="r")
    if r.level == "nominal" and r.n_categories > 2:
        raise ParameterError(
            f"{function} needs numeric labels (interval/ratio), ordinal ranks or a binary label; got a nominal "
            f"label with {r.n_categories} categories. Build the Ratings with level='ordinal' or 'interval' if "
            "the categories are ordered.", parameter="level", value=r.level)
    return r.values


@dataclass
class Crossed:
    """One replication on an item axis: centred values and their per-item / per-rater sums.

    Rows of the item arrays align with ``axis`` (item codes of the Ratings).
    ``pairable`` marks axis items with two or more ratings: only they enter the
    variance components; all axis items enter cross-replication sums.
    """

    axis: IntArray
    pos: IntArray          # axis position of each kept rating
    rater: IntArray        # compact rater code of each kept rating
    y: FloatArray          # centred values of the kept ratings
    mean: float
    n_raters: int
    pairable: np.ndarray

    @property
    def n_axis(self) -> int:
        return int(self.axis.size)

    @cached_property
    def item_m(self) -> FloatArray:
        """(count, sum, sum of squares) per axis item, shape (n_axis, 3)."""
        return _moments(self.pos, self.y, self.n_axis)

    @cached_property
    def rater_m(self) -> FloatArray:
        """(count, sum, sum of squares) per rater over pairable items, shape (n_raters, 3)."""
        keep = self.pairable[self.pos]
        return _moments(self.rater[keep], self.y[keep], self.n_raters)

    @cached_property
    def by_item(self) -> sp.csr_matrix:
        """Stacked (3 n_axis, n_raters) matrix of 1, y, y^2: times rater weights gives item moments."""
        return _stacked(self.pos, self.rater, self.y, self.n_axis, self.n_raters)

    @cached_property
    def by_rater(self) -> sp.csr_matrix:
        """Stacked (3 n_raters, n_axis) matrix: times item weights gives rater moments."""
        return _stacked(self.rater, self.pos, self.y, self.n_raters, self.n_axis)


def crossed(r: Ratings, function: str, axis: IntArray | None = None) -> Crossed:
    """Build the :class:`Crossed` view of ``r`` on ``axis`` (default: every item)."""
    values = numeric_values(r, function)
    if axis is None:
        axis = np.flatnonzero(r.ratings_per_item > 0)
    position = np.full(r.n_items, -1, dtype=np.int64)
    position[axis] = np.arange(axis.size)
    pos = position[r.item_codes]
    rows = np.flatnonzero(pos >= 0)
    pos = pos[rows]
    rater, n_raters = _compact_codes(r.rater_codes[rows], r.n_raters)
    counts = np.bincount(pos, minlength=axis.size)
    pairable = counts >= 2
    y = values[rows]
    kept = pairable[pos]
    mean = float(y[kept].mean()) if kept.any() else (float(y.mean()) if y.size else 0.0)
    return Crossed(axis=axis, pos=pos, rater=rater, y=y - mean, mean=mean, n_raters=n_raters, pairable=pairable)


def _compact_codes(codes: IntArray, n: int) -> tuple[IntArray, int]:
    """Renumber the codes that occur as 0..k-1 (in code order) without sorting: O(N)."""
    used = np.bincount(codes, minlength=n) > 0
    if used.all():
        return codes.astype(np.int64, copy=False), n
    new = np.cumsum(used) - 1
    return new[codes].astype(np.int64), int(used.sum())


def _moments(codes: IntArray, y: FloatArray, n: int) -> FloatArray:
    out = np.empty((n, 3), dtype=np.float64)
    out[:, 0] = np.bincount(codes, minlength=n)
    out[:, 1] = np.bincount(codes, weights=y, minlength=n)
    out[:, 2] = np.bincount(codes, weights=y * y, minlength=n)
    return out


def _stacked(rows: IntArray, cols: IntArray, y: FloatArray, n_rows: int, n_cols: int) -> sp.csr_matrix:
    r3 = np.concatenate([rows, rows + n_rows, rows + 2 * n_rows])
    c3 = np.concatenate([cols, cols, cols])
    data = np.concatenate([np.ones_like(y), y, y * y])
    return sp.csr_matrix((data, (r3, c3)), shape=(3 * n_rows, n_cols))


# ------------------------------------------------------------------------ weighted sums
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


# ---------------------------------------------------------------------------- bootstrap
def check_resample(resample: str, function: str) -> None:
    check_option(resample, RESAMPLE, "resample", function)


def two_way_draws(n_boot: int, seed: Any, n_items: int, rater_sizes: list[int], resample: str,
                  ) -> Iterator[tuple[np.ndarray, list[np.ndarray | None]]]:
    """Chunks of item multiplicities (b, n_items) and, per rater axis, rater multiplicities.

    The draws are item-block multinomial counts (``resample_counts`` of the
    engine); with ``resample="items"`` the rater weights are None (each rater once).
    """
    rng = np.random.default_rng(seed)
    width = 3 * (n_items + sum(rater_sizes)) + n_items + sum(rater_sizes)
    chunk = max(1, min(n_boot, CHUNK_CELLS // max(width, 1)))
    for start in range(0, n_boot, chunk):
        size = min(chunk, n_boot - start)
        w = resample_counts(rng, n_items, size)
        vs: list[np.ndarray | None] = [
            resample_counts(rng, k, size) if resample == "items_and_raters" else None for k in rater_sizes]
        yield w, vs


def bootstrap_replicates(compute: Callable[[np.ndarray, list[np.ndarray | None]], Arrays], n_boot: int,
                         seed: Any, n_items: int, rater_sizes: list[int], resample: str) -> Arrays:
    """Concatenate ``compute(w, vs)`` over the chunks of :func:`two_way_draws`."""
    parts: dict[str, list[np.ndarray]] = {}
    for w, vs in two_way_draws(n_boot, seed, n_items, rater_sizes, resample):
        for key, value in compute(w, vs).items():
            parts.setdefault(key, []).append(np.asarray(value, dtype=np.float64))
    return {k: np.concatenate(v) for k, v in parts.items()}


def interval_of(replicates: np.ndarray, ci: float) -> tuple[tuple[float, float] | None, int]:
    """Percentile interval of the finite replicates and the number of undefined ones."""
    return percentile_interval(np.asarray(replicates, dtype=np.float64), float(ci))


# ------------------------------------------------------------------------ public result
_COMPONENTS = ("item", "rater", "residual")


@dataclass(frozen=True)
class VarianceComponents:
    r"""Moment estimates of the item, rater and residual variances of a crossed design.

    Attributes
    ----------
    item, rater, residual : float
        Variance components truncated at 0 (NaN when not identifiable).
    item_raw, rater_raw, residual_raw : float
        The untruncated moment estimates (unbiased; may be negative).
    negative : tuple of str
        Components whose raw estimate was negative and was set to 0.
    mean : float
        Grand mean of the ratings used.
    n_items, n_raters, n_ratings, n_items_excluded : int
        Items (with two or more ratings), raters and ratings used; items with a
        single rating are excluded.
    within_item_pairs, within_rater_pairs, all_pairs : int
        Ordered pairs of ratings behind each U-statistic
        (:math:`\sum N_i^2 - N`, :math:`\sum M_j^2 - N`, :math:`N^2 - N`).
    ci : dict or None
        Bootstrap intervals of the components and shares, keyed by name.
    """

    item: float
    rater: float
    residual: float
    item_raw: float
    rater_raw: float
    residual_raw: float
    mean: float
    n_items: int
    n_raters: int
    n_ratings: int
    n_items_excluded: int
    within_item_pairs: int
    within_rater_pairs: int
    all_pairs: int
    negative: tuple[str, ...] = ()
    rater_plus_residual: float = math.nan
    reason: str | None = None
    reason_code: Reason | None = None
    ci: dict[str, tuple[float, float] | None] | None = None
    ci_level: float | None = None
    n_boot: int = 0
    resample: str = "items_and_raters"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def total(self) -> float:
        """Sum of the truncated components (NaN when not identifiable)."""
        if math.isnan(self.rater) and not math.isnan(self.rater_plus_residual):
            return self.item + max(self.rater_plus_residual, 0.0)
        return self.item + self.rater + self.residual

    def share(self, component: str) -> float:
        """``component / total`` (the item ICC, labeler ICC or residual share)."""
        check_option(component, _COMPONENTS, "component", "VarianceComponents.share")
        total = self.total
        return getattr(self, component) / total if total > 0 else math.nan

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dictionary: ``item``, ``rater``, ``residual``, shares, raw values and counts."""
        out: dict[str, Any] = {
            "item": self.item, "rater": self.rater, "residual": self.residual, "total": self.total,
            "item_share": self.share("item"), "rater_share": self.share("rater"),
            "residual_share": self.share("residual"),
            "item_raw": self.item_raw, "rater_raw": self.rater_raw, "residual_raw": self.residual_raw,
            "rater_plus_residual": self.rater_plus_residual, "negative": list(self.negative),
            "mean": self.mean, "n_items": self.n_items, "n_raters": self.n_raters,
            "n_ratings": self.n_ratings, "n_items_excluded": self.n_items_excluded,
            "within_item_pairs": self.within_item_pairs, "within_rater_pairs": self.within_rater_pairs,
            "all_pairs": self.all_pairs, "reason": self.reason,
            "reason_code": self.reason_code.value if self.reason_code else None,
            "ci_level": self.ci_level, "n_boot": self.n_boot, "resample": self.resample if self.ci else None,
        }
        for key, bounds in (self.ci or {}).items():
            out[f"{key}_ci_low"], out[f"{key}_ci_high"] = bounds if bounds else (None, None)
        out.update(self.extra)
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}


def _reason(point: Arrays, sums: Arrays, want: str) -> tuple[Reason, str] | None:
    """Why the share ``want`` (item_share / rater_share / total) is NaN, or None."""
    if float(sums["a"][0]) <= 0:
        return Reason.NO_PAIRABLE_ITEMS, "no item has two or more ratings"
    if want == "rater_share" and not np.isfinite(point["rater"][0]):
        return (Reason.NO_PAIRABLE_ITEMS, "no rater rated two or more items, so the rater variance is "
                "confounded with the residual variance")
    total = float(point["total"][0])
    if np.isfinite(total) and total <= 0:
        return (Reason.NO_EXPECTED_DISAGREEMENT,
                "the total variance is 0 (all ratings equal): expected disagreement is 0")
    if want.endswith("_share") or not np.isfinite(total):
        return Reason.NO_VARIANCE, "the variance components are not identifiable on this design"
    return None


def _point(c: Crossed) -> tuple[Arrays, Arrays]:
    w = np.ones((1, c.n_axis))
    sums = component_sums(c, w, None)
    return sums, solve_components(sums)


def variance_components(r: Ratings, *, ci: float | None = None, n_boot: int = DEFAULT_N_BOOT, seed: Any = None,
                        resample: Resample = "items_and_raters") -> VarianceComponents:
    r"""Item, rater and residual variances of a crossed design by moments (Gao & Owen 2017).

    Costs O(N): three U-statistics from per-item and per-rater (count, sum,
    sum of squares), no raters x items matrix. See the module docstring for
    the model and the moment equations.

    Parameters
    ----------
    r : Ratings
        Interval/ratio values, ordinal ranks, or a binary nominal label (0/1).
    ci : float, optional
        Level of bootstrap intervals for each component and share (e.g. 0.95).
    n_boot : int, default 2000
        Bootstrap replicates.
    seed : int or numpy Generator, optional
        Seed of the bootstrap.
    resample : {"items_and_raters", "items"}, default "items_and_raters"
        Two-way (pigeonhole) bootstrap of items and raters, or items only.

    Returns
    -------
    VarianceComponents
        ``to_dict()`` has ``item``, ``rater``, ``residual`` (truncated at 0),
        their raw values, shares and the design counts.

    Examples
    --------
    On a complete design the estimates are the two-way ANOVA ones:

    >>> import labelgate as lg
    >>> r = lg.Ratings.from_wide([[1, 2, 3], [3, 3, 4], [5, 6, 6], [2, 2, 4]], level="interval")
    >>> from labelgate.metrics.variance import variance_components, item_icc, labeler_icc
    >>> vc = variance_components(r)
    >>> round(vc.item, 4), round(vc.rater, 4), round(vc.residual, 4)
    (2.4722, 0.5278, 0.2222)
    >>> round(vc.share("item"), 4)
    0.7672
    """
    check_bootstrap_args(ci, n_boot, seed, "variance_components")
    check_resample(resample, "variance_components")
    c = crossed(r, "variance_components")
    sums, point = _point(c)
    why = _reason(point, sums, "total")
    intervals = None
    if ci is not None and why is None:
        reps = bootstrap_replicates(lambda w, vs: solve_components(component_sums(c, w, vs[0])), n_boot, seed,
                                    c.n_axis, [c.n_raters], resample)
        intervals = {k: interval_of(reps[k], ci)[0] for k in ("item", "rater", "residual", "item_share",
                                                                "rater_share")}
    n = float(sums["N"][0])
    return VarianceComponents(
        item=float(point["item"][0]), rater=float(point["rater"][0]), residual=float(point["residual"][0]),
        item_raw=float(point["item_raw"][0]), rater_raw=float(point["rater_raw"][0]),
        residual_raw=float(point["residual_raw"][0]), mean=c.mean, n_items=int(c.pairable.sum()),
        n_raters=int((c.rater_m[:, 0] > 0).sum()), n_ratings=int(n),
        n_items_excluded=int((~c.pairable).sum()),
        within_item_pairs=int(sums["a"][0]), within_rater_pairs=int(sums["b"][0]),
        all_pairs=int(sums["c3"][0]),
        negative=tuple(k for k in _COMPONENTS if float(point[f"{k}_raw"][0]) < 0),
        rater_plus_residual=float(point["rater_plus_residual"][0]),
        reason=why[1] if why else None, reason_code=why[0] if why else None,
        ci=intervals, ci_level=level_of(ci, intervals), n_boot=n_boot if intervals else 0,
        resample=resample)


# ------------------------------------------------------------------------ item / labeler ICC
def _share_estimate(metric: str, r: Ratings, want: str, ci: float | None, n_boot: int, seed: Any,
                    resample: str) -> Estimate:
    c = crossed(r, metric)
    sums, point = _point(c)
    value = float(point[want][0])
    details: dict[str, Any] = {
        "scale": "observed", "item_variance": float(point["item"][0]),
        "rater_variance": float(point["rater"][0]), "residual_variance": float(point["residual"][0]),
        "total_variance": float(point["total"][0]), "item_icc": float(point["item_share"][0]),
        "labeler_icc": float(point["rater_share"][0]),
        "negative": [k for k in _COMPONENTS if float(point[f"{k}_raw"][0]) < 0],
        "n_raters": int((c.rater_m[:, 0] > 0).sum()),
    }
    why = None if np.isfinite(value) else _reason(point, sums, want)
    interval, n_failed = None, 0
    if ci is not None and why is None:
        reps = bootstrap_replicates(lambda w, vs: solve_components(component_sums(c, w, vs[0])), n_boot, seed,
                                    c.n_axis, [c.n_raters], resample)
        interval, n_failed = interval_of(reps[want], ci)
        other = "rater_share" if want == "item_share" else "item_share"
        part, _ = interval_of(reps[other], ci)
        name = "labeler_icc" if other == "rater_share" else "item_icc"
        details[f"{name}_ci_low"], details[f"{name}_ci_high"] = part if part else (np.nan, np.nan)
        diff, _ = interval_of(reps["item_share"] - reps["rater_share"], ci)
        details["icc_minus_labeler_icc_ci_low"], details["icc_minus_labeler_icc_ci_high"] = (
            diff if diff else (np.nan, np.nan))
        details["n_boot_undefined"] = n_failed
        details["resample"] = resample
    return Estimate(metric=metric, value=value if why is None else math.nan, ci=interval,
                    ci_level=level_of(ci, interval), n_items=int(c.pairable.sum()),
                    n_ratings=int(sums["N"][0]), n_items_excluded=int((~c.pairable).sum()),
                    reason=why[1] if why else None, reason_code=why[0] if why else None, details=details,
                    n_boot=n_boot if interval else 0)


def _check_scale(scale: str, function: str) -> None:
    check_option(scale, SCALES, "scale", function)


def item_icc(r: Ratings, *, scale: Scale = "observed", ci: float | None = None, n_boot: int = DEFAULT_N_BOOT,
             seed: Any = None, resample: Resample = "items_and_raters") -> Estimate:
    r"""Item ICC: the share of the item ("true score") variance in the total.

    .. math::

        ICC = \frac{\sigma^2_{item}}{\sigma^2_{item} + \sigma^2_{rater} + \sigma^2_{residual}}

    (the blog's ICC, a variance partition coefficient; Girard's agreement ICC
    for a single rating). Works on sparse crossed designs.

    Parameters
    ----------
    r : Ratings
        Numeric, ordinal or binary labels (see :func:`variance_components`).
    scale : {"observed", "latent"}, default "observed"
        ``"observed"``: moment estimates of the linear model on the label
        values (for 0/1 labels: the observed, probability scale).
        ``"latent"``: binary labels only — the logistic crossed random-effects
        model fitted by Laplace approximation, with residual variance
        :math:`\pi^2/3` (metric name ``item_icc_latent``).
    ci, n_boot, seed
        Interval level, replicates and seed. Observed scale: percentile
        bootstrap; latent scale: Wald interval of the standard deviations
        propagated by ``n_boot`` normal draws.
    resample : {"items_and_raters", "items"}, default "items_and_raters"
        Bootstrap scheme on the observed scale (two-way or items only).

    Returns
    -------
    Estimate
        ``details`` carries the three variances, ``item_icc`` and
        ``labeler_icc`` (so a gate can compare them), and with ``ci`` the
        interval of ``icc_minus_labeler_icc``.

    Examples
    --------
    >>> import labelgate as lg
    >>> r = lg.Ratings.from_wide([[1, 2, 3], [3, 3, 4], [5, 6, 6], [2, 2, 4]], level="interval")
    >>> from labelgate.metrics.variance import item_icc, labeler_icc
    >>> round(float(item_icc(r)), 4), round(float(labeler_icc(r)), 4)
    (0.7672, 0.1638)
    """
    check_bootstrap_args(ci, n_boot, seed, "item_icc")
    check_resample(resample, "item_icc")
    _check_scale(scale, "item_icc")
    if scale == "latent":
        from labelgate.metrics._logit import latent_share_estimate
        return latent_share_estimate("item_icc_latent", r, "item", ci=ci, n_boot=n_boot, seed=seed)
    return _share_estimate("item_icc", r, "item_share", ci, n_boot, seed, resample)


def labeler_icc(r: Ratings, *, scale: Scale = "observed", ci: float | None = None, n_boot: int = DEFAULT_N_BOOT,
                seed: Any = None, resample: Resample = "items_and_raters") -> Estimate:
    r"""Labeler ICC: the share of the rater (labeler bias) variance in the total.

    .. math::

        ICC_l = \frac{\sigma^2_{rater}}{\sigma^2_{item} + \sigma^2_{rater} + \sigma^2_{residual}}

    The blog's "Labeler ICC": data are suspect when it exceeds the item ICC
    (the gate "labeler ICC < ICC"). Parameters as :func:`item_icc`; the latent
    variant is named ``labeler_icc_latent``.

    Examples
    --------
    >>> import labelgate as lg
    >>> r = lg.Ratings.from_wide([[1, 2, 3], [3, 3, 4], [5, 6, 6], [2, 2, 4]], level="interval")
    >>> from labelgate.metrics.variance import labeler_icc
    >>> est = labeler_icc(r)
    >>> est.details["labeler_icc"] < est.details["item_icc"]
    True
    """
    check_bootstrap_args(ci, n_boot, seed, "labeler_icc")
    check_resample(resample, "labeler_icc")
    _check_scale(scale, "labeler_icc")
    if scale == "latent":
        from labelgate.metrics._logit import latent_share_estimate
        return latent_share_estimate("labeler_icc_latent", r, "rater", ci=ci, n_boot=n_boot, seed=seed)
    return _share_estimate("labeler_icc", r, "rater_share", ci, n_boot, seed, resample)
