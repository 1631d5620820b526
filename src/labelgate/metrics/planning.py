r"""Design planning: Spearman–Brown prediction, raters needed, items needed for a target interval width.

Spearman–Brown (the blog's "Spearman-Brown prediction formula"): the
reliability of the mean of :math:`k` ratings, each of reliability
:math:`\rho`, is

.. math::

    \rho_k = \frac{k\rho}{1 + (k - 1)\rho}, \qquad\text{inverse:}\qquad
    k = \frac{\rho_k (1 - \rho)}{\rho (1 - \rho_k)}.

:func:`plan_items` answers "how many items must a trusted replication share
with a batch so that the normalized :math:`\kappa_x` interval is narrower
than a target width?" from pilot data (bootstrap width) or from design
parameters (simulation of the bivariate crossed model), in both cases by
scaling the width at a pilot size as :math:`1/\sqrt{n}`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, overload

import numpy as np

from labelgate.core.estimate import Estimate
from labelgate.core.ratings import Ratings
from labelgate.errors import ParameterError, Reason
from labelgate.metrics.cross import normalized_cross_kappa


# ------------------------------------------------------------------------------ Spearman–Brown
def _check_positive(value: Any, parameter: str, function: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not math.isfinite(float(value)) or float(value) <= 0:
        raise ParameterError(f"The {parameter!r} parameter of {function} must be a finite number > 0; got "
                             f"{value!r}.", parameter=parameter, value=value)
    return float(value)


def _check_unit(value: Any, parameter: str, function: str, low: float, open_low: bool) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    bad = ~np.isfinite(arr) | (arr > 1) | ((arr <= low) if open_low else (arr < low))
    if open_low:
        bad |= arr >= 1
    if np.any(bad):
        bounds = f"in ({low:g}, 1)" if open_low else f"in [{low:g}, 1]"
        raise ParameterError(f"The {parameter!r} parameter of {function} must be {bounds}; got {value!r}.",
                             parameter=parameter, value=float(arr.flat[int(np.argmax(bad))]))
    return arr


def _sb(rho: np.ndarray, k: float) -> np.ndarray:
    den = 1.0 + (k - 1.0) * rho
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, k * rho / np.where(den > 0, den, 1.0), np.nan)


@overload
def spearman_brown(reliability: Estimate, k: float) -> Estimate: ...
@overload
def spearman_brown(reliability: float, k: float) -> float: ...
@overload
def spearman_brown(reliability: np.ndarray, k: float) -> np.ndarray: ...
def spearman_brown(reliability: Any, k: float) -> Any:
    r"""Reliability of the mean of ``k`` ratings: :math:`k\rho / (1 + (k-1)\rho)`.

    Parameters
    ----------
    reliability : float, array or Estimate
        Single-rating reliability :math:`\rho \in [-1, 1]` (e.g. an item ICC).
        An :class:`Estimate` is transformed with its interval (the map is
        increasing).
    k : float > 0
        Number of ratings averaged, or the factor by which it changes (the
        blog: going from 2 to 4 raters per item is ``k = 2``). Non-integer
        values are allowed.

    Returns
    -------
    float, ndarray or Estimate
        NaN where :math:`1 + (k-1)\rho \le 0`.

    Examples
    --------
    >>> from labelgate.metrics.planning import spearman_brown, raters_needed
    >>> round(spearman_brown(0.4, 5), 4)
    0.7692
    >>> round(raters_needed(0.4, spearman_brown(0.4, 5)), 10)
    5.0
    """
    k = _check_positive(k, "k", "spearman_brown")
    if isinstance(reliability, Estimate):
        return _map_estimate(reliability, lambda v: float(_sb(_check_unit(v, "reliability", "spearman_brown",
                                                                          -1.0, False), k)),
                             f"spearman_brown({reliability.metric})", {"k": k}, increasing=True)
    rho = _check_unit(reliability, "reliability", "spearman_brown", -1.0, False)
    out = _sb(rho, k)
    return float(out) if out.ndim == 0 else out


@overload
def raters_needed(reliability: Estimate, target: float) -> Estimate: ...
@overload
def raters_needed(reliability: float, target: float) -> float: ...
@overload
def raters_needed(reliability: np.ndarray, target: float) -> np.ndarray: ...
def raters_needed(reliability: Any, target: Any) -> Any:
    r"""Ratings per item needed for the item mean to reach ``target`` reliability (inverse Spearman–Brown).

    .. math::

        k = \frac{t (1 - \rho)}{\rho (1 - t)}

    Parameters
    ----------
    reliability : float, array or Estimate
        Single-rating reliability :math:`\rho \in (0, 1)`. An Estimate is
        mapped with its interval (the map is decreasing in :math:`\rho`).
    target : float or array
        Target reliability :math:`t \in (0, 1)`.

    Returns
    -------
    float, ndarray or Estimate
        The (fractional) number of ratings; round up with ``math.ceil`` to plan.
        ``spearman_brown(rho, raters_needed(rho, t)) == t``.

    Examples
    --------
    >>> from labelgate.metrics.planning import raters_needed
    >>> round(raters_needed(0.5, 0.8), 10)
    4.0
    """
    t = _check_unit(target, "target", "raters_needed", 0.0, True)

    def k_of(rho_value: Any) -> Any:
        rho = _check_unit(rho_value, "reliability", "raters_needed", 0.0, True)
        out = t * (1.0 - rho) / (rho * (1.0 - t))
        return float(out) if np.ndim(out) == 0 else out

    if isinstance(reliability, Estimate):
        return _map_estimate(reliability, k_of, f"raters_needed({reliability.metric})",
                             {"target": float(t) if t.ndim == 0 else t.tolist()}, increasing=False)
    return k_of(reliability)


def _map_estimate(est: Estimate, fn: Any, metric: str, extra: dict[str, Any], increasing: bool) -> Estimate:
    if est.is_nan:
        return replace(est, metric=metric)
    value = float(fn(est.value))
    ci = None
    if est.ci is not None:
        low, high = (_map_bound(b, fn) for b in est.ci)
        ci = (low, high) if increasing else (high, low)
    details = {**est.details, "input_value": est.value, **extra}
    return replace(est, metric=metric, value=value, ci=ci, details=details)


def _map_bound(bound: float, fn: Any) -> float:
    """Map an interval bound; a bound outside the domain gives NaN."""
    try:
        return float(fn(bound))
    except ParameterError:
        return math.nan


# ---------------------------------------------------------------------------------- plan_items
@dataclass(frozen=True)
class ItemPlan:
    """How many common items a trusted replication needs for a target interval width.

    Attributes
    ----------
    n_items : int
        Items to share so that the normalized kappa_x interval width is about
        ``width`` (0 when the plan failed; see ``reason``).
    width, ci_level : float
        Target width and interval level.
    pilot_items : int
        Items behind the pilot width.
    pilot_width : float
        Interval width observed (bootstrap) or simulated at ``pilot_items``.
    method : {"bootstrap", "simulation"}
        Pilot data or design parameters.
    pilot_value : float
        Normalized kappa_x on the pilot (bootstrap) or its mean over the
        simulations.
    reason : str or None
        Why no plan could be made.
    """

    n_items: int
    width: float
    ci_level: float
    pilot_items: int
    pilot_width: float
    method: str
    pilot_value: float
    reason: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(out.pop("details"))
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in out.items()}


_MAX_REFINE_ITEMS = 20_000


def items_for_width(pilot_items: int, pilot_width: float, width: float) -> int:
    r"""Items for an interval of ``width`` when ``pilot_items`` items gave ``pilot_width``: widths shrink as
    :math:`1/\sqrt{n}`, so :math:`n = \lceil n_0 (w_0 / w)^2 \rceil` (at least 2).

    Any stretch of an interval scales alike: with ``pilot_width`` the distance from a point to its interval's end
    and ``width`` the distance from the point to a threshold, ``n`` is the number of items for that end of the
    interval to reach the threshold, if the point stays where it is (the gate's next steps use it so).

    The ratio is rounded up after a relative 1e-12 is taken off, so that a ratio that is a whole number in exact
    arithmetic (``(0.16 / 0.1) ** 2 * 100 = 256``) is not raised by its floating-point error.

    Examples
    --------
    >>> from labelgate.metrics.planning import items_for_width
    >>> items_for_width(100, 0.2, 0.1), items_for_width(100, 0.3 - 0.14, 0.3 - 0.2)
    (400, 256)
    """
    return max(2, math.ceil(pilot_items * (pilot_width / width) ** 2 * (1 - 1e-12)))


def plan_items(width: float, x: Ratings | None = None, y: Ratings | None = None, *, ci: float = 0.95,
               irr: str = "krippendorff_alpha", n_boot: int = 1000, seed: Any = None,
               icc_x: float | None = None, icc_y: float | None = None, rho: float = 1.0,
               labeler_icc_x: float = 0.0, labeler_icc_y: float = 0.0, raters_x: int = 3, raters_y: int = 3,
               pool_x: int = 20, pool_y: int = 20, pilot_items: int = 200, n_sim: int = 200,
               refine: bool = True) -> ItemPlan:
    r"""Items a trusted replication must share with a batch for a normalized :math:`\kappa_x` interval of ``width``.

    The width of an item-bootstrap (or sampling) interval shrinks as
    :math:`1/\sqrt{n}` in the number :math:`n` of common items, so

    .. math::

        n = \left\lceil n_0 \,(w_0 / w)^2 \right\rceil

    from a width :math:`w_0` at a pilot size :math:`n_0`. Two ways to get
    :math:`w_0`:

    * **pilot data** (``x`` and ``y`` given): the bootstrap interval of
      :func:`~labelgate.normalized_cross_kappa` on their common items;
    * **design parameters** (``icc_x`` and ``icc_y`` given): ``n_sim``
      simulations of the bivariate crossed Gaussian model with ``pilot_items``
      items — item ICCs ``icc_x``, ``icc_y``, labeler ICCs, correlation
      ``rho`` of the item effects, ``raters_x`` / ``raters_y`` ratings per
      item drawn from pools of ``pool_x`` / ``pool_y`` raters (total variance
      1 per replication) — and :math:`w_0` the central ``ci`` range of the
      simulated normalized :math:`\kappa_x` (interval distance). With
      ``refine`` (default) the simulation is repeated at the planned size and
      the plan rescaled once more (the :math:`1/\sqrt{n}` law is asymptotic).

    Parameters
    ----------
    width : float > 0
        Target width of the normalized kappa_x interval.
    x, y : Ratings, optional
        Pilot replications (batch, trusted).
    ci : float, default 0.95
        Interval level.
    irr : str, default "krippendorff_alpha"
        IRR of the normalisation (pilot mode).
    n_boot, seed
        Bootstrap replicates (pilot mode) and seed (both modes).
    icc_x, icc_y, rho, labeler_icc_x, labeler_icc_y, raters_x, raters_y, pool_x, pool_y, pilot_items, n_sim
        Design parameters (simulation mode).
    refine : bool, default True
        Second simulation stage at the first-stage plan (simulation mode;
        skipped above 20,000 items).

    Returns
    -------
    ItemPlan

    Examples
    --------
    >>> from labelgate.metrics.planning import plan_items
    >>> plan = plan_items(0.2, icc_x=0.5, icc_y=0.6, rho=0.9, pilot_items=100, n_sim=100, seed=0)
    >>> plan.method, plan.n_items > 100
    ('simulation', True)
    """
    width = _check_positive(width, "width", "plan_items")
    if not (isinstance(ci, (int, float)) and 0 < float(ci) < 1):
        raise ParameterError(f"The 'ci' parameter of plan_items must be a level in (0, 1); got {ci!r}.",
                             parameter="ci", value=ci)
    if x is not None or y is not None:
        if x is None or y is None:
            raise ParameterError("plan_items needs both pilot replications x and y (or neither, with icc_x and "
                                 "icc_y).", parameter="y")
        return _plan_from_pilot(width, x, y, float(ci), irr, n_boot, seed)
    if icc_x is None or icc_y is None:
        raise ParameterError("plan_items needs pilot data (x, y) or design parameters (icc_x, icc_y).",
                             parameter="icc_x")
    return _plan_from_design(width, float(ci), seed, _Design(icc_x, icc_y, rho, labeler_icc_x, labeler_icc_y,
                                                             raters_x, raters_y, pool_x, pool_y),
                             pilot_items, n_sim, refine)


def _plan_from_pilot(width: float, x: Ratings, y: Ratings, ci: float, irr: str, n_boot: int, seed: Any,
                     ) -> ItemPlan:
    est = normalized_cross_kappa(x, y, irr=irr, ci=ci, n_boot=n_boot, seed=seed)
    if est.ci is None:
        why = est.reason or "the bootstrap interval is undefined"
        return ItemPlan(0, width, ci, est.n_items, math.nan, "bootstrap", est.value, reason=why,
                        details={"irr": irr, "reason_code": (est.reason_code or Reason.NO_VARIANCE).value})
    pilot_width = est.ci[1] - est.ci[0]
    return ItemPlan(items_for_width(est.n_items, pilot_width, width), width, ci, est.n_items, pilot_width,
                    "bootstrap", est.value, details={"irr": irr, "n_boot": n_boot})


@dataclass(frozen=True)
class _Design:
    icc_x: float
    icc_y: float
    rho: float
    labeler_icc_x: float
    labeler_icc_y: float
    raters_x: int
    raters_y: int
    pool_x: int
    pool_y: int

    def check(self) -> None:
        for name in ("icc_x", "icc_y", "labeler_icc_x", "labeler_icc_y"):
            _check_unit(getattr(self, name), name, "plan_items", 0.0, False)
        _check_unit(self.rho, "rho", "plan_items", -1.0, False)
        for side in ("x", "y"):
            if getattr(self, f"icc_{side}") + getattr(self, f"labeler_icc_{side}") > 1:
                raise ParameterError(f"plan_items: icc_{side} + labeler_icc_{side} must be <= 1 (shares of a "
                                     "total variance of 1).", parameter=f"icc_{side}")
            raters, pool = getattr(self, f"raters_{side}"), getattr(self, f"pool_{side}")
            if not isinstance(raters, (int, np.integer)) or raters < 2 or not isinstance(pool, (int, np.integer)) \
                    or pool < raters:
                raise ParameterError(f"plan_items: raters_{side} must be an integer >= 2 and pool_{side} an "
                                     f"integer >= raters_{side}; got {raters!r} and {pool!r}.",
                                     parameter=f"raters_{side}")


def simulate_pair(design: _Design, n_items: int, rng: np.random.Generator) -> tuple[Ratings, Ratings]:
    """One draw of the bivariate crossed Gaussian model (item effects correlated ``rho``)."""
    sx, sy = math.sqrt(design.icc_x), math.sqrt(design.icc_y)
    cov = np.array([[sx * sx, design.rho * sx * sy], [design.rho * sx * sy, sy * sy]])
    effects = rng.multivariate_normal(np.zeros(2), cov, size=n_items, method="eigh")
    out = []
    for s, (k, pool, share, labeler) in enumerate(((design.raters_x, design.pool_x, design.icc_x,
                                                    design.labeler_icc_x),
                                                   (design.raters_y, design.pool_y, design.icc_y,
                                                    design.labeler_icc_y))):
        bias = rng.normal(0.0, math.sqrt(labeler), pool)
        raters = np.argsort(rng.random((n_items, pool)), axis=1)[:, :k].ravel()
        items = np.repeat(np.arange(n_items), k)
        noise = rng.normal(0.0, math.sqrt(max(1.0 - share - labeler, 0.0)), items.size)
        value = effects[items, s] + bias[raters] + noise
        out.append(Ratings.from_long({"item_id": items, "rater_id": raters, "label": value}, level="interval"))
    return out[0], out[1]


def _plan_from_design(width: float, ci: float, seed: Any, design: _Design, pilot_items: int, n_sim: int,
                      refine: bool) -> ItemPlan:
    design.check()
    if not isinstance(pilot_items, (int, np.integer)) or pilot_items < 10:
        raise ParameterError(f"The 'pilot_items' parameter of plan_items must be an integer >= 10; got "
                             f"{pilot_items!r}.", parameter="pilot_items", value=pilot_items)
    if not isinstance(n_sim, (int, np.integer)) or n_sim < 20:
        raise ParameterError(f"The 'n_sim' parameter of plan_items must be an integer >= 20; got {n_sim!r}.",
                             parameter="n_sim", value=n_sim)
    rng = np.random.default_rng(seed)
    details: dict[str, Any] = {**asdict(design), "n_sim": n_sim}
    stage = _simulated_width(design, pilot_items, n_sim, ci, rng)
    if stage is None:
        return ItemPlan(0, width, ci, pilot_items, math.nan, "simulation", math.nan,
                        reason="normalized kappa_x is undefined in most simulations (IRR product <= 0)",
                        details=details)
    pilot_width, pilot_value = stage
    n_items = items_for_width(pilot_items, pilot_width, width)
    details["first_stage_items"] = n_items
    if refine and n_items != pilot_items and n_items <= _MAX_REFINE_ITEMS:
        # second stage: the 1/sqrt(n) law is only asymptotic, so measure again at the planned size
        second = _simulated_width(design, n_items, n_sim, ci, rng)
        if second is not None:
            details["first_stage_width"] = pilot_width
            pilot_items, (pilot_width, pilot_value) = n_items, second
            n_items = items_for_width(pilot_items, pilot_width, width)
    return ItemPlan(n_items, width, ci, pilot_items, pilot_width, "simulation", pilot_value, details=details)


def _simulated_width(design: _Design, n_items: int, n_sim: int, ci: float, rng: np.random.Generator,
                     ) -> tuple[float, float] | None:
    """Central ``ci`` range and mean of normalized kappa_x over ``n_sim`` simulated pairs (None if undefined)."""
    values = np.array([float(normalized_cross_kappa(*simulate_pair(design, n_items, rng))) for _ in range(n_sim)])
    finite = values[np.isfinite(values)]
    if finite.size < n_sim // 2:
        return None
    alpha = (1.0 - ci) / 2.0
    low, high = np.quantile(finite, [alpha, 1.0 - alpha])
    return float(high - low), float(finite.mean())
