"""Drift episodes of a monitor: the detectors' stored state, episode records and their open/close events, and the
thresholds the baseline rule compares with (the gate's own thresholds)."""

from __future__ import annotations

import math
from collections.abc import Iterable
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


def record_event(
    conn: Connection,
    monitor: str,
    question: str,
    metric: str,
    event: drift_mod.Event,
    worst: list[str],
    detector: dict[str, Any],
) -> dict[str, Any]:
    """Record an episode's opening or closing (idempotent on re-measured windows) and describe the event."""
    e = episodes_table
    eid = drift_mod.episode_id(monitor, question, metric, event.kind, event.since)
    window = {k: v for k, v in event.window.items() if k not in ("window_start", "window_end")}
    window.update(
        window_start=utc(event.window["window_start"]), window_end=utc(event.window["window_end"])
    )
    if event.transition == "open":
        detector[event.kind]["open"]["episode_id"] = eid
        exists = conn.execute(select(e.c.episode_id).where(e.c.episode_id == eid)).first()
        if exists is None:
            conn.execute(
                insert(e).values(
                    episode_id=eid,
                    monitor=monitor,
                    question=question,
                    metric=metric,
                    kind=event.kind,
                    opened_at=event.since,
                    closed_at=None,
                    reason=event.reason,
                    close_reason=None,
                    worst_raters=worst,
                    details={"opened_by": window, **to_jsonable(event.details)},
                    alerts_done=False,
                )
            )
    else:
        details = conn.execute(select(e.c.details).where(e.c.episode_id == eid)).scalar() or {}
        conn.execute(
            update(e)
            .where(e.c.episode_id == eid)
            .values(
                closed_at=event.window["window_end"],
                close_reason=event.reason,
                alerts_done=False,
                details={**details, "closed_by": window},
            )
        )
    return {
        "episode_id": eid,
        "transition": event.transition,
        "kind": event.kind,
        "question": question,
        "metric": metric,
        "since": utc(event.since),
        "reason": event.reason,
        "worst_raters": worst,
    }


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
