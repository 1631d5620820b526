"""The audit log: round trip, append-only records keyed by the inputs digest, history, transactions, concurrency."""

from __future__ import annotations

import json
import os
import threading
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from sqlalchemy import create_engine, text

from labelgate.core.estimate import Estimate
from labelgate.errors import ParameterError
from labelgate.pipeline.store import SCHEMA_VERSION, GateRecord, ResultsStore, StoreError, inputs_digest
from labelgate.pipeline.tables import metadata


def _record(decision: str = "REJECT", batch_hash: str = "bh1", config_hash: str = "ch1", **kw) -> GateRecord:
    start = datetime(2026, 11, 20, 10, 0, 0, 123456, tzinfo=UTC)
    base = dict(
        batch_id="batch-0007",
        batch_hash=batch_hash,
        config_hash=config_hash,
        decision=decision,
        reasons=["label: normalized_cross_kappa 0.41 (95% CI 0.30-0.52) below 0.8"],
        metrics={"label": {"normalized_cross_kappa": {"value": 0.41, "ci_low": 0.30, "ci_high": 0.52,
                                                      "n_items": 80},
                           "krippendorff_alpha": {"value": 0.63, "ci_low": 0.55, "ci_high": 0.70}}},
        coverage={"common_items": 80, "coverage": 0.4},
        validation={"invalid_rows": 2, "quarantine": "reports/q.csv"},
        timing={"load": 0.12, "metrics": 1.5},
        reports={"data_docs": "file:///tmp/docs/index.html", "markdown": "reports/run.md"},
        created_at=start,
        finished_at=start + timedelta(seconds=2),
    )
    base.update(kw)
    return GateRecord(**base)


# PostgreSQL runs of the same tests when a disposable database is named here (its labelgate tables are dropped).
PG_URL = os.environ.get("LABELGATE_TEST_POSTGRES_URL")


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'nested' / 'dir' / 'results.db'}"
    if not PG_URL:
        pytest.skip("set LABELGATE_TEST_POSTGRES_URL to a disposable PostgreSQL database to run this test there")
    engine = create_engine(PG_URL)
    metadata.drop_all(engine)  # every LabelGate table: the schema is one chain
    engine.dispose()
    return PG_URL


def _sql(url: str, statement: str, **params) -> list[tuple]:
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            result = conn.execute(text(statement), params)
            return [tuple(r) for r in result] if result.returns_rows else []
    finally:
        engine.dispose()


def _tables(url: str) -> set[str]:
    from sqlalchemy import inspect

    engine = create_engine(url)
    try:
        # the store's tables; a benchmark's cached tables (labelgate_bench_*) in a shared test database are not
        return {t for t in inspect(engine).get_table_names()
                if t.startswith("labelgate") and not t.startswith("labelgate_bench_")}
    finally:
        engine.dispose()


def _count_rows(url: str) -> int:
    return _sql(url, "SELECT count(*) FROM labelgate_runs")[0][0]


def _digest(batch_hash: str = "bh1", config_hash: str = "ch1", trusted_hash: str | None = None) -> str:
    return inputs_digest(batch_hash, trusted_hash, config_hash)


def test_round_trip_keeps_every_field(db_url):
    store = ResultsStore(db_url)
    rec = _record(trusted_hash="th1")
    saved = store.append(rec)
    assert saved.to_dict() == rec.to_dict()
    # a fresh store on the same file reads back the same complete record
    again = ResultsStore(db_url).get(rec.run_id)
    assert again is not None
    assert again.to_dict() == rec.to_dict()
    assert again.created_at == rec.created_at and again.created_at.tzinfo is not None
    assert again.metrics["label"]["normalized_cross_kappa"]["ci_low"] == 0.30
    assert again.reports["data_docs"] == "file:///tmp/docs/index.html"
    assert again.inputs_digest == _digest(trusted_hash="th1") and again.labelgate_version


def test_sqlite_parent_directories_are_created(tmp_path):
    path = tmp_path / "a" / "b" / "c.db"
    ResultsStore(f"sqlite:///{path}").migrate()
    assert path.is_file()


def test_the_digest_covers_every_input():
    base = _digest(trusted_hash="t")
    assert base == _digest(trusted_hash="t")
    assert len({base, _digest(trusted_hash="t2"), _digest(batch_hash="b2", trusted_hash="t"),
                _digest(config_hash="c2", trusted_hash="t"), _digest()}) == 5


