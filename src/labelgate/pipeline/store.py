"""Results store of the gate: one record per gate run, in SQLite (default) or PostgreSQL.

A record is keyed by ``(batch_hash, config_hash)``: the content hash of the batch and the digest of the gate
configuration. Gating the same content with the same configuration again finds the stored record instead of
recomputing (``find``); ``save(record, replace=True)`` replaces it in one transaction (the CLI's ``--force``).
Every write is one database transaction, so an exception before the commit leaves nothing behind. The schema
is versioned (table ``labelgate_schema_version``, one chain with the monitor's tables: :mod:`labelgate.pipeline.
migrations`) and created or upgraded by :meth:`ResultsStore.migrate`.

Only SQLAlchemy 2.0 is used here (no Prefect, no GX). See ``docs/store-and-alerts.md``.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, insert, select, text, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from labelgate.errors import ParameterError, check_option
from labelgate.pipeline.database import advisory_key, make_engine, safe_url, transaction
from labelgate.pipeline.migrations import SCHEMA_VERSION, StoreError, migrate, schema_version
from labelgate.pipeline.serialize import to_jsonable
from labelgate.pipeline.tables import runs_table

__all__ = ["DEFAULT_URL", "SCHEMA_VERSION", "GateRecord", "ResultsStore", "StoreError", "to_jsonable"]

DEFAULT_URL = "sqlite:///labelgate-results.db"
DECISIONS = ("ACCEPT", "REJECT", "REVIEW", "ERROR")
_JSON_FIELDS = ("reasons", "metrics", "coverage", "validation", "timing", "reports", "alerts")


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class GateRecord:
    """One gate run: identity, decision, reasons, metrics with intervals, timing and links.

    Attributes
    ----------
    batch_id : str
        Human-readable batch identifier (file name, batch tag...).
    batch_hash : str
        Content hash of the batch; with ``config_hash`` the idempotency key of the run.
    config_hash : str
        Digest of the gate configuration (``GateConfig.digest()``).
    decision : {"ACCEPT", "REJECT", "REVIEW", "ERROR"}
        The gate decision.
    reasons : list of str
        Why the decision was taken (empty for a clean ACCEPT).
    metrics : dict
        ``question -> metric name -> {"value", "ci_low", "ci_high", ...}``; NaN is stored as null.
        Objects with a ``to_dict()`` method (e.g. :class:`~labelgate.Estimate`) are converted.
    coverage, validation : dict
        Coverage of the trusted replication and validation summary (quarantined rows...).
    timing : dict
        ``step -> seconds``.
    reports : dict
        ``name -> path or URL`` of the reports written for this run.
    alerts : list of dict
        Alert delivery outcomes (see :func:`labelgate.pipeline.alerts.deliver`); filled by
        :meth:`ResultsStore.record_alerts` after delivery.
    run_id : str
        ``uuid4`` string, generated when omitted.
    created_at, finished_at : datetime or None
        Start and end of the run (UTC; naive datetimes are taken as UTC).

    Examples
    --------
    >>> rec = GateRecord(batch_id="b1", batch_hash="ab" * 32, config_hash="cd" * 32, decision="REJECT",
    ...                  reasons=["kappa below 0.8"], metrics={"label": {"kappa": {"value": float("nan")}}})
    >>> rec.to_dict()["metrics"]
    {'label': {'kappa': {'value': None}}}
    >>> len(rec.run_id)
    36
    """

    batch_id: str
    batch_hash: str
    config_hash: str
    decision: str
    reasons: list[str] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    coverage: dict[str, Any] = field(default_factory=dict)
    validation: dict[str, Any] = field(default_factory=dict)
    timing: dict[str, Any] = field(default_factory=dict)
    reports: dict[str, Any] = field(default_factory=dict)
    alerts: list[dict[str, Any]] = field(default_factory=list)
    run_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    created_at: datetime = field(default_factory=_utcnow)
    finished_at: datetime | None = None

    def __post_init__(self) -> None:
        check_option(self.decision, DECISIONS, "decision", "GateRecord")
        for name in ("batch_id", "batch_hash", "config_hash", "run_id"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ParameterError(f"The {name!r} of a GateRecord must be a non-empty string; "
                                     f"got {value!r}.", parameter=name, value=value)
        self.created_at = _as_utc(self.created_at)
        self.finished_at = None if self.finished_at is None else _as_utc(self.finished_at)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: NaN/inf become None, datetimes ISO 8601 strings, tuples lists."""
        out: dict[str, Any] = {}
        for f in fields(self):
            out[f.name] = to_jsonable(getattr(self, f.name), f.name)
        return out


