"""Windows of the monitored series and their metrics (computed by the core, with bootstrap intervals).

A window holds the **crowd** judgements whose timestamp falls in it (time windows) or that are among the
same block of ``annotations`` consecutive crowd judgements in merge order (count windows). Its metrics are
the core's on those judgements: SPA and the crowd IRR on the window alone (so a window must be long enough
to hold several ratings of one item), kappa_x and normalized kappa_x of the window's crowd judgements against
**all** trusted judgements of the same items (the trusted replication is the fixed reference).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from labelgate import metrics as lg
from labelgate.core.estimate import Estimate
from labelgate.core.ratings import Ratings
from labelgate.errors import DesignError
from labelgate.metrics.diagnostics import rater_diagnostics
from labelgate.monitor.state import Meta
from labelgate.pipeline.config import Window

US_PER_HOUR = 3_600_000_000
WINDOW_METRICS = ("spa", "irr_crowd", "cross_kappa", "normalized_cross_kappa")

IRR_FUNCTIONS: dict[str, Callable[..., Estimate]] = {
    "krippendorff_alpha": lg.krippendorff_alpha,
    "fleiss_kappa": lg.fleiss_kappa,
    "gwet_ac": lg.gwet_ac,
}


def length_us(window: Window) -> int:
    """Length of a time window in microseconds."""
    return round(window.length_hours * US_PER_HOUR)


def to_close(
    window: Window, closed_until: int | None, first_ts: int | None, watermark: int | None, n_seq: int
) -> tuple[int, int]:
    """Indices ``[start, stop)`` of the windows that are closed and not yet measured.

    Time windows: window ``w`` covers ``[w L, (w + 1) L)`` (microseconds since the epoch) and is closed when
    ``(w + 1) L + lateness <= watermark``. Count windows: window ``w`` holds crowd judgements with merge
    sequence ``[w N, (w + 1) N)`` and is closed when ``n_seq >= (w + 1) N``.

    Examples
    --------
    >>> from labelgate.pipeline.config import Window
    >>> to_close(Window(annotations=100), None, None, None, n_seq=250)
    (0, 2)
    >>> to_close(Window(hours=1), None, first_ts=90 * 60 * 10**6, watermark=4 * 3600 * 10**6, n_seq=0)
    (1, 4)
    """
    if window.kind == "annotations":
        return (closed_until or 0), n_seq // int(window.annotations or 1)
    if first_ts is None or watermark is None:
        return (closed_until or 0), (closed_until or 0)
    size = length_us(window)
    start = closed_until if closed_until is not None else first_ts // size
    stop = (watermark - round(window.lateness_hours * US_PER_HOUR)) // size
    return start, max(start, stop)


def window_index(window: Window, ts: np.ndarray, seq: np.ndarray) -> np.ndarray:
    """Window of each judgement."""
    if window.kind == "annotations":
        return seq // int(window.annotations or 1)
    return ts // length_us(window)


def bounds(window: Window, index: int, ts: np.ndarray) -> tuple[int, int]:
    """(start, end) in microseconds: the grid for time windows, first and last time for count windows."""
    if window.kind == "hours":
        size = length_us(window)
        return index * size, (index + 1) * size
    return int(ts.min()), int(ts.max())


def build_pools(crowd: pd.DataFrame, trusted: pd.DataFrame, meta: Meta) -> tuple[Ratings, Ratings | None]:
    """Ratings of a window's crowd judgements and of the trusted judgements on its items (one item index)."""
    items = pd.concat([crowd["item_id"], trusted["item_id"]], ignore_index=True)
    codes, labels = pd.factorize(items)
    item_labels = np.asarray(labels, dtype=object)

    def one(frame: pd.DataFrame, item_codes: np.ndarray) -> Ratings:
        rater_codes, raters = pd.factorize(frame["rater_id"])
        return meta.ratings(item_codes, rater_codes, frame["code"].to_numpy(np.int64), item_labels=item_labels,
                            rater_labels=np.asarray(raters, dtype=object))

    n = len(crowd)
    crowd_r = one(crowd, codes[:n])
    trusted_r = one(trusted, codes[n:]) if len(trusted) else None
    return crowd_r, trusted_r


def measure(
    crowd: pd.DataFrame,
    trusted: pd.DataFrame,
    meta: Meta,
    metrics: list[str],
    *,
    ci: float | None,
    n_boot: int,
    seed: Any,
) -> dict[str, dict[str, Any]]:
    """Window rows' numbers (value, ci_low, ci_high, n_items, n_ratings) of each window metric."""
    crowd_r, trusted_r = build_pools(crowd, trusted, meta)
    out = {}
    for position, metric in enumerate(m for m in WINDOW_METRICS if m in metrics):
        rng = np.random.Generator(np.random.SFC64(np.random.SeedSequence([*seed, position])))
        out[metric] = _estimate(metric, crowd_r, trusted_r, meta, ci, n_boot, rng)
    return out


def _estimate(
    metric: str,
    crowd: Ratings,
    trusted: Ratings | None,
    meta: Meta,
    ci: float | None,
    n_boot: int,
    rng: np.random.Generator,
) -> dict[str, Any]:
    kw: dict[str, Any] = {"ci": ci, "n_boot": n_boot, "seed": rng}
    try:
        if metric == "spa":
            est = lg.spa(crowd, weighting=meta.weighting, **kw)
        elif metric == "irr_crowd":
            est = IRR_FUNCTIONS[meta.irr](crowd, **_weighted(meta), **kw)
        elif trusted is None:
            return _empty()
        elif metric == "cross_kappa":
            est = lg.cross_kappa(crowd, trusted, **kw)
        else:
            est = lg.normalized_cross_kappa(crowd, trusted, irr=meta.irr, **_weighted(meta), **kw)
    except DesignError:  # no common item with the trusted replication
        return _empty()
    d = est.to_dict()
    return {
        "value": d["value"],
        "ci_low": d["ci_low"],
        "ci_high": d["ci_high"],
        "n_items": est.n_items,
        "n_ratings": est.n_ratings,
    }


def _weighted(meta: Meta) -> dict[str, Any]:
    """The IRR's ``weights`` argument (none when the monitor sets no weighting: the coefficient's default)."""
    return {} if meta.weights is None else {"weights": meta.weights}


def _empty() -> dict[str, Any]:
    return {"value": None, "ci_low": None, "ci_high": None, "n_items": 0, "n_ratings": 0}


def worst_raters(
    crowd: pd.DataFrame, trusted: pd.DataFrame, meta: Meta, count: int, min_items: int = 3
) -> list[str]:
    """The ``count`` crowd raters of a window with the lowest kappa_x vs trusted (else vs peers)."""
    if count <= 0 or crowd.empty:
        return []
    crowd_r, trusted_r = build_pools(crowd, trusted, meta)
    rows = rater_diagnostics(crowd_r, trusted_r, ci=None, center=meta.center)
    scored = []
    for row in rows:
        if row["kappa_vs_trusted"] is not None and row["n_shared_items"] >= min_items:
            scored.append((row["kappa_vs_trusted"], str(row["rater_id"])))
        elif row["loo_agreement"] is not None and row["n_loo_items"] >= min_items:
            scored.append((row["loo_agreement"], str(row["rater_id"])))
    return [rater for _, rater in sorted(scored)[:count]]
