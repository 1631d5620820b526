"""Merging judgements into a monitor's streams: one question's stream row and sums (load, save), the deliveries'
rows in canonical form with category codes, and the new judgements with their sequence numbers."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection

from labelgate.core.labels import label_key, label_number, plain_label
from labelgate.errors import InputError, Reason
from labelgate.monitor import sources, windows
from labelgate.monitor.config import MonitorConfig
from labelgate.monitor.cumulative import Cumulative, Stream
from labelgate.monitor.schema import (
    judgements_table,
    streams_table,
)
from labelgate.monitor.state import (
    CROWD,
    TRUSTED,
    Meta,
    PartState,
)
from labelgate.monitor.window_pass import load_items

_log = logging.getLogger("labelgate.monitor")


@dataclass
class Accepted:
    """A delivery accepted in this pass and its number in the deliveries table."""

    delivery: sources.Delivery
    number: int


class StreamMerge:
    """Loads, merges into and saves the streams of one monitor (``name``); the sums go through ``cumulative``."""

    def __init__(self, cfg: MonitorConfig, name: str, cumulative: Cumulative) -> None:
        self.cfg = cfg
        self.name = name
        self.cumulative = cumulative

    def load_stream(self, conn: Connection, question: Any) -> Stream:
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

    def save_stream(self, conn: Connection, stream: Stream) -> None:
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

    def frame(
        self,
        question: Any,
        accepted: list[Accepted],
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

    def merge_frame(
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
