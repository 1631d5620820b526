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


COUNTS = ("n_new", "n_already", "n_conflicts", "n_invalid", "n_late")
"""A delivery's merge counts (its row of the deliveries table and of a pass summary). Defined here, not in
:mod:`labelgate.monitor.intake` which fills them, because intake imports this module."""

RESTATEMENT_COUNTS = ("n_replaced", "n_removed")
"""The counts a merge adds to a delivery and a question once it restates items (absent until then)."""

ADDITIVE = (*COUNTS, *RESTATEMENT_COUNTS)
"""The counts that add up over the deliveries of a pass and over the transactions of a pass read in chunks; the rest
of a question's summary (cumulative rows, windows, events, learning notes) comes from the last transaction only,
the one that measures."""


def combined(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """The summary of a pass made of one or several transactions (``steps``, in order).

    The last transaction's summary, with every transaction's deliveries, rows and timings, each question's
    :data:`ADDITIVE` counts summed over the transactions, and the pass totals of the deliveries' :data:`COUNTS`
    (``n_new``, ``n_invalid``, ...).
    """
    out = {**steps[-1], "steps": [step["pass_id"] for step in steps]}
    if len(steps) > 1:
        out["started_at"], out["replay"] = steps[0]["started_at"], steps[0]["replay"]
        out["deliveries"] = [row for step in steps for row in step["deliveries"]]
        out["rows"] = sum(step["rows"] for step in steps)
        out["questions"] = {name: _question(name, steps) for name in steps[-1]["questions"]}
        timing: dict[str, float] = {}
        for step in steps:
            for key, seconds in step["timing"].items():
                timing[key] = round(timing.get(key, 0.0) + seconds, 4)
        out["timing"] = timing
    # one rule for one transaction and for several: a pass's counts are the sums of its deliveries'
    out.update({key: sum(row[key] for row in out["deliveries"]) for key in COUNTS})
    return out


def _question(name: str, steps: list[dict[str, Any]]) -> dict[str, Any]:
    """One question's summary over the transactions of a pass: the last one's, its additive counts summed (a count a
    transaction lacks, such as ``n_replaced`` before any restatement, adds nothing)."""
    parts = [step["questions"][name] for step in steps]
    sums = {key: sum(part.get(key, 0) for part in parts) for key in ADDITIVE if any(key in part for part in parts)}
    return {**parts[-1], **sums}
