r"""Per-rater rows (the report contract) from :class:`RaterSums`: kappas, intervals, bias and the flag policy."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from labelgate.core.ratings import FloatArray
from labelgate.metrics.diagnostics.blocks import Kind, kappa_finalize
from labelgate.metrics.diagnostics.intervals import delta_interval
from labelgate.metrics.diagnostics.sums import RaterSums

Bounds = tuple[np.ndarray, np.ndarray]


def rater_rows_from_sums(rater_ids: Sequence[Any], sums: RaterSums, *, kind: Kind, q: int, pool_name: str,
                         ci: float | None, trusted_interval: Bounds | None = None,
                         loo_interval: Bounds | None = None,
                         partners: dict[int, list[Any]] | None = None, min_agreement: float = 0.2,
                         min_shared_items: int = 10) -> list[dict[str, Any]]:
    """Per-rater rows (the contract shape) from :class:`RaterSums`.

    Intervals are delta-method unless ``trusted_interval`` / ``loo_interval`` ``(low, high)`` are given
    (e.g. from the bootstrap). ``partners`` maps a rater position to its collusion partners.
    """
    finalize = kappa_finalize(kind, q)
    level = 0.95 if ci is None else float(ci)
    kx, kx_lo, kx_hi = delta_interval(finalize, sums.trusted, sums.trusted_second, sums.trusted_n, level)
    loo, loo_lo, loo_hi = delta_interval(finalize, sums.loo, sums.loo_second, sums.loo_n, level)
    if trusted_interval is not None:
        kx_lo, kx_hi = trusted_interval
    if loo_interval is not None:
        loo_lo, loo_hi = loo_interval
    if ci is None:
        kx_lo = kx_hi = loo_lo = loo_hi = np.full(len(rater_ids), np.nan)
    bias = _bias(kind, q, sums.loo)
    partners = partners or {}
    rows = []
    for g, rater in enumerate(rater_ids):
        has_t, has_loo = sums.trusted_n[g] > 0, sums.loo_n[g] > 0
        row = {"rater_id": rater, "pool": pool_name, "n_ratings": int(sums.n_ratings[g]),
               "n_shared_items": int(sums.trusted_n[g]),
               "kappa_vs_trusted": _num(kx[g]) if has_t else None,
               "kappa_ci_low": _num(kx_lo[g]) if has_t else None,
               "kappa_ci_high": _num(kx_hi[g]) if has_t else None,
               "loo_agreement": _num(loo[g]) if has_loo else None,
               "loo_ci_low": _num(loo_lo[g]) if has_loo else None,
               "loo_ci_high": _num(loo_hi[g]) if has_loo else None,
               "n_loo_items": int(sums.loo_n[g]),
               "bias": _num(bias[g]), "flags": [], "partners": sorted(partners.get(g, []), key=str),
               "agreement_basis": None}
        _flag_low(row, min_agreement, min_shared_items)
        if row["partners"]:
            row["flags"].append("collusion")
        rows.append(row)
    return rows


def _flag_low(row: dict[str, Any], threshold: float, min_items: int) -> None:
    """``low_agreement`` when the upper bound of the trusted interval (else the peers') is below ``threshold``.

    A rater is judged on the trusted pool when it shares ``min_items`` items with it, else on its co-raters
    when it has that many co-rated items, else not at all; ``agreement_basis`` records which.
    """
    if row["n_shared_items"] >= min_items and row["kappa_ci_high"] is not None:
        row["agreement_basis"] = "trusted"
        high = row["kappa_ci_high"]
    elif row["n_loo_items"] >= min_items and row["loo_ci_high"] is not None:
        row["agreement_basis"] = "peers"
        high = row["loo_ci_high"]
    else:
        return
    if high < threshold:
        row["flags"].append("low_agreement")


def _bias(kind: Kind, q: int, loo: FloatArray) -> FloatArray:
    """Rater minus co-raters on the same items: mean difference, or total-variation distance of the labels."""
    if kind == "moments":
        with np.errstate(divide="ignore", invalid="ignore"):
            return loo[:, 2] / loo[:, 1] - loo[:, 5] / loo[:, 4]
    start = 1 if kind == "nominal" else q * q
    xs, ys = loo[:, start:start + q], loo[:, start + q:start + 2 * q]
    with np.errstate(divide="ignore", invalid="ignore"):
        p = xs / xs.sum(axis=1, keepdims=True)
        r = ys / ys.sum(axis=1, keepdims=True)
        return 0.5 * np.abs(p - r).sum(axis=1)


def _num(value: Any) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None
