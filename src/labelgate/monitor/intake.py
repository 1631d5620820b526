"""A monitor's deliveries: collect the new ones from the source, accept them into the deliveries table (duplicates and
empty deliveries recorded, not merged), record their merge counts, and advance the source watermark.

A Label Studio source is read as one restatement per pass: the tasks changed since the watermark, the tasks a caller
names (a webhook's), and, when a reconciliation is due, the tasks whose stored raters are no longer all among the
task's annotators (deleted annotations or tasks, which Label Studio does not list)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, insert, select, update
from sqlalchemy.engine import Connection

from labelgate.errors import InputError, Reason
from labelgate.monitor import judgements, passes
from labelgate.pipeline.config import MonitorConfig
from labelgate.pipeline.sources.deliveries import Delivery, list_files, parse_timestamps, read_since, read_trusted
from labelgate.pipeline.sources.label_studio_delivery import Hints, ProjectReader
from labelgate.pipeline.tables import deliveries_table, monitors_table
from labelgate.pipeline.units import UNIT_SEP


@dataclass
class Accepted:
    """A delivery accepted in this pass and its number in the deliveries table."""

    delivery: Delivery
    number: int


def collect(engine: Engine, cfg: MonitorConfig, hints: Hints | None = None) -> list[Delivery]:
    """New deliveries of the source (and the trusted file, when configured and changed).

    ``hints`` (a Label Studio source only): tasks to restate and whether to reconcile in this pass.
    """
    monitor = cfg.monitor.name
    if cfg.monitor.source.kind == "label_studio":
        return _label_studio(engine, cfg, hints or Hints())
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


def _label_studio(engine: Engine, cfg: MonitorConfig, hints: Hints) -> list[Delivery]:
    """The restatement of a Label Studio project's tasks that changed, were named, or lost annotations."""
    monitor, src = cfg.monitor.name, cfg.monitor.source
    if cfg.trusted.path:
        raise InputError(
            f"Monitor {monitor!r} reads Label Studio project {src.project}: its trusted pool comes from the project "
            f"(monitor.source.trusted), not from the file trusted.path = {cfg.trusted.path!r}; remove one.",
            Reason.INVALID_PARAMETER, setting="trusted.path",
        )
    every = src.reconcile_every
    due = hints.reconcile or (every > 0 and passes.count(engine, monitor, "ok") % every == 0)
    with engine.connect() as conn:
        watermark = conn.execute(
            select(monitors_table.c.source_watermark).where(monitors_table.c.monitor == monitor)
        ).scalar()
        stored = _by_item(judgements.item_raters(conn, monitor)) if due else None
    with ProjectReader(cfg) as reader:
        changed = reader.changed_tasks(watermark)
        tasks = set(changed) | set(hints.tasks)
        if stored is not None:
            tasks |= reader.vanished(stored)
        if not tasks:
            return []
        return [reader.restatement(tasks, changed)]


def _by_item(stored: dict[str, set[str]]) -> dict[str, set[str]]:
    """The raters of every task: a span question's unit (``task#position``) counts for its task."""
    out: dict[str, set[str]] = {}
    for item, raters in stored.items():
        task = item.rpartition(UNIT_SEP)[0] if UNIT_SEP in item else item
        out.setdefault(task, set()).update(raters)
    return out


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
        duplicate = not delivery.restates and (  # a restatement is always merged: it states what is now
            delivery.content_hash in seen
            or conn.execute(
                select(d.c.delivery_no)
                .where(d.c.monitor == monitor, d.c.content_hash == delivery.content_hash)
                .limit(1)
            ).first()
            is not None
        )
        n_rows = 0 if delivery.frame is None else len(delivery.frame)
        status = "duplicate" if duplicate else ("empty" if n_rows == 0 and not delivery.restates else "merged")
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
            **dict.fromkeys(passes.COUNTS, 0),
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
            conn.execute(update(d).where(d.c.delivery_no == number).values(**{k: row[k] for k in passes.COUNTS}))


def advance_source_watermark(conn: Connection, cfg: MonitorConfig, accepted: list[Accepted]) -> int | None:
    """Move a table or parquet source's watermark to the latest timestamp merged (trusted deliveries aside); a
    delivery that carries its own (``source_watermark``: Label Studio's latest ``updated_at``) moves it there.

    Returns the source watermark now stored (microseconds since the epoch, or None)."""
    own = [acc.delivery.source_watermark for acc in accepted if acc.delivery.source_watermark is not None]
    latest = max(own) if own else _latest_timestamp(cfg, accepted)
    m, monitor = monitors_table, cfg.monitor.name
    current = conn.execute(select(m.c.source_watermark).where(m.c.monitor == monitor)).scalar()
    if latest is None:
        return None if current is None else int(current)
    stored = max(latest, current or latest)
    conn.execute(update(m).where(m.c.monitor == monitor).values(source_watermark=stored))
    return int(stored)


def _latest_timestamp(cfg: MonitorConfig, accepted: list[Accepted]) -> int | None:
    """The latest timestamp of a table or parquet source's merged rows (trusted deliveries aside)."""
    ts = cfg.columns.timestamp
    if cfg.monitor.source.kind not in ("parquet", "sql") or not ts:
        return None
    latest = None
    for acc in accepted:
        frame = acc.delivery.frame
        if frame is not None and ts in frame.columns and not acc.delivery.delivery_id.startswith("trusted:"):
            stamps = parse_timestamps(frame[ts]).dropna()
            if len(stamps):
                latest = max(latest or 0, int(stamps.max()))
    return latest
