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
import math
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Engine, func, insert, select, update
from sqlalchemy.engine import Connection

from labelgate.core.labels import label_key, label_number, plain_label
from labelgate.errors import InputError, Reason
from labelgate.monitor import episodes, sources, window_pass, windows
from labelgate.monitor.config import MonitorConfig, as_monitor_config
from labelgate.monitor.cumulative import Cumulative, Stream
from labelgate.monitor.schema import (
    deliveries_table,
    judgements_table,
    migrate,
    monitors_table,
    passes_table,
    streams_table,
    write_transaction,
)
from labelgate.monitor.sources import jsonable
from labelgate.monitor.state import (
    CROWD,
    TRUSTED,
    Meta,
    PartState,
)
from labelgate.monitor.window_pass import load_items
from labelgate.pipeline.store import ResultsStore

_log = logging.getLogger("labelgate.monitor")


@dataclass
class _Accepted:
    delivery: sources.Delivery
    number: int


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
    ) -> tuple[list[_Accepted], dict[int, dict[str, Any]]]:
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
                accepted.append(_Accepted(delivery, number))
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

    def _advance_source_watermark(self, conn: Connection, accepted: list[_Accepted]) -> None:
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
        accepted: list[_Accepted],
        delivery_rows: dict[int, dict[str, Any]],
        pass_id: str,
        timing: dict[str, float],
    ) -> dict[str, Any]:
        t0 = time.perf_counter()
        stream = self._load_stream(conn, question)
        frame = self._frame(question, accepted, delivery_rows)
        summary: dict[str, Any] = {"n_new": 0, "n_already": 0, "n_conflicts": 0, "n_late": 0}
        if len(frame):
            self._merge_frame(conn, stream, frame, delivery_rows, summary)
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
        self._save_stream(conn, stream)
        return summary

    def _load_stream(self, conn: Connection, question: Any) -> Stream:
        s = streams_table
        stored = (
            conn.execute(select(s).where(s.c.monitor == self.name, s.c.question == question.name))
            .mappings()
            .first()
        )
        explicit = question.categories is not None
        row: dict[str, Any]
        if stored is None:
            categories = [_plain_category(c, question.level) for c in (question.categories or [])]
            values = {
                "monitor": self.name,
                "question": question.name,
                "level": question.level,
                "categories": categories,
                "center": None,
                "n_seq": 0,
                "first_ts": None,
                "watermark": None,
                "closed_until": None,
                "state": {},
                "updated_at": datetime.now(UTC),
            }
            values["stream_id"] = conn.execute(insert(s).values(**values)).inserted_primary_key[0]  # type: ignore[index]
            row = values
        else:
            row = dict(stored)
        if row["level"] != question.level:
            raise InputError(
                f"Question {question.name!r} was monitored as {row['level']} and is now configured "
                f"as {question.level}; use another monitor name.",
                Reason.INCOMPATIBLE_RATINGS,
            )
        state = row["state"] or {}
        meta = Meta(
            level=question.level,
            categories=list(row["categories"]),
            center=row["center"],
            irr=self.cfg.monitor.irr,
            weighting=self.cfg.monitor.spa_weighting,
            sizes=list(state.get("sizes", [])),
        )
        if state.get("irr", meta.irr) != meta.irr:
            raise InputError(
                f"The monitor's IRR changed from {state['irr']!r} to {meta.irr!r}; its stored sums "
                "do not apply. Use another monitor name.",
                Reason.INCOMPATIBLE_RATINGS,
            )
        parts = {name: PartState.from_json(name, data) for name, data in state.get("parts", {}).items()}
        return Stream(row, meta, parts, explicit)

    def _save_stream(self, conn: Connection, stream: Stream) -> None:
        s = streams_table
        state = {
            "sizes": stream.meta.sizes,
            "irr": stream.meta.irr,
            "parts": {name: p.to_json() for name, p in stream.parts.items()},
        }
        r = stream.row
        conn.execute(
            update(s)
            .where(s.c.stream_id == r["stream_id"])
            .values(
                categories=stream.meta.categories,
                center=stream.meta.center,
                n_seq=r["n_seq"],
                first_ts=r["first_ts"],
                watermark=r["watermark"],
                closed_until=r["closed_until"],
                state=state,
                updated_at=datetime.now(UTC),
            )
        )

    def _frame(
        self,
        question: Any,
        accepted: list[_Accepted],
        delivery_rows: dict[int, dict[str, Any]],
    ) -> pd.DataFrame:
        """The question's judgements of the accepted deliveries, canonical columns (invalid rows counted)."""
        cols, pools = self.cfg.columns, self.cfg.pools
        frames = []
        for acc in accepted:
            df = acc.delivery.frame
            if df is None or df.empty:
                continue
            label = self.cfg.label_column(question)
            if cols.question:
                if cols.question not in df.columns:
                    raise InputError(
                        f"Delivery {acc.delivery.delivery_id!r} has no question column {cols.question!r}.",
                        Reason.MISSING_COLUMN,
                        column=cols.question,
                    )
                qv = question.question_value if question.question_value is not None else question.name
                df = df.loc[(df[cols.question].astype(object) == qv).to_numpy(bool)]
            for name in (cols.item, cols.rater, label):
                if name not in df.columns:
                    raise InputError(
                        f"Delivery {acc.delivery.delivery_id!r} has no column {name!r}; it has "
                        f"{sorted(map(str, df.columns))}.",
                        Reason.MISSING_COLUMN,
                        column=name,
                    )
            df = df.loc[df[label].notna()]
            if cols.pool in df.columns:
                pool = _ids(df[cols.pool])
            elif acc.delivery.default_pool:
                pool = pd.Series(acc.delivery.default_pool, index=df.index, dtype=object)
            else:
                raise InputError(
                    f"Delivery {acc.delivery.delivery_id!r} has no pool column {cols.pool!r}; add it "
                    "or set monitor.source.default_pool.",
                    Reason.MISSING_COLUMN,
                    column=cols.pool,
                )
            if cols.timestamp and cols.timestamp in df.columns:
                ts = sources.parse_timestamps(df[cols.timestamp])
            elif cols.timestamp:
                raise InputError(
                    f"Delivery {acc.delivery.delivery_id!r} has no timestamp column {cols.timestamp!r}.",
                    Reason.MISSING_COLUMN,
                    column=cols.timestamp,
                )
            else:
                ts = pd.Series(acc.delivery.arrived_at, index=df.index, dtype="Int64")
            out = pd.DataFrame(
                {
                    "item_id": _ids(df[cols.item]),
                    "rater_id": _ids(df[cols.rater]),
                    "label": df[label].astype(object),
                    "pool_name": pool,
                    "ts": ts,
                    "delivery_no": acc.number,
                }
            )
            pool_code = out["pool_name"].map({pools.crowd: CROWD, pools.trusted: TRUSTED})
            valid = out["item_id"].notna() & out["rater_id"].notna() & pool_code.notna() & out["ts"].notna()
            delivery_rows[acc.number]["n_invalid"] += int((~valid).sum())
            out = out.loc[valid.to_numpy(bool)].assign(pool=pool_code[valid].astype(np.int64))
            frames.append(out.drop(columns=["pool_name"]))
        if not frames:
            return pd.DataFrame(columns=["item_id", "rater_id", "label", "ts", "delivery_no", "pool"])
        frame = pd.concat(frames, ignore_index=True)
        frame["ts"] = frame["ts"].astype(np.int64)
        return frame

    # ------------------------------------------------------------------------------------------ merge
    def _merge_frame(
        self,
        conn: Connection,
        stream: Stream,
        frame: pd.DataFrame,
        delivery_rows: dict[int, dict[str, Any]],
        summary: dict[str, Any],
    ) -> None:
        meta, sid = stream.meta, stream.row["stream_id"]
        codes, values, valid = _codes(frame["label"], meta, stream.explicit)
        for number, bad in frame.loc[~valid].groupby("delivery_no").size().items():
            delivery_rows[int(number)]["n_invalid"] += int(bad)
        frame = frame.loc[valid].assign(code=codes[valid], value=values[valid])
        # within the pass: one judgement per (pool, item, rater), the first delivered wins
        first = ~frame.duplicated(["pool", "item_id", "rater_id"], keep="first")
        self._count(frame.loc[~first], frame.loc[first], delivery_rows, summary)
        frame = frame.loc[first]
        if frame.empty:
            return
        existing = load_items(conn, sid, frame["item_id"].unique().tolist())
        key = ["pool", "item_id", "rater_id"]
        joined = frame.merge(existing[[*key, "code"]].rename(columns={"code": "stored"}), on=key, how="left")
        fresh = joined["stored"].isna().to_numpy()
        self._count(
            joined.loc[~fresh].assign(code=joined["code"], clash=joined["stored"]),
            None,
            delivery_rows,
            summary,
        )
        new = frame.loc[fresh]
        if new.empty:
            return
        stream.changed = True
        if meta.numeric and meta.center is None:
            meta.center = float(new["value"].iloc[0])
        new = self._sequence(stream, new, delivery_rows, summary)
        self._insert_judgements(conn, sid, new)
        self.cumulative.update_sums(conn, stream, existing, new)

    def _count(
        self,
        dropped: pd.DataFrame,
        kept: pd.DataFrame | None,
        delivery_rows: dict[int, dict[str, Any]],
        summary: dict[str, Any],
    ) -> None:
        """Count re-delivered judgements: identical (already merged) or with another label (conflict)."""
        if dropped.empty:
            return
        if kept is not None:  # duplicates within this pass: compare with the kept judgement
            ref = kept[["pool", "item_id", "rater_id", "code"]].rename(columns={"code": "clash"})
            dropped = dropped.merge(ref, on=["pool", "item_id", "rater_id"], how="left")
        same = dropped["code"].to_numpy() == dropped["clash"].to_numpy()
        for (number, is_same), count in (
            dropped.assign(same=same).groupby(["delivery_no", "same"]).size().items()
        ):
            field_name = "n_already" if is_same else "n_conflicts"
            delivery_rows[int(number)][field_name] += int(count)
            summary[field_name] += int(count)

    def _sequence(
        self,
        stream: Stream,
        new: pd.DataFrame,
        delivery_rows: dict[int, dict[str, Any]],
        summary: dict[str, Any],
    ) -> pd.DataFrame:
        """Merge order of the crowd judgements (by time, then delivery order); late judgements counted."""
        r = stream.row
        crowd = new["pool"].to_numpy() == CROWD
        order = np.lexsort((np.arange(len(new)), new["delivery_no"].to_numpy(), new["ts"].to_numpy(), ~crowd))
        new = new.iloc[order].copy()
        is_crowd = new["pool"].to_numpy() == CROWD
        n_crowd = int(is_crowd.sum())
        seq = np.full(len(new), -1, dtype=np.int64)
        seq[is_crowd] = r["n_seq"] + np.arange(n_crowd)
        new["seq"] = seq
        for number, count in new.groupby("delivery_no").size().items():
            delivery_rows[int(number)]["n_new"] += int(count)
        summary["n_new"] += len(new)
        if n_crowd:
            ts = new.loc[is_crowd, "ts"].to_numpy()
            window = self.cfg.monitor.window
            if window.kind == "hours" and r["closed_until"] is not None:
                late = ts < r["closed_until"] * windows.length_us(window)
                if late.any():
                    summary["n_late"] += int(late.sum())
                    for number, count in new.loc[is_crowd].loc[late].groupby("delivery_no").size().items():
                        delivery_rows[int(number)]["n_late"] += int(count)
            r["n_seq"] += n_crowd
            r["first_ts"] = int(ts.min()) if r["first_ts"] is None else min(r["first_ts"], int(ts.min()))
            r["watermark"] = int(ts.max()) if r["watermark"] is None else max(r["watermark"], int(ts.max()))
        return new

    def _insert_judgements(self, conn: Connection, sid: int, new: pd.DataFrame) -> None:
        values = new["value"].to_numpy(dtype=np.float64)
        columns = {
            "item_id": new["item_id"].tolist(),
            "pool": new["pool"].to_numpy(np.int64).tolist(),
            "rater_id": new["rater_id"].tolist(),
            "code": new["code"].to_numpy(np.int64).tolist(),
            "value": [None if math.isnan(v) else v for v in values.tolist()],
            "ts": new["ts"].to_numpy(np.int64).tolist(),
            "seq": new["seq"].to_numpy(np.int64).tolist(),
            "delivery_no": new["delivery_no"].to_numpy(np.int64).tolist(),
        }
        names = list(columns)
        records = [
            dict(zip(names, row, strict=True), stream_id=sid) for row in zip(*columns.values(), strict=True)
        ]
        for start in range(0, len(records), 20_000):
            conn.execute(insert(judgements_table), records[start : start + 20_000])

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


