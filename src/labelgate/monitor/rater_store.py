"""The stored per-rater sums and co-rating pair tallies of a stream: read them, and add a pass's deltas
(:mod:`labelgate.monitor.raters` computes them) in the caller's transaction. Pair tallies are added to a small table
of pending tallies and folded into the main one at a bounded cadence (:func:`add_pairs`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import and_, bindparam, delete, func, insert, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection

from labelgate.monitor.judgements import CHUNK
from labelgate.monitor.raters import RaterDelta, expand_rater
from labelgate.monitor.state import Meta
from labelgate.pipeline.tables import pair_deltas_table, pairs_table, raters_table


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


#: Rows of pending pair tallies a stream keeps before they are folded into the main table (:func:`fold_pairs`).
FOLD_ROWS = 65_536


def add_pairs(conn: Connection, sid: int, pool: int, pairs: pd.DataFrame, min_pair_items: int) -> None:
    """Add the new co-rating ``pairs`` of a pool (``rater_a, rater_b, n, agree``) to the stored tallies; a pair
    with ``min_pair_items`` shared items or more becomes a collusion candidate.

    The tallies go to the pending table (``labelgate_monitor_pair_deltas``), whose pages are few, not to the main one,
    whose pages a pass would scatter its writes over (docs/monitoring.md, "Pass cost"). A pending row holds the sum of
    the deltas since the last fold and a copy of the pair's main row (read by key; the main table does not change until
    the fold), so the pair's total, and whether it is a candidate, is known without a join. Once the stream has
    :data:`FOLD_ROWS` pending rows or more they are folded into the main table (:func:`fold_pairs`): between passes a
    stream holds fewer than :data:`FOLD_ROWS` pending rows, but within a pass that adds many pairs (a large backfill)
    it holds ``FOLD_ROWS`` plus the pass's new pairs until the fold at its end.
    """
    if pairs.empty:
        return
    # Read, add, write back: the pending tally is correct only because passes are serialised (the pass lock:
    # ``BEGIN IMMEDIATE`` on SQLite, an advisory lock on PostgreSQL); two writers at once would lose an addition.
    keys = list(zip(pairs["rater_a"].tolist(), pairs["rater_b"].tolist(), strict=True))
    base = _tallies(conn, pairs_table, sid, pool, keys)
    pending = _tallies(conn, pair_deltas_table, sid, pool, keys)
    rows = []
    for key, n, agree in zip(keys, pairs["n"].astype(int).tolist(), pairs["agree"].astype(int).tolist(), strict=True):
        base_n, base_agree = base.get(key, (0, 0))
        old_n, old_agree = pending.get(key, (0, 0))
        rows.append({"stream_id": sid, "pool": pool, "rater_a": key[0], "rater_b": key[1], "n": old_n + n,
                     "agree": old_agree + agree, "base_n": base_n, "base_agree": base_agree,
                     "candidate": base_n + old_n + n >= min_pair_items})
    conn.execute(_upsert(conn, pair_deltas_table, ("n", "agree", "candidate")), rows)
    d = pair_deltas_table
    held = conn.execute(select(func.count()).select_from(d).where(d.c.stream_id == sid)).scalar() or 0
    if held >= FOLD_ROWS:
        fold_pairs(conn, sid)


def fold_pairs(conn: Connection, sid: int) -> None:
    """Fold a stream's pending pair tallies into the main table (one ``INSERT ... SELECT ... ON CONFLICT``) and empty
    them: the main row of a pair becomes ``base + pending``, which is its total."""
    p, d = pairs_table, pair_deltas_table
    totals = select(d.c.stream_id, d.c.pool, d.c.rater_a, d.c.rater_b, d.c.base_n + d.c.n, d.c.base_agree + d.c.agree,
                    d.c.candidate).where(d.c.stream_id == sid)
    columns = ["stream_id", "pool", "rater_a", "rater_b", "n", "agree", "candidate"]
    statement = _dialect_insert(conn)(p).from_select(columns, totals)
    statement = statement.on_conflict_do_update(
        index_elements=[p.c.stream_id, p.c.pool, p.c.rater_a, p.c.rater_b],
        set_={name: statement.excluded[name] for name in ("n", "agree", "candidate")},
    )
    conn.execute(statement)
    conn.execute(delete(d).where(d.c.stream_id == sid))


def candidate_pairs(conn: Connection, sid: int) -> pd.DataFrame:
    """The collusion candidates of a stream with their total tallies: columns ``pool, rater_a, rater_b, n, agree``.

    A pair is a candidate when its main row says so and it has no pending row, or when its pending row says so
    (total: the main row copied in it plus the pending sum). Both reads go through partial covering indexes that hold
    the candidates alone; the pending rows of the main candidates are read by key.
    """
    p, d = pairs_table, pair_deltas_table
    columns = ["pool", "rater_a", "rater_b", "n", "agree"]
    main = conn.execute(
        select(p.c.pool, p.c.rater_a, p.c.rater_b, p.c.n, p.c.agree).where(
            p.c.stream_id == sid, p.c.candidate.is_(True))
    ).all()
    shadowed: set[tuple[int, str, str]] = set()
    by_pool: dict[int, list[tuple[str, str]]] = {}
    for pool, a, b, _, _ in main:
        by_pool.setdefault(int(pool), []).append((a, b))
    for pool, keys in by_pool.items():
        shadowed.update((pool, a, b) for a, b in _tallies(conn, d, sid, pool, keys))
    pending = conn.execute(
        select(d.c.pool, d.c.rater_a, d.c.rater_b, d.c.base_n + d.c.n, d.c.base_agree + d.c.agree).where(
            d.c.stream_id == sid, d.c.candidate.is_(True))
    ).all()
    rows = [tuple(r) for r in main if (int(r[0]), r[1], r[2]) not in shadowed] + [tuple(r) for r in pending]
    return pd.DataFrame(rows, columns=columns)


def _tallies(conn: Connection, table: Any, sid: int, pool: int, keys: list[tuple[str, str]]) -> dict[tuple[str, str],
                                                                                                       tuple[int, int]]:
    """``(n, agree)`` of the stored rows of ``table`` (main or pending tallies) for some pairs of a pool, by key.

    The keys are joined as a ``VALUES`` list to the table's primary key (one key descent a pair, in SQLite and
    PostgreSQL alike; a row-value ``IN`` searches the whole pool in SQLite). The statement is plain driver SQL, kept
    per chunk size: compiling a construct with a thousand parameters would cost more than the search. A statement binds
    ``2·KEYS_A_STATEMENT + 2`` parameters, within the 999 that SQLite builds before 3.32 allow by default. The table is
    named without an alias, so that its line of SQLite's query plan names it (``tests/monitor/test_pass_cost.py``).
    """
    _check_dialect(conn)
    out: dict[tuple[str, str], tuple[int, int]] = {}
    mark = "?" if conn.dialect.paramstyle == "qmark" else "%s"
    name = table.name
    for start in range(0, len(keys), KEYS_A_STATEMENT):
        chunk = keys[start : start + KEYS_A_STATEMENT]
        sql = _KEYED_SQL.get((name, mark, len(chunk)))
        if sql is None:
            listed = ", ".join([f"({mark}, {mark})"] * len(chunk))
            sql = (f"WITH k(a, b) AS (VALUES {listed}) SELECT {name}.rater_a, {name}.rater_b, {name}.n, {name}.agree "
                   f"FROM k JOIN {name} ON {name}.stream_id = {mark} AND {name}.pool = {mark} "
                   f"AND {name}.rater_a = k.a AND {name}.rater_b = k.b")
            _KEYED_SQL[(name, mark, len(chunk))] = sql
        parameters = (*(v for key in chunk for v in key), sid, pool)
        rows = conn.exec_driver_sql(sql, parameters).all()
        out.update({(a, b): (int(n), int(agree)) for a, b, n, agree in rows})
    return out


#: Pair keys a statement of :func:`_tallies` reads: two parameters a key plus the stream and the pool stay within
#: SQLite's default limit of 999 variables before 3.32 (``SQLITE_MAX_VARIABLE_NUMBER``), (999 − 2) // 2 = 498.
KEYS_A_STATEMENT = (999 - 2) // 2

_KEYED_SQL: dict[tuple[str, str, int], str] = {}


def _check_dialect(conn: Connection) -> None:
    """Refuse, with a message naming it, a database the monitor's pair statements are not written for."""
    if conn.dialect.name not in _UPSERT:
        raise ValueError(f"the monitor's store needs SQLite or PostgreSQL, not {conn.dialect.name!r}")


def _dialect_insert(conn: Connection) -> Any:
    _check_dialect(conn)
    return _UPSERT[conn.dialect.name]


def _upsert(conn: Connection, table: Any, columns: tuple[str, ...]) -> Any:
    """``INSERT ... ON CONFLICT (primary key) DO UPDATE SET`` the ``columns`` to the inserted values."""
    statement = _dialect_insert(conn)(table)
    return statement.on_conflict_do_update(
        index_elements=list(table.primary_key.columns),
        set_={name: statement.excluded[name] for name in columns},
    )


_UPSERT: dict[str, Any] = {"sqlite": sqlite_insert, "postgresql": postgresql_insert}


def keyed_rater_update(**values: Any) -> Any:
    """An executemany UPDATE of rater rows keyed by the bind parameters ``b_sid``, ``b_pool``, ``b_rid``."""
    r = raters_table
    key = and_(r.c.stream_id == bindparam("b_sid"), r.c.pool == bindparam("b_pool"),
               r.c.rater_id == bindparam("b_rid"))
    return update(r).where(key).values(**values)
