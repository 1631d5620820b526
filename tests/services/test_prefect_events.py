"""Prefect events in and out of the served gate, against a real ``prefect server start`` on 127.0.0.1.

`labelgate serve` with PREFECT_API_URL: 8 dropped batches → 8 decisions, 8 audit records and 8
``labelgate.gate.decided`` events read back from the API; ``labelgate.batch.ready`` (sent by ``labelgate submit``)
triggers the served deployment, whose decision event carries the batch id. (Without a server — an emit failure never
changes a decision, the deployment's event trigger: tests/flows/test_events.py.)
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections import Counter
from typing import Any

from labelgate.pipeline.store import ResultsStore
from tests.conftest import wait_for
from tests.flows.test_events import SQL_SOURCES, judgements_database
from tests.gate.test_drop_folder import SERVE_APP, gate_config, ledger_rows, write_batches
from tests.services.conftest import stop_process_group


def decided_events(api: str) -> list[dict[str, Any]]:
    body = {"filter": {"event": {"name": ["labelgate.gate.decided"]}, "order": "ASC"}, "limit": 50}
    request = urllib.request.Request(f"{api}/events/filter", data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())["events"]


def deployment_status(api: str) -> str | None:
    try:
        with urllib.request.urlopen(f"{api}/deployments/name/labelgate-gate/labelgate-gate-on-event",
                                    timeout=10) as response:
            return json.loads(response.read()).get("status")
    except OSError:
        return None


def test_served_gate_emits_decisions_and_gates_on_batch_ready_events(prefect_server_session, tmp_path):
    api, env = prefect_server_session["url"], {**prefect_server_session["env"], "OPENBLAS_NUM_THREADS": "1"}
    expected = write_batches(tmp_path / "drop")
    config = gate_config(tmp_path, poll_seconds=0.2)
    config["sources"] = SQL_SOURCES
    env["LG_TEST_SOURCE_DB"] = judgements_database(tmp_path / "judgements.db")
    (tmp_path / "gate.yaml").write_text(json.dumps(config), encoding="utf-8")
    state = tmp_path / "reports" / "labelgate-serve.db"
    log = open(tmp_path / "serve.log", "w")  # closed below
    server = subprocess.Popen([sys.executable, "-c", SERVE_APP, "serve", "--config", str(tmp_path / "gate.yaml")],
                              env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: len(ledger_rows(state)) == 8 and all(s == "done" for _, s, _ in ledger_rows(state)),
                 timeout=300, interval=0.2, give_up=lambda: server.poll() is not None, what="8 decisions")
        # the session's Prefect server is shared with other tests' served gates: only this test's batches count
        events = wait_for(lambda: (e := [x for x in decided_events(api) if x["payload"]["batch_id"] in expected])
                          and len(e) >= 8 and e, timeout=120, interval=0.5, what="8 decided events in the Prefect API")
        by_batch = {e["payload"]["batch_id"]: e for e in events}
        assert {b: e["payload"]["decision"] for b, e in by_batch.items()} == expected
        assert all(e["resource"]["prefect.resource.id"] == f"labelgate.batch.{b}" for b, e in by_batch.items())
        accepted = by_batch["0-good1"]["payload"]
        assert accepted["run_id"] and accepted["report"] and accepted["reasons"] == []
        assert set(accepted["metrics"]["label"]["normalized_cross_kappa"]) >= {"value", "ci_low", "ci_high"}
        assert by_batch["7-malformed0"]["payload"]["reasons"]
        records = ResultsStore(config["store"]["url"]).list_runs(None)
        assert len(records) == 8 and Counter(r.decision for r in records)["ERROR"] == 1

        # events in: `labelgate submit` emits labelgate.batch.ready and waits for the decision event of its id
        wait_for(lambda: deployment_status(api) == "READY", timeout=120, interval=0.5,
                 give_up=lambda: server.poll() is not None, what="the served gate deployment to be ready")
        submitted = subprocess.run([sys.executable, "-c", SERVE_APP, "submit", "--batch",
                                    str(tmp_path / "drop" / "4-contentment3.csv"), "--batch-id", "ev-42", "--json",
                                    "--timeout", "300"], env=env, cwd=tmp_path, capture_output=True, text=True,
                                   timeout=400)
        assert submitted.returncode == 1, submitted.stderr[-3000:]  # REJECT
        payload = json.loads(submitted.stdout.strip().splitlines()[-1])
        assert payload["batch_id"] == "ev-42" and payload["decision"] == "REJECT"
        assert any(e["resource"]["prefect.resource.id"] == "labelgate.batch.ev-42" for e in decided_events(api))
        assert ResultsStore(config["store"]["url"]).current("ev-42").decision == "REJECT"

        # events in, a batch in a database: the event names a configured SQL source and its parameter
        emit = ("from prefect.events import emit_event\n"
                "emit_event(event='labelgate.batch.ready', resource={'prefect.resource.id': 'labelgate.batch.sql-7'},"
                " payload={'batch_id': 'sql-7', 'source': {'name': 'vendor_db', 'params': {'batch': 'bad'}}})")
        subprocess.run([sys.executable, "-c", emit], env=env, check=True, timeout=120)
        event = wait_for(lambda: next((e for e in decided_events(api)
                                       if e["resource"]["prefect.resource.id"] == "labelgate.batch.sql-7"), None),
                         timeout=300, interval=0.5, give_up=lambda: server.poll() is not None,
                         what="the decision of the SQL-source batch")
        assert event["payload"]["decision"] == "REJECT", event["payload"]["reasons"]
    finally:
        stop_process_group(server)
        log.close()