def _as_utc(value: datetime) -> datetime:
    if not isinstance(value, datetime):
        raise ParameterError(f"Timestamps of a GateRecord must be datetimes; got {value!r}.", value=value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


# --- the store ---------------------------------------------------------------------------------------


class ResultsStore:
    """One record per gate run in a SQL database (SQLite by default, PostgreSQL by URL).

    Parameters
    ----------
    url : str, default ``"sqlite:///labelgate-results.db"``
        SQLAlchemy URL. Parent directories of a SQLite file are created. ``"sqlite://"`` is an in-memory
        database shared by one connection (tests only; not safe across threads).
    auto_migrate : bool, default True
        Run :meth:`migrate` (idempotent) before the first operation.
    busy_timeout : float, default 30.0
        Seconds a SQLite writer waits for another writer's lock before failing.

    Notes
    -----
    Idempotency key: ``(batch_hash, config_hash)``, enforced by a unique constraint. Concurrent gate runs on
    the same key store one record: the loser's insert fails with an integrity error and :meth:`save` returns
    the stored record. SQLite writes start with ``BEGIN IMMEDIATE`` (the writer lock is taken first, so two
    writers queue on the busy timeout instead of dead-locking on a lock upgrade); DDL is transactional.

    Examples
    --------
    >>> store = ResultsStore("sqlite://")
    >>> rec = store.save(GateRecord(batch_id="b1", batch_hash="h1", config_hash="c1", decision="ACCEPT"))
    >>> store.find("h1", "c1").run_id == rec.run_id
    True
    >>> again = store.save(GateRecord(batch_id="b1", batch_hash="h1", config_hash="c1", decision="REJECT"))
    >>> again.decision, again.run_id == rec.run_id    # idempotent: the stored record wins
    ('ACCEPT', True)
    >>> store.save(GateRecord(batch_id="b1", batch_hash="h1", config_hash="c1", decision="REJECT"),
    ...            replace=True).decision             # --force
    'REJECT'
    >>> len(store.list_runs())
    1
    """

    def __init__(self, url: str = DEFAULT_URL, *, auto_migrate: bool = True,
                 busy_timeout: float = 30.0) -> None:
        self.url = url
        self.engine = make_engine(url, busy_timeout)
        self._auto_migrate = auto_migrate
        self._migrated = False
        self._migrate_lock = threading.Lock()

    @classmethod
    def from_config(cls, store_config: Any, **kwargs: Any) -> ResultsStore:
        """Build from a ``labelgate.pipeline.config.Store``: the env var named by ``url_env`` wins over ``url``.

        Raises
        ------
        StoreError
            ``url_env`` names an environment variable that is not set.
        """
        url = store_config.url
        if store_config.url_env:
            url = os.environ.get(store_config.url_env, "")
            if not url:
                raise StoreError(f"store.url_env: the environment variable {store_config.url_env!r} that "
                                 "should hold the results-store URL is not set.", parameter="store.url_env")
        return cls(url, **kwargs)

    # -- schema ---------------------------------------------------------------------------------------------

    def migrate(self) -> int:
        """Create or upgrade the schema to :data:`SCHEMA_VERSION` in one transaction; idempotent.

        Returns the schema version of the database afterwards (:func:`labelgate.pipeline.migrations.migrate`: one
        chain for the gate's and the monitor's tables).

        Raises
        ------
        StoreError
            The database was written by a newer LabelGate (its schema version is higher than this code's).
        """
        version = migrate(self.engine, f"The results store at {safe_url(self.url)}")
        self._migrated = True
        return version

    def schema_version(self) -> int:
        """Schema version recorded in the database (0 when it was never migrated)."""
        return schema_version(self.engine)

    # -- reads ----------------------------------------------------------------------------------------------

    def find(self, batch_hash: str, config_hash: str) -> GateRecord | None:
        """The stored record for this batch content and configuration, or None."""
        query = select(runs_table).where(runs_table.c.batch_hash == batch_hash,
                                         runs_table.c.config_hash == config_hash)
        with self._transaction() as conn:
            row = conn.execute(query).mappings().first()
        return None if row is None else _record_from_row(row)

    def get(self, run_id: str) -> GateRecord | None:
        """The record with this ``run_id``, or None."""
        with self._transaction() as conn:
            row = conn.execute(select(runs_table).where(runs_table.c.run_id == run_id)).mappings().first()
        return None if row is None else _record_from_row(row)

    def list_runs(self, limit: int = 50, *, batch_id: str | None = None) -> list[GateRecord]:
        """The ``limit`` most recent records (newest first), optionally for one ``batch_id``."""
        if not isinstance(limit, int) or limit < 1:
            raise ParameterError("The 'limit' parameter of list_runs must be a positive integer; "
                                 f"got {limit!r}.", parameter="limit", value=limit)
        query = select(runs_table).order_by(runs_table.c.created_at.desc(), runs_table.c.run_id).limit(limit)
        if batch_id is not None:
            query = query.where(runs_table.c.batch_id == batch_id)
        with self._transaction() as conn:
            rows = conn.execute(query).mappings().all()
        return [_record_from_row(row) for row in rows]

    # -- writes ---------------------------------------------------------------------------------------------

    def save(self, record: GateRecord, replace: bool = False) -> GateRecord:
        """Store ``record`` in one transaction and return the record that is stored for its key.

        Parameters
        ----------
        record : GateRecord
            The finished run.
        replace : bool, default False
            False: if a record with the same ``(batch_hash, config_hash)`` exists (stored earlier or by a
            concurrent run), it is returned unchanged and ``record`` is not stored — compare ``run_id`` to
            know which happened. True (``--force``): the earlier record is deleted and ``record`` inserted in
            the same transaction.

        Returns
        -------
        GateRecord
            The stored record, as read back (NaN as None, timestamps in UTC).
        """
        row = _row_from_record(record)
        for attempt in range(3):
            try:
                with self._transaction(write=True) as conn:
                    if replace:
                        self._delete_key(conn, record)
                    self._insert(conn, row)
                return _record_from_row(row)
            except IntegrityError:
                if self.get(record.run_id) is not None:  # run_id already used (by this key or another one)
                    stored = self.find(record.batch_hash, record.config_hash)
                    if stored is not None and stored.run_id == record.run_id and not replace:
                        return stored
                    raise
                if not replace:
                    stored = self.find(record.batch_hash, record.config_hash)
                    if stored is not None:  # an earlier or concurrent run of this key: the stored one wins
                        return stored
                # The colliding record vanished meanwhile (a concurrent --force replaced it): try again.
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _delete_key(self, conn: Connection, record: GateRecord) -> None:
        # Concurrent --force runs on one key: SQLite serialises writers (BEGIN IMMEDIATE); PostgreSQL needs a
        # per-key advisory lock, since under read committed a concurrent insert after our delete would
        # collide. Other backends rely on save()'s retry of the whole transaction.
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"),
                         {"key": advisory_key(record.batch_hash, record.config_hash)})
        conn.execute(delete(runs_table).where(runs_table.c.batch_hash == record.batch_hash,
                                              runs_table.c.config_hash == record.config_hash))

    def record_alerts(self, run_id: str, outcomes: list[dict[str, Any]]) -> GateRecord:
        """Append alert delivery outcomes to a stored run (own small transaction); the decision is untouched.

        Raises
        ------
        StoreError
            No record has this ``run_id`` (it may have been replaced by a forced rerun).
        """
        new = to_jsonable(list(outcomes), "alerts")
        with self._transaction(write=True) as conn:
            query = select(runs_table).where(runs_table.c.run_id == run_id)
            if conn.dialect.name != "sqlite":  # SQLite already holds the write lock (BEGIN IMMEDIATE)
                query = query.with_for_update()
            row = conn.execute(query).mappings().first()
            if row is None:
                raise StoreError(f"No gate run with run_id {run_id!r} in the results store; cannot record "
                                 "its alerts.", parameter="run_id", value=run_id)
            alerts = list(row["alerts"] or []) + new
            conn.execute(update(runs_table).where(runs_table.c.run_id == run_id).values(alerts=alerts))
            updated = dict(row, alerts=alerts)
        return _record_from_row(updated)

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()

    def __enter__(self) -> ResultsStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ResultsStore({safe_url(self.url)!r})"

    # -- internals ------------------------------------------------------------------------------------------

    def _insert(self, conn: Connection, row: dict[str, Any]) -> None:
        conn.execute(insert(runs_table).values(**row))

    def _ensure_migrated(self) -> None:
        if self._auto_migrate and not self._migrated:
            with self._migrate_lock:  # threads sharing this store wait for the first one's migration
                if not self._migrated:
                    self.migrate()

    @contextmanager
    def _transaction(self, write: bool = False) -> Iterator[Connection]:
        self._ensure_migrated()
        with transaction(self.engine, write=write) as conn:
            yield conn



def _row_from_record(record: GateRecord) -> dict[str, Any]:
    if not isinstance(record, GateRecord):
        raise ParameterError(f"save() needs a GateRecord; got {type(record).__name__}.", parameter="record")
    row: dict[str, Any] = {f.name: getattr(record, f.name) for f in fields(record)}
    for name in _JSON_FIELDS:
        row[name] = to_jsonable(row[name], name)
    row["created_at"] = _as_utc(record.created_at)
    row["finished_at"] = None if record.finished_at is None else _as_utc(record.finished_at)
    return row


def _record_from_row(row: Mapping[Any, Any]) -> GateRecord:
    values = {f.name: row[f.name] for f in fields(GateRecord)}
    return GateRecord(**values)


def record_summary(record: GateRecord, warnings: list[str] | None = None) -> dict[str, Any]:
    """The JSON-able run summary of a gate record (what the gate returns and the CLI prints)."""
    data = to_jsonable(record.to_dict())
    data["warnings"] = list(warnings or [])
    data["report"] = (data.get("reports") or {}).get("html")
    return data