def test_find_serves_the_latest_computed_decision_of_the_same_inputs_only(db_url):
    store = ResultsStore(db_url)
    assert store.find(_digest()) is None
    first = store.append(_record("REJECT", created_at=datetime(2026, 1, 1, tzinfo=UTC)))
    assert store.find(_digest()).run_id == first.run_id
    # another trusted replication, config or batch content is another key
    assert store.find(_digest(trusted_hash="other")) is None
    assert store.find(_digest(config_hash="ch2")) is None
    # an ERROR is never served, nor a record that itself reused a decision
    store.append(_record("ERROR", created_at=datetime(2026, 1, 2, tzinfo=UTC)))
    store.append(_record("ACCEPT", reused_from="someone", created_at=datetime(2026, 1, 3, tzinfo=UTC)))
    assert store.find(_digest()).run_id == first.run_id
    forced = store.append(_record("ACCEPT", reasons=[], created_at=datetime(2026, 1, 4, tzinfo=UTC)))
    assert store.find(_digest()).run_id == forced.run_id  # a later computation supersedes
    assert _count_rows(db_url) == 4  # nothing was replaced


def test_history_is_kept_and_the_latest_record_of_a_batch_is_current(db_url):
    store = ResultsStore(db_url)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    first = store.append(_record("REJECT", created_at=t0))
    store.append(_record("ERROR", created_at=t0 + timedelta(hours=1)))  # a failed rerun: beside, not instead
    assert store.get(first.run_id).decision == "REJECT"
    assert store.current("batch-0007").decision == "ERROR"
    forced = store.append(_record("ACCEPT", created_at=t0 + timedelta(hours=2)))
    assert store.current("batch-0007").run_id == forced.run_id
    assert [r.decision for r in store.list_runs(batch_id="batch-0007")] == ["ACCEPT", "ERROR", "REJECT"]
    assert store.current("unknown") is None


def test_concurrent_appends_each_leave_a_record(db_url):
    url = db_url
    ResultsStore(url).migrate()
    n = 6
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        store = ResultsStore(url)  # one store (engine) per "process"
        try:
            barrier.wait()
            store.append(_record("REJECT", batch_id=f"conc{i}"))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert _count_rows(url) == n
    assert {r.batch_id for r in ResultsStore(url).list_runs(None)} == {f"conc{i}" for i in range(n)}


def test_threads_sharing_one_store_race_on_the_lazy_migration(db_url):
    store = ResultsStore(db_url)
    barrier = threading.Barrier(4)

    def worker() -> None:
        barrier.wait()
        store.append(_record())

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store.list_runs()) == 4


def test_injected_crash_inside_append_leaves_no_row_and_keeps_the_earlier_ones(db_url, monkeypatch):
    store = ResultsStore(db_url)
    old = store.append(_record("REJECT"))
    real_insert = ResultsStore._insert

    def insert_then_crash(self, conn, row):
        real_insert(self, conn, row)  # the row is written inside the transaction...
        raise RuntimeError("injected crash before commit")  # ...and the process dies before the commit

    monkeypatch.setattr(ResultsStore, "_insert", insert_then_crash)
    with pytest.raises(RuntimeError, match="injected crash"):
        store.append(_record("ACCEPT"))
    assert _count_rows(db_url) == 1
    assert store.find(_digest()).run_id == old.run_id


def test_unserialisable_value_fails_before_any_write(db_url):
    store = ResultsStore(db_url)
    store.migrate()
    with pytest.raises(ParameterError, match=r"metrics\.label\.x"):
        store.append(_record(metrics={"label": {"x": object()}}))
    assert _count_rows(db_url) == 0


def test_migrate_twice_is_a_noop(db_url):
    store = ResultsStore(db_url, auto_migrate=False)
    assert store.schema_version() == 0
    assert store.migrate() == SCHEMA_VERSION
    store.append(_record())
    assert store.migrate() == SCHEMA_VERSION
    assert ResultsStore(db_url).migrate() == SCHEMA_VERSION
    assert _sql(db_url, "SELECT version FROM labelgate_schema_version ORDER BY version") == [
        (v,) for v in range(1, SCHEMA_VERSION + 1)]
    assert _count_rows(db_url) == 1  # data kept
    assert store.schema_version() == SCHEMA_VERSION


def test_newer_schema_is_refused(db_url):
    ResultsStore(db_url).migrate()
    _sql(db_url, "INSERT INTO labelgate_schema_version VALUES (:v, 'future', '2030-01-01 00:00:00')",
         v=SCHEMA_VERSION + 1)
    with pytest.raises(StoreError, match="newer than this LabelGate"):
        ResultsStore(db_url).migrate()


def test_failed_migration_step_rolls_back_the_ddl(db_url, monkeypatch):
    from labelgate.pipeline import migrations
    from labelgate.pipeline.tables import runs_table

    def crash_after_create(conn):
        runs_table.create(conn)
        raise RuntimeError("injected crash in migration")

    monkeypatch.setitem(migrations._STEPS, 1, ("v1", crash_after_create))
    with pytest.raises(RuntimeError):
        ResultsStore(db_url).migrate()
    assert _tables(db_url) == set()  # transactional DDL: neither table survived


