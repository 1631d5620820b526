"""The monitor's state on a real PostgreSQL store: same results as SQLite, concurrent passes merge once.

Needs ``LABELGATE_TEST_POSTGRES_URL`` (``scripts/services.sh postgres``) and the psycopg driver; skips with a
message otherwise. The module works in a database of its own, dropped at the end.
"""

from __future__ import annotations

import itertools
import math
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

PG_URL = os.environ.get("LABELGATE_TEST_POSTGRES_URL")
if not PG_URL:
    pytest.skip("LABELGATE_TEST_POSTGRES_URL is not set: start a server with `eval \"$(scripts/services.sh "
                "postgres)\"` to run the PostgreSQL monitor tests", allow_module_level=True)
pytest.importorskip("psycopg", reason="the PostgreSQL tests need the psycopg driver (pip install 'labelgate[postgres]')")

from sqlalchemy import create_engine, text  # noqa: E402

from labelgate.monitor import Monitor, history, monitor_config_from_dict  # noqa: E402
from labelgate.pipeline.synth import scenario_named, simulate  # noqa: E402
from tests.conftest import postgres_database  # noqa: E402


@pytest.fixture(scope="module")
def pg_url():
    with postgres_database("labelgate_monitor") as url:
        yield url


@pytest.fixture(scope="module")
def deliveries(tmp_path_factory):
    """Four deliveries of one stream of judgements (crowd and trusted), in arrival order."""
    data = simulate(scenario_named("good", 400), seed=3)
    data = data.sort_values("timestamp", kind="stable").reset_index(drop=True)
    bounds = [0, len(data) // 4, len(data) // 2, 3 * len(data) // 4, len(data)]
    return [data.iloc[a:b].drop(columns=["timestamp"]) for a, b in itertools.pairwise(bounds)]


def config(root: Path, store: dict) -> object:
    return monitor_config_from_dict({"store": store, "monitor": {"source": {"path": str(root / "drop")}}})


def deliver(root: Path, k: int, frame) -> None:
    (root / "drop").mkdir(parents=True, exist_ok=True)
    frame.to_csv(root / "drop" / f"d{k}.csv", index=False)


def cumulative(summary: dict) -> dict[str, float | None]:
    rows = summary["questions"]["label"]["cumulative"]
    return {metric: row["value"] for metric, row in rows.items()}


def same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)


def drop_tables(url: str) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
    engine.dispose()


def test_monitor_passes_on_postgres_equal_sqlite(pg_url, deliveries, tmp_path, monkeypatch):
    monkeypatch.setenv("LG_TEST_PG_MONITOR", pg_url)
    drop_tables(pg_url)
    sqlite_cfg = config(tmp_path / "sqlite", {"url": f"sqlite:///{tmp_path / 'sqlite' / 'results.db'}"})
    pg_cfg = config(tmp_path / "pg", {"url_env": "LG_TEST_PG_MONITOR"})
    for k, frame in enumerate(deliveries):
        deliver(tmp_path / "sqlite", k, frame)
        deliver(tmp_path / "pg", k, frame)
        a = Monitor(sqlite_cfg).run_pass(send_alerts=False)
        b = Monitor(pg_cfg).run_pass(send_alerts=False)
        assert a["n_new"] == b["n_new"] == len(frame)
        ca, cb = cumulative(a), cumulative(b)
        assert ca.keys() == cb.keys() and all(same(ca[m], cb[m]) for m in ca), (k, ca, cb)
    assert Monitor(pg_cfg).run_pass(send_alerts=False)["n_new"] == 0  # nothing merged twice
    ha, hb = history(sqlite_cfg), history(pg_cfg)
    assert len(ha["windows"]) == len(hb["windows"]) and len(ha["raters"]) == len(hb["raters"])


def test_concurrent_monitor_passes_on_postgres_merge_every_judgement_once(pg_url, deliveries, tmp_path,
                                                                          monkeypatch):
    monkeypatch.setenv("LG_TEST_PG_MONITOR", pg_url)
    drop_tables(pg_url)  # the first passes also race to create the monitor tables
    cfg = config(tmp_path, {"url_env": "LG_TEST_PG_MONITOR"})
    for k, frame in enumerate(deliveries):
        deliver(tmp_path, k, frame)
    with ThreadPoolExecutor(8) as pool:
        summaries = list(pool.map(lambda _: Monitor(cfg).run_pass(send_alerts=False), range(8)))
    # the passes serialise on the store: one merges everything, the others find nothing new
    assert sum(s["n_new"] for s in summaries) == sum(len(f) for f in deliveries)
    assert sorted(s["n_new"] > 0 for s in summaries) == [False] * 7 + [True]
    # and the state equals one pass over the same deliveries on a fresh SQLite store
    reference = Monitor(config(tmp_path, {"url": f"sqlite:///{tmp_path / 'ref.db'}"})).run_pass(send_alerts=False)
    final = Monitor(cfg).run_pass(send_alerts=False)
    assert final["n_new"] == 0
    ca, cb = cumulative(reference), cumulative(final)
    assert all(same(ca[m], cb[m]) for m in ca), (ca, cb)
