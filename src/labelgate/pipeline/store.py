"""The audit log of the gate: one record per gate request, appended, never replaced or deleted (SQLite or PostgreSQL).

Every request is one :class:`GateRecord`. A record is identified by its ``run_id`` and keyed by its
``inputs_digest``: the digest of everything that decides a batch (batch content, trusted content, the resolved
configuration with the LabelGate version, and the metrics' definitions version, :func:`inputs_digest`). A request
whose inputs were decided before gets a record of its own that names the deciding record (``reused_from``) instead of
a recomputation; ``--force`` appends a new computed record; a failure appends an ERROR record beside the earlier
ones. The latest record of a batch id is its current decision. Alert deliveries are kept in the alert ledger
(:mod:`labelgate.pipeline.alert_ledger`) under the deciding run's id.

Only SQLAlchemy 2.0 is used here (no Prefect, no GX). See ``docs/store-and-alerts.md``.
"""

from __future__ import annotations

import hashlib
import os
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from labelgate._version import METRIC_DEFINITIONS, __version__
from labelgate.errors import ParameterError, check_option
from labelgate.pipeline.alert_ledger import alert_outcomes
from labelgate.pipeline.database import make_engine, safe_url, transaction
from labelgate.pipeline.migrations import SCHEMA_VERSION, StoreError, migrate, schema_version
from labelgate.pipeline.serialize import to_jsonable
from labelgate.pipeline.tables import runs_table

__all__ = ["DEFAULT_URL", "SCHEMA_VERSION", "GateRecord", "ResultsStore", "StoreError", "inputs_digest", "to_jsonable"]

DEFAULT_URL = "sqlite:///labelgate-results.db"
DECISIONS = ("ACCEPT", "REJECT", "REVIEW", "ERROR")
_JSON_FIELDS = ("reasons", "metrics", "coverage", "validation", "timing", "reports", "alerts")


def _utcnow() -> datetime:
    return datetime.now(UTC)


def inputs_digest(batch_hash: str, trusted_hash: str | None, config_hash: str) -> str:
    """The key of a decision: SHA-256 of the batch and trusted contents, the configuration digest (which includes
    the LabelGate version) and the metrics' definitions version.

    >>> inputs_digest("b", "t", "c") == inputs_digest("b", "t", "c") != inputs_digest("b", "t2", "c")
    True
    """
    parts = [batch_hash, trusted_hash or "", config_hash, f"metrics:{METRIC_DEFINITIONS}"]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


