r"""Logistic crossed random-effects model for binary labels, fitted by the Laplace approximation.

Model (the blog's "Different outcome types" section):

.. math::

    P(Y_{ij} = 1) = \mathrm{logit}^{-1}(\mu + a_i + b_j), \qquad
    a_i \sim N(0, \sigma^2_{item}), \quad b_j \sim N(0, \sigma^2_{rater}).

The marginal likelihood integrates the random effects out. With spherical
effects :math:`a = \sigma_{item} u`, :math:`b = \sigma_{rater} v`,
:math:`(u, v) \sim N(0, I)`, the Laplace approximation of minus the log
likelihood is (as lme4's ``glmer`` with ``nAGQ = 1``)

.. math::

    f(\mu, \sigma_{item}, \sigma_{rater}) = -\sum \log p(y \mid \hat\eta)
        + \tfrac12 \lVert (\hat u, \hat v) \rVert^2 + \tfrac12 \log\det H,

where :math:`(\hat u, \hat v)` is the conditional mode (penalised Newton
iterations) and :math:`H = \Lambda Z^\top W Z \Lambda + I` the Hessian there
(:math:`W = \mathrm{diag}\, p(1-p)`). :math:`f` is minimised over
:math:`\mu` and :math:`\sigma \ge 0` by L-BFGS-B. :math:`H` is factorised by
block elimination: the diagonal block of the larger effect set is inverted
elementwise and the Schur complement on the smaller set is factorised densely
(Cholesky), or the whole sparse :math:`H` by SuperLU when both sets are large.

Intervals: the Hessian of :math:`f` in :math:`(\mu, \sigma_{item}, \sigma_{rater})`
by central differences (:math:`f` is even in each :math:`\sigma`, so this is
valid at the boundary 0) gives a Wald covariance; latent ICCs are evaluated on
normal draws of the parameters and the percentile interval is reported.

numpy / scipy only; statsmodels' ``BinomialBayesMixedGLM`` is used in the
tests as an independent check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.optimize import minimize
from scipy.special import expit

from labelgate.core.estimate import Estimate
from labelgate.core.ratings import FloatArray, IntArray, Ratings
from labelgate.errors import ParameterError, Reason
from labelgate.metrics._intervals import level_of, percentile_interval

LATENT_RESIDUAL = math.pi**2 / 3
# Dense Schur complement up to this many effects on the smaller side.
_DENSE_LIMIT = 4000


@dataclass(frozen=True)
class LogitFit:
    """Laplace maximum-likelihood fit of the logistic crossed model.

    Attributes
    ----------
    mu, sd_item, sd_rater : float
        Intercept and random-effect standard deviations (logit scale).
    neg_loglik : float
        Laplace approximation of minus the log marginal likelihood.
    cov : ndarray of shape (3, 3) or None
        Wald covariance of (mu, sd_item, sd_rater); None if the Hessian is not
        positive definite.
    converged : bool
        Whether L-BFGS-B reported success.
    n_evaluations : int
        Laplace evaluations used.
    """

    mu: float
    sd_item: float
    sd_rater: float
    neg_loglik: float
    cov: np.ndarray | None
    converged: bool
    n_evaluations: int

    def shares(self) -> tuple[float, float]:
        """Latent-scale (item ICC, labeler ICC) with residual variance pi^2/3."""
        total = self.sd_item**2 + self.sd_rater**2 + LATENT_RESIDUAL
        return self.sd_item**2 / total, self.sd_rater**2 / total


class _Laplace:
    """Laplace objective for one data set, with warm-started conditional modes."""

    def __init__(self, y: FloatArray, item: IntArray, rater: IntArray, n_items: int, n_raters: int) -> None:
        self.y, self.item, self.rater = y, item, rater
        self.n_items, self.n_raters = n_items, n_raters
        self.z = np.zeros(n_items + n_raters)
        self.evaluations = 0
        # the larger effect set gets the diagonal block, the smaller one the Schur complement
        self.items_big = n_items >= n_raters
        small = n_raters if self.items_big else n_items
        self.dense = small <= _DENSE_LIMIT

    def _eta(self, mu: float, sa: float, sb: float, z: FloatArray) -> FloatArray:
        return mu + sa * z[self.item] + sb * z[self.n_items + self.rater]

    def _penalised(self, eta: FloatArray, z: FloatArray) -> float:
        # -sum log p(y | eta) + |z|^2 / 2, with log(1 + e^eta) computed stably
        nll = np.sum(np.logaddexp(0.0, eta) - self.y * eta)
        return float(nll + 0.5 * z @ z)

    def _factor(self, w: FloatArray, sa: float, sb: float) -> tuple[Any, float]:
        """Factorisation of H and log det H."""
        ni, nr = self.n_items, self.n_raters
        diag_i = 1.0 + sa * sa * np.bincount(self.item, weights=w, minlength=ni)
        diag_r = 1.0 + sb * sb * np.bincount(self.rater, weights=w, minlength=nr)
        c = sp.csr_matrix((sa * sb * w, (self.item, self.rater)), shape=(ni, nr))
        if not self.dense:
            h = sp.bmat([[sp.diags(diag_i), c], [c.T, sp.diags(diag_r)]], format="csc")
            lu = spla.splu(h, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                           options={"SymmetricMode": True})
            return ("lu", lu), float(np.sum(np.log(np.abs(lu.U.diagonal()))))
        if self.items_big:
            big, small, cross = diag_i, diag_r, c
        else:
            big, small, cross = diag_r, diag_i, c.T.tocsr()
        schur = np.asfortranarray((cross.T @ sp.diags(-1.0 / big) @ cross).toarray())
        schur[np.diag_indices_from(schur)] += small
        chol = sla.cho_factor(schur, lower=True, overwrite_a=True, check_finite=False)
        logdet = float(np.sum(np.log(big)) + 2.0 * np.sum(np.log(np.diag(chol[0]))))
        return ("schur", big, cross, chol), logdet

    def _solve(self, factor: Any, rhs: FloatArray) -> FloatArray:
        if factor[0] == "lu":
            return np.asarray(factor[1].solve(rhs))
        _, big, cross, chol = factor
        ni = self.n_items
        r_i, r_r = rhs[:ni], rhs[ni:]
        r_big, r_small = (r_i, r_r) if self.items_big else (r_r, r_i)
        x_small = sla.cho_solve(chol, r_small - cross.T @ (r_big / big))
        x_big = (r_big - cross @ x_small) / big
        return np.concatenate([x_big, x_small]) if self.items_big else np.concatenate([x_small, x_big])

    def __call__(self, theta: FloatArray, tol: float = 1e-8) -> float:
        """Laplace negative log marginal likelihood at (mu, sd_item, sd_rater)."""
        mu, sa, sb = (float(t) for t in theta)
        self.evaluations += 1
        z = self.z.copy()
        ni = self.n_items
        eta = self._eta(mu, sa, sb, z)
        value = self._penalised(eta, z)
        for _ in range(100):
            p = expit(eta)
            resid = p - self.y
            grad = z.copy()
            grad[:ni] += sa * np.bincount(self.item, weights=resid, minlength=ni)
            grad[ni:] += sb * np.bincount(self.rater, weights=resid, minlength=self.n_raters)
            factor, _ = self._factor(p * (1.0 - p), sa, sb)
            step = self._solve(factor, -grad)
            decrement = float(-grad @ step)
            t = 1.0
            while True:  # step halving keeps the penalised objective decreasing
                z_new = z + t * step
                eta_new = self._eta(mu, sa, sb, z_new)
                new = self._penalised(eta_new, z_new)
                if new <= value + 1e-12 * max(1.0, abs(value)) or t < 1e-8:
                    break
                t *= 0.5
            z, eta, value = z_new, eta_new, new
            # Newton converges quadratically: after a step with a small decrement the mode is exact to
            # rounding, which keeps the objective smooth enough for finite-difference gradients
            if decrement < tol:
                break
        p = expit(eta)
        _, logdet = self._factor(p * (1.0 - p), sa, sb)
        self.z = z
        return value + 0.5 * logdet


def fit_logit_crossed(y: FloatArray, item: IntArray, rater: IntArray, n_items: int, n_raters: int,
                      start: tuple[float, float, float] | None = None, hessian: bool = True) -> LogitFit:
    """Laplace ML fit of the logistic crossed random-effects model (see the module docstring).

    Parameters
    ----------
    y : ndarray of 0/1, shape (N,)
        Binary outcomes.
    item, rater : ndarray of int, shape (N,)
        Codes in ``0..n_items-1`` and ``0..n_raters-1``.
    start : (mu, sd_item, sd_rater), optional
        Starting values (default: logit of the mean, 1, 0.5).
    hessian : bool, default True
        Compute the Wald covariance.
    """
    objective = _Laplace(np.asarray(y, dtype=np.float64), item, rater, n_items, n_raters)
    mean = float(np.clip(np.mean(y), 1e-3, 1 - 1e-3))
    x0 = np.asarray(start if start is not None else (math.log(mean / (1 - mean)), 1.0, 0.5), dtype=np.float64)
    result = minimize(objective, x0, method="L-BFGS-B", bounds=[(None, None), (0.0, 20.0), (0.0, 20.0)],
                      options={"maxiter": 200, "ftol": 1e-12, "gtol": 1e-7})
    theta = np.asarray(result.x, dtype=np.float64)
    value = objective(theta)
    cov = _wald_covariance(objective, theta) if hessian else None
    return LogitFit(mu=float(theta[0]), sd_item=float(theta[1]), sd_rater=float(theta[2]), neg_loglik=value,
                    cov=cov, converged=bool(result.success), n_evaluations=objective.evaluations)


def _wald_covariance(objective: _Laplace, theta: FloatArray) -> np.ndarray | None:
    """Inverse of the central-difference Hessian of the objective, or None if not positive definite."""
    k = theta.size
    steps = 1e-3 * np.maximum(np.abs(theta), 0.1)
    f0 = objective(theta)
    hess = np.empty((k, k))
    for a in range(k):
        for b in range(a, k):
            if a == b:
                e = np.zeros(k)
                e[a] = steps[a]
                value = (objective(theta + e) - 2 * f0 + objective(theta - e)) / steps[a] ** 2
            else:
                ea, eb = np.zeros(k), np.zeros(k)
                ea[a], eb[b] = steps[a], steps[b]
                value = (objective(theta + ea + eb) - objective(theta + ea - eb)
                         - objective(theta - ea + eb) + objective(theta - ea - eb)) / (4 * steps[a] * steps[b])
            hess[a, b] = hess[b, a] = value
    try:
        sla.cholesky(hess)
    except np.linalg.LinAlgError:
        return None
    return np.linalg.inv(hess)


def binary_outcomes(r: Ratings, function: str) -> FloatArray:
    """0/1 outcome of each rating (second category = 1); raises on more than two categories."""
    if r.n_categories > 2:
        raise ParameterError(f"scale='latent' of {function} needs a binary label (two categories); got "
                             f"{r.n_categories} categories {list(r.categories)[:5]}.", parameter="scale",
                             value="latent")
    return (r.value_codes == 1).astype(np.float64)


def latent_share_estimate(metric: str, r: Ratings, component: str, *, ci: float | None, n_boot: int,
                          seed: Any) -> Estimate:
    """Latent-scale item or labeler ICC of binary labels (component ``"item"`` or ``"rater"``)."""
    y = binary_outcomes(r, metric)
    pairable = r.ratings_per_item >= 2
    rows = np.flatnonzero(pairable[r.item_codes])
    n_excluded = int((r.ratings_per_item == 1).sum())
    items, item_codes = np.unique(r.item_codes[rows], return_inverse=True)
    raters, rater_codes = np.unique(r.rater_codes[rows], return_inverse=True)
    base: dict[str, Any] = {"n_items": int(items.size), "n_ratings": int(rows.size), "n_items_excluded": n_excluded}
    why = _latent_reason(y[rows], items.size, raters.size, component)
    if why is not None:
        return Estimate(metric=metric, value=math.nan, reason=why[1], reason_code=why[0],
                        details={"scale": "latent"}, **base)
    fit = fit_logit_crossed(y[rows], item_codes.astype(np.int64), rater_codes.astype(np.int64),
                            int(items.size), int(raters.size), hessian=ci is not None)
    item_share, rater_share = fit.shares()
    value = item_share if component == "item" else rater_share
    details: dict[str, Any] = {
        "scale": "latent", "item_icc": item_share, "labeler_icc": rater_share, "mu": fit.mu,
        "item_variance": fit.sd_item**2, "rater_variance": fit.sd_rater**2,
        "residual_variance": LATENT_RESIDUAL, "neg_loglik": fit.neg_loglik, "converged": fit.converged,
        "method": "laplace", "n_raters": int(raters.size),
    }
    interval = None
    if ci is not None:
        interval = _wald_interval(fit, component, float(ci), n_boot, seed, details)
    return Estimate(metric=metric, value=float(value), ci=interval, ci_level=level_of(ci, interval),
                    details=details, n_boot=n_boot if interval else 0, **base)


def _latent_reason(y: FloatArray, n_items: int, n_raters: int, component: str) -> tuple[Reason, str] | None:
    if n_items == 0:
        return Reason.NO_PAIRABLE_ITEMS, "no item has two or more ratings"
    if np.all(y == y[0]):
        return (Reason.NO_EXPECTED_DISAGREEMENT, "one category is used throughout, so the logistic model has "
                "no information on the variances")
    if component == "rater" and n_raters < 2:
        return Reason.NO_PAIRABLE_ITEMS, "a single rater: the rater variance is not identifiable"
    return None


def _wald_interval(fit: LogitFit, component: str, ci: float, n_draws: int, seed: Any,
                   details: dict[str, Any]) -> tuple[float, float] | None:
    if fit.cov is None:
        details["ci_note"] = "the Hessian of the Laplace likelihood is not positive definite: no interval"
        return None
    rng = np.random.default_rng(seed)
    draws = rng.multivariate_normal(np.array([fit.mu, fit.sd_item, fit.sd_rater]), fit.cov, size=n_draws,
                                    method="eigh")
    var_i, var_r = draws[:, 1] ** 2, draws[:, 2] ** 2
    total = var_i + var_r + LATENT_RESIDUAL
    shares = (var_i if component == "item" else var_r) / total
    interval, _ = percentile_interval(shares, ci)
    details["interval_method"] = "wald_sd_draws"
    details["sd_item_se"] = float(math.sqrt(fit.cov[1, 1]))
    details["sd_rater_se"] = float(math.sqrt(fit.cov[2, 2]))
    return interval


__all__ = ["LATENT_RESIDUAL", "LogitFit", "binary_outcomes", "fit_logit_crossed", "latent_share_estimate"]
