"""One monitor pass: collect new deliveries → merge them into the stored state → measure the closed windows
→ detect drift → persist, all in one database transaction; then send the pending episode alerts.

A pass costs time proportional to the new judgements (plus the categories, the closed windows and the
candidate collusion pairs), not to the judgements merged before: it reads only the stored judgements of
the items the new ones touch, updates maintained sums (:mod:`labelgate.monitor.state`) and per-rater sums,
and measures windows from their own judgements. ``replay=True`` recomputes every window, the detectors
and the episodes from the stored judgements (cost proportional to everything merged); episode ids are
deterministic and sent alerts are recorded, so a replay sends no alert twice.
"""

from __future__ import annotations

import logging
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, func, insert, select, update
from sqlalchemy.engine import Connection

from labelgate.monitor import episodes, sources, window_pass
from labelgate.monitor.config import MonitorConfig, as_monitor_config
from labelgate.monitor.cumulative import Cumulative
from labelgate.monitor.merging import Accepted, StreamMerge
from labelgate.monitor.schema import (
    deliveries_table,
    migrate,
    monitors_table,
    passes_table,
    write_transaction,
)
from labelgate.monitor.sources import jsonable
from labelgate.pipeline.store import ResultsStore

_log = logging.getLogger("labelgate.monitor")


