"""A monitor pass costs the new judgements and the items they touch, not the history: every statement a pass runs on
the tables that grow with the history is an index lookup on a full key or a bounded range (SQLite's query plans),
and migration step 4 puts the collusion candidates in an index of their own.

The timing itself lives in ``benchmarks/bench_monitor.py cost`` (docs/monitoring.md, "Pass cost").
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from unittest.mock import patch

import numpy as np
import pandas as pd
from sqlalchemy import event, inspect, text

from labelgate.monitor import Monitor, rater_store
from labelgate.pipeline.config import monitor_config_from_dict
from labelgate.pipeline.database import make_engine
from labelgate.pipeline.migrations import SCHEMA_VERSION, migrate, schema_version
from labelgate.pipeline.tables import schema_version_table

# The tables whose size grows with the judgements merged so far (the pending pair tallies do not: fewer than
# rater_store.FOLD_ROWS rows a stream between passes).
GROWING = ("labelgate_monitor_judgements", "labelgate_monitor_pairs", "labelgate_monitor_windows",
           "labelgate_monitor_passes", "labelgate_monitor_episodes")


def _delivery(rng: np.random.Generator, first: int, n_items: int) -> pd.DataFrame:
    items = np.repeat(np.arange(first, first + n_items), 3)
    raters = np.concatenate([rng.choice(40, 3, replace=False) for _ in range(n_items)])
    crowd = pd.DataFrame({"item_id": items, "rater_id": [f"c{r}" for r in raters],
                          "label": rng.choice(["a", "b", "c"], items.size), "pool": "crowd"})
    trusted = pd.DataFrame({"item_id": np.repeat(np.arange(first, first + n_items, 4), 2),
                            "rater_id": np.tile(["t1", "t2"], len(range(first, first + n_items, 4))),
                            "pool": "trusted"})
    trusted["label"] = rng.choice(["a", "b", "c"], len(trusted))
    out = pd.concat([crowd, trusted], ignore_index=True)
    out["timestamp"] = pd.Timestamp("2026-01-01", tz="UTC") + pd.to_timedelta(first + np.arange(len(out)), "s")
    return out


def _plans(url: str, statements: list[tuple[str, Any]]) -> list[tuple[str, list[str]]]:
    """SQLite's query plan of every SELECT, UPDATE and DELETE a pass ran (on a connection of its own)."""
    engine = make_engine(url)
    out = []
    with engine.connect() as conn:
        for statement, parameters in statements:
            if not re.match(r"\s*(SELECT|WITH|UPDATE|DELETE|INSERT .* ON CONFLICT)", statement,
                            re.IGNORECASE | re.DOTALL):
                continue
            rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters).all()
            out.append((statement, [row[-1] for row in rows]))
    return out


def _sqlite_monitor(tmp_path: Path, *, annotations: int, min_pair_items: int) -> tuple[Path, str, Any]:
    """A drop folder, a SQLite store URL and a monitor configuration over them (count windows, 20 resamples)."""
    drop = tmp_path / "drop"
    drop.mkdir()
    url = f"sqlite:///{tmp_path / 'r.db'}"
    cfg = monitor_config_from_dict({
        "store": {"url": url},
        "columns": {"timestamp": "timestamp"},
        "monitor": {"source": {"path": str(drop), "pattern": "*.csv"}, "window": {"annotations": annotations},
                    "n_boot": 20, "raters": {"min_pair_items": min_pair_items}},
    })
    return drop, url, cfg


