"""One migration chain for every LabelGate table, and the upgrade of a database of an earlier release whose monitor
tables were on a chain of their own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from sqlalchemy import inspect, select, text

from labelgate.pipeline import migrations
from labelgate.pipeline import tables as t
from labelgate.pipeline.database import make_engine
from labelgate.pipeline.migrations import SCHEMA_VERSION, migrate, schema_version
from labelgate.pipeline.store import ResultsStore, inputs_digest
from tests.conftest import postgres_database

_LEGACY_ALERTS = """CREATE TABLE labelgate_monitor_alerts (
    monitor VARCHAR(100) NOT NULL, dedupe_key VARCHAR(200) NOT NULL, channel VARCHAR(200) NOT NULL,
    episode_id VARCHAR(40) NOT NULL, transition VARCHAR(8) NOT NULL, ok BOOLEAN NOT NULL, attempts INTEGER NOT NULL,
    error TEXT, sent_at DATETIME, PRIMARY KEY (monitor, dedupe_key, channel))"""


def _names(engine) -> set[str]:
    return {name for name in inspect(engine).get_table_names() if name.startswith("labelgate")}


def test_a_new_database_gets_every_table_in_one_chain(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    assert schema_version(engine) == 0
    assert migrate(engine) == SCHEMA_VERSION == schema_version(engine)
    assert _names(engine) == {name for name in t.metadata.tables}
    assert "labelgate_monitor_schema" not in _names(engine)


def test_a_database_of_an_earlier_release_is_adopted(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'old.sqlite'}")
    with engine.begin() as conn:  # the earlier release: runs on chain 1, the monitor on its own chain
        t.schema_version_table.create(conn)
        migrations._runs_v1().create(conn)
        conn.execute(text(
            "INSERT INTO labelgate_runs VALUES ('r-old', 'b1', 'bh', 'ch', 'ACCEPT', '[]', '{}', '{}', '{}', '{}', "
            "'{}', '[]', '2026-11-01 09:00:00', NULL)"))
        conn.execute(text("INSERT INTO labelgate_schema_version VALUES (1, 'runs', '2026-11-01 00:00:00')"))
        conn.execute(text("CREATE TABLE labelgate_monitor_schema (version INTEGER PRIMARY KEY, "
                          "description VARCHAR(200) NOT NULL, applied_at DATETIME NOT NULL)"))
        conn.execute(text("INSERT INTO labelgate_monitor_schema VALUES (1, 'monitor', '2026-11-01 00:00:00')"))
        t.episodes_table.create(conn)
        conn.execute(text(_LEGACY_ALERTS))
        conn.execute(text("INSERT INTO labelgate_monitor_alerts VALUES ('m', 'labelgate-monitor:m:e1:open', "
                          "'webhook:HOOK', 'e1', 'open', 1, 2, NULL, '2026-11-02 10:00:00')"))
        conn.execute(text("INSERT INTO labelgate_monitor_alerts VALUES ('m', 'labelgate-monitor:m:e1:close', "
                          "'webhook:HOOK', 'e1', 'close', 0, 3, 'HTTP 503', NULL)"))
    assert schema_version(engine) == 1
    assert migrate(engine) == SCHEMA_VERSION
    names = _names(engine)
    assert "labelgate_monitor_alerts" not in names and "labelgate_monitor_schema" not in names
    assert names == {name for name in t.metadata.tables}
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT dedupe_key, channel, decision, ok, attempts, error "
                                 "FROM labelgate_alert_deliveries ORDER BY dedupe_key")).all()
    assert [tuple(r) for r in rows] == [
        ("labelgate-monitor:m:e1:close", "webhook:HOOK", "DRIFT_CLOSED", 0, 3, "HTTP 503"),
        ("labelgate-monitor:m:e1:open", "webhook:HOOK", "DRIFT_OPEN", 1, 2, None),
    ]
    store = ResultsStore(f"sqlite:///{tmp_path / 'old.sqlite'}")
    old = store.get("r-old")  # the earlier release's record is kept, under a digest no new run produces
    assert old.decision == "ACCEPT" and old.batch_id == "b1" and old.inputs_digest == "v1:bh:ch"
    assert store.current("b1").run_id == "r-old"
    assert store.find(inputs_digest("bh", None, "ch")) is None
    assert migrate(engine) == SCHEMA_VERSION  # idempotent afterwards


@pytest.fixture(params=["sqlite", "postgresql"])
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A new SQLite file, or a database of its own on the PostgreSQL server of LABELGATE_TEST_POSTGRES_URL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'db.sqlite'}"
        return
    with postgres_database("labelgate_migrate") as url:
        yield url


def test_step_5_adds_the_pending_pair_tallies_and_a_step_4_store_keeps_its_tallies(fresh_url):
    """A store as step 4 left it (tallies in the pairs table only) gains the empty pending table; new tallies go there
    with a copy of the main row, the candidates and a fold give the totals."""
    from labelgate.monitor import rater_store

    engine = make_engine(fresh_url)
    migrate(engine)
    with engine.begin() as conn:  # the store as step 4 left it, with two tallies
        conn.execute(text("DROP TABLE labelgate_monitor_pair_deltas"))
        conn.execute(t.schema_version_table.delete().where(t.schema_version_table.c.version >= 5))
        conn.execute(t.pairs_table.insert(), [
            {"stream_id": 1, "pool": 0, "rater_a": "a", "rater_b": "b", "n": 19, "agree": 10, "candidate": False},
            {"stream_id": 1, "pool": 0, "rater_a": "a", "rater_b": "c", "n": 25, "agree": 20, "candidate": True}])
    assert schema_version(engine) == 4
    assert migrate(engine) == SCHEMA_VERSION == schema_version(engine)
    assert _names(engine) == {name for name in t.metadata.tables}
    new = pd.DataFrame({"rater_a": ["a", "b"], "rater_b": ["b", "c"], "n": [1, 2], "agree": [1, 0]})
    with engine.begin() as conn:
        rater_store.add_pairs(conn, 1, 0, new, min_pair_items=20)
        pending = conn.execute(text("SELECT rater_a, rater_b, n, agree, base_n, base_agree, candidate "
                                    "FROM labelgate_monitor_pair_deltas ORDER BY rater_a")).all()
        assert [tuple(r) for r in pending] == [("a", "b", 1, 1, 19, 10, True), ("b", "c", 2, 0, 0, 0, False)]
        candidates = rater_store.candidate_pairs(conn, 1).sort_values("rater_b")
        assert candidates.values.tolist() == [[0, "a", "b", 20, 11], [0, "a", "c", 25, 20]]
        rater_store.fold_pairs(conn, 1)
        main = conn.execute(text("SELECT rater_a, rater_b, n, agree, candidate FROM labelgate_monitor_pairs "
                                 "ORDER BY rater_a, rater_b")).all()
        assert [tuple(r) for r in main] == [("a", "b", 20, 11, True), ("a", "c", 25, 20, True),
                                            ("b", "c", 2, 0, False)]
        assert conn.execute(text("SELECT count(*) FROM labelgate_monitor_pair_deltas")).scalar() == 0
    engine.dispose()


def test_step_6_removes_the_cumulative_rows_of_passes_without_crowd_judgements(fresh_url):
    """A store of step 5 holding the 1970-01-01 cumulative rows an earlier release stored for a pass that had merged
    the trusted replication alone keeps every other row, and migrating again changes nothing."""
    engine = make_engine(fresh_url)
    migrate(engine)
    w = t.windows_table

    def row(scope, start, end, index=None, value=None):
        return {"monitor": "default", "question": "label", "metric": "irr_crowd", "scope": scope,
                "window_index": index, "window_start": start, "window_end": end, "value": value, "ci_low": None,
                "ci_high": None, "n_items": 0 if value is None else 40, "n_ratings": 0, "threshold": 0.3,
                "pass_id": "p"}

    day = 1_767_571_200_000_000  # 2026-01-05T00:00:00Z in microseconds
    with engine.begin() as conn:
        conn.execute(t.schema_version_table.delete().where(t.schema_version_table.c.version >= 6))
        conn.execute(w.insert(), [row("cumulative", 0, 0), row("cumulative", 0, 0),
                                  row("cumulative", day, day + 3_600_000_000, value=0.5),
                                  row("window", day, day + 3_600_000_000, index=0, value=0.4)])
    assert schema_version(engine) == 5
    assert migrate(engine) == SCHEMA_VERSION == 8 == schema_version(engine)
    assert migrate(engine) == 8
    with engine.begin() as conn:
        kept = conn.execute(select(w.c.scope, w.c.window_end, w.c.value).order_by(w.c.scope)).all()
    assert [tuple(r) for r in kept] == [("cumulative", day + 3_600_000_000, 0.5),
                                        ("window", day + 3_600_000_000, 0.4)]
