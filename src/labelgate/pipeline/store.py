"""Results store of the gate: one record per gate run, in SQLite (default) or PostgreSQL.

A record is keyed by ``(batch_hash, config_hash)``: the content hash of the batch and the digest of the gate
configuration. Gating the same content with the same configuration again finds the stored record instead of
recomputing (``find``); ``save(record, replace=True)`` replaces it in one transaction (the CLI's ``--force``).
Every write is one database transaction, so an exception before the commit leaves nothing behind. The schema
is versioned (table ``labelgate_schema_version``) and created or upgraded by :meth:`ResultsStore.migrate`.

Only SQLAlchemy 2.0 is used here (no Prefect, no GX). See ``docs/store-and-alerts.md``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    JSON,
    Column,
    DateTime,
    Engine,
    Integer,
    MetaData,
    String,
    Table,
    UniqueConstraint,
    create_engine,
    delete,
    event,
    func,
    insert,
    select,
    text,
    update,
)
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.pool import StaticPool

from labelgate.errors import LabelGateError, ParameterError, Reason, check_option

__all__ = ["DEFAULT_URL", "SCHEMA_VERSION", "GateRecord", "ResultsStore", "StoreError"]

DEFAULT_URL = "sqlite:///labelgate-results.db"
DECISIONS = ("ACCEPT", "REJECT", "REVIEW", "ERROR")
#: Version of the schema this code reads and writes; :meth:`ResultsStore.migrate` upgrades older databases.
SCHEMA_VERSION = 1
_JSON_FIELDS = ("reasons", "metrics", "coverage", "validation", "timing", "reports", "alerts")
# Key of the PostgreSQL advisory lock that serialises concurrent migrations (any constant int64 works).
_PG_MIGRATE_LOCK = 0x4C47_5354  # "LGST"


class StoreError(LabelGateError, RuntimeError):
    """The results store cannot do what was asked (unknown run, schema newer than the code...)."""

    default_code = Reason.INVALID_PARAMETER


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


def to_jsonable(value: Any, path: str = "value") -> Any:
    """Convert ``value`` to plain JSON types: NaN/inf -> None, numpy scalars/arrays -> Python, dates -> ISO.

    Raises
    ------
    ParameterError
        A value cannot be represented in JSON; the message names its path (e.g. ``metrics.label.kappa``).

    Examples
    --------
    >>> to_jsonable({"a": (1.0, float("inf")), "b": {2: float("nan")}})
    {'a': [1.0, None], 'b': {'2': None}}
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str(value)  # plain str, also for StrEnum members such as Reason
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v, f"{path}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v, f"{path}[{i}]") for i, v in enumerate(value)]
    # numpy scalars and arrays without importing numpy; Estimate-like objects through their to_dict().
    for method in ("to_dict", "tolist"):
        if callable(getattr(value, method, None)):
            return to_jsonable(getattr(value, method)(), path)
    if callable(getattr(value, "item", None)):
        return to_jsonable(value.item(), path)
    raise ParameterError(f"{path}: a {type(value).__name__} cannot be stored as JSON in the results store.",
                         parameter=path, value=type(value).__name__)


