"""Results store: round trip, idempotency key, --force, transactions, concurrency, migrations."""

from __future__ import annotations

import json
import os
import threading
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import IntegrityError

from labelgate.core.estimate import Estimate
from labelgate.errors import ParameterError
from labelgate.pipeline.store import SCHEMA_VERSION, GateRecord, ResultsStore, StoreError
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
        return {t for t in inspect(engine).get_table_names() if t.startswith("labelgate")}
    finally:
        engine.dispose()


def _count_rows(url: str) -> int:
    return _sql(url, "SELECT count(*) FROM labelgate_runs")[0][0]


def test_round_trip_keeps_every_field(db_url):
    store = ResultsStore(db_url)
    rec = _record()
    saved = store.save(rec)
    assert saved.to_dict() == rec.to_dict()
    # a fresh store on the same file reads back the same complete record
    again = ResultsStore(db_url).get(rec.run_id)
    assert again is not None
    assert again.to_dict() == rec.to_dict()
    assert again.created_at == rec.created_at and again.created_at.tzinfo is not None
    assert again.metrics["label"]["normalized_cross_kappa"]["ci_low"] == 0.30
    assert again.reports["data_docs"] == "file:///tmp/docs/index.html"


def test_sqlite_parent_directories_are_created(tmp_path):
    path = tmp_path / "a" / "b" / "c.db"
    ResultsStore(f"sqlite:///{path}").migrate()
    assert path.is_file()


def test_find_is_idempotent_and_save_without_replace_keeps_the_first(db_url):
    store = ResultsStore(db_url)
    assert store.find("bh1", "ch1") is None
    first = store.save(_record("REJECT"))
    assert store.find("bh1", "ch1").run_id == first.run_id
    second = store.save(_record("ACCEPT"))  # same key, new run: the stored record wins
    assert second.run_id == first.run_id and second.decision == "REJECT"
    assert _count_rows(db_url) == 1
    # another config or another batch content is another key
    store.save(_record("ACCEPT", config_hash="ch2"))
    store.save(_record("ACCEPT", batch_hash="bh2"))
    assert _count_rows(db_url) == 3
    assert store.find("bh1", "ch2").decision == "ACCEPT"


def test_replace_true_replaces_the_record_for_the_key(db_url):
    store = ResultsStore(db_url)
    first = store.save(_record("REJECT"))
    forced = store.save(_record("ACCEPT", reasons=[]), replace=True)
    assert forced.run_id != first.run_id
    assert store.get(first.run_id) is None
    stored = store.find("bh1", "ch1")
    assert stored.run_id == forced.run_id and stored.decision == "ACCEPT" and stored.reasons == []
    assert _count_rows(db_url) == 1
    # replace on a fresh key is a plain insert
    store.save(_record("REVIEW", batch_hash="new"), replace=True)
    assert _count_rows(db_url) == 2


def test_concurrent_duplicate_inserts_give_one_record(db_url):
    url = db_url
    ResultsStore(url).migrate()
    n = 6
    barrier = threading.Barrier(n)
    results: list[GateRecord] = []
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        store = ResultsStore(url)  # one store (engine) per "process"
        rec = _record("REJECT", reasons=[f"worker {i}"])
        try:
            barrier.wait()
            results.append(store.save(rec))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(results) == n
    assert len({r.run_id for r in results}) == 1  # every worker got the one stored record
    assert _count_rows(url) == 1


def test_concurrent_duplicates_through_one_shared_store(db_url):
    # threads sharing one ResultsStore also race on the lazy migration
    store = ResultsStore(db_url)
    barrier = threading.Barrier(4)
    results: list[GateRecord] = []

    def worker() -> None:
        barrier.wait()
        results.append(store.save(_record()))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and len({r.run_id for r in results}) == 1
    assert len(store.list_runs()) == 1


def test_injected_crash_inside_save_leaves_no_row(db_url, monkeypatch):
    store = ResultsStore(db_url)
    store.migrate()
    real_insert = ResultsStore._insert

    def insert_then_crash(self, conn, row):
        real_insert(self, conn, row)  # the row is written inside the transaction...
        raise RuntimeError("injected crash before commit")  # ...and the process dies before the commit

    monkeypatch.setattr(ResultsStore, "_insert", insert_then_crash)
    with pytest.raises(RuntimeError, match="injected crash"):
        store.save(_record())
    assert _count_rows(db_url) == 0
    assert store.find("bh1", "ch1") is None


def test_injected_crash_during_forced_replace_keeps_the_old_record(db_url, monkeypatch):
    store = ResultsStore(db_url)
    old = store.save(_record("REJECT"))
    real_insert = ResultsStore._insert

    def insert_then_crash(self, conn, row):
        real_insert(self, conn, row)
        raise RuntimeError("injected crash before commit")

    monkeypatch.setattr(ResultsStore, "_insert", insert_then_crash)
    with pytest.raises(RuntimeError):
        store.save(_record("ACCEPT"), replace=True)
    kept = store.find("bh1", "ch1")
    assert kept is not None and kept.run_id == old.run_id and kept.decision == "REJECT"
    assert _count_rows(db_url) == 1


