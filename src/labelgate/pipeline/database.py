"""The results-store database: engines and transactions, the same for the gate's store and the monitor.

SQLite is the embedded default and PostgreSQL the production backend. On SQLite, pysqlite's implicit
transactions are turned off so that DDL is transactional and a writer takes the write lock up front
(``BEGIN IMMEDIATE``: two writers queue on the busy timeout instead of dead-locking on a lock upgrade). On
PostgreSQL a transaction can take an advisory lock that serialises the writers of one kind (migrations, monitor
passes, forced reruns of one key).

A SQLite file keeps SQLite's rollback journal with full syncs: a committed transaction survives a process kill and a
power loss. (Write-ahead-log mode with ``synchronous=NORMAL`` was measured on a monitor pass at 10⁷ judgements: the
same CPU time and a longer commit, its checkpoint, for a weaker guarantee; docs/monitoring.md "Pass cost".)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.pool import StaticPool

#: Advisory-lock keys (any constant int64 works): schema migrations, and the monitor's passes.
MIGRATION_LOCK = 0x4C47_5354  # "LGST"
MONITOR_PASS_LOCK = 0x4C47_4D4E  # "LGMN"
ALERT_CLAIM_LOCK = 0x4C47_414C  # "LGAL"


#: Set on every connection to a SQLite file: a 32 MiB page cache (KiB when negative). On a monitor pass at 10⁷
#: judgements, 256 MiB changed neither its CPU time nor the bytes it wrote, and SQLite's default 2 MiB did not change
#: its CPU time (docs/monitoring.md, "Pass cost").
SQLITE_PRAGMAS = ("cache_size=-32768",)


def make_engine(url: str, busy_timeout: float = 30.0) -> Engine:
    """A SQLAlchemy engine for the results store (parent folders of a SQLite file are created).

    ``"sqlite://"`` is an in-memory database shared by one connection (tests only). JSON is written with
    ``allow_nan=False``: NaN must never reach the database as the invalid JSON token ``NaN``.
    """
    parsed = make_url(url)
    kwargs: dict[str, Any] = {"json_serializer": lambda obj: json.dumps(obj, allow_nan=False)}
    if parsed.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True, **kwargs)
    database = parsed.database or ""
    in_memory = database in ("", ":memory:") or database.startswith("file::memory:")
    if in_memory:
        kwargs.update(poolclass=StaticPool)
    elif not database.startswith("file:"):
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"timeout": busy_timeout, "check_same_thread": False}, **kwargs)
    _make_sqlite_transactional(engine, () if in_memory else SQLITE_PRAGMAS)
    return engine


def _make_sqlite_transactional(engine: Engine, pragmas: tuple[str, ...]) -> None:
    # pysqlite opens transactions lazily (not before DDL) and always as deferred; take control (SQLAlchemy docs,
    # "Serializable isolation / Savepoints / Transactional DDL" for pysqlite).
    @event.listens_for(engine, "connect")
    def _no_implicit_transactions(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            for pragma in pragmas:
                cursor.execute(f"PRAGMA {pragma}")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get("labelgate_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


@contextmanager
def transaction(engine: Engine, *, write: bool = False, lock: int | None = None) -> Iterator[Connection]:
    """One transaction: committed when the block ends, rolled back on an exception.

    ``write=True`` takes SQLite's write lock first; ``lock`` (an advisory-lock key) serialises the transactions
    that name it on PostgreSQL (SQLite writers are serialised already).
    """
    with engine.connect() as conn:
        if write:
            conn = conn.execution_options(labelgate_write=True)
        with conn.begin():
            if lock is not None and conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": lock})
            yield conn


def safe_url(url: str) -> str:
    """The URL with its password hidden (for messages)."""
    return make_url(url).render_as_string(hide_password=True)
