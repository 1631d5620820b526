"""A monitor's records of itself: its row in the monitors table (configuration digest), and its passes, successful
(with their summary, in the pass's transaction) or failed (in a transaction of their own); the summary of a pass made
of several transactions (a SQL source read in chunks)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, func, insert, select, update
from sqlalchemy.engine import Connection

from labelgate.pipeline.database import MONITOR_PASS_LOCK, transaction
from labelgate.pipeline.serialize import to_jsonable
from labelgate.pipeline.tables import monitors_table, passes_table

_log = logging.getLogger("labelgate.monitor")


def register(conn: Connection, monitor: str, config_hash: str) -> None:
    """Create or touch the monitor's row, with the digest of its current configuration."""
    m, now = monitors_table, datetime.now(UTC)
    if conn.execute(select(m.c.monitor).where(m.c.monitor == monitor)).first() is None:
        conn.execute(insert(m).values(monitor=monitor, created_at=now, updated_at=now, config_hash=config_hash))
    else:
        conn.execute(update(m).where(m.c.monitor == monitor).values(updated_at=now, config_hash=config_hash))


def record_pass(
    conn: Connection, monitor: str, pass_id: str, status: str, started: datetime, finished: datetime,
    summary: dict[str, Any],
) -> None:
    """Record a pass and its summary."""
    conn.execute(
        insert(passes_table).values(
            pass_id=pass_id, monitor=monitor, status=status, started_at=started, finished_at=finished,
            summary=to_jsonable(summary),
        )
    )


def record_failure(engine: Engine, monitor: str, pass_id: str, started: datetime, exc: BaseException) -> None:
    """Record an ``error`` pass in its own transaction; a failure to record it is logged, not raised."""
    message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
    try:
        with transaction(engine, write=True, lock=MONITOR_PASS_LOCK) as conn:
            record_pass(conn, monitor, pass_id, "error", started, datetime.now(UTC), {"error": str(message)[:2000]})
    except Exception as store_error:  # the original error matters more
        _log.error("could not record the failed monitor pass: %s", store_error)


def count(engine: Engine, monitor: str, status: str | None) -> int:
    """Number of recorded passes of a monitor (of one status, or all)."""
    p = passes_table
    query = select(func.count()).select_from(p).where(p.c.monitor == monitor)
    if status is not None:
        query = query.where(p.c.status == status)
    with engine.connect() as conn:
        return int(conn.execute(query).scalar() or 0)


_COUNTS = ("n_new", "n_already", "n_conflicts", "n_late", "n_replaced", "n_removed", "windows")


def combined(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """The summary of a pass made of several transactions: the last one's, with every step's deliveries and counts."""
    out = {**steps[-1], "steps": [step["pass_id"] for step in steps]}
    if len(steps) == 1:
        return out
    out["started_at"], out["replay"] = steps[0]["started_at"], steps[0]["replay"]
    out["deliveries"] = [row for step in steps for row in step["deliveries"]]
    for key in ("n_new", "rows"):
        out[key] = sum(step[key] for step in steps)
    questions = {}
    for name, last in steps[-1]["questions"].items():
        parts = [step["questions"][name] for step in steps]
        questions[name] = {
            **last,
            **{key: sum(part.get(key, 0) for part in parts) for key in _COUNTS if key in last},
            "events": [event for part in parts for event in part["events"]],
        }
    out["questions"] = questions
    timing: dict[str, float] = {}
    for step in steps:
        for key, seconds in step["timing"].items():
            timing[key] = round(timing.get(key, 0.0) + seconds, 4)
    out["timing"] = timing
    return out
