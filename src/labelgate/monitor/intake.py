"""A monitor's deliveries: collect the new ones from the source, accept them into the deliveries table (duplicates and
empty deliveries recorded, not merged), record their merge counts, and advance the source watermark."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, insert, select, update
from sqlalchemy.engine import Connection

from labelgate.pipeline.config import MonitorConfig
from labelgate.pipeline.sources.deliveries import Delivery, list_files, parse_timestamps, read_since, read_trusted
from labelgate.pipeline.tables import deliveries_table, monitors_table

COUNTS = ("n_new", "n_already", "n_conflicts", "n_invalid", "n_late")


@dataclass
class Accepted:
    """A delivery accepted in this pass and its number in the deliveries table."""

    delivery: Delivery
    number: int


def collect(engine: Engine, cfg: MonitorConfig) -> list[Delivery]:
    """New deliveries of the source (and the trusted file, when configured and changed)."""
    monitor = cfg.monitor.name
    known = _known_files(engine, monitor)

    def is_known(delivery_id: str, size: int, mtime_ns: int) -> bool:
        return (size, mtime_ns) in known.get(delivery_id, set())

    out = read_trusted(cfg, is_known)
    if cfg.monitor.source.kind == "files":
        return out + list_files(cfg, is_known)
    with engine.connect() as conn:
        watermark = conn.execute(
            select(monitors_table.c.source_watermark).where(monitors_table.c.monitor == monitor)
        ).scalar()
    return out + read_since(cfg, watermark)


def _known_files(engine: Engine, monitor: str) -> dict[str, set[tuple[int, int]]]:
    """(size, mtime) of every file delivery recorded so far, by delivery id."""
    d = deliveries_table
    with engine.connect() as conn:
        rows = conn.execute(
            select(d.c.delivery_id, d.c.size, d.c.mtime_ns).where(d.c.monitor == monitor, d.c.size.is_not(None))
        ).all()
    known: dict[str, set[tuple[int, int]]] = {}
    for delivery_id, size, mtime in rows:
        known.setdefault(delivery_id, set()).add((int(size), int(mtime)))
    return known


def accept(
    conn: Connection, monitor: str, deliveries: list[Delivery], pass_id: str
) -> tuple[list[Accepted], dict[int, dict[str, Any]]]:
    """Record every delivery; returns those to merge and each delivery's summary row (counts at 0), by number."""
    d = deliveries_table
    accepted, rows, seen = [], {}, set()
    for delivery in deliveries:
        duplicate = (
            delivery.content_hash in seen
            or conn.execute(
                select(d.c.delivery_no)
                .where(d.c.monitor == monitor, d.c.content_hash == delivery.content_hash)
                .limit(1)
            ).first()
            is not None
        )
        n_rows = 0 if delivery.frame is None else len(delivery.frame)
        status = "duplicate" if duplicate else ("empty" if n_rows == 0 else "merged")
        number = conn.execute(
            insert(d).values(
                monitor=monitor,
                delivery_id=delivery.delivery_id[:500],
                content_hash=delivery.content_hash,
                size=delivery.size,
                mtime_ns=delivery.mtime_ns,
                status=status,
                n_rows=n_rows,
                pass_id=pass_id,
                merged_at=datetime.now(UTC),
            )
        ).inserted_primary_key[0]  # type: ignore[index]
        rows[number] = {
            "delivery_no": number,
            "delivery_id": delivery.delivery_id,
            "status": status,
            "n_rows": n_rows,
            **dict.fromkeys(COUNTS, 0),
        }
        seen.add(delivery.content_hash)
        if status == "merged":
            accepted.append(Accepted(delivery, number))
    return accepted, rows


def save_counts(conn: Connection, rows: dict[int, dict[str, Any]]) -> None:
    """Store the merge counts of the merged deliveries."""
    d = deliveries_table
    for number, row in rows.items():
        if row["status"] == "merged":
            conn.execute(update(d).where(d.c.delivery_no == number).values(**{k: row[k] for k in COUNTS}))


def advance_source_watermark(conn: Connection, cfg: MonitorConfig, accepted: list[Accepted]) -> None:
    """Move a table or parquet source's watermark to the latest timestamp merged (trusted deliveries aside)."""
    ts = cfg.columns.timestamp
    if cfg.monitor.source.kind == "files" or not ts:
        return
    latest = None
    for acc in accepted:
        frame = acc.delivery.frame
        if frame is not None and ts in frame.columns and not acc.delivery.delivery_id.startswith("trusted:"):
            stamps = parse_timestamps(frame[ts]).dropna()
            if len(stamps):
                latest = max(latest or 0, int(stamps.max()))
    if latest is not None:
        m, monitor = monitors_table, cfg.monitor.name
        current = conn.execute(select(m.c.source_watermark).where(m.c.monitor == monitor)).scalar()
        conn.execute(
            update(m).where(m.c.monitor == monitor).values(source_watermark=max(latest, current or latest))
        )