@dataclass
class GateRecord:
    """One gate run: identity, decision, reasons, metrics with intervals, timing and links.

    Attributes
    ----------
    batch_id : str
        Human-readable batch identifier (file name, batch tag...).
    batch_hash : str
        Content hash of the batch.
    config_hash : str
        Digest of the gate configuration (``GateConfig.digest()``, which includes the LabelGate version).
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
        Alert delivery outcomes (see :func:`labelgate.pipeline.alerts.deliver`): read from the alert ledger, not
        stored with the record (records of earlier releases kept them here).
    run_id : str
        ``uuid4`` string, generated when omitted.
    trusted_hash : str or None
        Content hash of the trusted replication.
    inputs_digest : str
        :func:`inputs_digest` of the hashes (computed when omitted): the key under which a decision is reused.
    reused_from : str or None
        The ``run_id`` of the record whose decision this request received without recomputation.
    labelgate_version : str
        The LabelGate version that wrote the record.
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
    trusted_hash: str | None = None
    inputs_digest: str = ""
    reused_from: str | None = None
    labelgate_version: str = __version__

    def __post_init__(self) -> None:
        check_option(self.decision, DECISIONS, "decision", "GateRecord")
        for name in ("batch_id", "batch_hash", "config_hash", "run_id"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ParameterError(f"The {name!r} of a GateRecord must be a non-empty string; "
                                     f"got {value!r}.", parameter=name, value=value)
        self.inputs_digest = self.inputs_digest or inputs_digest(self.batch_hash, self.trusted_hash, self.config_hash)
        self.created_at = _as_utc(self.created_at)
        self.finished_at = None if self.finished_at is None else _as_utc(self.finished_at)

    @property
    def deciding_run_id(self) -> str:
        """The run that computed this record's decision (itself, unless the decision was reused)."""
        return self.reused_from or self.run_id

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
    """The audit log of gate requests in a SQL database (SQLite by default, PostgreSQL by URL).

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
    Records are only ever appended (:meth:`append`): nothing updates or deletes one. Concurrent requests with
    the same inputs are serialised by the run lock (:mod:`labelgate.pipeline.run_lock`), so identical inputs are
    computed once; every request still gets its record. SQLite writes start with ``BEGIN IMMEDIATE``.

    Examples
    --------
    >>> store = ResultsStore("sqlite://")
    >>> first = store.append(GateRecord(batch_id="b1", batch_hash="h1", config_hash="c1", decision="ACCEPT"))
    >>> store.find(first.inputs_digest).run_id == first.run_id
    True
    >>> forced = store.append(GateRecord(batch_id="b1", batch_hash="h1", config_hash="c1", decision="REJECT"))
    >>> store.current("b1").decision, len(store.list_runs(batch_id="b1"))   # history kept, latest is current
    ('REJECT', 2)
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

    def find(self, digest: str) -> GateRecord | None:
        """The latest *computed* decision for these inputs (:func:`inputs_digest`), or None.

        ERROR records are never served (a rerun recomputes), nor are records that themselves reused a decision.
        """
        query = (select(runs_table)
                 .where(runs_table.c.inputs_digest == digest, runs_table.c.reused_from.is_(None),
                        runs_table.c.decision != "ERROR")
                 .order_by(runs_table.c.created_at.desc(), runs_table.c.run_id.desc()).limit(1))
        return next(iter(self._records(query)), None)

    def get(self, run_id: str) -> GateRecord | None:
        """The record with this ``run_id``, or None."""
        return next(iter(self._records(select(runs_table).where(runs_table.c.run_id == run_id))), None)

    def current(self, batch_id: str) -> GateRecord | None:
        """The current decision of a batch id: its latest record, or None."""
        runs = self.list_runs(1, batch_id=batch_id)
        return runs[0] if runs else None

    def list_runs(self, limit: int | None = 50, *, batch_id: str | None = None, since: datetime | None = None,
                  decision: str | None = None) -> list[GateRecord]:
        """Records newest first: the ``limit`` latest (None: all), optionally of one batch id, since a time, with one
        decision."""
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
            raise ParameterError("The 'limit' parameter of list_runs must be a positive integer or None; "
                                 f"got {limit!r}.", parameter="limit", value=limit)
        if decision is not None:
            check_option(decision, DECISIONS, "decision", "list_runs")
        query = select(runs_table).order_by(runs_table.c.created_at.desc(), runs_table.c.run_id.desc())
        if batch_id is not None:
            query = query.where(runs_table.c.batch_id == batch_id)
        if since is not None:
            query = query.where(runs_table.c.created_at >= _as_utc(since))
        if decision is not None:
            query = query.where(runs_table.c.decision == decision)
        return self._records(query if limit is None else query.limit(limit))

    # -- writes ---------------------------------------------------------------------------------------------

    def append(self, record: GateRecord) -> GateRecord:
        """Add ``record`` to the log in one transaction and return it as stored (NaN as None, times in UTC).

        Raises
        ------
        StoreError
            A record with this ``run_id`` exists already (records are never replaced).
        """
        row = _row_from_record(record)
        try:
            with self._transaction(write=True) as conn:
                self._insert(conn, row)
        except IntegrityError:
            raise StoreError(f"A gate run with run_id {record.run_id!r} is already recorded; records are never "
                             "replaced.", parameter="run_id", value=record.run_id) from None
        return _record_from_row(row)

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

    def _records(self, query: Any) -> list[GateRecord]:
        with self._transaction() as conn:
            rows = conn.execute(query).mappings().all()
            records = [_record_from_row(row) for row in rows]
            deliveries = alert_outcomes(conn, [gate_alert_key(r.deciding_run_id) for r in records])
        for record in records:
            record.alerts = deliveries.get(gate_alert_key(record.deciding_run_id), record.alerts)
        return records

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


def gate_alert_key(run_id: str) -> str:
    """The alert-ledger key of a gate decision: the run that computed it (a reuse never alerts twice)."""
    return f"labelgate-gate:{run_id}"


def _row_from_record(record: GateRecord) -> dict[str, Any]:
    if not isinstance(record, GateRecord):
        raise ParameterError(f"append() needs a GateRecord; got {type(record).__name__}.", parameter="record")
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
    data["reused"] = record.reused_from is not None
    return data
