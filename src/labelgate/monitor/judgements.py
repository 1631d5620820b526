"""A stream's stored judgements: those of some items, those of a range of windows, inserting new ones and deleting
replaced or removed ones; the raters of every item a monitor holds (to find deletions at a source)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import and_, bindparam, delete, insert, or_, select, text
from sqlalchemy.engine import Connection

from labelgate.monitor import windows
from labelgate.monitor.touched import CROWD
from labelgate.pipeline.config import Window
from labelgate.pipeline.tables import boxes_table, judgements_table, streams_table
from labelgate.pipeline.units import UNIT_SEP, unit_items

CHUNK = 500  # ids per IN (...) query
_RANGE_CHUNK = 200  # items per query of unit ranges (two bound values each)
_AFTER_SEP = chr(ord(UNIT_SEP) + 1)  # the character after the unit separator: the end of an item's unit range
_INSERT_BATCH = 20_000  # rows per executemany
COLUMNS = ["pool", "item_id", "rater_id", "code", "value", "ts", "seq"]


def _select() -> Any:
    j = judgements_table
    return select(*(j.c[name] for name in COLUMNS))


def load_items(conn: Connection, sid: int, items: list[str], pool: int | None = None) -> pd.DataFrame:
    """The stored judgements of some items of a stream (of one pool, or both), queried in chunks of ids."""
    j = judgements_table
    rows: list[Any] = []
    for start in range(0, len(items), CHUNK):
        query = _select().where(j.c.stream_id == sid, j.c.item_id.in_(items[start : start + CHUNK]))
        if pool is not None:
            query = query.where(j.c.pool == pool)
        rows.extend(conn.execute(query).all())
    return pd.DataFrame(rows, columns=COLUMNS)


def load_units(conn: Connection, sid: int, items: list[str]) -> pd.DataFrame:
    """The stored unit judgements of some items of a span question (unit ids ``item#place``,
    :data:`labelgate.pipeline.units.UNIT_SEP`): a key range per item, ``[item#, item$)`` (``$`` follows ``#``), read
    in chunks of items, then kept where the unit's item is exactly one of ``items`` (an item id may itself hold
    ``#``). The range holds exactly the ids that start with ``item#`` under a bytewise order (SQLite's ``BINARY``,
    PostgreSQL's ``C`` / ``C.UTF-8``), a key range of the primary key; a PostgreSQL database with a language
    collation (which may order punctuation otherwise) compares the bounds under ``C`` instead, exact but then read
    through the stream's part of the key rather than a range of it."""
    j = judgements_table
    column = j.c.item_id if _bytewise(conn) else j.c.item_id.collate("C")
    rows: list[Any] = []
    for start in range(0, len(items), _RANGE_CHUNK):
        ranges = [and_(column >= f"{item}{UNIT_SEP}", column < f"{item}{_AFTER_SEP}")
                  for item in items[start : start + _RANGE_CHUNK]]
        rows.extend(conn.execute(_select().where(j.c.stream_id == sid, or_(*ranges))).all())
    out = pd.DataFrame(rows, columns=COLUMNS)
    return out.loc[pd.Series(unit_items(out["item_id"]), index=out.index).isin(set(items)).to_numpy(bool)]


def _bytewise(conn: Connection) -> bool:
    """Whether the store orders text bytewise (code point order), where ``[item#, item$)`` is a key range."""
    if conn.dialect.name != "postgresql":
        return True
    collation = conn.execute(text("select datcollate from pg_database where datname = current_database()")).scalar()
    return str(collation).split(".")[0] in ("C", "POSIX")


def load_windows(conn: Connection, window: Window, sid: int, start: int, stop: int) -> pd.DataFrame:
    """The crowd judgements of windows ``start`` to ``stop - 1`` (by time or by annotation count)."""
    j = judgements_table
    query = _select().where(j.c.stream_id == sid, j.c.pool == CROWD)
    if window.kind == "hours":
        size = windows.length_us(window)
        query = query.where(j.c.ts >= start * size, j.c.ts < stop * size)
    else:
        n = int(window.annotations or 1)
        query = query.where(j.c.seq >= start * n, j.c.seq < stop * n)
    return pd.DataFrame(conn.execute(query).all(), columns=COLUMNS)


def insert_new(conn: Connection, sid: int, new: pd.DataFrame) -> None:
    """Insert new judgements (columns ``item_id, pool, rater_id, code, value, ts, seq, delivery_no``)."""
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
    records = [dict(zip(names, row, strict=True), stream_id=sid) for row in zip(*columns.values(), strict=True)]
    for start in range(0, len(records), _INSERT_BATCH):
        conn.execute(insert(judgements_table), records[start : start + _INSERT_BATCH])


def delete_keys(conn: Connection, sid: int, keys: pd.DataFrame) -> None:
    """Delete the judgements of a stream with these keys (columns ``pool, item_id, rater_id``)."""
    if keys.empty:
        return
    j = judgements_table
    statement = delete(j).where(
        and_(j.c.stream_id == sid, j.c.item_id == bindparam("b_item"), j.c.pool == bindparam("b_pool"),
             j.c.rater_id == bindparam("b_rater"))
    )
    records = [
        {"b_item": item, "b_pool": int(pool), "b_rater": rater}
        for item, pool, rater in zip(keys["item_id"], keys["pool"], keys["rater_id"], strict=True)
    ]
    for start in range(0, len(records), _INSERT_BATCH):
        conn.execute(statement, records[start : start + _INSERT_BATCH])


def item_raters(conn: Connection, monitor: str) -> dict[str, set[str]]:
    """The raters (both pools) of every item with a stored judgement or box in any of the monitor's streams (an image
    whose raters all drew nothing has boxes but no unit judgement).

    Cost: one pass over the monitor's judgements and boxes (the reconciliation with a source that does not list
    deletions).
    """
    s = streams_table
    out: dict[str, set[str]] = {}
    for table in (judgements_table, boxes_table):
        query = (
            select(table.c.item_id, table.c.rater_id)
            .join_from(table, s, s.c.stream_id == table.c.stream_id)
            .where(s.c.monitor == monitor)
            .distinct()
        )
        for item, rater in conn.execute(query):
            out.setdefault(item, set()).add(rater)
    return out
