"""The stored per-rater sums and co-rating pair tallies of a stream: read them, and add a pass's deltas
(:mod:`labelgate.monitor.raters` computes them) in the caller's transaction."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import and_, bindparam, insert, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection

from labelgate.monitor.judgements import CHUNK
from labelgate.monitor.raters import RaterDelta, expand_rater
from labelgate.monitor.state import Meta
from labelgate.pipeline.tables import pairs_table, raters_table


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
    with ``min_pair_items`` shared items or more becomes a collusion candidate.

    One upsert per pair (``INSERT ... ON CONFLICT DO UPDATE``, SQLite and PostgreSQL): a single primary-key descent
    finds the stored tally and adds to it, instead of a read and then an update.
    """
    if pairs.empty:
        return
    p = pairs_table
    dialect = conn.dialect.name
    if dialect not in _UPSERT:
        raise ValueError(f"the monitor's store needs SQLite or PostgreSQL, not {dialect!r}")
    statement = _UPSERT[dialect](p)
    statement = statement.on_conflict_do_update(
        index_elements=[p.c.stream_id, p.c.pool, p.c.rater_a, p.c.rater_b],
        set_={"n": p.c.n + statement.excluded.n, "agree": p.c.agree + statement.excluded.agree,
              "candidate": p.c.n + statement.excluded.n >= min_pair_items},
    )
    rows = [{"stream_id": sid, "pool": pool, "rater_a": a, "rater_b": b, "n": n, "agree": agree,
             "candidate": n >= min_pair_items}
            for a, b, n, agree in zip(pairs["rater_a"].tolist(), pairs["rater_b"].tolist(),
                                      pairs["n"].astype(int).tolist(), pairs["agree"].astype(int).tolist(),
                                      strict=True)]
    conn.execute(statement, rows)


_UPSERT: dict[str, Any] = {"sqlite": sqlite_insert, "postgresql": postgresql_insert}


def keyed_rater_update(**values: Any) -> Any:
    """An executemany UPDATE of rater rows keyed by the bind parameters ``b_sid``, ``b_pool``, ``b_rid``."""
    r = raters_table
    key = and_(r.c.stream_id == bindparam("b_sid"), r.c.pool == bindparam("b_pool"),
               r.c.rater_id == bindparam("b_rid"))
    return update(r).where(key).values(**values)
