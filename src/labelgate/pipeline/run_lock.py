"""The run lock: concurrent gate runs of the same inputs (one inputs digest) compute once."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from labelgate.pipeline.store import ResultsStore

# Namespace of the two-integer PostgreSQL advisory locks of gate runs ("LG"); the store's own locks use the
# single bigint key space, which does not overlap with this one.
_PG_RUN_LOCK_CLASS = 0x4C47
_SQLITE_LOCK_FILES = 256
_THREAD_LOCKS: dict[str, threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


@contextmanager
def run_lock(store: ResultsStore, inputs_digest: str) -> Iterator[None]:
    """Hold the lock of one inputs digest: concurrent runs of the same inputs queue here.

    PostgreSQL: a session advisory lock on a dedicated connection (released when the block ends or the
    process dies). SQLite file: an exclusive ``flock`` on one of 256 files ``<database>.locks/XX.lock``
    chosen by the key (one machine, as SQLite itself; two keys sharing a file only wait for each other).
    In-memory SQLite: a lock of this process. Other databases: no lock (identical inputs may then be computed
    twice; every request is still recorded).
    """
    key = hashlib.sha256(inputs_digest.encode()).hexdigest()
    backend = store.engine.dialect.name
    if backend == "postgresql":
        with store.engine.connect() as conn:
            objid = int.from_bytes(bytes.fromhex(key[:8]), "big", signed=True)
            conn.exec_driver_sql(f"SELECT pg_advisory_lock({_PG_RUN_LOCK_CLASS}, {objid})")
            conn.commit()
            try:
                yield
            finally:
                conn.exec_driver_sql(f"SELECT pg_advisory_unlock({_PG_RUN_LOCK_CLASS}, {objid})")
                conn.commit()
        return
    database = store.engine.url.database or ""
    if backend == "sqlite" and database and database != ":memory:" and not database.startswith("file:"):
        slot = int(key[:8], 16) % _SQLITE_LOCK_FILES  # a bounded set of files: lock files are never deleted
        with _file_lock(Path(database).with_name(Path(database).name + ".locks") / f"{slot:02x}.lock"):
            yield
        return
    if backend == "sqlite":
        with _THREAD_LOCKS_GUARD:
            lock = _THREAD_LOCKS.setdefault(key, threading.Lock())
        with lock:
            yield
        return
    yield


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)  # released when the file is closed, also on a crash
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
