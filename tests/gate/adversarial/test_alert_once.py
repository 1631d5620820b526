"""One alert per key under concurrency, at least once across crashes (the review's fourth probe).

Senders race for real: threads in one process, and gate processes started as a user starts them, all against one
loopback HTTP receiver that answers slowly (so that every sender is inside its send at once).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import update

from labelgate.pipeline import alert_ledger
from labelgate.pipeline.config.models import Alerts
from labelgate.pipeline.database import make_engine
from labelgate.pipeline.migrations import migrate
from labelgate.pipeline.synth import scenario_named, simulate
from labelgate.pipeline.tables import alert_deliveries_table as ledger
from tests.gate.test_concurrency import pg_admin, store_url  # noqa: F401  (fixtures: SQLite and PostgreSQL)
from tests.loopback import Receiver


@pytest.fixture
def receiver():
    rec = Receiver(delay=0.3)
    yield rec
    rec.close()


def test_eight_threads_sending_one_key_send_it_once(tmp_path, receiver, monkeypatch):
    monkeypatch.setenv("LG_TEST_HOOK", receiver.url)
    engine = make_engine(f"sqlite:///{(tmp_path / 'r.db').as_posix()}")
    migrate(engine)
    config = Alerts(channels=[{"type": "webhook", "url_env": "LG_TEST_HOOK"}])
    barrier, results = threading.Barrier(8), []

    def send() -> None:
        barrier.wait()
        results.append(alert_ledger.deliver_once(engine, "REJECT", {"batch_id": "b1"}, config, "gate:run-1"))

    threads = [threading.Thread(target=send) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert receiver.keys == Counter({"gate:run-1": 1})
    assert sum(len(outcomes) for outcomes, _ in results) == 1
    # after the race: delivered, claim released, and a later call sends nothing
    assert alert_ledger.deliver_once(engine, "REJECT", {"batch_id": "b1"}, config, "gate:run-1") == ([], True)
    assert receiver.keys == Counter({"gate:run-1": 1})


def test_a_claim_left_by_a_dead_sender_lapses_and_the_alert_is_sent(tmp_path, receiver, monkeypatch):
    monkeypatch.setenv("LG_TEST_HOOK", receiver.url)
    engine = make_engine(f"sqlite:///{(tmp_path / 'r.db').as_posix()}")
    migrate(engine)
    config = Alerts(channels=[{"type": "webhook", "url_env": "LG_TEST_HOOK"}])
    claimed, busy = alert_ledger.claim(engine, "gate:run-2", "REJECT", ["webhook:LG_TEST_HOOK"], "dead-sender")
    assert claimed == ["webhook:LG_TEST_HOOK"] and not busy
    # while the claim is live, another call leaves the channel to its holder (and says it is not done)
    assert alert_ledger.deliver_once(engine, "REJECT", {"batch_id": "b2"}, config, "gate:run-2") == ([], False)
    assert receiver.keys == Counter()
    with engine.begin() as conn:  # the sender died long ago: its claim is older than the lease
        old = datetime.now(UTC) - timedelta(seconds=alert_ledger.CLAIM_LEASE_SECONDS + 60)
        conn.execute(update(ledger).values(claimed_at=old))
    outcomes, done = alert_ledger.deliver_once(engine, "REJECT", {"batch_id": "b2"}, config, "gate:run-2")
    assert done and [o["ok"] for o in outcomes] == [True]
    assert receiver.keys == Counter({"gate:run-2": 1})


GATE = """
import json, sys
from labelgate.gate import run
summary = run(sys.argv[1], sys.argv[2], sys.argv[3], batch_id="b1")
print(json.dumps({"decision": summary["decision"], "reused": summary["reused"], "alerts": summary["alerts"]}))
"""


def test_four_gate_processes_on_the_same_inputs_send_the_alert_once(tmp_path, receiver, store_url):  # noqa: F811
    frame = simulate(scenario_named("contentment", 120), seed=3)
    crowd, trusted = tmp_path / "crowd.csv", tmp_path / "trusted.csv"
    frame[frame["pool"] == "crowd"].to_csv(crowd, index=False)
    frame[frame["pool"] == "trusted"].to_csv(trusted, index=False)
    config = tmp_path / "gate.yaml"
    config.write_text(json.dumps({
        "gates": [{"type": "normalized_cross_kappa", "min_value": 0.8}], "interval": {"n_boot": 100, "seed": 0},
        "coverage": {"min_coverage": 0.1, "min_common_items": 10}, "store": {"url_env": "LG_TEST_ALERT_STORE"},
        "reports": {"dir": (tmp_path / "reports").as_posix()},
        "alerts": {"channels": [{"type": "webhook", "url_env": "LG_TEST_HOOK"}]}}), encoding="utf-8")
    env = {**os.environ, "LG_TEST_ALERT_STORE": store_url, "LG_TEST_HOOK": receiver.url,
           "OPENBLAS_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, "-c", GATE, str(config), str(crowd), str(trusted)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(4)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-2000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert {r["decision"] for r in results} == {"REJECT"}
    assert sorted(r["reused"] for r in results) == [False, True, True, True]
    assert len(receiver.keys) == 1 and set(receiver.keys.values()) == {1}, receiver.keys
