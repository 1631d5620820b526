r"""Pre-flight check of a monitor configuration: will its gates and detectors tell drift from noise at this window size?

From the monitor's own stored windows (at least ``change.reference_windows`` of them, the same windows the change
detector learns its reference from), for every series with a baseline threshold:

- the level :math:`m` (mean window value), the window standard error :math:`s` (root mean square of the windows'
  bootstrap standard errors) and the total window-to-window spread :math:`v = \max(s^2, \widehat{\mathrm{var}})`;
- the chance that a stable window breaches (the ``ci_high`` rule: :math:`x + z s < t`),
  :math:`p = \Phi\big((t - z s - m)/\sqrt v\big)` (the ``value`` rule drops :math:`z s`), as breaching windows per
  100 — each one an alert when no episode is open;
- when :math:`p` exceeds 1 %: the threshold at which it would be 1 %, :math:`m - z s - z_{0.99}\sqrt v`, and the window
  size at which the current threshold would be (window standard errors scale as :math:`1/\sqrt{\text{items}}`);
- for the change detector, the smallest sustained drop it detects within 10 windows on average,
  :math:`(k + h/10)\sqrt v` (a one-sided CUSUM gains :math:`\delta - k` a window on a shift of :math:`\delta` SE).

One line per series; ``labelgate monitor --config … --check``.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

from labelgate.monitor import drift as drift_mod
from labelgate.monitor.arl import cusum_limit
from labelgate.monitor.history import history
from labelgate.pipeline.config import MonitorConfig, as_monitor_config

_NORMAL = NormalDist()
#: Breaching windows per window above which a baseline gate is said to sit within noise.
TOLERATED = 0.01
#: Windows within which the change detector's detectable drop is reported.
DETECTION_WINDOWS = 10


def check(config: Any) -> list[dict[str, Any]]:
    """One finding per (question, metric) series with a baseline threshold or a change detector.

    Each finding has ``question``, ``metric``, ``windows`` (used), and, when there are enough windows, ``level``,
    ``window_se``, ``spread``, ``items`` (median per window); for a baseline gate ``threshold``,
    ``breaches_per_100``, ``warn`` and, when it warns, ``suggested_threshold`` and ``suggested_items``; for a
    change-detected series ``detectable_drop``. ``message`` says it in one line.
    """
    cfg: MonitorConfig = as_monitor_config(config)
    drift = cfg.monitor.drift
    rows = [w for w in history(cfg)["windows"] if w["scope"] == "window"]
    series: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        series.setdefault((row["question"], row["metric"]), []).append(row)
    change_metrics = set(drift.change.metrics)
    baseline_metrics = set(drift.baseline_metrics if drift.baseline_metrics is not None else cfg.monitor.metrics)
    n_series = len(change_metrics & set(cfg.monitor.metrics)) * len(cfg.questions)
    h = cusum_limit(drift.change, n_series)
    findings = []
    for question in cfg.questions:
        for metric in cfg.monitor.metrics:
            judged = [r for r in series.get((question.name, metric), [])
                      if r["value"] is not None and (r["n_items"] or 0) >= drift.min_items]
            baseline = drift.baseline and metric in baseline_metrics and any(r["threshold"] is not None for r in judged)
            if not (baseline or metric in change_metrics):
                continue
            findings.append(_finding(question.name, metric, judged, cfg, baseline, metric in change_metrics, h))
    return findings


def _finding(question: str, metric: str, rows: list[dict[str, Any]], cfg: MonitorConfig, baseline: bool,
             change: bool, h: float) -> dict[str, Any]:
    drift, level_ci = cfg.monitor.drift, cfg.interval.ci or 0.95
    out: dict[str, Any] = {"question": question, "metric": metric, "windows": len(rows), "warn": False}
    need = drift.change.reference_windows
    if len(rows) < need:
        out["message"] = (f"[{question}] {metric}: {len(rows)} judged window(s) stored, {need} needed to check "
                          "(run the monitor for longer)")
        return out
    values = [float(r["value"]) for r in rows]
    ses = [se for r in rows if (se := drift_mod.standard_error(r, level_ci)) is not None]
    m = sum(values) / len(values)
    s = math.sqrt(sum(x * x for x in ses) / len(ses)) if ses else 0.0
    var = sum((x - m) ** 2 for x in values) / (len(values) - 1)
    spread = math.sqrt(max(s * s, var))
    items = sorted(int(r["n_items"]) for r in rows)[len(rows) // 2]
    out.update(level=m, window_se=s, spread=spread, items=items)
    parts = []
    if baseline:
        threshold = float(next(r["threshold"] for r in reversed(rows) if r["threshold"] is not None))
        z = _NORMAL.inv_cdf(0.5 + level_ci / 2.0) if drift.baseline_rule == "ci_high" else 0.0
        p = _breach_probability(m, s, spread, threshold, z)
        out.update(threshold=threshold, breaches_per_100=100.0 * p, warn=p > TOLERATED)
        text = (f"gate {metric} >= {threshold:.3f}: {100 * p:.1f} breaching windows per 100 expected on stable data "
                f"at {items} items per window (level {m:.3f}, window SE {s:.3f})")
        if p > TOLERATED:
            suggested = m - z * s - _NORMAL.inv_cdf(1 - TOLERATED) * spread
            larger = _items_needed(m, s, spread, threshold, z, items)
            out.update(suggested_threshold=suggested, suggested_items=larger)
            text += f"; lower it to {suggested:.3f}" + (
                f" or use windows of >= {larger} items" if larger is not None else
                " (the level itself is too close to it for any window size)")
        parts.append(text)
    if change:
        drop = (drift.change.k + h / DETECTION_WINDOWS) * spread
        out["detectable_drop"] = drop
        parts.append(f"the change detector sees a sustained drop of >= {drop:.3f} within {DETECTION_WINDOWS} windows")
    out["message"] = f"[{question}] " + ("; ".join(parts) if parts else metric)
    return out


def _breach_probability(m: float, s: float, spread: float, threshold: float, z: float) -> float:
    return _NORMAL.cdf((threshold - z * s - m) / spread) if spread > 0 else float(m + z * s < threshold)


def _items_needed(m: float, s: float, spread: float, threshold: float, z: float, items: int) -> int | None:
    """Items per window at which the current threshold breaches at most :data:`TOLERATED` of stable windows.

    The window-to-window spread beyond sampling (item and rater mix) does not shrink with the window: only ``s``
    does, as ``1 / sqrt(items)``.
    """
    tau2 = max(spread * spread - s * s, 0.0)
    q = _NORMAL.inv_cdf(1 - TOLERATED)
    gap = m - threshold
    if s <= 0 or gap <= q * math.sqrt(tau2):
        return None
    low, high = 0.0, s  # bisection on the new window standard error
    for _ in range(60):
        mid = (low + high) / 2.0
        ok = gap >= z * mid + q * math.sqrt(mid * mid + tau2)
        low, high = (mid, high) if ok else (low, mid)
    return math.ceil(items * (s / low) ** 2) if low > 0 else None