def test_nan_and_numpy_values_are_stored_as_json(db_url):
    store = ResultsStore(db_url)
    est = Estimate("krippendorff_alpha", float("nan"), n_items=0, reason="no pairable items")
    rec = _record(metrics={"label": {"kappa": {"value": np.float64("nan"), "ci_low": float("-inf"),
                                               "ci_high": np.float32(0.5), "n_items": np.int64(12)},
                                     "alpha": est}},
                  timing={"metrics": np.float64(1.25)})
    store.append(rec)
    got = store.get(rec.run_id)
    assert got.metrics["label"]["kappa"] == {"value": None, "ci_low": None, "ci_high": 0.5, "n_items": 12}
    assert got.metrics["label"]["alpha"]["value"] is None
    assert got.metrics["label"]["alpha"]["reason"] == "no pairable items"
    assert got.timing == {"metrics": 1.25}
    raw = _sql(db_url, "SELECT CAST(metrics AS TEXT) FROM labelgate_runs")[0][0]
    assert "NaN" not in raw and "Infinity" not in raw
    assert json.loads(raw)["label"]["kappa"]["value"] is None  # valid JSON with null


def test_alerts_of_a_record_are_read_from_the_ledger(db_url):
    from labelgate.pipeline.alert_ledger import record
    from labelgate.pipeline.store import gate_alert_key

    store = ResultsStore(db_url)
    rec = store.append(_record("REJECT"))
    reused = store.append(_record("REJECT", reused_from=rec.run_id, batch_id="again"))
    outcome = {"channel": "webhook:HOOK", "ok": False, "attempts": 3, "error": "ConnectError", "sent_at": None}
    record(store.engine, gate_alert_key(rec.run_id), "REJECT", [outcome])
    got = store.get(rec.run_id)
    assert [(a["channel"], a["ok"], a["attempts"]) for a in got.alerts] == [("webhook:HOOK", False, 3)]
    assert got.decision == "REJECT" and got.reasons == rec.reasons
    # the request that received the decision shows the deciding run's deliveries
    assert store.get(reused.run_id).alerts == got.alerts


def test_list_runs_newest_first_and_filter(db_url):
    store = ResultsStore(db_url)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(5):
        store.append(_record("ACCEPT" if i % 2 else "REJECT", batch_hash=f"h{i}", batch_id=f"b{i % 2}",
                             created_at=t0 + timedelta(hours=i)))
    runs = store.list_runs(limit=3)
    assert [r.batch_hash for r in runs] == ["h4", "h3", "h2"]
    assert [r.batch_hash for r in store.list_runs(batch_id="b1")] == ["h3", "h1"]
    assert [r.batch_hash for r in store.list_runs(since=t0 + timedelta(hours=3))] == ["h4", "h3"]
    assert [r.batch_hash for r in store.list_runs(None, decision="REJECT")] == ["h4", "h2", "h0"]
    with pytest.raises(ParameterError):
        store.list_runs(limit=0)
    with pytest.raises(ParameterError, match="decision"):
        store.list_runs(decision="MAYBE")


def test_a_run_id_is_never_recorded_twice(db_url):
    store = ResultsStore(db_url)
    rec = store.append(_record())
    with pytest.raises(StoreError, match="never replaced"):
        store.append(_record("ACCEPT", batch_hash="third", run_id=rec.run_id))
    with pytest.raises(StoreError, match="never replaced"):
        store.append(rec)
    assert store.get(rec.run_id).batch_hash == "bh1" and store.get(rec.run_id).decision == "REJECT"
    assert _count_rows(db_url) == 1


def test_record_validation():
    with pytest.raises(ParameterError, match="'decision' parameter of GateRecord"):
        _record(decision="MAYBE")
    with pytest.raises(ParameterError, match="batch_hash"):
        _record(batch_hash="")
    naive = _record(created_at=datetime(2026, 1, 1, 12, 0))
    assert naive.created_at.tzinfo is UTC


def test_from_config_reads_the_url_from_the_environment(tmp_path, monkeypatch):
    from labelgate.pipeline.config import Store

    url = f"sqlite:///{tmp_path / 'env.db'}"
    monkeypatch.setenv("LG_TEST_STORE_URL", url)
    store = ResultsStore.from_config(Store(url_env="LG_TEST_STORE_URL"))
    assert store.url == url
    monkeypatch.delenv("LG_TEST_STORE_URL")
    with pytest.raises(StoreError, match="LG_TEST_STORE_URL"):
        ResultsStore.from_config(Store(url_env="LG_TEST_STORE_URL"))


def test_in_memory_store_works():
    store = ResultsStore("sqlite://")
    rec = store.append(_record())
    assert store.get(rec.run_id).decision == "REJECT"


def test_concurrent_first_runs_on_a_new_database(db_url):
    # several gate runs start at once on a database without tables yet: each migrates and appends its record
    url = db_url
    n = 5
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            store = ResultsStore(url)
            record = _record(reasons=[f"worker {i}"])
            store.engine.connect().close()  # connect first: the race must be on the DDL, not on connecting
            barrier.wait()
            store.migrate()
            store.append(record)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert _count_rows(url) == n
    assert ResultsStore(url).schema_version() == SCHEMA_VERSION