def test_a_pass_reads_the_growing_tables_only_by_key_or_bounded_range(tmp_path: Path) -> None:
    drop, url, cfg = _sqlite_monitor(tmp_path, annotations=60, min_pair_items=2)
    engine = make_engine(url)
    monitor = Monitor(cfg, engine=engine)
    rng = np.random.default_rng(7)
    for k in range(2):  # history: candidate pairs, windows, episodes' detector state, passes
        _delivery(rng, 1000 * k, 60).to_csv(drop / f"d{k}.csv", index=False)
        monitor.run_pass(send_alerts=False)
    seen: list[tuple[str, Any]] = []

    @event.listens_for(engine, "before_cursor_execute")
    def _record(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        seen.append((statement, parameters[0] if executemany and parameters else parameters))

    late = _delivery(rng, 5000, 40)
    late.loc[:10, "item_id"] = late.loc[:10, "item_id"] - 5000  # new ratings of items already merged ...
    late.loc[:10, "rater_id"] = [f"late{i}" for i in range(11)]  # ... by raters not seen on them
    late.to_csv(drop / "d2.csv", index=False)
    with patch.object(rater_store, "FOLD_ROWS", 1):  # the pass folds its pending pair tallies too
        summary = monitor.run_pass(send_alerts=False)
    event.remove(engine, "before_cursor_execute", _record)
    assert summary["n_new"] == len(late) and summary["questions"]["label"]["windows"] >= 1

    plans = _plans(url, seen)
    touched = {table for statement, _ in plans for table in GROWING if table in statement}
    assert {"labelgate_monitor_judgements", "labelgate_monitor_pairs"} <= touched  # the test sees what it checks
    checked = []
    for statement, plan in plans:
        names = _plan_names(statement)
        for line in plan:
            table = next((names[n] for n in re.findall(r"^(?:SEARCH|SCAN) (\w+)", line) if n in names), None)
            if table is None:
                continue
            checked.append((statement, table, line))
            if table not in GROWING:  # the pending tallies: bounded, read whole by the fold and its count
                continue
            assert not line.startswith("SCAN"), f"{line} in {statement}"
            # A search on the stream (or a pool of it) alone reads every judgement or pair it holds.
            assert not re.search(r"\((stream_id|monitor)=\?( AND pool=\?)?\)$", line), f"{line} in {statement}"
    # The main tallies of the pass's pairs (and the pending ones) are read by their full key, one descent a pair.
    keyed = [(table, line) for statement, table, line in checked if statement.lstrip().startswith("WITH k(a, b)")]
    assert {table for table, _ in keyed} == {"labelgate_monitor_pairs", "labelgate_monitor_pair_deltas"}, keyed
    for _, line in keyed:
        assert "(stream_id=? AND pool=? AND rater_a=? AND rater_b=?)" in line, line


def _plan_names(statement: str) -> dict[str, str]:
    """The names a plan line of ``statement`` may give a growing table (or the pending tallies): the table's own and
    every alias the statement gives it (``FROM t AS a``, ``JOIN t a``)."""
    names = {}
    for table in (*GROWING, "labelgate_monitor_pair_deltas"):
        if re.search(rf"\b{table}\b", statement):
            names[table] = table
        for alias in re.findall(rf"\b{table}\s+(?:AS\s+)?(\w+)", statement, re.IGNORECASE):
            if alias.upper() not in _KEYWORDS:
                names[alias] = table
    return names


_KEYWORDS = {"ON", "WHERE", "SET", "VALUES", "JOIN", "LEFT", "INNER", "CROSS", "USING", "GROUP", "ORDER", "LIMIT",
             "DEFAULT", "SELECT", "AS", "NOT", "INDEXED", "RETURNING", "UNION"}


def test_step_4_moves_the_candidates_to_a_partial_covering_index(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'v3.sqlite'}")
    migrate(engine)
    with engine.begin() as conn:  # the database as step 3 left it
        conn.execute(text("DROP INDEX ix_labelgate_monitor_pairs_candidates"))
        conn.execute(text("CREATE INDEX ix_labelgate_monitor_pairs_candidate "
                          "ON labelgate_monitor_pairs (stream_id, candidate)"))
        conn.execute(text("DROP TABLE labelgate_monitor_pair_deltas"))  # step 5's
        conn.execute(schema_version_table.delete().where(schema_version_table.c.version >= 4))
        conn.execute(text(
            "INSERT INTO labelgate_monitor_pairs VALUES (1, 0, 'a', 'b', 25, 20, 1), (1, 0, 'a', 'c', 3, 1, 0)"))
    assert schema_version(engine) == 3
    assert migrate(engine) == SCHEMA_VERSION >= 5  # steps after 4 run too
    names = {ix["name"] for ix in inspect(engine).get_indexes("labelgate_monitor_pairs")}
    assert names == {"ix_labelgate_monitor_pairs_candidates"}
    with engine.connect() as conn:
        query = ("SELECT pool, rater_a, rater_b, n, agree FROM labelgate_monitor_pairs "
                 "WHERE stream_id = 1 AND candidate IS 1")
        plan = " ".join(row[-1] for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {query}").all())
        assert "COVERING INDEX ix_labelgate_monitor_pairs_candidates" in plan
        assert [tuple(r) for r in conn.exec_driver_sql(query).all()] == [(0, "a", "b", 25, 20)]


def test_a_pass_binds_at_most_999_variables_a_statement(tmp_path: Path) -> None:
    """SQLite builds before 3.32 allow 999 bound variables a statement by default: with the connection's limit lowered
    to 999, passes whose pools hold more than 500 new pairs (780 here), read from both tally tables by key (before and
    after a fold, the main candidates shadowed by pending rows), run and tally every pair."""
    import sqlite3

    import pytest
    from sqlalchemy.exc import OperationalError

    drop, url, cfg = _sqlite_monitor(tmp_path, annotations=500, min_pair_items=1)
    engine = make_engine(url)

    @event.listens_for(engine, "connect")
    def _old_sqlite_limit(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)

    with engine.connect() as conn:  # the limit holds and bites
        raw: Any = conn.connection.dbapi_connection
        assert raw.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) == 999
        with pytest.raises(OperationalError, match="too many SQL variables"):
            conn.exec_driver_sql(f"SELECT 1 WHERE 1 IN ({', '.join(['?'] * 1000)})", tuple(range(1000)))
    raters = [f"c{r:02d}" for r in range(40)]
    pairs = [(a, b) for i, a in enumerate(raters) for b in raters[i + 1:]]  # every pair of 40 raters: 780
    monitor = Monitor(cfg, engine=engine)
    for k in range(2):  # one item a pair and a pass; the first pass folds, the second leaves its tallies pending
        first = 10_000 * k
        frame = pd.DataFrame({"item_id": np.repeat(np.arange(first, first + len(pairs)), 2),
                              "rater_id": [r for pair in pairs for r in pair], "label": "a", "pool": "crowd"})
        frame["timestamp"] = pd.Timestamp("2026-01-01", tz="UTC") + pd.to_timedelta(first + np.arange(len(frame)), "s")
        frame.to_csv(drop / f"d{k}.csv", index=False)
        with patch.object(rater_store, "FOLD_ROWS", 1 if k == 0 else rater_store.FOLD_ROWS):
            assert monitor.run_pass(send_alerts=False)["n_new"] == len(frame)
    with engine.connect() as conn:
        held = conn.exec_driver_sql("SELECT count(*) FROM labelgate_monitor_pair_deltas").scalar()
        sid = conn.exec_driver_sql("SELECT stream_id FROM labelgate_monitor_streams").scalar_one()
        candidates = rater_store.candidate_pairs(conn, sid)
    assert held == len(pairs) > rater_store.KEYS_A_STATEMENT  # more keys than one statement reads
    assert sorted(zip(candidates["rater_a"], candidates["rater_b"], candidates["n"], strict=True)) == [
        (a, b, 2) for a, b in pairs]
    engine.dispose()


def test_pair_tallies_refuse_another_database_before_any_statement() -> None:
    """The key reads are SQL written for SQLite and PostgreSQL: another dialect is refused by name, nothing run."""
    from types import SimpleNamespace

    import pytest

    ran: list[Any] = []
    conn: Any = SimpleNamespace(dialect=SimpleNamespace(name="mssql", paramstyle="qmark"),
                                exec_driver_sql=lambda *a: ran.append(a), execute=lambda *a: ran.append(a))
    pairs = pd.DataFrame({"rater_a": ["a"], "rater_b": ["b"], "n": [1], "agree": [1]})
    with pytest.raises(ValueError, match="SQLite or PostgreSQL, not 'mssql'"):
        rater_store.add_pairs(conn, 1, 0, pairs, min_pair_items=2)
    assert ran == []
