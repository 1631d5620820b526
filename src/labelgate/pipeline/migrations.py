"""One versioned chain of schema migrations for every LabelGate table (:mod:`labelgate.pipeline.tables`).

The version is recorded in ``labelgate_schema_version`` (one row per applied step). :func:`migrate` applies the
missing steps in one transaction, serialised across processes, and is idempotent; a database written by a newer
LabelGate is refused. Applied steps are frozen: a new shape is a new step.

Databases of earlier releases kept the monitor's tables on a chain of their own (``labelgate_monitor_schema``);
step 2 adopts them. Step 3 turns the gate's runs table from a cache (one row per batch and configuration) into an
append-only audit log: the unique key goes, the inputs digest and the reuse link come, every record is kept.
Step 4 replaces the index of the monitor's collusion candidates by a partial covering one, so that a monitor pass
reads its candidate pairs without scanning every pair tallied so far. Step 5 adds the monitor's table of pending pair
tallies (a pass writes its tallies there; they are folded into the pairs table at a bounded cadence). Step 6 mends
the monitor's series: earlier releases stored a cumulative row for a pass that had merged no crowd judgement yet,
dated at time 0 (1970-01-01) and with nothing measured; those rows go (a pass now stores none). Step 7 gives the
alert ledger a claim (token and time): a sender claims a row in a transaction before it sends. Step 8 adds the
monitor's table of raw boxes (a ``kind: boxes`` question's objects are regrouped from them as boxes arrive).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    Column,
    DateTime,
    Engine,
    MetaData,
    String,
    Table,
    UniqueConstraint,
    func,
    insert,
    inspect,
    select,
    text,
)
from sqlalchemy.engine import Connection

from labelgate.errors import LabelGateError, Reason
from labelgate.pipeline import tables as t
from labelgate.pipeline.database import MIGRATION_LOCK, transaction

#: Version of the schema this code reads and writes.
SCHEMA_VERSION = 8

_MONITOR_TABLES: tuple[Table, ...] = (
    t.monitors_table,
    t.streams_table,
    t.judgements_table,
    t.deliveries_table,
    t.raters_table,
    t.pairs_table,
    t.windows_table,
    t.detectors_table,
    t.episodes_table,
    t.passes_table,
)
_LEGACY_MONITOR_VERSION = "labelgate_monitor_schema"
_LEGACY_MONITOR_ALERTS = "labelgate_monitor_alerts"


class StoreError(LabelGateError, RuntimeError):
    """The results store cannot do what was asked (unknown run, schema newer than the code...)."""

    default_code = Reason.INVALID_PARAMETER


def _runs_v1() -> Table:
    # Frozen: the runs table as step 1 created it (a cache keyed by batch and configuration).
    return Table(
        "labelgate_runs", MetaData(),
        Column("run_id", String(36), primary_key=True),
        Column("batch_id", String(512), nullable=False),
        Column("batch_hash", String(128), nullable=False),
        Column("config_hash", String(128), nullable=False),
        Column("decision", String(16), nullable=False),
        *(Column(name, JSON, nullable=False)
          for name in ("reasons", "metrics", "coverage", "validation", "timing", "reports", "alerts")),
        Column("created_at", DateTime(timezone=True), nullable=False, index=True),
        Column("finished_at", DateTime(timezone=True), nullable=True),
        UniqueConstraint("batch_hash", "config_hash", name="uq_labelgate_runs_batch_config"),
    )


def _step_1(conn: Connection) -> None:
    _runs_v1().create(conn)


def _step_2(conn: Connection) -> None:
    # The monitor's tables, created where absent (a database of an earlier release has them on its own chain),
    # and the alert-delivery ledger that replaces the monitor's own alerts table.
    for table in (*_MONITOR_TABLES, t.alert_deliveries_table):
        table.create(conn, checkfirst=True)
    existing = set(inspect(conn).get_table_names())
    if _LEGACY_MONITOR_ALERTS in existing:
        conn.execute(text(
            f"INSERT INTO {t.alert_deliveries_table.name} "
            "(dedupe_key, channel, decision, ok, attempts, error, sent_at) "
            "SELECT dedupe_key, channel, CASE transition WHEN 'open' THEN 'DRIFT_OPEN' ELSE 'DRIFT_CLOSED' END, "
            f"ok, attempts, error, sent_at FROM {_LEGACY_MONITOR_ALERTS}"
        ))
        conn.execute(text(f"DROP TABLE {_LEGACY_MONITOR_ALERTS}"))
    if _LEGACY_MONITOR_VERSION in existing:
        conn.execute(text(f"DROP TABLE {_LEGACY_MONITOR_VERSION}"))


_V1_COLUMNS = ("run_id, batch_id, batch_hash, config_hash, decision, reasons, metrics, coverage, validation, timing, "
               "reports, alerts, created_at, finished_at")


def _step_3(conn: Connection) -> None:
    # The runs table becomes append-only: rebuilt without the unique key (SQLite cannot drop a constraint), every
    # record copied. Records of earlier releases get an inputs digest that no new run produces (their trusted
    # replication was never hashed), so their decisions are kept for the record but never served to a new request.
    conn.execute(text("DROP INDEX IF EXISTS ix_labelgate_runs_created_at"))
    conn.execute(text("ALTER TABLE labelgate_runs RENAME TO labelgate_runs_v1"))
    t.runs_table.create(conn)
    conn.execute(text(
        f"INSERT INTO labelgate_runs ({_V1_COLUMNS}, trusted_hash, inputs_digest, labelgate_version, reused_from) "
        f"SELECT {_V1_COLUMNS}, NULL, 'v1:' || batch_hash || ':' || config_hash, 'before-audit-log', NULL "
        "FROM labelgate_runs_v1"
    ))
    conn.execute(text("DROP TABLE labelgate_runs_v1"))


def _step_4(conn: Connection) -> None:
    # The full (stream_id, candidate) index of the pairs table lost to the primary key in SQLite's planner (every
    # pair read to find the candidates) and cost an index write per new pair; the partial covering index that
    # replaces it holds the candidate pairs alone.
    conn.execute(text("DROP INDEX IF EXISTS ix_labelgate_monitor_pairs_candidate"))
    for index in t.pairs_table.indexes:
        if index.name == "ix_labelgate_monitor_pairs_candidates":
            index.create(conn, checkfirst=True)


def _step_5(conn: Connection) -> None:
    # The pending pair tallies (and their partial covering index of candidates); a store of step 4 has none pending.
    t.pair_deltas_table.create(conn, checkfirst=True)


def _step_6(conn: Connection) -> None:
    # A cumulative row of a stream without crowd judgements had no time of the data: window_end 0 (the epoch). No
    # real row ends there (the monitor's times are of judgements made since 1970), so the rule needs no other column.
    w = t.windows_table
    conn.execute(w.delete().where(w.c.scope == "cumulative", w.c.window_end <= 0))


def _step_7(conn: Connection) -> None:
    # The alert ledger's claim: read, send, then record let concurrent requests send one alert several times.
    have = {column["name"] for column in inspect(conn).get_columns(t.alert_deliveries_table.name)}
    for name in ("claim", "claimed_at"):
        if name not in have:
            kind = t.alert_deliveries_table.c[name].type.compile(dialect=conn.dialect)
            conn.execute(text(f"ALTER TABLE {t.alert_deliveries_table.name} ADD COLUMN {name} {kind}"))


def _step_8(conn: Connection) -> None:
    # The raw boxes of box questions: the monitor followed none before, so there is nothing to fill.
    t.boxes_table.create(conn, checkfirst=True)


_STEPS: dict[int, tuple[str, Callable[[Connection], None]]] = {
    1: ("runs table with unique (batch_hash, config_hash)", _step_1),
    2: ("monitor tables (streams, judgements, deliveries, raters, pairs, windows, detectors, episodes, passes) "
        "and the alert-delivery ledger", _step_2),
    3: ("runs table as an append-only audit log: inputs digest, trusted hash, version, reuse link; no unique key",
        _step_3),
    4: ("monitor pairs: a partial covering index of the collusion candidates instead of (stream_id, candidate)",
        _step_4),
    5: ("monitor pair deltas: a pass's pair tallies pending until they are folded into the pairs table", _step_5),
    6: ("monitor series: the cumulative rows of passes without crowd judgements (dated 1970-01-01) removed", _step_6),
    7: ("alert ledger: a claim (token, time) taken in a transaction before a channel is sent to", _step_7),
    8: ("monitor boxes: the raw boxes of box questions, from which an image's objects are regrouped", _step_8),
}


def migrate(engine: Engine, what: str = "The results store") -> int:
    """Create or upgrade every table to :data:`SCHEMA_VERSION` in one transaction; idempotent.

    Returns the schema version afterwards.

    Raises
    ------
    StoreError
        The database holds a newer schema than this code knows (``what`` names the database in the message).

    Examples
    --------
    >>> from labelgate.pipeline.database import make_engine
    >>> engine = make_engine("sqlite://")
    >>> migrate(engine), migrate(engine), schema_version(engine)
    (8, 8, 8)
    """
    with transaction(engine, write=True, lock=MIGRATION_LOCK) as conn:
        t.schema_version_table.create(conn, checkfirst=True)
        current = conn.execute(select(func.max(t.schema_version_table.c.version))).scalar() or 0
        if current > SCHEMA_VERSION:
            raise StoreError(f"{what} has schema version {current}, newer than this LabelGate's "
                             f"{SCHEMA_VERSION}; upgrade LabelGate.")
        for version in range(current + 1, SCHEMA_VERSION + 1):
            description, step = _STEPS[version]
            step(conn)
            conn.execute(insert(t.schema_version_table).values(
                version=version, description=description, applied_at=datetime.now(UTC)))
    return SCHEMA_VERSION


def schema_version(engine: Engine) -> int:
    """Schema version recorded in the database (0 when it was never migrated)."""
    with transaction(engine) as conn:
        if not conn.dialect.has_table(conn, t.schema_version_table.name):
            return 0
        return int(conn.execute(select(func.max(t.schema_version_table.c.version))).scalar() or 0)
