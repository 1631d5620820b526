"""Many gate processes at once, and gate processes killed at random points: the audit log holds every request,
each batch has exactly one current decision, identical inputs are never computed twice at once, and a killed run
leaves either no record or a complete one, which a rerun completes.

The gate API (no Prefect) runs in separate processes, each started as a user would start a gate.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from labelgate.pipeline.store import ResultsStore
from labelgate.pipeline.synth import scenario_named, simulate

CONFIG = """
gates:
  - type: normalized_cross_kappa
    min_value: 0.8
interval: {{n_boot: 100, seed: 0}}
coverage: {{min_coverage: 0.1, min_common_items: 10}}
store: {{url_env: LG_TEST_CONCURRENT_STORE}}
reports: {{dir: "{reports}"}}
"""

# One gate request; prints its summary's decision and run id (a killed process prints nothing).
GATE = """
import json, sys
from labelgate.gate import run
summary = run(sys.argv[1], sys.argv[2], sys.argv[3], batch_id=sys.argv[4], force=sys.argv[5] == "1")
print(json.dumps({"decision": summary["decision"], "run_id": summary["run_id"], "reused": summary["reused"]}))
"""


@pytest.fixture(scope="module")
def batches(tmp_path_factory) -> dict[str, tuple[str, str]]:
    root = tmp_path_factory.mktemp("concurrent-batches")
    out = {}
    for k in range(8):
        frame = simulate(scenario_named("good" if k % 2 == 0 else "contentment", 120), seed=100 + k)
        crowd, trusted = root / f"b{k}-crowd.csv", root / f"b{k}-trusted.csv"
        frame[frame["pool"] == "crowd"].to_csv(crowd, index=False)
        frame[frame["pool"] == "trusted"].to_csv(trusted, index=False)
        out[f"b{k}"] = (str(crowd), str(trusted))
    return out


def _config(tmp: Path) -> Path:
    config = tmp / "gate.yaml"
    config.write_text(CONFIG.format(reports=(tmp / "reports").as_posix()), encoding="utf-8")
    return config


def _start(config: Path, batch: tuple[str, str], batch_id: str, force: bool, store_url: str) -> subprocess.Popen:
    env = {**os.environ, "LG_TEST_CONCURRENT_STORE": store_url, "OPENBLAS_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-c", GATE, str(config), *batch, batch_id, "1" if force else "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{(tmp_path / 'results.db').as_posix()}"
    admin = request.getfixturevalue("pg_admin")
    from tests.services.test_postgres_gate import fresh_database  # one way to make a disposable database

    url, drop = fresh_database(admin, "labelgate_concurrency")
    if url is None:
        pytest.skip("the PostgreSQL role may not create a database for this test")
    request.addfinalizer(lambda: _drop(admin, drop))
    return url


def _drop(admin, statement: str) -> None:
    from sqlalchemy import text

    with admin.connect() as conn:
        conn.execute(text(statement))


@pytest.fixture(scope="module")
def pg_admin():
    from tests.services.test_postgres_gate import NO_PG, PG_URL

    if not PG_URL:
        pytest.skip(NO_PG)
    from sqlalchemy import create_engine

    engine = create_engine(PG_URL, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 5})
    yield engine
    engine.dispose()


def test_sixteen_processes_gating_eight_batches(tmp_path, batches, store_url):
    config = _config(tmp_path)
    ResultsStore(store_url).migrate()  # the schema exists; the race is on the decisions, not the DDL
    # each batch twice: batches 0-5 both plain (identical inputs at once), batches 6-7 once plain, once --force
    jobs = [(name, f"{name}-{i}", name in ("b6", "b7") and i == 1) for name in batches for i in range(2)]
    processes = [_start(config, batches[name], batch_id, force, store_url) for name, batch_id, force in jobs]
    outputs = []
    for process in processes:
        out, err = process.communicate(timeout=900)
        assert process.returncode == 0, err[-2000:]
        outputs.append(json.loads(out.strip().splitlines()[-1]))
    records = ResultsStore(store_url).list_runs(None)
    assert len(records) == len(jobs)  # every request is on record
    assert {r.run_id for r in records} == {o["run_id"] for o in outputs}
    assert all(r.decision in ("ACCEPT", "REJECT", "REVIEW") for r in records), [r.reasons for r in records]
    by_digest: dict[str, list] = {}
    for record in records:
        by_digest.setdefault(record.inputs_digest, []).append(record)
    assert len(by_digest) == len(batches)
    for (_name, batch_id, _force), out in zip(jobs, outputs, strict=True):
        assert ResultsStore(store_url).current(batch_id).run_id == out["run_id"]  # one current decision each
    for digest, group in by_digest.items():
        computed = [r for r in group if r.reused_from is None]
        forced = [r for r in computed if r.batch_id in ("b6-1", "b7-1")]
        # identical plain requests: at most one computation (none when a forced run had decided them already);
        # every other request received a computed decision of the same inputs
        assert len(computed) - len(forced) <= 1 and computed, (digest, [(r.batch_id, r.reused_from) for r in group])
        assert all(r.reused_from in {c.run_id for c in computed} for r in group if r.reused_from)
        assert len({r.decision for r in group}) == 1
