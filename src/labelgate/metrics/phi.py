r"""Checco et al.'s agreement :math:`\Phi` for bounded rating scales (HCOMP 2017; Roitero's slides).

Each item's ratings, rescaled to :math:`(0, 1)`, are modelled as draws from a
Beta distribution with the item's own mean :math:`\mu_i` and one precision
:math:`p = a + b` common to all items:
:math:`x_{ij} \sim \mathrm{Beta}(\mu_i p, (1 - \mu_i) p)`. Agreement is the
concentration, mapped to :math:`[-1, 1]` as the authors' code computes it
(package ``agreement-phi``, ``agreement()``):

.. math::

    \Phi = 1 - 2\exp(-\ln 2 \cdot p / 2) = 1 - 2^{\,1 - p/2},

so :math:`p = 2` (uniform) gives :math:`\Phi = 0`, :math:`p \to 0`
(polarised, U-shaped) gives :math:`-1` and :math:`p \to \infty` gives 1.

Rescaling, as in the authors' ``scale_mat``: :math:`x = (v - lo)/(hi - lo)`,
then squeezed away from 0 and 1 as :math:`(x (l - 1) + 0.5) / l` with
:math:`l` the item's number of ratings (the authors' code uses the row length
of its item matrix, which is the same for complete data).

Fitting (documented choice; the authors sample the posterior by MCMC under
very flat priors — ``precision ~ N(2, 10^6)``, ``mu_i ~ N(1/2, 10^6)`` — and
report the posterior mean of :math:`\Phi` with a 95% HPD interval):

* priors: :math:`p` flat on :math:`(0, \infty)`; item means
  :math:`\mu_i \sim \mathrm{Beta}(a_0, b_0)` with :math:`a_0, b_0 \ge 1`
  estimated with :math:`p` (empirical Bayes, ``prior="beta"``, default), or
  uniform on :math:`(0, 1)` (``prior="flat"``, the authors' prior restricted to
  the valid range). The flat prior overstates :math:`p` when the item means
  are concentrated (e.g. uniform ratings, all means 1/2) and items have few
  ratings (about +12% at 5 ratings per item); the fitted prior removes that;
* :math:`\mu_i` are integrated out item by item (adaptive Gauss–Hermite
  quadrature on the logit scale, 32 nodes, centred at the conditional mode);
  the per-item sufficient statistics are :math:`n_i`, :math:`\sum\log x` and
  :math:`\sum\log(1-x)`. Integrating (rather than maximising over
  :math:`\mu_i` jointly with :math:`p`, as the slide's arg max reads) avoids
  the Neyman–Scott upward bias with few ratings per item;
* :math:`\hat p` maximises the integrated likelihood (MAP under the flat
  prior on :math:`p`): a grid and Brent's method on
  :math:`\log p \in [\log 10^{-3}, \log 10^{5}]` with the flat prior, then
  L-BFGS-B jointly with :math:`(\log a_0, \log b_0) \in [0, \log 10^3]^2`;
* interval, mapped to :math:`\Phi` (monotone in :math:`p`): with the flat
  prior, likelihood ratio
  :math:`\{p : 2(\ell(\hat p) - \ell(p)) \le \chi^2_{1, level}\}`; with
  the fitted prior, Laplace (Wald) on :math:`\log p` from the central-difference
  Hessian of the joint log likelihood in :math:`(\log p, \log a_0, \log b_0)`
  (a prior parameter at its bound is held fixed), which carries the
  uncertainty of the prior parameters.

Standard error (``Estimate.se``, ``se_method="delta"``): the inverse observed
information of :math:`\log p` (the same central-difference Hessian as the
Wald interval, in :math:`\log p` alone with the flat prior), mapped to
:math:`\Phi` by the delta method,

.. math::

    \mathrm{se}(\hat\Phi) = \Big|\frac{d\Phi}{d\log p}\Big| \mathrm{se}(\log \hat p)
    = \frac{\ln 2}{2}\, \hat p\, 2^{\,1 - \hat p/2}\, \mathrm{se}(\log \hat p),

computed when first read. No standard error when :math:`\hat p` is at a
bound of its search range or infinite (every item's ratings identical). It is
checked against the spread of :math:`\hat\Phi` over simulated Beta designs
(``tests/metrics/test_phi.py``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from labelgate.core.estimate import DeferredSE, Estimate, StandardError
from labelgate.core.ratings import FloatArray, Ratings
from labelgate.errors import ParameterError, Reason, check_option
from labelgate.metrics._lazy import lazy
from labelgate.metrics.variance import level_of

# SciPy, imported on first use (import labelgate stays light)
brentq, minimize, minimize_scalar = (lazy("scipy.optimize", n) for n in ("brentq", "minimize", "minimize_scalar"))
betaln, digamma, expit, polygamma, roots_hermite = (
    lazy("scipy.special", n) for n in ("betaln", "digamma", "expit", "polygamma", "roots_hermite"))
chi2, norm = lazy("scipy.stats", "chi2"), lazy("scipy.stats", "norm")

_LOG_P_BOUNDS = (math.log(1e-3), math.log(1e5))
_LOG_HYPER_BOUNDS = (0.0, math.log(1e3))  # prior Beta(a0, b0) of the item means: 1 <= a0, b0 <= 1000
PRIORS = ("beta", "flat")
SE_SOURCE = ("delta method: the inverse observed information of log precision (the integrated likelihood's "
             "central-difference Hessian, with the fitted prior's free parameters), times dPhi/dlog p")


@functools.cache
def _hermite() -> tuple[np.ndarray, np.ndarray]:
    """32-point Gauss–Hermite nodes and weights (computed once, on first use)."""
    nodes, weights = roots_hermite(32)
    return nodes, weights


def phi_from_precision(p: Any) -> Any:
    r""":math:`\Phi = 1 - 2^{1 - p/2}` (the authors' ``agreement(precision)``)."""
    return 1.0 - 2.0 * np.exp(-np.log(2.0) * np.asarray(p, dtype=np.float64) / 2.0)


class BetaItems:
    """Per-item sufficient statistics of the rescaled ratings and the integrated log likelihood.

    ``loglik(p, a0, b0)`` integrates each item mean over the prior
    :math:`\\mathrm{Beta}(a_0, b_0)` with :math:`a_0, b_0 \\ge 1` (1, 1 = flat), which
    keeps the integrand log-concave in :math:`\\mu` (unique conditional mode).
    """

    def __init__(self, n: FloatArray, sum_log: FloatArray, sum_log1m: FloatArray) -> None:
        self.n, self.a, self.b = n, sum_log, sum_log1m

    def _mode(self, p: float, a0: float, b0: float) -> np.ndarray:
        """Logit of the conditional mode of each mu_i: Newton on the decreasing derivative, kept in a bracket."""
        low = np.full(self.n.shape, -40.0)
        high = np.full(self.n.shape, 40.0)
        t = np.zeros(self.n.shape)
        for _ in range(60):
            mu = expit(t)
            slope = (p * (self.a - self.b) - self.n * p * (digamma(mu * p) - digamma((1.0 - mu) * p))
                     + (a0 - 1.0) / mu - (b0 - 1.0) / (1.0 - mu))
            high = np.where(slope < 0, t, high)
            low = np.where(slope < 0, low, t)
            curve = (-self.n * p * p * (polygamma(1, mu * p) + polygamma(1, (1.0 - mu) * p))
                     - (a0 - 1.0) / mu**2 - (b0 - 1.0) / (1.0 - mu) ** 2) * mu * (1.0 - mu)
            with np.errstate(divide="ignore", invalid="ignore"):
                step = np.where(curve < 0, slope / curve, np.nan)
            new = t - step
            new = np.where(np.isfinite(new) & (new >= low) & (new <= high), new, 0.5 * (low + high))
            done = np.max(np.abs(new - t)) < 1e-10
            t = new
            if done:
                break
        return t

    def loglik(self, p: float, a0: float = 1.0, b0: float = 1.0) -> float:
        """Sum over items of log of the integral over mu_i of likelihood x Beta(a0, b0) prior."""
        t0 = self._mode(p, a0, b0)
        mu = expit(t0)
        s = mu * (1.0 - mu)
        second = (-self.n * p * p * (polygamma(1, mu * p) + polygamma(1, (1.0 - mu) * p))
                  - (a0 - 1.0) / mu**2 - (b0 - 1.0) / (1.0 - mu) ** 2)
        curvature = np.maximum(-(second * s * s - 2.0 * s), 1e-12)
        scale = np.sqrt(2.0 / curvature)
        nodes, weights = _hermite()
        t = t0[:, None] + scale[:, None] * nodes[None, :]
        m = expit(t)
        log_m, log_1m = -np.logaddexp(0.0, -t), -np.logaddexp(0.0, t)
        ell = ((m * p - 1.0) * self.a[:, None] + ((1.0 - m) * p - 1.0) * self.b[:, None]
               - self.n[:, None] * betaln(m * p, (1.0 - m) * p))
        g = ell + a0 * log_m + b0 * log_1m - betaln(a0, b0)  # prior density x Jacobian mu (1 - mu)
        logs = g + (nodes**2)[None, :] + np.log(weights)[None, :]
        peak = logs.max(axis=1)
        return float(np.sum(np.log(scale) + peak + np.log(np.exp(logs - peak[:, None]).sum(axis=1))))


def _resolve_limits(r: Ratings, limits: Sequence[Any] | None, used: FloatArray) -> tuple[float, float]:
    if limits is None:  # the scale of the category list (explicit categories define the scale's ends)
        if r.is_numeric:
            return float(r.category_values.min()), float(r.category_values.max())
        return 0.0, float(r.n_categories - 1)
    if len(limits) != 2:
        raise ParameterError(f"The 'limits' parameter of phi_agreement must be (low, high); got {limits!r}.",
                             parameter="limits", value=limits)
    if r.is_numeric:
        lo, hi = (float(v) for v in limits)
    else:
        position = {c: i for i, c in enumerate(r.categories)}
        missing = [v for v in limits if v not in position]
        if missing:
            raise ParameterError(f"The 'limits' of phi_agreement must be categories of the ordinal scale "
                                 f"{list(r.categories)}; got {list(limits)!r}.", parameter="limits",
                                 value=missing[0])
        lo, hi = float(position[limits[0]]), float(position[limits[1]])
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ParameterError(f"The 'limits' of phi_agreement must satisfy low < high; got {limits!r}.",
                             parameter="limits", value=limits)
    if used.min() < lo or used.max() > hi:
        raise ParameterError(f"Ratings lie outside the limits {limits!r} of phi_agreement (observed range "
                             f"{used.min():g}..{used.max():g}).", parameter="limits", value=limits)
    return lo, hi


def phi_agreement(r: Ratings, limits: Sequence[Any] | None = None, *, squeeze: bool = True,
                  prior: str = "beta", ci: float | None = None) -> Estimate:
    r"""Checco et al.'s :math:`\Phi`: concentration of each item's ratings under a common Beta precision.

    See the module docstring for the model, the priors and the fitting method.

    Parameters
    ----------
    r : Ratings
        Ordinal (category positions are used) or interval/ratio ratings on a
        bounded scale. Items with a single rating are excluded.
    limits : (low, high), optional
        Scale ends. Default: the observed minimum and maximum for
        interval/ratio (as the authors' code), the first and last category for
        ordinal. For ordinal ratings give categories, e.g. ``(1, 5)``.
    squeeze : bool, default True
        Apply the authors' squeeze :math:`(x(l-1) + 0.5)/l`. With
        ``squeeze=False`` the rescaled values must lie strictly inside (0, 1)
        (continuous data); the fitted precision is then the Beta precision of
        the data themselves.
    prior : {"beta", "flat"}, default "beta"
        Prior of the item means: ``"beta"`` — :math:`\\mathrm{Beta}(a_0, b_0)`,
        :math:`a_0, b_0 \\ge 1`, fitted with :math:`p` (empirical Bayes; the
        flat prior is the special case :math:`a_0 = b_0 = 1`); ``"flat"`` —
        uniform on (0, 1), the authors' prior, which overstates :math:`p`
        when item means are concentrated and items have few ratings.
    ci : float, optional
        Level of the interval (likelihood ratio with the flat prior, Wald on
        :math:`\\log p` with the fitted prior).

    Returns
    -------
    Estimate
        ``value`` is :math:`\Phi`; ``details``: ``precision`` (and its
        interval), ``log_likelihood``, ``limits``, ``method``. When every item's
        ratings are identical the precision is infinite and :math:`\Phi = 1`.
        ``se``: the delta method over the observed information of
        :math:`\log p` (``se_method="delta"``; ``details["se_source"]`` and
        ``details["log_precision_se"]``), computed when first read; NaN (with
        ``details["se_note"]``) when the precision is infinite or at a bound of
        its search range. ``z`` and ``p_value`` are NaN.

    Examples
    --------
    >>> import labelgate as lg
    >>> from labelgate.metrics.phi import phi_agreement
    >>> tight = lg.Ratings.from_wide([[4, 4, 5], [1, 1, 1], [2, 3, 2], [5, 5, 5], [3, 3, 3]],
    ...                              level="ordinal", categories=[1, 2, 3, 4, 5])
    >>> polarised = lg.Ratings.from_wide([[1, 5, 1, 5, 1, 5], [5, 1, 5, 5, 1, 1], [1, 1, 5, 1, 5, 5],
    ...                                   [5, 5, 1, 1, 5, 1]], level="ordinal", categories=[1, 2, 3, 4, 5])
    >>> float(phi_agreement(tight)) > 0.5, float(phi_agreement(polarised)) < 0
    (True, True)
    >>> est = phi_agreement(tight)
    >>> est.se_method, 0 < est.se < 1
    ('delta', True)
    """
    if not isinstance(r, Ratings):
        raise ParameterError(f"phi_agreement takes a Ratings; got {type(r).__name__}.", parameter="r")
    if r.level == "nominal":
        raise ParameterError("phi_agreement needs ratings on a bounded ordered scale (level 'ordinal', "
                             "'interval' or 'ratio'); got a nominal label.", parameter="level", value=r.level)
    check_option(prior, PRIORS, "prior", "phi_agreement")
    if ci is not None and not (isinstance(ci, (int, float)) and 0 < float(ci) < 1):
        raise ParameterError(f"The 'ci' parameter of phi_agreement must be None or a level in (0, 1), e.g. "
                             f"0.95; got {ci!r}.", parameter="ci", value=ci)
    counts = r.ratings_per_item
    keep = counts[r.item_codes] >= 2
    n_excluded = int((counts == 1).sum())
    base: dict[str, Any] = {"n_items_excluded": n_excluded}
    if not keep.any():
        return Estimate("phi_agreement", math.nan, n_items=0, n_ratings=0, reason="no item has two or more "
                        "ratings", reason_code=Reason.NO_PAIRABLE_ITEMS, **base)
    items = r.item_codes[keep]
    values = r.values[keep]
    lo, hi = _resolve_limits(r, limits, values)
    if not hi > lo:
        return Estimate("phi_agreement", math.nan, n_items=0, n_ratings=0, reason="the rating scale has a single "
                        "value, so ratings cannot be placed on it; pass limits=(low, high)",
                        reason_code=Reason.NO_VARIANCE, **base)
    x = (values - lo) / (hi - lo)
    l_item = counts[items].astype(np.float64)
    if squeeze:
        x = (x * (l_item - 1.0) + 0.5) / l_item
    elif np.any((x <= 0) | (x >= 1)):
        raise ParameterError("phi_agreement with squeeze=False needs ratings strictly inside the limits; some "
                             "ratings are at a limit (use squeeze=True for discrete scales).",
                             parameter="squeeze", value=squeeze)
    used, pos = np.unique(items, return_inverse=True)
    n = np.bincount(pos).astype(np.float64)
    beta_items = BetaItems(n, np.bincount(pos, weights=np.log(x)).astype(np.float64),
                           np.bincount(pos, weights=np.log1p(-x)).astype(np.float64))
    details: dict[str, Any] = {"limits": [lo, hi] if r.is_numeric else [r.categories[int(lo)],
                                                                          r.categories[int(hi)]],
                               "squeeze": squeeze, "method": "marginal_map", "prior_precision": "flat",
                               "prior_mu": prior}
    base.update(n_items=int(used.size), n_ratings=int(x.size))
    spread = np.bincount(pos, weights=(x - np.bincount(pos, weights=x)[pos] / n[pos]) ** 2)
    if np.all(spread <= 1e-24):
        details.update(precision=math.inf, se_note="the precision is infinite (every item's ratings are identical): "
                       "no standard error")
        return Estimate("phi_agreement", 1.0, details=details, **base)
    fit = _Fit(beta_items, prior)
    log_p, loglik = fit.maximise()
    prior_a, prior_b = np.exp(fit.hyper)
    details.update(precision=math.exp(log_p), log_likelihood=loglik, prior_a=float(prior_a), prior_b=float(prior_b),
                   precision_at_bound=bool(log_p <= _LOG_P_BOUNDS[0] + 1e-6 or log_p >= _LOG_P_BOUNDS[1] - 1e-6))
    interval = None
    if ci is not None:
        lo_p, hi_p = fit.interval(log_p, loglik, float(ci))
        details["precision_ci_low"], details["precision_ci_high"] = lo_p, hi_p
        interval = (float(phi_from_precision(lo_p)), float(phi_from_precision(hi_p)))
    if details["precision_at_bound"]:
        details["se_note"] = "the precision is at a bound of its search range: no standard error"
        se: float | DeferredSE = math.nan
    else:
        se = DeferredSE(functools.partial(_phi_se, fit, log_p, fit.hyper.copy()))
    return Estimate("phi_agreement", float(phi_from_precision(math.exp(log_p))), ci=interval,
                    ci_level=level_of(ci, interval), details=details, se=se,  # type: ignore[arg-type]  # DeferredSE
                    **base)


def _phi_se(fit: _Fit, log_p: float, hyper: np.ndarray) -> StandardError:
    """The deferred standard error of Phi (module docstring): delta method over the variance of log p."""
    variance = fit.log_p_variance(log_p, hyper)
    if not variance > 0:
        return math.nan, None, math.nan, math.nan, {"se_note": "the observed information of the log precision is "
                                                    "not positive: no standard error"}
    p = math.exp(log_p)
    slope = 0.5 * math.log(2.0) * p * 2.0 ** (1.0 - p / 2.0)
    return (slope * math.sqrt(variance), "delta", math.nan, math.nan,
            {"se_source": SE_SOURCE, "log_precision_se": math.sqrt(variance)})


class _Fit:
    """Maximiser of the integrated likelihood over log p (and the prior of the item means)."""

    def __init__(self, items: BetaItems, prior: str) -> None:
        self.items, self.prior = items, prior
        self.hyper = np.zeros(2)  # log a0, log b0 (warm start of the profile)

    def profile(self, log_p: float) -> float:
        """Log likelihood at p, maximised over the prior parameters (fixed at 1, 1 when flat)."""
        p = math.exp(log_p)
        if self.prior == "flat":
            return self.items.loglik(p)
        res = minimize(lambda h: -self.items.loglik(p, *np.exp(h)), self.hyper, method="L-BFGS-B",
                       bounds=[_LOG_HYPER_BOUNDS] * 2)
        self.hyper = np.asarray(res.x, dtype=np.float64)
        return float(-res.fun)

    def maximise(self) -> tuple[float, float]:
        """(log p, log likelihood): flat-prior grid and Brent, then the joint fit with the prior."""
        grid = np.linspace(*_LOG_P_BOUNDS, 25)
        values = np.array([self.items.loglik(math.exp(g)) for g in grid])
        best = int(np.argmax(values))
        low, high = grid[max(best - 1, 0)], grid[min(best + 1, grid.size - 1)]
        res = minimize_scalar(lambda g: -self.items.loglik(math.exp(g)), bounds=(low, high), method="bounded",
                              options={"xatol": 1e-7})
        log_p, value = (float(res.x), float(-res.fun)) if -res.fun >= values[best] else (grid[best], values[best])
        if self.prior == "flat":
            return float(log_p), float(value)
        joint = minimize(lambda v: -self.items.loglik(math.exp(v[0]), *np.exp(v[1:])),
                         np.array([log_p, 0.0, 0.0]), method="L-BFGS-B",
                         bounds=[_LOG_P_BOUNDS, _LOG_HYPER_BOUNDS, _LOG_HYPER_BOUNDS])
        self.hyper = np.asarray(joint.x[1:], dtype=np.float64)
        if -joint.fun < value:  # the flat prior (a0 = b0 = 1) is inside the search space
            self.hyper = np.zeros(2)
            return float(log_p), float(value)
        return float(joint.x[0]), float(-joint.fun)

    def interval(self, log_p: float, loglik: float, level: float) -> tuple[float, float]:
        """Likelihood-ratio interval of p (flat prior), or Wald on log p from the joint Hessian (fitted prior)."""
        if self.prior == "flat":
            return self._lr_interval(log_p, loglik, level)
        return self._wald_interval(log_p, level)

    def _lr_interval(self, log_p: float, loglik: float, level: float) -> tuple[float, float]:
        cut = loglik - 0.5 * float(chi2.ppf(level, 1))
        bounds = []
        for end in _LOG_P_BOUNDS:
            if abs(end - log_p) < 1e-9 or self.profile(end) - cut >= 0:
                bounds.append(math.exp(end))
                continue
            bounds.append(math.exp(brentq(lambda g: self.profile(g) - cut, min(end, log_p), max(end, log_p),
                                          xtol=1e-7)))
        return bounds[0], bounds[1]

    def _wald_interval(self, log_p: float, level: float) -> tuple[float, float]:
        """Laplace (Wald) interval from :meth:`log_p_variance`."""
        variance = self.log_p_variance(log_p, self.hyper)
        if not variance > 0:
            return math.nan, math.nan
        half = float(norm.ppf(0.5 + level / 2)) * math.sqrt(variance)
        return math.exp(max(log_p - half, _LOG_P_BOUNDS[0])), math.exp(min(log_p + half, _LOG_P_BOUNDS[1]))

    def log_p_variance(self, log_p: float, hyper: np.ndarray) -> float:
        """The inverse Hessian of -loglik in (log p, free log a0, log b0) at log p, element (log p, log p).

        A prior parameter at its bound is held fixed, so with the flat prior (a0 = b0 = 1, the lower bound) the
        Hessian is that of log p alone. NaN when the Hessian is singular.
        """
        theta = np.array([log_p, *hyper])
        free = [0] + [k + 1 for k in range(2) if _LOG_HYPER_BOUNDS[0] + 1e-4 < hyper[k]
                      < _LOG_HYPER_BOUNDS[1] - 1e-4]  # a prior parameter at its bound is held fixed

        def f(v: np.ndarray) -> float:
            return -self.items.loglik(math.exp(v[0]), math.exp(v[1]), math.exp(v[2]))

        h = 1e-3
        k = len(free)
        hess = np.empty((k, k))
        f0 = f(theta)
        for i, a in enumerate(free):
            for j, b in enumerate(free[i:], start=i):
                ea, eb = np.zeros(3), np.zeros(3)
                ea[a], eb[b] = h, h
                if a == b:
                    value = (f(theta + ea) - 2 * f0 + f(theta - ea)) / h**2
                else:
                    value = (f(theta + ea + eb) - f(theta + ea - eb) - f(theta - ea + eb) + f(theta - ea - eb)) / (
                        4 * h * h)
                hess[i, j] = hess[j, i] = value
        try:
            return float(np.linalg.inv(hess)[0, 0])
        except np.linalg.LinAlgError:
            return math.nan
