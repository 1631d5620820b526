"""The window pass of a monitor: measure every window that closed since the last pass, run the drift detectors on
each, and record windows and episode events (one transaction, the caller's)."""

from __future__ import annotations

from typing import Any

import pandas as pd
from sqlalchemy import insert, select
from sqlalchemy.engine import Connection

from labelgate.monitor import drift as drift_mod
from labelgate.monitor import episodes, windows
from labelgate.monitor.config import MonitorConfig
from labelgate.monitor.schema import judgements_table, windows_table
from labelgate.monitor.sources import utc
from labelgate.monitor.state import CROWD, TRUSTED, Parts, part_estimate

CHUNK = 500  # ids per IN (...) query
_WINDOW_BATCH = 50  # windows measured per range query


def load_items(
    conn: Connection, sid: int, items: list[str], pool: int | None = None
) -> pd.DataFrame:
    """The stored judgements of some items of a stream (of one pool, or both), queried in chunks of ids."""
    j = judgements_table
    columns = [j.c.pool, j.c.item_id, j.c.rater_id, j.c.code, j.c.value, j.c.ts, j.c.seq]
    parts: list[Any] = []
    for start in range(0, len(items), CHUNK):
        query = select(*columns).where(
            j.c.stream_id == sid, j.c.item_id.in_(items[start : start + CHUNK])
        )
        if pool is not None:
            query = query.where(j.c.pool == pool)
        parts.extend(conn.execute(query).all())
    return pd.DataFrame(parts, columns=["pool", "item_id", "rater_id", "code", "value", "ts", "seq"])


def series_record(monitor: str, question: str, metric: str, scope: str, index: int | None, start: int, end: int,
                  row: dict[str, Any], pass_id: str) -> dict[str, Any]:
    """One row of the stored series (a window's or the cumulative value of one metric)."""
    return {"monitor": monitor, "question": question, "metric": metric, "scope": scope, "window_index": index,
            "window_start": start, "window_end": end, "pass_id": pass_id,
            **{k: row[k] for k in ("value", "ci_low", "ci_high", "n_items", "n_ratings", "threshold")}}


def measure_windows(
    conn: Connection,
    cfg: MonitorConfig,
    monitor: str,
    stream: Any,
    question: Any,
    pass_id: str,
) -> tuple[int, list[dict[str, Any]]]:
    """Measure the windows of ``question`` that closed since the stream's ``closed_until``; run the detectors.

    ``stream`` is the engine's stream state (``row``, ``meta``, ``parts``); its ``closed_until`` advances. Returns
    the number of windows measured and the episode events they opened or closed.
    """
    window, r = cfg.monitor.window, stream.row
    start, stop = windows.to_close(window, r["closed_until"], r["first_ts"], r["watermark"], r["n_seq"])
    if stop <= start:
        return 0, []
    metrics: list[str] = [m for m in cfg.monitor.metrics if m in windows.WINDOW_METRICS]
    irr_trusted = None
    if stream.parts.get("irr_trusted") is not None and stream.parts["irr_trusted"].n > 0:
        parts = Parts(stream.meta)
        irr_trusted = part_estimate(
            parts, stream.parts["irr_trusted"].expand(parts.widths["irr_trusted"]), None
        )["value"]
    thresholds = episodes.thresholds(cfg, question, irr_trusted)
    detectors = episodes.load_detectors(conn, monitor, question.name, metrics)
    measured, events = 0, []
    for batch in range(start, stop, _WINDOW_BATCH):
        crowd = window_judgements(conn, cfg, r["stream_id"], batch, min(stop, batch + _WINDOW_BATCH))
        if crowd.empty:
            continue
        crowd["window"] = windows.window_index(window, crowd["ts"].to_numpy(), crowd["seq"].to_numpy())
        trusted = load_items(conn, r["stream_id"], crowd["item_id"].unique().tolist(), pool=TRUSTED)
        for index, rows in crowd.groupby("window", sort=True):
            items = rows["item_id"].unique()
            mine = trusted.loc[trusted["item_id"].isin(items)]
            events += _measure_window(
                conn, cfg, monitor, stream, question, int(index), rows, mine, metrics, thresholds, detectors, pass_id
            )
            measured += 1
    r["closed_until"] = stop
    episodes.save_detectors(conn, monitor, question.name, detectors)
    return measured, events


def window_judgements(conn: Connection, cfg: MonitorConfig, sid: int, start: int, stop: int) -> pd.DataFrame:
    """The crowd judgements of windows ``start`` to ``stop - 1`` (by time or by annotation count)."""
    j, window = judgements_table, cfg.monitor.window
    query = select(j.c.pool, j.c.item_id, j.c.rater_id, j.c.code, j.c.value, j.c.ts, j.c.seq).where(
        j.c.stream_id == sid, j.c.pool == CROWD
    )
    if window.kind == "hours":
        size = windows.length_us(window)
        query = query.where(j.c.ts >= start * size, j.c.ts < stop * size)
    else:
        n = int(window.annotations or 1)
        query = query.where(j.c.seq >= start * n, j.c.seq < stop * n)
    return pd.DataFrame(
        conn.execute(query).all(), columns=["pool", "item_id", "rater_id", "code", "value", "ts", "seq"]
    )


def _measure_window(
    conn: Connection,
    cfg: MonitorConfig,
    monitor: str,
    stream: Any,
    question: Any,
    index: int,
    crowd: pd.DataFrame,
    trusted: pd.DataFrame,
    metrics: list[str],
    thresholds: dict[str, float | None],
    detectors: dict[str, dict[str, Any]],
    pass_id: str,
) -> list[dict[str, Any]]:
    seed = [int(cfg.interval.seed or 0), int(index)]
    numbers = windows.measure(
        crowd, trusted, stream.meta, metrics, ci=cfg.interval.ci, n_boot=cfg.monitor.n_boot, seed=seed
    )
    start, end = windows.bounds(cfg.monitor.window, index, crowd["ts"].to_numpy())
    records, events = [], []
    drift = cfg.monitor.drift
    change_metrics = set(drift.change.metrics)
    baseline_metrics = set(drift.baseline_metrics if drift.baseline_metrics is not None else metrics)
    worst: list[str] | None = None
    for metric in metrics:
        row = {
            "question": question.name,
            "metric": metric,
            "window_start": utc(start),
            "window_end": utc(end),
            "scope": "window",
            **numbers[metric],
            "threshold": thresholds.get(metric),
        }
        records.append(series_record(monitor, question.name, metric, "window", index, start, end, row, pass_id))
        series_row = {**row, "window_index": index, "window_start": start, "window_end": end}
        found = drift_mod.step(
            detectors[metric],
            series_row,
            threshold=row["threshold"],
            baseline=drift.baseline and metric in baseline_metrics,
            change=metric in change_metrics,
            drift=drift,
            level=cfg.interval.ci or 0.95,
        )
        for event in found:
            if event.transition == "open" and worst is None:
                worst = windows.worst_raters(crowd, trusted, stream.meta, cfg.monitor.raters.worst)
            events.append(
                episodes.record_event(conn, monitor, question.name, metric, event, worst or [], detectors[metric])
            )
    conn.execute(insert(windows_table), records)
    return events
