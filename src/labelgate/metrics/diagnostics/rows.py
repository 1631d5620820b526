r"""Per-rater rows (the report contract) from :class:`RaterSums`, and the ``low_agreement`` judgement of a pool.

The rows carry each rater's kappas with their score intervals and the one-sided p-value of the basis the rater
is judged on (:mod:`~labelgate.metrics.diagnostics.judging`); :func:`judge_rows` then flags, across all the raters
of one pool and question, those that Benjamini-Hochberg rejects, and gives every other rater the workload it needs
before a flag is possible. The batch diagnostics judge the rows at once; the monitor stores unjudged rows of the
raters a pass touched and judges the whole pool when it reads them, so the family is always every rater.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from labelgate.core.ratings import FloatArray
from labelgate.metrics.diagnostics.blocks import Kind
from labelgate.metrics.diagnostics.judging import (
    AgreementTest,
    agreement_test,
    benjamini_hochberg,
    items_needed,
    level_for_next_flag,
)
from labelgate.metrics.diagnostics.sums import RaterSums


def rater_rows_from_sums(rater_ids: Sequence[Any], sums: RaterSums, *, kind: Kind, q: int, pool_name: str,
                         ci: float | None, partners: dict[int, list[Any]] | None = None,
                         min_agreement: float = 0.2, min_shared_items: int = 10, effect: float = 0.2,
                         fdr: float | None = 0.1, power: float = 0.8) -> list[dict[str, Any]]:
    """Per-rater rows (the contract shape) from :class:`RaterSums`, judged across them unless ``fdr`` is None.

    ``partners`` maps a rater position to its collusion partners. With ``ci=None`` the rows have no interval,
    no basis, no p-value and are not judged (no ``low_agreement`` flag, no ``judged``). With ``fdr=None`` the rows
    carry their p-values but are not judged: the caller judges the whole pool later with :func:`judge_rows`.
    """
    level = 0.95 if ci is None else float(ci)
    tests = {basis: agreement_test(kind, q, getattr(sums, name), getattr(sums, f"{name}_second"),
                                   getattr(sums, f"{name}_n"), level=level, min_agreement=min_agreement,
                                   effect=effect)
             for basis, name in (("trusted", "trusted"), ("peers", "loo"))}
    kx, loo = tests["trusted"], tests["peers"]
    bias = _bias(kind, q, sums.loo)
    partners = partners or {}
    with_ci = ci is not None
    rows = []
    for g, rater in enumerate(rater_ids):
        has_t, has_loo = sums.trusted_n[g] > 0, sums.loo_n[g] > 0
        row = {"rater_id": rater, "pool": pool_name, "n_ratings": int(sums.n_ratings[g]),
               "n_shared_items": int(sums.trusted_n[g]),
               "kappa_vs_trusted": _num(kx.value[g]) if has_t else None,
               "kappa_ci_low": _num(kx.low[g]) if has_t and with_ci else None,
               "kappa_ci_high": _num(kx.high[g]) if has_t and with_ci else None,
               "loo_agreement": _num(loo.value[g]) if has_loo else None,
               "loo_ci_low": _num(loo.low[g]) if has_loo and with_ci else None,
               "loo_ci_high": _num(loo.high[g]) if has_loo and with_ci else None,
               "n_loo_items": int(sums.loo_n[g]),
               "bias": _num(bias[g]), "flags": [], "partners": sorted(partners.get(g, []), key=str),
               "agreement_basis": _basis(int(sums.trusted_n[g]), int(sums.loo_n[g]), min_shared_items)
               if with_ci else None,
               "p_value": None, "workload": None}
        if with_ci:
            _attach_test(row, g, kx, loo, min_shared_items)
        if row["partners"]:
            row["flags"].append("collusion")
        rows.append(row)
    if fdr is not None and ci is not None:
        judge_rows(rows, fdr=fdr, power=power, min_items=min_shared_items)
    return rows


def _basis(n_trusted: int, n_peers: int, min_items: int) -> str | None:
    """Judged on the trusted pool with ``min_items`` shared items, else on the co-raters with that many, else not."""
    if n_trusted >= min_items:
        return "trusted"
    if n_peers >= min_items:
        return "peers"
    return None


def _attach_test(row: dict[str, Any], g: int, kx: AgreementTest, loo: AgreementTest, min_items: int) -> None:
    """The p-value of the basis the rater is judged on, and the workload parameters of the basis it will be."""
    basis = row["agreement_basis"]
    # a rater not judged yet will be judged on the trusted pool once it shares enough items with it, if it shares any
    future = basis or ("trusted" if row["n_shared_items"] > 0 else "peers" if row["n_loo_items"] > 0 else None)
    if basis is not None:
        test = kx if basis == "trusted" else loo
        row["p_value"] = _num(test.p_value[g])
    if future is not None:
        test = kx if future == "trusted" else loo
        n = row["n_shared_items"] if future == "trusted" else row["n_loo_items"]
        shift, sd0, sd1 = (_num(a[g]) for a in (test.shift, test.sd_null, test.sd_alt))
        if shift is not None and sd0 is not None and sd1 is not None:
            row["workload"] = {"basis": future, "shift": shift, "sd_null": sd0, "sd_alt": sd1,
                               "trials_per_item": float(test.trials[g]) / n if n else 1.0}


def judge_rows(rows: Iterable[dict[str, Any]], *, fdr: float, power: float = 0.8,
               min_items: int = 10) -> list[dict[str, Any]]:
    """Flag ``low_agreement`` across the rows of one pool and question (Benjamini-Hochberg at ``fdr``), in place.

    Each row gets ``judged`` (its data can judge it: flagged, or enough items on its basis for the test to find a
    rater ``effect`` below the minimum with probability ``power``), ``needs_items`` (that workload, in items on
    its basis, at least ``min_items``, converting trials to items with the pool's median effective trials per
    item; a rater without a test of its own yet gets the pool's median workload; None when flagged or when no rater
    of the pool has a workload) and ``flag_level`` (the level
    Benjamini-Hochberg applies to one more flag, :math:`q (k + 1) / m`, the workload's level). Rows without a
    p-value are not tested and do not count in ``m``.

    Examples
    --------
    >>> rows = [{"flags": [], "p_value": p, "agreement_basis": "trusted", "n_shared_items": 30,
    ...          "workload": {"basis": "trusted", "shift": 0.15, "sd_null": 0.49, "sd_alt": 0.43,
    ...                       "trials_per_item": 1.0}} for p in (0.001, 0.2, 0.6)]
    >>> [(r["flags"], r["judged"], r["needs_items"]) for r in judge_rows(rows, fdr=0.1)]
    [(['low_agreement'], True, None), ([], False, 54), ([], False, 54)]
    """
    rows = list(rows)
    for row in rows:
        row["flags"] = [f for f in row.get("flags") or [] if f != "low_agreement"]
    p = np.asarray([_p_or_nan(r) for r in rows], dtype=np.float64)
    flagged = benjamini_hochberg(p, fdr)
    n_tested, n_flagged = int(np.isfinite(p).sum()), int(flagged.sum())
    per_item = _trials_per_item(rows)
    for row, tested, flag in zip(rows, np.isfinite(p), flagged, strict=True):
        level = level_for_next_flag(fdr, n_flagged, n_tested if tested else n_tested + 1)
        row["flag_level"] = level
        row["needs_items"] = None if flag else _needs(row.get("workload"), level, power, min_items, per_item)
        if flag:
            row["flags"].insert(0, "low_agreement")
    known = [r["needs_items"] for r in rows if r["needs_items"] is not None]
    typical = int(np.ceil(np.median(known))) if known else None
    for row, tested, flag in zip(rows, np.isfinite(p), flagged, strict=True):
        if row["needs_items"] is None and not flag:
            row["needs_items"] = typical  # no test of its own yet (e.g. one item): the pool's typical workload
        have = row["n_shared_items"] if row.get("agreement_basis") == "trusted" else row.get("n_loo_items") or 0
        row["judged"] = bool(flag or (tested and row["needs_items"] is not None and have >= row["needs_items"]))
    return rows


def judgement_summary(rows: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """How many raters of judged rows the data could judge: ``n_raters, n_judged, n_flagged, n_too_few`` and the range
    ``needs_min, needs_max`` of the workloads of those with too few items (None without judged rows).

    >>> judgement_summary([{"judged": True, "flags": []}, {"judged": False, "flags": [], "needs_items": 23}])
    {'n_raters': 2, 'n_judged': 1, 'n_flagged': 0, 'n_too_few': 1, 'needs_min': 23, 'needs_max': 23}
    """
    rows = [r for r in rows if "judged" in r]
    if not rows:
        return None
    waiting = [r for r in rows if not r["judged"]]
    needs = [int(r["needs_items"]) for r in waiting if r.get("needs_items") is not None]
    return {"n_raters": len(rows), "n_judged": len(rows) - len(waiting),
            "n_flagged": sum("low_agreement" in (r.get("flags") or []) for r in rows), "n_too_few": len(waiting),
            "needs_min": min(needs) if needs else None, "needs_max": max(needs) if needs else None}


def too_few_text(summary: dict[str, Any] | None) -> str | None:
    """One line for a :func:`judgement_summary`: "12 of 40 raters have too few items to judge (need ≥ 23–31 items)".

    >>> too_few_text({"n_raters": 40, "n_too_few": 12, "needs_min": 23, "needs_max": 31})
    '12 of 40 raters have too few items to judge (each needs ≥ 23–31 items on its basis)'
    """
    if not summary or not summary.get("n_too_few"):
        return None
    low, high = summary.get("needs_min"), summary.get("needs_max")
    need = "" if low is None else f" (each needs ≥ {low} items on its basis)" if low == high else \
        f" (each needs ≥ {low}–{high} items on its basis)"
    return f"{summary['n_too_few']} of {summary['n_raters']} raters have too few items to judge{need}"


def _p_or_nan(row: dict[str, Any]) -> float:
    value = row.get("p_value")
    return float(value) if value is not None and row.get("agreement_basis") is not None else math.nan


def _trials_per_item(rows: list[dict[str, Any]]) -> float:
    """The pool's effective trials per item: the median over its raters with a workload (1 when there is none).

    A rater's own ratio rests on its few items; the pool's median is the design effect of the job."""
    ratios = [float(w["trials_per_item"]) for r in rows if (w := r.get("workload")) and w.get("trials_per_item")]
    ratios = [x for x in ratios if math.isfinite(x) and x > 0]
    return float(np.median(ratios)) if ratios else 1.0


def _needs(workload: dict[str, Any] | None, level: float, power: float, min_items: int,
           per_item: float) -> int | None:
    """Items on the rater's basis at which the test reaches ``power`` at ``level`` (None: unknown or unreachable)."""
    if not workload:
        return None
    trials = float(items_needed(np.asarray([workload["shift"]]), np.asarray([workload["sd_null"]]),
                                np.asarray([workload["sd_alt"]]), level, power)[0])
    if not math.isfinite(trials):
        return None
    return max(min_items, math.ceil(trials / per_item - 1e-9))


def _bias(kind: Kind, q: int, loo: FloatArray) -> FloatArray:
    """Rater minus co-raters on the same items: mean difference, or total-variation distance of the labels."""
    if kind == "moments":
        with np.errstate(divide="ignore", invalid="ignore"):
            return loo[:, 2] / loo[:, 1] - loo[:, 5] / loo[:, 4]
    start = 1 if kind in ("nominal", "matrix") else q * q
    xs, ys = loo[:, start:start + q], loo[:, start + q:start + 2 * q]
    with np.errstate(divide="ignore", invalid="ignore"):
        p = xs / xs.sum(axis=1, keepdims=True)
        r = ys / ys.sum(axis=1, keepdims=True)
        return 0.5 * np.abs(p - r).sum(axis=1)


def _num(value: Any) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None
