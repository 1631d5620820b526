"""The result type of every metric."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from labelgate.errors import Reason

#: Bootstrap resamples when none are asked for: the one default of every metric, the config and the expectations.
DEFAULT_N_BOOT = 2000

#: Interval methods of the item-statistic metrics, as recorded in ``Estimate.ci_method``: ``"bca"`` (item
#: bootstrap, bias-corrected and accelerated; Efron 1987), ``"delta"`` (normal interval with the linearised,
#: infinitesimal-jackknife standard error; no resampling) and ``"percentile"`` (item bootstrap).
INTERVAL_METHODS: tuple[str, ...] = ("bca", "delta", "percentile")
#: Values of the ``ci_method`` option: a method, or ``"auto"``, the method the coverage study chose for the metric
#: (:func:`resolve_ci_method`).
CI_METHOD_OPTIONS: tuple[str, ...] = ("auto", *INTERVAL_METHODS)
#: The ``ci_method`` of every item-statistic metric, the config and the expectations when none is asked for.
DEFAULT_CI_METHOD = "auto"
#: What ``"auto"`` means, per metric (every other metric: ``"bca"``). Chosen by the coverage study
#: (``benchmarks/coverage.py``; ``docs/benchmarks.md``, "Interval coverage"): on 50 common items normalized
#: kappa_x's bootstrap distribution has heavier tails than its sampling distribution, and the BCa and percentile
#: intervals under-cover there, while the delta-method interval is in 93-97 % at 50, 100 and 300 items.
AUTO_CI_METHODS: dict[str, str] = {"normalized_cross_kappa": "delta"}
#: Values of ``Estimate.se_method``: a published variance formula (``"analytic"``), the delta method (``"delta"``: the
#: linearised standard error of the item statistics; for the two-way ICC forms and Phi, of the model's own variance
#: of its mean squares or log precision, named in ``details["se_source"]``) or the standard deviation of the
#: item-bootstrap replicates (``"bootstrap"``).
SE_METHODS: tuple[str, ...] = ("analytic", "delta", "bootstrap")

#: What a deferred standard error computes: ``(se, se_method, z, p_value, details)``, ``details`` the entries it
#: adds to ``Estimate.details`` (``se_source``, ``se_null``, ``test_source``, ``se_note``).
StandardError = tuple[float, str | None, float, float, dict[str, Any]]


class DeferredSE:
    """A standard error computed when it is first read, not when the estimate is made.

    Pass one as ``Estimate(..., se=DeferredSE(compute))``: ``se``, ``se_method``, ``z``, ``p_value`` and the
    entries ``compute`` adds to ``details`` are then computed by ``compute()`` on the first read of any of them
    (or of ``details``, by equality, ``to_dict()``, pickling and copying) and kept; the values given for
    ``se_method``, ``z`` and ``p_value`` are ignored. A point estimate so does not pay for the per-item statistics
    its standard error reads when the caller never asks for it. Until then the estimate holds ``compute`` and
    what it reads (the ratings).

    ``adds_details=False`` declares that ``compute`` adds nothing to ``details`` (it must return ``{}``): reading
    ``details`` then leaves the standard error uncomputed. The bootstrap standard errors say so, since
    ``n_boot`` replicates cost far more than the point estimate whose components a caller reads.

    >>> est = Estimate("m", 0.5, se=DeferredSE(lambda: (0.1, "delta", math.nan, math.nan, {"se_note": "x"})))
    >>> est.se, est.se_method, est.details
    (0.1, 'delta', {'se_note': 'x'})
    >>> est = Estimate("m", 0.5, details={"k": 1},
    ...                se=DeferredSE(lambda: (0.2, "bootstrap", math.nan, math.nan, {}), adds_details=False))
    >>> est.details, "_se_pending" in est.__dict__, est.se
    ({'k': 1}, True, 0.2)
    """

    __slots__ = ("adds_details", "compute", "lock")

    def __init__(self, compute: Callable[[], StandardError], *, adds_details: bool = True) -> None:
        self.compute = compute
        self.adds_details = adds_details
        self.lock = threading.Lock()


_PENDING = "_se_pending"


def resolve_ci_method(ci_method: str, metric: str) -> str:
    """The interval method ``ci_method`` stands for on ``metric``: itself, or for ``"auto"`` the metric's choice.

    >>> resolve_ci_method("auto", "normalized_cross_kappa"), resolve_ci_method("auto", "fleiss_kappa")
    ('delta', 'bca')
    >>> resolve_ci_method("percentile", "normalized_cross_kappa")
    'percentile'
    """
    return AUTO_CI_METHODS.get(metric, "bca") if ci_method == "auto" else ci_method


@dataclass(frozen=True)
class Estimate:
    """A point value with an optional bootstrap interval and provenance.

    Attributes
    ----------
    metric : str
        Name of the metric that produced the value, e.g. ``"krippendorff_alpha"``.
    value : float
        Point estimate; NaN when the metric is undefined on the data, in which
        case ``reason`` says why.
    ci : tuple of float or None
        ``(low, high)`` item-bootstrap interval (its method in ``ci_method``), or None.
    ci_level : float or None
        Confidence level of ``ci`` (e.g. 0.95).
    n_items : int
        Items that entered the computation (pairable / common items).
    n_ratings : int
        Ratings on those items.
    n_items_excluded : int
        Items present in the data but excluded (e.g. a single rating).
    reason : str or None
        Human-readable reason for a NaN value.
    reason_code : Reason or None
        Machine-readable reason code for a NaN value.
    details : dict
        Metric-specific components (e.g. ``d_o``, ``d_e``, the two IRRs).
    n_boot : int
        Bootstrap resamples behind ``ci`` (0 without a bootstrap interval, e.g. a ``"delta"`` one).
    ci_method : str or None
        The method that made ``ci``: ``"bca"``, ``"delta"`` or ``"percentile"``
        for the agreement metrics (never ``"auto"``: the method it stood for;
        ``details["ci_method_note"]`` says why a request fell back to another
        method). None when there is no interval, and for metrics whose own
        intervals do not record it yet.
    se : float
        Standard error of ``value``; NaN when none is available (``se_method`` None). The metrics compute it,
        with ``se_method``, ``z``, ``p_value`` and their ``details``, when it is first read
        (:class:`DeferredSE`), unless an interval was asked for.
    se_method : str or None
        How ``se`` was computed (:data:`SE_METHODS`): ``"analytic"`` (a published variance formula, named in
        ``details["se_source"]``), ``"delta"`` (the linearised, infinitesimal-jackknife standard error of the
        item statistics; for the two-way ICC forms and Phi the delta method over the model's variance of its mean
        squares or log precision, named in ``details["se_source"]``) or ``"bootstrap"`` (the standard deviation of
        the item-bootstrap replicates).
    z : float
        ``value / se0`` for the test of no agreement beyond chance, with ``se0`` the standard error under that
        hypothesis, where the literature defines one (Cohen's kappa, Fleiss' kappa); NaN elsewhere.
    p_value : float
        Two-sided normal p-value of ``z``; NaN when ``z`` is.

    Examples
    --------
    >>> est = Estimate("percent_agreement", 0.7, ci=(0.5, 0.9), ci_level=0.95, n_items=10, n_ratings=20)
    >>> float(est)
    0.7
    >>> est.to_dict()["ci_low"]
    0.5
    >>> est.se_method is None, est.to_dict()["se"]  # no standard error was given
    (True, None)
    """

    metric: str
    value: float
    ci: tuple[float, float] | None = None
    ci_level: float | None = None
    n_items: int = 0
    n_ratings: int = 0
    n_items_excluded: int = 0
    reason: str | None = None
    reason_code: Reason | None = None
    details: dict[str, Any] = field(default_factory=dict)
    n_boot: int = 0
    ci_method: str | None = None
    se: float = math.nan
    se_method: str | None = None
    z: float = math.nan
    p_value: float = math.nan

    def __float__(self) -> float:
        return float(self.value)

    def __getstate__(self) -> dict[str, Any]:
        # the deferred standard error is computed, never pickled (its closure holds the ratings)
        _resolve(self)
        return dict(self.__dict__)

    def __setstate__(self, state: dict[str, Any]) -> None:
        # an Estimate pickled before a field existed unpickles with the field's default
        for name, default in _LATER_FIELDS.items():
            state.setdefault(name, default)
        self.__dict__.update(state)

    @property
    def is_nan(self) -> bool:
        """True when the value is NaN (see ``reason``)."""
        return math.isnan(self.value)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dictionary; NaN becomes None."""
        low, high = self.ci if self.ci is not None else (None, None)
        return {
            "metric": self.metric,
            "value": _clean(self.value),
            "ci_low": _clean(low),
            "ci_high": _clean(high),
            "ci_level": self.ci_level,
            "n_items": self.n_items,
            "n_ratings": self.n_ratings,
            "n_items_excluded": self.n_items_excluded,
            "n_boot": self.n_boot,
            "ci_method": self.ci_method,
            "se": _clean(self.se),
            "se_method": self.se_method,
            "z": _clean(self.z),
            "p_value": _clean(self.p_value),
            "reason": self.reason,
            "reason_code": self.reason_code.value if self.reason_code else None,
            **{k: _clean(v) for k, v in self.details.items()},
        }

    def __repr__(self) -> str:
        ci = "" if self.ci is None else f", {self.ci_level:.0%} CI [{self.ci[0]:.4f}, {self.ci[1]:.4f}]"
        why = f", reason={self.reason!r}" if self.reason else ""
        return f"Estimate({self.metric}={self.value:.4f}{ci}, n_items={self.n_items}{why})"


