"""Drift episodes of a monitor: the detectors' stored state, episode records and their events, and the thresholds
the baseline rule compares with (the gate's own thresholds).

An episode is one drift incident of a question: every alarm (a series under a rule: the baseline rule or the change
detector) that fires while the question has an open episode joins it, with its own numbers and start; the episode
closes when every one of its alarms has recovered. It is stored as one row of ``labelgate_monitor_episodes``: its
``metric``, ``kind`` and ``reason`` are those of the alarm that opened it, ``opened_at`` the earliest start of its
alarms, and ``details["members"]`` lists every alarm (:func:`members`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection

from labelgate.monitor import drift as drift_mod
from labelgate.monitor.windows import WINDOW_METRICS
from labelgate.pipeline.config import MonitorConfig
from labelgate.pipeline.serialize import to_jsonable, utc
from labelgate.pipeline.tables import detectors_table, episodes_table, streams_table, windows_table


def thresholds(cfg: MonitorConfig, question: Any, irr_trusted: float | None) -> dict[str, float | None]:
    """Gate thresholds of each monitored metric of a question (the trusted baseline)."""
    out: dict[str, float | None] = {}
    for metric, gate_type in (
        ("normalized_cross_kappa", "normalized_cross_kappa"),
        ("cross_kappa", "cross_kappa"),
        ("spa", "spa"),
    ):
        gate = cfg.threshold_gate(question, gate_type)
        out[metric] = None if gate is None else gate.min_value
    gate = cfg.threshold_gate(question, "irr_baseline")
    irr = irr_trusted if irr_trusted is not None and math.isfinite(irr_trusted) else None
    if gate is None or irr is None:
        out["irr_crowd"] = None
    elif gate.tolerance is not None:
        out["irr_crowd"] = irr - gate.tolerance
    else:
        out["irr_crowd"] = irr * gate.min_ratio
    out["irr_trusted"] = None
    return out


def series_count(cfg: MonitorConfig) -> int:
    """Series the monitor watches, the ``S`` of the false-alarm budget (:mod:`labelgate.monitor.arl`): per question,
    the window metrics under the change detector plus those with a baseline gate."""
    return sum(len(b) + len(c) for b, c in (question_series(cfg, q) for q in cfg.questions))


def question_series(cfg: MonitorConfig, question: Any) -> tuple[list[str], list[str]]:
    """The window metrics of a question watched by a baseline rule (those with a gate) and by the change
    detector."""
    drift = cfg.monitor.drift
    metrics = [m for m in cfg.monitor.metrics if m in WINDOW_METRICS]
    baseline = set(drift.baseline_metrics if drift.baseline_metrics is not None else metrics)
    gated = thresholds(cfg, question, 1.0)  # any trusted IRR: only whether a gate exists matters here
    return ([m for m in metrics if drift.baseline and m in baseline and gated.get(m) is not None],
            [m for m in metrics if m in drift.change.metrics])


def members(row: Mapping[Any, Any]) -> list[dict[str, Any]]:
    """The alarms of a stored episode, in the order they fired: each ``{metric, kind, since, reason, details,
    opened_by, closed_at, close_reason, closed_by}`` (times in microseconds; ``closed_at`` None while the series is
    still in alarm). An episode stored by an earlier release (one per series and rule) is its own single alarm."""
    details = row.get("details") or {}
    if details.get("members"):
        return [dict(m) for m in details["members"]]
    return [{"metric": row["metric"], "kind": row["kind"], "since": row["opened_at"], "reason": row["reason"],
             "details": {k: v for k, v in details.items() if k not in ("opened_by", "closed_by")},
             "opened_by": details.get("opened_by") or {}, "closed_at": row.get("closed_at"),
             "close_reason": row.get("close_reason"), "closed_by": details.get("closed_by")}]


def record_event(
    conn: Connection,
    monitor: str,
    question: str,
    metric: str,
    event: drift_mod.Event,
    worst: list[str],
    detector: dict[str, Any],
) -> dict[str, Any]:
    """Record one alarm's opening or recovery in the question's episode (idempotent on re-measured windows) and
    describe the event.

    A drift incident is one episode per question: an alarm of any series or rule that fires while the question has
    an open episode joins it (``transition: "joined"``), otherwise it opens a new one (``"open"``, the only
    transition alerted on opening). A recovered alarm is marked in its episode (``"recovered"``); the episode
    closes (``"close"``) when the last of its alarms has recovered. The episode's id is that of the alarm that
    opened it (:func:`labelgate.monitor.drift.episode_id`): deterministic, so a replay over the same windows finds
    the same episode and its alerts' dedupe keys."""
    window = {k: v for k, v in event.window.items() if k not in ("window_start", "window_end")}
    window.update(window_start=utc(event.window["window_start"]), window_end=utc(event.window["window_end"]))
    if event.transition == "open":
        eid, transition = _open_alarm(conn, monitor, question, metric, event, window, worst)
        detector[event.kind]["open"]["episode_id"] = eid
    else:
        eid, transition = _close_alarm(conn, monitor, question, metric, event, window)
    return {
        "episode_id": eid,
        "transition": transition,
        "kind": event.kind,
        "question": question,
        "metric": metric,
        "since": utc(event.since),
        "reason": event.reason,
        "worst_raters": worst,
    }