def _ids(values: pd.Series) -> pd.Series:
    """Ids as text (integral floats lose their '.0'); missing stays None."""

    def text(v: Any) -> Any:
        if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
            return None
        if isinstance(v, float) and v.is_integer():
            return str(int(v))
        return str(v)

    return values.astype(object).map(text)


def _plain_category(value: Any, level: str) -> Any:
    """A configured category as stored (the keying rule of :mod:`labelgate.core.labels`)."""
    if level in ("interval", "ratio") and label_number(value) is None:
        raise InputError(
            f"Category {value!r} of a numeric question is not a number.", Reason.NON_NUMERIC_VALUE
        )
    return plain_label(value)


def _codes(labels: pd.Series, meta: Meta, explicit: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Category code and numeric value of each label (categories grow unless explicit); valid mask.

    Labels are keyed once per distinct value (:func:`labelgate.core.labels.label_key`), not once per row.
    """
    lookup = {label_key(c): j for j, c in enumerate(meta.categories)}
    factor, uniques = pd.factorize(labels, use_na_sentinel=True)
    unique_codes = np.full(len(uniques), -1, dtype=np.int64)
    for position, label in enumerate(uniques.tolist()):
        key = label_key(label)
        if key is None or (meta.numeric and key[0] != "n"):
            continue
        code = lookup.get(key)
        if code is None:
            if explicit:
                continue
            code = len(meta.categories)
            meta.categories.append(plain_label(label))
            lookup[key] = code
        unique_codes[position] = code
    codes = np.where(factor >= 0, unique_codes[np.maximum(factor, 0)], -1).astype(np.int64)
    numbers = [label_number(c) for c in meta.categories]
    category_values = np.asarray([np.nan if n is None else float(n) for n in numbers] or [np.nan], dtype=float)
    values = np.where(codes >= 0, category_values[np.maximum(codes, 0)], np.nan)
    return codes, values, codes >= 0
