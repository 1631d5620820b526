"""The window pass of a monitor: measure every window that closed since the last pass, run the drift detectors on
each, and record windows and episode events (one transaction, the caller's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
from sqlalchemy import insert
from sqlalchemy.engine import Connection

from labelgate.monitor import cusum, episodes, judgements, windows
from labelgate.monitor import drift as drift_mod
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
    series: tuple[list[str], list[str]]  # the metrics under a baseline rule, under the change detector


def measure_windows(
    conn: Connection,
    cfg: MonitorConfig,
    monitor: str,
    stream: Stream,
    question: str,
    thresholds: dict[str, float | None],
    pass_id: str,
) -> tuple[int, list[dict[str, Any]], list[dict[str, Any]]]:
    """Measure the windows of ``question`` that closed since the stream's ``closed_until``; run the detectors.

    ``thresholds`` are the gate thresholds of each metric (:func:`labelgate.monitor.cumulative.measure`). The
    stream's ``closed_until`` advances. Returns the number of windows measured, the episode events they opened or
    closed, and the change-detected series still learning their reference (:func:`labelgate.monitor.cusum.learning`).
    """
    window, r = cfg.monitor.window, stream.row
    metrics: list[str] = [m for m in cfg.monitor.metrics if m in windows.WINDOW_METRICS]
    scope = _Scope(cfg, monitor, question, stream.meta, metrics, thresholds, pass_id,
                   episodes.question_series(cfg, next(q for q in cfg.questions if q.name == question)))
    detectors = episodes.load_detectors(conn, monitor, question, metrics)
    start, stop = windows.to_close(window, r["closed_until"], r["first_ts"], r["watermark"], r["n_seq"])
    if stop <= start:
        return 0, [], _learning(scope, detectors)
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
    return measured, events, _learning(scope, detectors)


def _learning(scope: _Scope, detectors: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    start = scope.cfg.monitor.drift.change.reference_windows
    found = (cusum.learning(cusum.upgrade(detectors[m]["change"]), m, start) for m in scope.series[1])
    return [one for one in found if one is not None]


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
    level = cfg.interval.ci or 0.95
    limit = cusum_limit(drift.change, episodes.series_count(cfg))  # the monitor's budget over all its series
    gated, changed = scope.series
    change_h = drift_mod.change_limit(detectors, scope.thresholds, gated, changed, drift, level, limit)
    worst: list[str] | None = None
    for metric in scope.metrics:
        row = series_row(question, metric, "window", start, end, numbers[metric], scope.thresholds.get(metric))
        records.append(series_record(scope.monitor, question, metric, "window", index, start, end, row, scope.pass_id))
        found = drift_mod.step(
            detectors[metric],
            {**row, "window_index": index, "window_start": start, "window_end": end},
            threshold=row["threshold"],
            baseline=metric in gated,
            change=metric in changed,
            drift=drift,
            level=level,
            h=limit,
            change_h=change_h,
        )
        for event in found:
            if event.transition == "open" and worst is None:
                worst = windows.worst_raters(crowd, trusted, scope.meta, cfg.monitor.raters.worst)
            events.append(
                episodes.record_event(conn, scope.monitor, question, metric, event, worst or [], detectors[metric])
            )
    conn.execute(insert(windows_table), records)
    return events