def _open_alarm(conn: Connection, monitor: str, question: str, metric: str, event: drift_mod.Event,
                window: dict[str, Any], worst: list[str]) -> tuple[str, str]:
    """Open a new episode with this alarm, or add the alarm to the question's open episode."""
    e = episodes_table
    alarm = {"metric": metric, "kind": event.kind, "since": event.since, "reason": event.reason,
             "details": to_jsonable(event.details), "opened_by": window, "closed_at": None, "close_reason": None,
             "closed_by": None}
    own_id = drift_mod.episode_id(monitor, question, metric, event.kind, event.since)
    current = conn.execute(
        select(e).where(e.c.monitor == monitor, e.c.question == question, e.c.closed_at.is_(None))
        .order_by(e.c.opened_at.desc(), e.c.episode_id).limit(1)
    ).mappings().first()
    if current is None:
        if conn.execute(select(e.c.episode_id).where(e.c.episode_id == own_id)).first() is None:
            conn.execute(insert(e).values(
                episode_id=own_id, monitor=monitor, question=question, metric=metric, kind=event.kind,
                opened_at=event.since, closed_at=None, reason=event.reason, close_reason=None, worst_raters=worst,
                details={"opened_by": window, "members": [alarm], **to_jsonable(event.details)}, alerts_done=False,
            ))
        return own_id, "open"
    found = members(current)
    if not any(_same(m, metric, event.kind, event.since) and m["closed_at"] is None for m in found):
        details = dict(current["details"] or {})
        details["members"] = [*found, alarm]
        conn.execute(update(e).where(e.c.episode_id == current["episode_id"]).values(
            details=details, opened_at=min(int(current["opened_at"]), int(event.since)),
            worst_raters=list(current["worst_raters"] or []) or worst,
        ))
    return str(current["episode_id"]), "joined"


def _close_alarm(conn: Connection, monitor: str, question: str, metric: str, event: drift_mod.Event,
                 window: dict[str, Any]) -> tuple[str, str]:
    """Mark this alarm recovered in its episode; close the episode when it was the last alarm still open."""
    e = episodes_table
    rows = conn.execute(
        select(e).where(e.c.monitor == monitor, e.c.question == question, e.c.closed_at.is_(None))
    ).mappings().all()
    for row in rows:
        found = members(row)
        hit = next((m for m in found if _same(m, metric, event.kind, event.since) and m["closed_at"] is None), None)
        if hit is None:
            continue
        end = int(event.window["window_end"])
        hit.update(closed_at=end, close_reason=event.reason, closed_by=window)
        details = {**(row["details"] or {}), "members": found}
        if any(m["closed_at"] is None for m in found):
            conn.execute(update(e).where(e.c.episode_id == row["episode_id"]).values(details=details))
            return str(row["episode_id"]), "recovered"
        conn.execute(update(e).where(e.c.episode_id == row["episode_id"]).values(
            closed_at=end, close_reason=close_reason(found), alerts_done=False,
            details={**details, "closed_by": window},
        ))
        return str(row["episode_id"]), "close"
    # the alarm's episode is not stored (it was closed or forgotten already): nothing to mark
    return drift_mod.episode_id(monitor, question, metric, event.kind, event.since), "recovered"


def _same(alarm: Mapping[str, Any], metric: str, kind: str, since: int) -> bool:
    return alarm["metric"] == metric and alarm["kind"] == kind and int(alarm["since"]) == int(since)


def close_reason(alarms: list[dict[str, Any]]) -> str:
    """Why an episode closed: every alarm recovered, each with its own reason."""
    return "every alarm recovered: " + "; ".join(
        f"{m['metric']} ({m['kind']}): {m['close_reason']}" for m in alarms
    )


def load_detectors(
    conn: Connection, monitor: str, question: str, metrics: Iterable[str]
) -> dict[str, dict[str, Any]]:
    """The stored detector state of each metric of a question (a new state where none is stored)."""
    d = detectors_table
    rows: dict[str, Any] = dict(
        conn.execute(  # type: ignore[arg-type]
            select(d.c.metric, d.c.state).where(d.c.monitor == monitor, d.c.question == question)
        ).all()
    )
    return {m: rows.get(m) or drift_mod.new_state() for m in metrics}


def save_detectors(conn: Connection, monitor: str, question: str, detectors: dict[str, dict[str, Any]]) -> None:
    """Replace the stored detector states of a question."""
    d = detectors_table
    conn.execute(delete(d).where(d.c.monitor == monitor, d.c.question == question))
    conn.execute(
        insert(d),
        [
            {"monitor": monitor, "question": question, "metric": m, "state": s}
            for m, s in detectors.items()
        ],
    )


def reset(conn: Connection, monitor: str) -> None:
    """Forget windows, detectors and episodes (not the sent alerts): the pass measures them again."""
    w, d, e, s = windows_table, detectors_table, episodes_table, streams_table
    conn.execute(delete(w).where(w.c.monitor == monitor, w.c.scope == "window"))
    conn.execute(delete(d).where(d.c.monitor == monitor))
    conn.execute(delete(e).where(e.c.monitor == monitor))
    conn.execute(update(s).where(s.c.monitor == monitor).values(closed_until=None))
