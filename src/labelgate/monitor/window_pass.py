"""The window pass of a monitor: measure every window that closed since the last pass, run the drift detectors on
each, and record windows and episode events (one transaction, the caller's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
from sqlalchemy import insert
from sqlalchemy.engine import Connection

from labelgate.monitor import drift as drift_mod
from labelgate.monitor import episodes, judgements, windows
from labelgate.monitor.arl import cusum_limit
from labelgate.monitor.series import series_record, series_row
from labelgate.monitor.state import Meta
from labelgate.monitor.stream_store import Stream
from labelgate.monitor.touched import TRUSTED
from labelgate.pipeline.config import MonitorConfig
from labelgate.pipeline.tables import windows_table

_WINDOW_BATCH = 50  # windows measured per range query


@dataclass(frozen=True)
class _Scope:
    """What every window of one question's pass is measured and recorded with."""

    cfg: MonitorConfig
    monitor: str
    question: str
    meta: Meta
    metrics: list[str]
    thresholds: dict[str, float | None]
    pass_id: str


def measure_windows(
    conn: Connection,
    cfg: MonitorConfig,
    monitor: str,
    stream: Stream,
    question: str,
    thresholds: dict[str, float | None],
    pass_id: str,
) -> tuple[int, list[dict[str, Any]]]:
    """Measure the windows of ``question`` that closed since the stream's ``closed_until``; run the detectors.

    ``thresholds`` are the gate thresholds of each metric (:func:`labelgate.monitor.cumulative.measure`). The
    stream's ``closed_until`` advances. Returns the number of windows measured and the episode events they opened
    or closed.
    """
    window, r = cfg.monitor.window, stream.row
    start, stop = windows.to_close(window, r["closed_until"], r["first_ts"], r["watermark"], r["n_seq"])
    if stop <= start:
        return 0, []
    metrics: list[str] = [m for m in cfg.monitor.metrics if m in windows.WINDOW_METRICS]
    scope = _Scope(cfg, monitor, question, stream.meta, metrics, thresholds, pass_id)
    detectors = episodes.load_detectors(conn, monitor, question, metrics)
    measured, events = 0, []
    for batch in range(start, stop, _WINDOW_BATCH):
        crowd = judgements.load_windows(conn, window, r["stream_id"], batch, min(stop, batch + _WINDOW_BATCH))
        if crowd.empty:
            continue
        crowd["window"] = windows.window_index(window, crowd["ts"].to_numpy(), crowd["seq"].to_numpy())
        trusted = judgements.load_items(conn, r["stream_id"], crowd["item_id"].unique().tolist(), pool=TRUSTED)
        for index, rows in crowd.groupby("window", sort=True):
            mine = trusted.loc[trusted["item_id"].isin(rows["item_id"].unique())]
            events += _measure_window(conn, scope, int(index), rows, mine, detectors)
            measured += 1
    r["closed_until"] = stop
    episodes.save_detectors(conn, monitor, question, detectors)
    return measured, events


def _measure_window(
    conn: Connection,
    scope: _Scope,
    index: int,
    crowd: pd.DataFrame,
    trusted: pd.DataFrame,
    detectors: dict[str, dict[str, Any]],
) -> list[dict[str, Any]]:
    """Measure one window, record its rows and step each metric's detectors; returns the episode events."""
    cfg, question = scope.cfg, scope.question
    seed = [int(cfg.interval.seed or 0), int(index)]
    numbers = windows.measure(
        crowd, trusted, scope.meta, scope.metrics, ci=cfg.interval.ci, n_boot=cfg.monitor.n_boot, seed=seed
    )
    start, end = windows.bounds(cfg.monitor.window, index, crowd["ts"].to_numpy())
    records, events = [], []
    drift = cfg.monitor.drift
    change_metrics = set(drift.change.metrics)
    limit = cusum_limit(drift.change, episodes.series_count(cfg))  # the monitor's budget over all its series
    baseline_metrics = set(drift.baseline_metrics if drift.baseline_metrics is not None else scope.metrics)
    worst: list[str] | None = None
    for metric in scope.metrics:
        row = series_row(question, metric, "window", start, end, numbers[metric], scope.thresholds.get(metric))
        records.append(series_record(scope.monitor, question, metric, "window", index, start, end, row, scope.pass_id))
        found = drift_mod.step(
            detectors[metric],
            {**row, "window_index": index, "window_start": start, "window_end": end},
            threshold=row["threshold"],
            baseline=drift.baseline and metric in baseline_metrics,
            change=metric in change_metrics,
            drift=drift,
            level=cfg.interval.ci or 0.95,
            h=limit,
        )
        for event in found:
            if event.transition == "open" and worst is None:
                worst = windows.worst_raters(crowd, trusted, scope.meta, cfg.monitor.raters.worst)
            events.append(
                episodes.record_event(conn, scope.monitor, question, metric, event, worst or [], detectors[metric])
            )
    conn.execute(insert(windows_table), records)
    return events
