"""The monitor's history: the stored window series, the drift episodes and the current per-rater rows.

Shapes are what the monitoring report reads (:func:`labelgate.reporting.report.render_monitor_report`): window rows
``{question, metric, window_start, window_end, scope, value, ci_low, ci_high, n_items, n_ratings,
threshold}``, episodes ``{episode_id, question, metric, kind, opened_at, closed_at, reason,
worst_raters, close_reason, metrics, alarms}`` (one per drift incident of a question: ``metric``, ``kind`` and
``reason`` of the alarm that opened it, ``metrics`` every series that fired, ``alarms`` every alarm with its numbers,
:func:`alarm_row`), per-rater rows ``{rater_id, pool, n_ratings, n_shared_items, kappa_vs_trusted,
kappa_ci_low, kappa_ci_high, loo_agreement, bias, flags, partners}`` plus ``question`` and the extra keys of
:func:`labelgate.metrics.diagnostics.rater_diagnostics`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pandas as pd
from sqlalchemy import or_, select

from labelgate.monitor.engine import Monitor
from labelgate.monitor.episodes import members
from labelgate.monitor.rater_rows import judge_stored
from labelgate.pipeline.serialize import utc
from labelgate.pipeline.tables import episodes_table, raters_table, streams_table, windows_table

WINDOW_KEYS = (
    "question",
    "metric",
    "window_start",
    "window_end",
    "scope",
    "value",
    "ci_low",
    "ci_high",
    "n_items",
    "n_ratings",
    "threshold",
)


def history(config_or_path: Any, since: str | datetime | None = None) -> dict[str, list[dict[str, Any]]]:
    """Stored window rows (window and cumulative scopes), episodes and per-rater rows of a monitor.

    Parameters
    ----------
    config_or_path : path, mapping or MonitorConfig
        The monitor configuration (its ``store`` and ``monitor.name`` select the data).
    since : ISO 8601 string or datetime, optional
        Only windows ending at or after this time, and episodes open at or after it (or still open then).

    Returns
    -------
    dict
        ``{"windows": [...], "episodes": [...], "raters": [...]}``, windows ordered by question, metric,
        scope and end time; NaN is None.
    """
    monitor = Monitor(config_or_path)
    cutoff = _micros(since)
    w, e = windows_table, episodes_table
    query = (
        select(w)
        .where(w.c.monitor == monitor.name)
        .order_by(w.c.question, w.c.metric, w.c.scope, w.c.window_end, w.c.row_id)
    )
    if cutoff is not None:
        query = query.where(w.c.window_end >= cutoff)
    episodes_query = select(e).where(e.c.monitor == monitor.name).order_by(e.c.opened_at, e.c.episode_id)
    if cutoff is not None:
        episodes_query = episodes_query.where(
            or_(e.c.opened_at >= cutoff, e.c.closed_at.is_(None), e.c.closed_at >= cutoff)
        )
    with monitor.engine.connect() as conn:
        window_rows = conn.execute(query).mappings().all()
        episode_rows = conn.execute(episodes_query).mappings().all()
        rater_rows = (
            conn.execute(
                select(raters_table.c.row)
                .join(streams_table, streams_table.c.stream_id == raters_table.c.stream_id)
                .where(streams_table.c.monitor == monitor.name, raters_table.c.row.is_not(None))
                .order_by(streams_table.c.question, raters_table.c.pool, raters_table.c.rater_id)
            )
            .scalars()
            .all()
        )
    windows = [
        {
            **{k: row[k] for k in WINDOW_KEYS},
            "window_start": utc(row["window_start"]),
            "window_end": utc(row["window_end"]),
        }
        for row in window_rows
    ]
    episodes = [
        {
            "episode_id": row["episode_id"],
            "question": row["question"],
            "metric": row["metric"],
            "kind": row["kind"],
            "opened_at": utc(row["opened_at"]),
            "closed_at": utc(row["closed_at"]),
            "reason": row["reason"],
            "worst_raters": list(row["worst_raters"] or []),
            "close_reason": row["close_reason"],
            "metrics": list(dict.fromkeys(str(m["metric"]) for m in alarms)),
            "alarms": [alarm_row(m) for m in alarms],
        }
        for row in episode_rows
        for alarms in [members(row)]
    ]
    return {"windows": windows, "episodes": episodes, "raters": judge_stored(rater_rows, monitor.cfg.monitor.raters)}


def alarm_row(alarm: dict[str, Any]) -> dict[str, Any]:
    """One alarm of an episode as history shows it: ``{metric, kind, since, reason, value, ci_low, ci_high,
    threshold, recovered_at, recover_reason}`` (times as UTC text; ``recovered_at`` None while in alarm)."""
    window = alarm.get("opened_by") or {}
    details = alarm.get("details") or {}
    return {"metric": alarm["metric"], "kind": alarm["kind"], "since": utc(alarm["since"]), "reason": alarm["reason"],
            "value": window.get("value"), "ci_low": window.get("ci_low"), "ci_high": window.get("ci_high"),
            "threshold": details.get("threshold", window.get("threshold")),
            "recovered_at": utc(alarm["closed_at"]) if alarm.get("closed_at") is not None else None,
            "recover_reason": alarm.get("close_reason")}


def _micros(since: str | datetime | None) -> int | None:
    if since is None:
        return None
    stamp = pd.Timestamp(since)
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    return int(stamp.value // 1000)