def _as_utc(value: datetime) -> datetime:
    if not isinstance(value, datetime):
        raise ParameterError(f"Timestamps of a GateRecord must be datetimes; got {value!r}.", value=value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


# --- schema ------------------------------------------------------------------------------------------

_metadata = MetaData()

schema_version_table = Table(
    "labelgate_schema_version", _metadata,
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("description", String(200), nullable=False),
    Column("applied_at", DateTime(timezone=True), nullable=False),
)

# The *current* shape of the runs table, used by queries. Migrations below are frozen copies: when the schema
# changes, add a migration step (ALTER ...) and update this definition; never edit an applied step.
runs_table = Table(
    "labelgate_runs", _metadata,
    Column("run_id", String(36), primary_key=True),
    Column("batch_id", String(512), nullable=False),
    Column("batch_hash", String(128), nullable=False),
    Column("config_hash", String(128), nullable=False),
    Column("decision", String(16), nullable=False),
    Column("reasons", JSON, nullable=False),
    Column("metrics", JSON, nullable=False),
    Column("coverage", JSON, nullable=False),
    Column("validation", JSON, nullable=False),
    Column("timing", JSON, nullable=False),
    Column("reports", JSON, nullable=False),
    Column("alerts", JSON, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, index=True),
    Column("finished_at", DateTime(timezone=True), nullable=True),
    UniqueConstraint("batch_hash", "config_hash", name="uq_labelgate_runs_batch_config"),
)


def _migration_1(conn: Connection) -> None:
    # Frozen: the version-1 schema. It equals ``runs_table`` today; later versions get their own steps.
    runs_table.create(conn)


def apply_migrations(conn: Connection, version_table: Table,
                     migrations: dict[int, tuple[str, Callable[[Connection], None]]], target: int, what: str) -> int:
    """Apply the numbered ``migrations`` above the version recorded in ``version_table``, in ``conn``'s transaction.

    Shared by the results store and the monitor's tables. Raises :class:`StoreError` when ``what`` (e.g. "the
    results store") already has a newer schema than ``target``.
    """
    version_table.create(conn, checkfirst=True)
    current = conn.execute(select(func.max(version_table.c.version))).scalar() or 0
    if current > target:
        raise StoreError(f"{what} has schema version {current}, newer than this LabelGate's {target}; "
                         "upgrade LabelGate.")
    for version in range(current + 1, target + 1):
        description, step = migrations[version]
        step(conn)
        conn.execute(insert(version_table).values(version=version, description=description, applied_at=_utcnow()))
    return target


_MIGRATIONS: dict[int, tuple[str, Callable[[Connection], None]]] = {
    1: ("runs table with unique (batch_hash, config_hash)", _migration_1),
}


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
        self.engine = _make_engine(url, busy_timeout)
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

        Returns the schema version of the database afterwards.

        Raises
        ------
        StoreError
            The database was written by a newer LabelGate (its schema version is higher than this code's).
        """
        with self._raw_transaction(write=True) as conn:
            if conn.dialect.name == "postgresql":
                # Two gate runs starting at once must not both create the tables.
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATE_LOCK})
            apply_migrations(conn, schema_version_table, _MIGRATIONS, SCHEMA_VERSION,
                             f"The results store at {self._safe_url()}")
        self._migrated = True
        return SCHEMA_VERSION

    def schema_version(self) -> int:
        """Schema version recorded in the database (0 when it was never migrated)."""
        with self._raw_transaction() as conn:
            if not conn.dialect.has_table(conn, schema_version_table.name):
                return 0
            return int(conn.execute(select(func.max(schema_version_table.c.version))).scalar() or 0)

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
                         {"key": _lock_key(record.batch_hash, record.config_hash)})
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
        return f"ResultsStore({self._safe_url()!r})"

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
        with self._raw_transaction(write) as conn:
            yield conn

    @contextmanager
    def _raw_transaction(self, write: bool = False) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            if write:
                conn.execution_options(labelgate_write=True)
            with conn.begin():
                yield conn

    def _safe_url(self) -> str:
        return make_url(self.url).render_as_string(hide_password=True)


def _lock_key(batch_hash: str, config_hash: str) -> int:
    digest = hashlib.sha256(f"{batch_hash}\0{config_hash}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)  # PostgreSQL advisory locks take a bigint


def _make_engine(url: str, busy_timeout: float) -> Engine:
    parsed = make_url(url)
    # json.dumps(allow_nan=False): NaN must never reach the database as the invalid JSON token NaN.
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
    _make_sqlite_transactional(engine)
    return engine


def _make_sqlite_transactional(engine: Engine) -> None:
    # pysqlite opens transactions lazily (not before DDL) and always as deferred; take control so that DDL is
    # transactional and writers take the write lock up front (SQLAlchemy docs, "Serializable isolation /
    # Savepoints / Transactional DDL" for pysqlite).
    @event.listens_for(engine, "connect")
    def _no_implicit_transactions(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get("labelgate_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


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
