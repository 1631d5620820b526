"""One versioned chain of schema migrations for every LabelGate table (:mod:`labelgate.pipeline.tables`).

The version is recorded in ``labelgate_schema_version`` (one row per applied step). :func:`migrate` applies the
missing steps in one transaction, serialised across processes, and is idempotent; a database written by a newer
LabelGate is refused. Applied steps are frozen: a new shape is a new step.

Databases of earlier releases kept the monitor's tables on a chain of their own (``labelgate_monitor_schema``);
step 2 adopts them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from sqlalchemy import Engine, Table, func, insert, inspect, select, text
from sqlalchemy.engine import Connection

from labelgate.errors import LabelGateError, Reason
from labelgate.pipeline import tables as t
from labelgate.pipeline.database import MIGRATION_LOCK, transaction

#: Version of the schema this code reads and writes.
SCHEMA_VERSION = 2

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


def _step_1(conn: Connection) -> None:
    t.runs_table.create(conn)


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


_STEPS: dict[int, tuple[str, Callable[[Connection], None]]] = {
    1: ("runs table with unique (batch_hash, config_hash)", _step_1),
    2: ("monitor tables (streams, judgements, deliveries, raters, pairs, windows, detectors, episodes, passes) "
        "and the alert-delivery ledger", _step_2),
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
    (2, 2, 2)
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