def test_unserialisable_value_fails_before_any_write(db_url):
    store = ResultsStore(db_url)
    store.migrate()
    with pytest.raises(ParameterError, match=r"metrics\.label\.x"):
        store.save(_record(metrics={"label": {"x": object()}}))
    assert _count_rows(db_url) == 0


def test_migrate_twice_is_a_noop(db_url):
    store = ResultsStore(db_url, auto_migrate=False)
    assert store.schema_version() == 0
    assert store.migrate() == SCHEMA_VERSION
    store.save(_record())
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
    store.save(rec)
    got = store.get(rec.run_id)
    assert got.metrics["label"]["kappa"] == {"value": None, "ci_low": None, "ci_high": 0.5, "n_items": 12}
    assert got.metrics["label"]["alpha"]["value"] is None
    assert got.metrics["label"]["alpha"]["reason"] == "no pairable items"
    assert got.timing == {"metrics": 1.25}
    raw = _sql(db_url, "SELECT CAST(metrics AS TEXT) FROM labelgate_runs")[0][0]
    assert "NaN" not in raw and "Infinity" not in raw
    assert json.loads(raw)["label"]["kappa"]["value"] is None  # valid JSON with null


def test_record_alerts_appends_and_keeps_the_decision(db_url):
    store = ResultsStore(db_url)
    rec = store.save(_record("REJECT"))
    outcome = {"channel": "webhook:HOOK", "ok": False, "attempts": 3, "error": "ConnectError", "sent_at": None}
    updated = store.record_alerts(rec.run_id, [outcome])
    assert updated.alerts == [outcome] and updated.decision == "REJECT"
    store.record_alerts(rec.run_id, [dict(outcome, ok=True, attempts=1, error=None)])
    got = store.get(rec.run_id)
    assert [a["ok"] for a in got.alerts] == [False, True]
    assert got.decision == "REJECT" and got.reasons == rec.reasons
    with pytest.raises(StoreError, match="No gate run"):
        store.record_alerts("no-such-run", [outcome])


def test_list_runs_newest_first_and_filter(db_url):
    store = ResultsStore(db_url)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(5):
        store.save(_record(batch_hash=f"h{i}", batch_id=f"b{i % 2}", created_at=t0 + timedelta(hours=i)))
    runs = store.list_runs(limit=3)
    assert [r.batch_hash for r in runs] == ["h4", "h3", "h2"]
    assert [r.batch_hash for r in store.list_runs(batch_id="b1")] == ["h3", "h1"]
    with pytest.raises(ParameterError):
        store.list_runs(limit=0)


def test_run_id_collision_on_another_key_is_not_swallowed(db_url):
    store = ResultsStore(db_url)
    rec = store.save(_record())
    other = store.save(_record(batch_hash="other"))
    with pytest.raises(IntegrityError):
        store.save(_record(batch_hash="third", run_id=rec.run_id))
    # --force with a run_id of another batch must not delete anything
    with pytest.raises(IntegrityError):
        store.save(_record("ACCEPT", batch_hash="other", run_id=rec.run_id), replace=True)
    assert store.get(rec.run_id).batch_hash == "bh1"
    assert store.find("other", "ch1").run_id == other.run_id
    assert _count_rows(db_url) == 2


def test_saving_the_same_record_twice_is_idempotent(db_url):
    store = ResultsStore(db_url)
    rec = _record()
    assert store.save(rec).run_id == rec.run_id
    assert store.save(rec).to_dict() == rec.to_dict()
    assert store.save(rec, replace=True).to_dict() == rec.to_dict()
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
    rec = store.save(_record())
    assert store.get(rec.run_id).decision == "REJECT"


def test_concurrent_first_runs_on_a_new_database(db_url):
    # several gate runs start at once on a database without tables yet: each migrates, one record results
    url = db_url
    n = 5
    barrier = threading.Barrier(n)
    results: list[GateRecord] = []
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            store = ResultsStore(url)
            record = _record(reasons=[f"worker {i}"])
            store.engine.connect().close()  # connect first: the race must be on the DDL, not on connecting
            barrier.wait()
            store.migrate()
            results.append(store.save(record))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len({r.run_id for r in results}) == 1 and len(results) == n
    assert _count_rows(url) == 1
    assert ResultsStore(url).schema_version() == SCHEMA_VERSION


def test_concurrent_forced_reruns_leave_one_record(db_url):
    # two --force reruns of the same batch at once: both succeed, one record remains (the last committed)
    ResultsStore(db_url).migrate()
    ResultsStore(db_url).save(_record("REJECT"))
    n = 4
    barrier = threading.Barrier(n)
    results: list[GateRecord] = []
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            store = ResultsStore(db_url)
            record = _record("ACCEPT", reasons=[f"worker {i}"])
            store.engine.connect().close()
            barrier.wait()
            results.append(store.save(record, replace=True))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert _count_rows(db_url) == 1
    stored = ResultsStore(db_url).find("bh1", "ch1")
    assert stored.decision == "ACCEPT" and stored.run_id in {r.run_id for r in results}