#: Fields added after Estimates were first stored (pickled by the result store and by Dask workers), with their
#: defaults: an older pickle lacks them.
_LATER_FIELDS: dict[str, Any] = {"n_boot": 0, "ci_method": None, "se": math.nan, "se_method": None,
                                 "z": math.nan, "p_value": math.nan}


def _resolve(est: Estimate) -> None:
    """Compute ``est``'s deferred standard error, if any, once (a concurrent reader waits for it)."""
    state = est.__dict__
    deferred = state.get(_PENDING)
    if deferred is None:
        return
    with deferred.lock:
        if _PENDING not in state:  # another thread computed it while this one waited
            return
        se, se_method, z, p_value, details = deferred.compute()
        if details and not deferred.adds_details:
            raise AssertionError(f"a DeferredSE with adds_details=False returned details {sorted(details)}")
        state["details"].update(details)
        state.update(se=se, se_method=se_method, z=z, p_value=p_value)
        del state[_PENDING]


class _Deferred:
    """The descriptor of a field that a :class:`DeferredSE` fills on its first read.

    Installed on the class after the dataclass is made, so the generated ``__init__``, ``__eq__`` and
    ``fields()`` are the dataclass's own; ``__init__``'s ``object.__setattr__`` comes here, and the value lives
    in the instance's ``__dict__`` under the field's name (as an older pickle has it).
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: Estimate | None, owner: type | None = None) -> Any:
        if obj is None:
            return _DEFAULTS.get(self.name, self)
        pending = obj.__dict__.get(_PENDING)
        if pending is not None and (self.name != "details" or pending.adds_details):
            _resolve(obj)
        return obj.__dict__[self.name]

    def __set__(self, obj: Estimate, value: Any) -> None:
        if isinstance(value, DeferredSE):
            obj.__dict__[_PENDING] = value
            value = math.nan
        obj.__dict__[self.name] = value


_DEFAULTS: dict[str, Any] = {"se": math.nan, "se_method": None, "z": math.nan, "p_value": math.nan}
for _name in ("details", *_DEFAULTS):
    setattr(Estimate, _name, _Deferred(_name))


def _clean(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:
        return _clean(value.item())
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value
