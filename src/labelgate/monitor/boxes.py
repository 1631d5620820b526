"""Image boxes (``kind: boxes``) in the monitor: the raw boxes are kept, and an image is regrouped into objects from
all its boxes whenever a box of it arrives.

An object of an image groups the boxes of *every* rater of it (both pools; :meth:`labelgate.Ratings.from_boxes`), so
a box that arrives later can change objects made of earlier boxes. The monitor therefore stores each box
(:data:`labelgate.pipeline.tables.boxes_table`) and, in every pass, takes the images that received boxes, groups each
from all its stored boxes with the gate's code (:func:`labelgate.pipeline.units.question_units`, both pools at once)
and **restates** the image's unit judgements (``image#object``): unchanged objects stay, changed ones are replaced,
objects that no longer exist are removed — the restatement path of :func:`labelgate.monitor.merging.merge` that a
Label Studio source's texts take. The stream's judgements, its sums and its cumulative values are then those of the
gate on every box merged so far, exactly.

An image a delivery restates (a Label Studio task read again: every current annotation of it) has exactly that
delivery's boxes of it: its stored boxes are replaced by them, then it is regrouped the same way.

A rater's boxes of an image arrive together (one group: the rows of a delivery with that image, rater and pool); a
group already stored, or delivered twice in one pass, is not merged again: its rows count as already merged (the same
boxes) or conflicting (others), as a re-delivered judgement does.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Connection

from labelgate.monitor.frames import BOX_COLUMNS
from labelgate.monitor.judgements import CHUNK
from labelgate.monitor.stream_store import Stream
from labelgate.monitor.touched import CROWD, RESTATED, TRUSTED
from labelgate.pipeline.config import MonitorConfig
from labelgate.pipeline.tables import boxes_table
from labelgate.pipeline.units import question_units, unit_items

GROUP = ["pool", "item_id", "rater_id"]
_STORED = ["pool", "item_id", "rater_id", "box", *BOX_COLUMNS, "label", "ts", "delivery_no"]
_TS = "_labelgate_ts"  # the time column of the rows regrouped when the configuration names none


def restated_units(conn: Connection, cfg: MonitorConfig, question: Any, stream: Stream, frame: pd.DataFrame,
                   delivery_rows: dict[int, dict[str, Any]], summary: dict[str, Any]) -> pd.DataFrame:
    """Store the new box groups of ``frame`` (a question's raw box rows, :func:`labelgate.monitor.frames.
    question_frame`) and return the unit judgements of every image they touch, regrouped from all its stored boxes,
    with a restating marker row per image (pool ``RESTATED``): the frame :func:`labelgate.monitor.merging.merge`
    merges with ``units=True``. Re-delivered groups are counted (``n_already`` / ``n_conflicts``) and dropped.

    An image a delivery restates (its marker row in ``frame``: a Label Studio task read again) has as its boxes
    exactly that delivery's rows of it: its stored boxes, every rater's, are replaced by them (none left: a task
    deleted, or every annotation of it deleted or cancelled), and it is regrouped; its unit judgements are then
    counted by the merge (unchanged, replaced, removed), not its boxes. Rows of such an image from the pass's other
    deliveries are counted against its restated boxes and dropped: the restatement states the image."""
    sid = stream.row["stream_id"]
    if frame.empty:
        return frame
    frame = frame.reset_index(drop=True)
    marker = (frame["pool"] == RESTATED).to_numpy(bool)
    restating = frame.loc[marker].groupby("item_id")["delivery_no"].max()  # the last delivery restating each image
    frame = frame.loc[~marker]
    of_restated = frame["item_id"].map(restating)
    stating = (of_restated == frame["delivery_no"]).to_numpy(bool)
    superseded = of_restated.notna().to_numpy(bool) & ~stating
    appended = frame.loc[~stating & ~superseded]
    stored = _load(conn, sid, appended["item_id"].unique().tolist())
    first = appended.groupby(GROUP, sort=False)["delivery_no"].transform("min") == appended["delivery_no"]
    known = pd.MultiIndex.from_frame(appended[GROUP]).isin(pd.MultiIndex.from_frame(stored[GROUP]))
    fresh = (first & ~known).to_numpy(bool)
    _count_repeats(_stack(appended.loc[~fresh], frame.loc[superseded]),
                   _stack(stored, appended.loc[fresh], frame.loc[stating]).reset_index(drop=True), delivery_rows,
                   summary)
    # a box's place: its row in the pass's rows (deliveries in order), so that an image's boxes are grouped in the
    # order of one table of the deliveries, crowd rows first (the gate's batch and trusted tables; ties by row order)
    new = _stack(appended.loc[fresh], frame.loc[stating])
    new = new.assign(box=new.index.to_numpy(np.int64))
    _delete(conn, sid, restating.index.tolist())
    if len(new):
        _insert(conn, sid, new)
    # the last delivery that touched each image restates it: its new groups' or the one restating it
    delivery = pd.concat([new.groupby("item_id")["delivery_no"].max(), restating]).groupby(level=0).max()
    if delivery.empty:
        return frame.iloc[:0]
    images = delivery.index.tolist()
    units = _units(cfg, question, _load(conn, sid, images))
    units["delivery_no"] = pd.Series(unit_items(units["item_id"]), index=units.index).map(delivery).astype(np.int64)
    markers = pd.DataFrame({"item_id": images, "rater_id": None, "label": None, "ts": 0,
                            "delivery_no": delivery.to_numpy(np.int64), "pool": RESTATED})
    return pd.concat([markers, units], ignore_index=True)


def _stack(*parts: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``parts`` in order, index kept; empty parts left out (their columns' types would not count)."""
    rows = [part for part in parts if len(part)]
    return pd.concat(rows) if rows else parts[0]


def _units(cfg: MonitorConfig, question: Any, boxes: pd.DataFrame) -> pd.DataFrame:
    """The unit judgements of the images of ``boxes`` (all their boxes), in the monitor's canonical columns."""
    cols, pools = cfg.columns, cfg.pools
    assert question.boxes is not None
    if boxes.empty:  # every image restated without a box left: no unit
        return pd.DataFrame({"item_id": pd.Series(dtype=object), "rater_id": pd.Series(dtype=object),
                             "label": pd.Series(dtype=object), "ts": pd.Series(dtype=np.int64),
                             "pool": pd.Series(dtype=np.int64)})
    time = cols.timestamp or _TS
    grouped = cfg.model_copy(update={"columns": cols.model_copy(update={"timestamp": time, "question": None})})
    rows = pd.DataFrame({cols.item: boxes["item_id"], cols.rater: boxes["rater_id"],
                         grouped.label_column(question): boxes["label"],
                         cols.pool: boxes["pool"].map({CROWD: pools.crowd, TRUSTED: pools.trusted}),
                         **{getattr(question.boxes, name): boxes[name] for name in BOX_COLUMNS},
                         time: boxes["ts"]})
    units, _ = question_units(grouped, question, rows)
    return pd.DataFrame({
        "item_id": units[cols.item].astype(str).to_numpy(object),
        "rater_id": units[cols.rater].astype(str).to_numpy(object),
        "label": units[grouped.label_column(question)].astype(object).to_numpy(),
        "ts": units[time].to_numpy(np.int64),
        "pool": units[cols.pool].astype(object).map({pools.crowd: CROWD, pools.trusted: TRUSTED}).to_numpy(np.int64),
    })


def _count_repeats(dropped: pd.DataFrame, kept: pd.DataFrame, delivery_rows: dict[int, dict[str, Any]],
                   summary: dict[str, Any]) -> None:
    """Count the rows of re-delivered groups: already merged when the group holds the same boxes, else conflicting."""
    if dropped.empty:
        return
    boxes = {key: _signature(group) for key, group in kept.groupby(GROUP, sort=False)}
    for key_and_delivery, group in dropped.groupby([*GROUP, "delivery_no"], sort=False):
        key, number = tuple(key_and_delivery[:-1]), int(key_and_delivery[-1])
        name = "n_already" if boxes.get(key) == _signature(group) else "n_conflicts"
        delivery_rows[number][name] += len(group)
        summary[name] += len(group)


def _signature(group: pd.DataFrame) -> list[tuple[Any, ...]]:
    """A group's boxes, in an order that does not depend on the rows' order."""
    out = []
    for row in group[[*BOX_COLUMNS, "label"]].itertuples(index=False):
        numbers = tuple(None if v is None or (isinstance(v, float) and np.isnan(v)) else round(float(v), 9)
                        for v in row[:4])
        out.append((*numbers, None if _missing(row[4]) else str(row[4])))
    return sorted(out, key=repr)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA


def _insert(conn: Connection, sid: int, new: pd.DataFrame) -> None:
    records = []
    for row in new[_STORED].itertuples(index=False):
        pool, item, rater, box, x, y, width, height, label, ts, number = row
        records.append({"stream_id": sid, "item_id": item, "pool": int(pool), "rater_id": rater, "box": int(box),
                        **{k: None if _missing(v) else float(v) for k, v in zip(BOX_COLUMNS, (x, y, width, height),
                                                                                 strict=True)},
                        "label": None if _missing(label) else _plain(label), "ts": int(ts),
                        "delivery_no": int(number)})
    conn.execute(insert(boxes_table), records)


def _plain(value: Any) -> Any:
    """A label as JSON stores it (numpy scalars as Python values)."""
    value = value.item() if isinstance(value, np.generic) else value
    json.dumps(value)  # a label JSON cannot hold is an error here, not in the store
    return value


def _delete(conn: Connection, sid: int, images: list[str]) -> None:
    """Remove every stored box of some images (restated: their boxes are stated again), in chunks of ids."""
    b = boxes_table
    for start in range(0, len(images), CHUNK):
        conn.execute(delete(b).where(b.c.stream_id == sid, b.c.item_id.in_(images[start : start + CHUNK])))


def _load(conn: Connection, sid: int, images: list[str]) -> pd.DataFrame:
    """The stored boxes of some images (every pool and rater), queried in chunks of ids by the primary key."""
    b = boxes_table
    rows: list[Any] = []
    for start in range(0, len(images), CHUNK):
        query = select(*(b.c[name] for name in _STORED)).where(b.c.stream_id == sid,
                                                                 b.c.item_id.in_(images[start : start + CHUNK]))
        rows.extend(conn.execute(query).all())
    out = pd.DataFrame(rows, columns=_STORED)
    return out.sort_values(["item_id", "pool", "delivery_no", "box"], kind="stable").reset_index(drop=True)