class Monitor:
    """The monitor of one configuration (``monitor.name``) on its results-store database.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from labelgate.monitor.config import monitor_config_from_dict
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> (root / "drop").mkdir()
    >>> _ = (root / "drop" / "d1.csv").write_text("item_id,rater_id,label,pool\\n1,a,x,crowd\\n"
    ...     "1,b,x,crowd\\n2,a,y,crowd\\n2,b,x,crowd\\n1,t,x,trusted\\n")
    >>> cfg = monitor_config_from_dict({"store": {"url": f"sqlite:///{root / 'r.db'}"},
    ...     "monitor": {"source": {"path": str(root / "drop")}}})
    >>> summary = Monitor(cfg).run_pass()
    >>> summary["n_new"], summary["questions"]["label"]["cumulative"]["spa"]["value"]
    (5, 0.5)
    >>> Monitor(cfg).run_pass()["n_new"]          # nothing new: nothing merged twice
    0
    """

    def __init__(self, config: Any, *, engine: Engine | None = None) -> None:
        self.cfg: MonitorConfig = as_monitor_config(config)
        self.name = self.cfg.monitor.name
        self.engine = (
            engine
            if engine is not None
            else ResultsStore.from_config(self.cfg.store, auto_migrate=False).engine
        )
        migrate(self.engine)
        self.cumulative = Cumulative(self.cfg, self.name)
        self.streams = StreamMerge(self.cfg, self.name, self.cumulative)

    # ------------------------------------------------------------------------------------------ pass
    def run_pass(self, *, replay: bool = False, send_alerts: bool = True) -> dict[str, Any]:
        """Collect, merge, measure, detect and persist (one transaction); then send pending alerts.

        Returns the pass summary (see :meth:`merge`). A failure records an ``error`` pass and re-raises.
        """
        pass_id, started = str(uuid.uuid4()), datetime.now(UTC)
        try:
            t0 = time.perf_counter()
            deliveries = self.collect()
            collect_s = time.perf_counter() - t0
            summary = self.merge(deliveries, pass_id=pass_id, started=started, replay=replay)
            summary["timing"]["collect"] = round(collect_s, 4)
        except Exception as exc:
            self.record_failure(pass_id, started, exc)
            raise
        if send_alerts:
            from labelgate.monitor.alerting import send_pending

            summary["alerts"] = send_pending(self.engine, self.cfg)
        return summary

    def collect(self) -> list[sources.Delivery]:
        """New deliveries of the source (and the trusted file, when configured and changed)."""
        known = self._known_files()

        def is_known(delivery_id: str, size: int, mtime_ns: int) -> bool:
            return (size, mtime_ns) in known.get(delivery_id, set())

        out = sources.read_trusted(self.cfg, is_known)
        if self.cfg.monitor.source.kind == "files":
            return out + sources.list_files(self.cfg, is_known)
        with self.engine.connect() as conn:
            watermark = conn.execute(
                select(monitors_table.c.source_watermark).where(monitors_table.c.monitor == self.name)
            ).scalar()
        return out + sources.read_since(self.cfg, watermark)

    def _known_files(self) -> dict[str, set[tuple[int, int]]]:
        d = deliveries_table
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(d.c.delivery_id, d.c.size, d.c.mtime_ns).where(
                    d.c.monitor == self.name, d.c.size.is_not(None)
                )
            ).all()
        known: dict[str, set[tuple[int, int]]] = {}
        for delivery_id, size, mtime in rows:
            known.setdefault(delivery_id, set()).add((int(size), int(mtime)))
        return known

    def merge(
        self,
        deliveries: list[sources.Delivery],
        *,
        pass_id: str | None = None,
        started: datetime | None = None,
        replay: bool = False,
    ) -> dict[str, Any]:
        """Merge deliveries and measure, in one write transaction; returns the pass summary.

        Summary keys: ``pass_id``, ``monitor``, ``status``, ``deliveries`` (id, status, counts), ``n_new``,
        ``questions`` ({question: {cumulative: {metric: row}, windows: n, events: [...], n_new, ...}}),
        ``timing``.
        """
        pass_id = pass_id or str(uuid.uuid4())
        started = started or datetime.now(UTC)
        timing: dict[str, float] = {}
        t0 = time.perf_counter()
        with write_transaction(self.engine) as conn:
            self._ensure_monitor(conn)
            if replay:
                episodes.reset(conn, self.name)
            accepted, delivery_rows = self._accept(conn, deliveries, pass_id)
            questions = {}
            for question in self.cfg.questions:
                questions[question.name] = self._question(
                    conn, question, accepted, delivery_rows, pass_id, timing
                )
            self._update_deliveries(conn, delivery_rows)
            self._advance_source_watermark(conn, accepted)
            summary = {
                "pass_id": pass_id,
                "monitor": self.name,
                "status": "ok",
                "replay": replay,
                "started_at": started.isoformat(),
                "deliveries": list(delivery_rows.values()),
                "n_new": sum(r["n_new"] for r in delivery_rows.values()),
                "questions": questions,
                "timing": timing,
            }
            timing["merge_total"] = round(time.perf_counter() - t0, 4)
            finished = datetime.now(UTC)
            summary["finished_at"] = finished.isoformat()
            conn.execute(
                insert(passes_table).values(
                    pass_id=pass_id,
                    monitor=self.name,
                    status="ok",
                    started_at=started,
                    finished_at=finished,
                    summary=jsonable(summary),
                )
            )
        return summary

    def record_failure(self, pass_id: str, started: datetime, exc: BaseException) -> None:
        """Record an ``error`` pass (its own transaction)."""
        message = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
        try:
            with write_transaction(self.engine) as conn:
                conn.execute(
                    insert(passes_table).values(
                        pass_id=pass_id,
                        monitor=self.name,
                        status="error",
                        started_at=started,
                        finished_at=datetime.now(UTC),
                        summary={"error": str(message)[:2000]},
                    )
                )
        except Exception as store_error:  # the original error matters more
            _log.error("could not record the failed monitor pass: %s", store_error)

    # ------------------------------------------------------------------------------------------ deliveries
    def _ensure_monitor(self, conn: Connection) -> None:
        now = datetime.now(UTC)
        exists = conn.execute(
            select(monitors_table.c.monitor).where(monitors_table.c.monitor == self.name)
        ).first()
        if exists is None:
            conn.execute(
                insert(monitors_table).values(
                    monitor=self.name, created_at=now, updated_at=now, config_hash=self.cfg.digest()
                )
            )
        else:
            conn.execute(
                update(monitors_table)
                .where(monitors_table.c.monitor == self.name)
                .values(updated_at=now, config_hash=self.cfg.digest())
            )

    def _accept(
        self,
        conn: Connection,
        deliveries: list[sources.Delivery],
        pass_id: str,
    ) -> tuple[list[Accepted], dict[int, dict[str, Any]]]:
        d = deliveries_table
        accepted, rows, seen = [], {}, set()
        for delivery in deliveries:
            duplicate = (
                delivery.content_hash in seen
                or conn.execute(
                    select(d.c.delivery_no)
                    .where(d.c.monitor == self.name, d.c.content_hash == delivery.content_hash)
                    .limit(1)
                ).first()
                is not None
            )
            n_rows = 0 if delivery.frame is None else len(delivery.frame)
            status = "duplicate" if duplicate else ("empty" if n_rows == 0 else "merged")
            number = conn.execute(
                insert(d).values(
                    monitor=self.name,
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
                "n_new": 0,
                "n_already": 0,
                "n_conflicts": 0,
                "n_invalid": 0,
                "n_late": 0,
            }
            seen.add(delivery.content_hash)
            if status == "merged":
                accepted.append(Accepted(delivery, number))
        return accepted, rows

    def _update_deliveries(self, conn: Connection, rows: dict[int, dict[str, Any]]) -> None:
        d = deliveries_table
        for number, row in rows.items():
            if row["status"] != "merged":
                continue
            conn.execute(
                update(d)
                .where(d.c.delivery_no == number)
                .values(**{k: row[k] for k in ("n_new", "n_already", "n_conflicts", "n_invalid", "n_late")})
            )

    def _advance_source_watermark(self, conn: Connection, accepted: list[Accepted]) -> None:
        ts = self.cfg.columns.timestamp
        if self.cfg.monitor.source.kind == "files" or not ts:
            return
        latest = None
        for acc in accepted:
            frame = acc.delivery.frame
            if (
                frame is not None
                and ts in frame.columns
                and not acc.delivery.delivery_id.startswith("trusted:")
            ):
                stamps = sources.parse_timestamps(frame[ts]).dropna()
                if len(stamps):
                    latest = max(latest or 0, int(stamps.max()))
        if latest is not None:
            m = monitors_table
            current = conn.execute(select(m.c.source_watermark).where(m.c.monitor == self.name)).scalar()
            conn.execute(
                update(m)
                .where(m.c.monitor == self.name)
                .values(source_watermark=max(latest, current or latest))
            )

    # ------------------------------------------------------------------------------------------ questions
    def _question(
        self,
        conn: Connection,
        question: Any,
        accepted: list[Accepted],
        delivery_rows: dict[int, dict[str, Any]],
        pass_id: str,
        timing: dict[str, float],
    ) -> dict[str, Any]:
        t0 = time.perf_counter()
        stream = self.streams.load_stream(conn, question)
        frame = self.streams.frame(question, accepted, delivery_rows)
        summary: dict[str, Any] = {"n_new": 0, "n_already": 0, "n_conflicts": 0, "n_late": 0}
        if len(frame):
            self.streams.merge_frame(conn, stream, frame, delivery_rows, summary)
        summary["categories"] = list(stream.meta.categories)
        summary["center"] = stream.meta.center
        timing[f"merge[{question.name}]"] = round(time.perf_counter() - t0, 4)
        t0 = time.perf_counter()
        if stream.changed:
            summary["cumulative"] = self.cumulative.measure(conn, stream, question, pass_id)
        else:
            summary["cumulative"] = self.cumulative.rows(stream, question)
        timing[f"cumulative[{question.name}]"] = round(time.perf_counter() - t0, 4)
        t0 = time.perf_counter()
        summary["windows"], summary["events"] = window_pass.measure_windows(
            conn, self.cfg, self.name, stream, question, pass_id)
        timing[f"windows[{question.name}]"] = round(time.perf_counter() - t0, 4)
        self.streams.save_stream(conn, stream)
        return summary


# ---------------------------------------------------------------------------------------------- helpers
def run_pass(config: Any, *, replay: bool = False, send_alerts: bool = True) -> dict[str, Any]:
    """One monitor pass for a configuration (path, mapping or MonitorConfig); see :class:`Monitor`."""
    return Monitor(config).run_pass(replay=replay, send_alerts=send_alerts)


def count_passes(config: Any, status: str | None = "ok") -> int:
    """Number of recorded passes of the configuration's monitor."""
    monitor = Monitor(config)
    p = passes_table
    query = select(func.count()).select_from(p).where(p.c.monitor == monitor.name)
    if status is not None:
        query = query.where(p.c.status == status)
    with monitor.engine.connect() as conn:
        return int(conn.execute(query).scalar() or 0)
