r"""Pre-flight check of a monitor configuration: will its gates and detectors tell drift from noise at this window size?

From the monitor's own stored windows (at least ``change.reference_windows`` of them, the same windows the change
detector learns its reference from), for every series with a baseline threshold:

- the level :math:`m` (mean window value), the window standard error :math:`s` (root mean square of the windows'
  bootstrap standard errors) and the total window-to-window spread :math:`v = \max(s^2, \widehat{\mathrm{var}})`;
- the chance that a stable window breaches (the ``ci_high`` rule: :math:`x + z s < t`),
  :math:`p = \Phi\big((t - z s - m)/\sqrt v\big)` (the ``value`` rule drops :math:`z s`;
  :func:`labelgate.monitor.arl.breach_probability`), as breaching windows per 100, and how many windows apart false
  episodes open with the rule's persistence ``r`` (:func:`labelgate.monitor.arl.baseline_persistence`),
  :math:`\mathrm{ARL}(p, r)` (:func:`labelgate.monitor.arl.runs_arl`; with the default hysteresis an open episode
  then lasts, one incident);
- a warning when that is shorter than the series' share of the monitor's target (the run length ``T`` of
  :mod:`labelgate.monitor.arl`), with the threshold at which it would be ``T`` — the breach probability
  :math:`p^*` with :math:`\mathrm{ARL}(p^*, r) = T`, :math:`t^* = m + z s + \Phi^{-1}(p^*)\sqrt v` — and the window
  size at which the current threshold would do (window standard errors scale as :math:`1/\sqrt{\text{items}}`);
- for the change detector, the smallest sustained drop it detects within 10 windows on average,
  :math:`(k + (h + 1.166)/10)\sqrt v` (a one-sided CUSUM gains :math:`\delta - k` a window on a shift of
  :math:`\delta` SE and alarms at about :math:`h + 1.166`), with ``h`` from the monitor's budget
  (:func:`labelgate.monitor.episodes.series_count`).

One line per series; ``labelgate monitor --config … --check``.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

from labelgate.monitor import arl, episodes
from labelgate.monitor import drift as drift_mod
from labelgate.monitor.history import history
from labelgate.pipeline.config import MonitorConfig, as_monitor_config

_NORMAL = NormalDist()
#: Windows within which the change detector's detectable drop is reported.
DETECTION_WINDOWS = 10


def check(config: Any) -> list[dict[str, Any]]:
    """One finding per (question, metric) series with a baseline threshold or a change detector.

    Each finding has ``question``, ``metric``, ``windows`` (used), and, when there are enough windows, ``level``,
    ``window_se``, ``spread``, ``items`` (median per window); for a baseline gate ``threshold``,
    ``breaches_per_100``, ``persistence``, ``false_episode_every`` and ``target_every`` (windows), ``warn`` and, when
    it warns,
    ``suggested_threshold`` and ``suggested_items``; for a change-detected series ``detectable_drop``. ``message``
    says it in one line.
    """
    cfg: MonitorConfig = as_monitor_config(config)
    drift = cfg.monitor.drift
    rows = [w for w in history(cfg)["windows"] if w["scope"] == "window"]
    series: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        series.setdefault((row["question"], row["metric"]), []).append(row)
    change_metrics = set(drift.change.metrics)
    baseline_metrics = set(drift.baseline_metrics if drift.baseline_metrics is not None else cfg.monitor.metrics)
    h = arl.cusum_limit(drift.change, episodes.series_count(cfg))
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
        z = arl.breach_z(drift, level_ci)
        p = arl.breach_probability(m, s, spread, threshold, z)
        runs = arl.baseline_persistence(drift, h, level_ci, s, spread)
        every = arl.runs_arl(p, runs)
        share = arl.run_length(drift.change.k, h)  # the series' share of the monitor's target
        out.update(threshold=threshold, breaches_per_100=100.0 * p, persistence=runs, false_episode_every=every,
                   target_every=share, warn=every < share)
        text = (f"gate {metric} >= {threshold:.3f}: {100 * p:.1f} breaching windows per 100 expected on stable data "
                f"at {items} items per window (level {m:.3f}, window SE {s:.3f}); an episode opens after {runs} in a "
                f"row: a false one every {_windows(every)} windows (the target allows one every {share:.0f})")
        if every < share:
            tolerated = _tolerated(share, runs)
            suggested = m + z * s + _NORMAL.inv_cdf(tolerated) * spread
            larger = _items_needed(m, s, spread, threshold, z, items, tolerated)
            out.update(suggested_threshold=suggested, suggested_items=larger)
            text += f"; lower it to {suggested:.3f}" + (
                f" or use windows of >= {larger} items" if larger is not None else
                " (the level itself is too close to it for any window size)")
        parts.append(text)
    if change:
        drop = (drift.change.k + (h + 1.166) / DETECTION_WINDOWS) * spread
        out["detectable_drop"] = drop
        parts.append(f"the change detector sees a sustained drop of >= {drop:.3f} within {DETECTION_WINDOWS} windows")
    out["message"] = f"[{question}] " + ("; ".join(parts) if parts else metric)
    return out


def _windows(count: float) -> str:
    if not math.isfinite(count):
        return "never (no breach on stable data)"
    return f"{count:.0f}" if count < 1e6 else "> 1,000,000"


def _tolerated(share: float, runs: int) -> float:
    """The breach probability at which ``runs`` breaches in a row come once every ``share`` windows."""
    low, high = 0.0, 1.0  # runs_arl falls as p grows
    for _ in range(60):
        mid = (low + high) / 2.0
        low, high = (mid, high) if arl.runs_arl(mid, runs) > share else (low, mid)
    return low


def _items_needed(m: float, s: float, spread: float, threshold: float, z: float, items: int,
                  tolerated: float) -> int | None:
    """The smallest window (items, in steps of 25 %) at which the current threshold breaches stable windows with at
    most the probability ``tolerated``; None up to 10,000 times the current window.

    The window-to-window spread beyond sampling (item and rater mix) does not shrink with the window: only ``s``
    does, as ``1 / sqrt(items)``. Under the ``ci_high`` rule narrower intervals can breach *more* often (a level
    below the threshold is then seen for what it is), so larger windows do not always help.
    """
    tau2 = max(spread * spread - s * s, 0.0)
    if s <= 0:
        return None
    factor = 1.0
    while factor < 1e4:
        factor *= 1.25
        narrower = s / math.sqrt(factor)
        if arl.breach_probability(m, narrower, math.sqrt(narrower * narrower + tau2), threshold, z) <= tolerated:
            return math.ceil(items * factor)
    return None
