"""The stored per-rater sums and co-rating pair tallies of a stream: read them, and add a pass's deltas
(:mod:`labelgate.monitor.raters` computes them) in the caller's transaction."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import and_, bindparam, delete, insert, select, update
from sqlalchemy.engine import Connection

from labelgate.monitor.judgements import CHUNK
from labelgate.monitor.raters import RaterDelta, expand_rater
from labelgate.monitor.state import Meta
from labelgate.pipeline.tables import keys_table, pairs_table, raters_table


def load_sums(conn: Connection, sid: int, pool: int, ids: list[str], meta: Meta) -> dict[str, np.ndarray]:
    """The stored sums vectors of some raters of a pool, laid out for the stream's current categories."""
    r = raters_table
    out = {}
    for start in range(0, len(ids), CHUNK):
        rows = conn.execute(
            select(r.c.rater_id, r.c.q, r.c.sums).where(
                r.c.stream_id == sid, r.c.pool == pool, r.c.rater_id.in_(ids[start : start + CHUNK])
            )
        ).all()
        for rid, q, blob in rows:
            out[rid] = expand_rater(np.frombuffer(blob, dtype=np.float64).copy(), meta.kind, int(q), meta.q)
    return out


def add_sums(conn: Connection, sid: int, pool: int, delta: RaterDelta, meta: Meta) -> None:
    """Add the deltas of a pool's touched raters to their stored sums (new raters get a row)."""
    ids = delta.ids.tolist()
    stored = load_sums(conn, sid, pool, ids, meta)
    updates, inserts = [], []
    for rid, change in zip(ids, delta.delta, strict=True):
        if rid in stored:
            updates.append({"b_sid": sid, "b_pool": pool, "b_rid": rid, "q": meta.q,
                            "sums": (stored[rid] + change).tobytes()})
        else:
            inserts.append({"stream_id": sid, "pool": pool, "rater_id": rid, "q": meta.q, "sums": change.tobytes(),
                            "row": None, "flagged": False})
    if updates:
        conn.execute(keyed_rater_update(q=bindparam("q"), sums=bindparam("sums")), updates)
    if inserts:
        conn.execute(insert(raters_table), inserts)


def add_pairs(conn: Connection, sid: int, pool: int, pairs: pd.DataFrame, min_pair_items: int) -> None:
    """Add the new co-rating ``pairs`` of a pool (``rater_a, rater_b, n, agree``) to the stored tallies; a pair
    with ``min_pair_items`` shared items or more becomes a collusion candidate."""
    if pairs.empty:
        return
    p = pairs_table
    keys = list(zip(pairs["rater_a"], pairs["rater_b"], strict=True))
    # Join with a temporary key table: SQLite does not use the whole primary key for a row-value IN (...),
    # and one query per key costs more than the join (one primary-key lookup per key).
    keys_table.create(conn, checkfirst=True)
    conn.execute(delete(keys_table))
    conn.execute(insert(keys_table), [{"a": a, "b": b} for a, b in keys])
    k = keys_table
    rows = conn.execute(
        select(p.c.rater_a, p.c.rater_b, p.c.n, p.c.agree).join_from(
            k, p, and_(p.c.stream_id == sid, p.c.pool == pool, p.c.rater_a == k.c.a, p.c.rater_b == k.c.b)
        )
    ).all()
    stored: dict[tuple[str, str], tuple[int, int]] = {(ra, rb): (n, ag) for ra, rb, n, ag in rows}
    conn.execute(delete(keys_table))
    updates, inserts = [], []
    for (a, b), n, agree in zip(keys, pairs["n"].astype(int), pairs["agree"].astype(int), strict=True):
        if (a, b) in stored:
            n_old, agree_old = stored[(a, b)]
            updates.append({"b_sid": sid, "b_pool": pool, "b_a": a, "b_b": b, "n": n_old + n,
                            "agree": agree_old + agree, "candidate": n_old + n >= min_pair_items})
        else:
            inserts.append({"stream_id": sid, "pool": pool, "rater_a": a, "rater_b": b, "n": n, "agree": agree,
                            "candidate": n >= min_pair_items})
    if updates:
        key = and_(p.c.stream_id == bindparam("b_sid"), p.c.pool == bindparam("b_pool"),
                   p.c.rater_a == bindparam("b_a"), p.c.rater_b == bindparam("b_b"))
        conn.execute(
            update(p).where(key).values(n=bindparam("n"), agree=bindparam("agree"), candidate=bindparam("candidate")),
            updates,
        )
    if inserts:
        conn.execute(insert(p), inserts)


def keyed_rater_update(**values: Any) -> Any:
    """An executemany UPDATE of rater rows keyed by the bind parameters ``b_sid``, ``b_pool``, ``b_rid``."""
    r = raters_table
    key = and_(r.c.stream_id == bindparam("b_sid"), r.c.pool == bindparam("b_pool"),
               r.c.rater_id == bindparam("b_rid"))
    return update(r).where(key).values(**values)
