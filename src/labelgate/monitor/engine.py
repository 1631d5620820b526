"""One monitor pass: collect new deliveries → merge them into the stored state → measure the closed windows
→ detect drift → persist, all in one database transaction; then send the pending episode alerts. A SQL source is read
in bounded chunks, each merged in a transaction of its own, the measurements in the last (:meth:`Monitor.merge`).

A pass costs time proportional to the new judgements (plus the categories, the closed windows and the
candidate collusion pairs), not to the judgements merged before: it reads only the stored judgements of
the items the new ones touch, updates maintained sums (:mod:`labelgate.monitor.sums`) and per-rater sums,
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

from sqlalchemy import Engine
from sqlalchemy.engine import Connection

from labelgate.monitor import boxes, cumulative, episodes, intake, passes, window_pass
from labelgate.monitor.alerting import send_pending
from labelgate.monitor.frames import question_frame
from labelgate.monitor.merging import merge
from labelgate.monitor.stream_store import load_stream, save_stream
from labelgate.pipeline.config import MonitorConfig, as_monitor_config
from labelgate.pipeline.database import MONITOR_PASS_LOCK, transaction
from labelgate.pipeline.migrations import migrate
from labelgate.pipeline.sources.deliveries import Delivery, iso_utc
from labelgate.pipeline.store import ResultsStore

_log = logging.getLogger("labelgate.monitor")


class Monitor:
    """The monitor of one configuration (``monitor.name``) on its results-store database.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from labelgate.pipeline.config import monitor_config_from_dict
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
            summary["alerts"] = send_pending(self.engine, self.cfg)
        return summary

    def collect(self) -> list[Delivery]:
        """New deliveries of the source (and the trusted file, when configured and changed)."""
        return intake.collect(self.engine, self.cfg)

    def record_failure(self, pass_id: str, started: datetime, exc: BaseException) -> None:
        """Record an ``error`` pass (its own transaction)."""
        passes.record_failure(self.engine, self.name, pass_id, started, exc)

    def merge(
        self,
        deliveries: list[Delivery],
        *,
        pass_id: str | None = None,
        started: datetime | None = None,
        replay: bool = False,
    ) -> dict[str, Any]:
        """Merge deliveries and measure, in one write transaction; returns the pass summary.

        Summary keys: ``pass_id``, ``monitor``, ``status``, ``deliveries`` (id, status, counts), ``n_new``,
        ``questions`` ({question: {cumulative: {metric: row}, windows: n, events: [...], learning: [...], n_new,
        ...}}; ``learning``: the change-detected series whose reference is still too short to promise the detection
        of small drops, :func:`labelgate.monitor.cusum.learning`), ``source_watermark``, ``steps`` (the pass ids of its
        transactions), ``timing``.

        A chunk of a ``sql`` source whose read goes on (:attr:`Delivery.more`) is merged in a transaction of its own
        and committed (a recorded pass, source watermark advanced); then the next chunk is read, and so on: the last
        transaction, under ``pass_id``, measures the cumulative rows and the windows and runs the detectors once, on
        everything merged, so the stored series is the one a single read of all the rows would give, and a pass that
        stopped after some chunks resumes from the watermark. The summary adds up the transactions' counts.
        """
        pass_id = pass_id or str(uuid.uuid4())
        steps: list[dict[str, Any]] = []
        try:
            while True:
                more = next((d.more for d in deliveries if d.more is not None), None)
                step_id = str(uuid.uuid4()) if more is not None else pass_id
                step = self._merge_step(deliveries, step_id, started if not steps else None, replay and not steps,
                                        final=more is None)
                steps.append(step)
                for delivery in deliveries:
                    if delivery.chunk is not None:
                        _log.info(
                            "monitor %s: chunk %d merged (%d rows, %d new), source watermark %s",
                            self.name, delivery.chunk, 0 if delivery.frame is None else len(delivery.frame),
                            step["n_new"], step["source_watermark"],
                        )
                        delivery.frame = None  # merged and committed: a pass holds one chunk of rows at a time
                if more is None:
                    return passes.combined(steps)
                deliveries = more()
        finally:
            # a read still open (a pass that failed between chunks) is closed now, not when collected: an open
            # source cursor holds its snapshot and locks on the source database
            for delivery in deliveries:
                if delivery.close is not None:
                    delivery.close()

    def _merge_step(
        self, deliveries: list[Delivery], pass_id: str, started: datetime | None, replay: bool, *, final: bool,
    ) -> dict[str, Any]:
        """One write transaction: accept and merge ``deliveries``; when ``final``, also measure and detect."""
        started = started or datetime.now(UTC)
        timing: dict[str, float] = {}
        t0 = time.perf_counter()
        with transaction(self.engine, write=True, lock=MONITOR_PASS_LOCK) as conn:
            passes.register(conn, self.name, self.cfg.digest())
            if replay:
                episodes.reset(conn, self.name)
            accepted, delivery_rows = intake.accept(conn, self.name, deliveries, pass_id)
            questions = {
                question.name: self._question(conn, question, accepted, delivery_rows, pass_id, timing, final)
                for question in self.cfg.questions
            }
            intake.save_counts(conn, delivery_rows)
            watermark = intake.advance_source_watermark(conn, self.cfg, accepted)
            summary = {
                "pass_id": pass_id,
                "monitor": self.name,
                "status": "ok",
                "replay": replay,
                "started_at": started.isoformat(),
                "deliveries": list(delivery_rows.values()),
                "n_new": sum(r["n_new"] for r in delivery_rows.values()),
                "rows": sum(r["n_rows"] for r in delivery_rows.values()),
                "source_watermark": None if watermark is None else iso_utc(watermark),
                "questions": questions,
                "timing": timing,
            }
            timing["merge_total"] = round(time.perf_counter() - t0, 4)
            finished = datetime.now(UTC)
            summary["finished_at"] = finished.isoformat()
            passes.record_pass(conn, self.name, pass_id, "ok", started, finished, summary)
            t0 = time.perf_counter()
        timing["commit"] = round(time.perf_counter() - t0, 4)  # returned, not stored: the record is committed with it
        return summary

    def _question(
        self,
        conn: Connection,
        question: Any,
        accepted: list[intake.Accepted],
        delivery_rows: dict[int, dict[str, Any]],
        pass_id: str,
        timing: dict[str, float],
        final: bool,
    ) -> dict[str, Any]:
        """Merge, measure and detect one question (only merge unless ``final``); returns its part of the summary."""
        t0 = time.perf_counter()
        stream = load_stream(conn, self.cfg, self.name, question)
        frame = question_frame(self.cfg, question, accepted, delivery_rows)
        summary: dict[str, Any] = {"n_new": 0, "n_already": 0, "n_conflicts": 0, "n_late": 0}
        if question.kind == "boxes" and len(frame):  # an image's objects regrouped from all its boxes: restated
            frame = boxes.restated_units(conn, self.cfg, question, stream, frame, delivery_rows, summary)
        merged = (merge(conn, stream, frame, self.cfg.monitor.window, delivery_rows, summary,
                        units=question.kind != "labels") if len(frame) else None)
        if merged is not None:
            cumulative.update(conn, self.cfg, stream, merged)
        summary["categories"] = list(stream.meta.categories)
        summary["center"] = stream.meta.center
        timing[f"merge[{question.name}]"] = round(time.perf_counter() - t0, 4)
        if not final:  # a chunk with more to come: the measurements wait for the last one
            # stored, not held in memory: a pass stopped before its measuring transaction records the point on rerun
            stream.unrecorded = stream.unrecorded or merged is not None
            summary.update(cumulative={}, windows=0, events=[], learning=[])
            save_stream(conn, stream)
            return summary
        t0 = time.perf_counter()
        summary["cumulative"], thresholds = cumulative.measure(self.cfg, stream, question)
        if merged is not None or stream.unrecorded:  # a new point of the series once per pass that changed the stream
            cumulative.record(conn, self.name, stream, summary["cumulative"], pass_id)
            stream.unrecorded = False
        timing[f"cumulative[{question.name}]"] = round(time.perf_counter() - t0, 4)
        t0 = time.perf_counter()
        summary["windows"], summary["events"], summary["learning"] = window_pass.measure_windows(
            conn, self.cfg, self.name, stream, question.name, thresholds, pass_id
        )
        timing[f"windows[{question.name}]"] = round(time.perf_counter() - t0, 4)
        save_stream(conn, stream)
        return summary


def run_pass(config: Any, *, replay: bool = False, send_alerts: bool = True) -> dict[str, Any]:
    """One monitor pass for a configuration (path, mapping or MonitorConfig); see :class:`Monitor`."""
    return Monitor(config).run_pass(replay=replay, send_alerts=send_alerts)


def count_passes(config: Any, status: str | None = "ok") -> int:
    """Number of recorded passes of the configuration's monitor."""
    monitor = Monitor(config)
    return passes.count(monitor.engine, monitor.name, status)
