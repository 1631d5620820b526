"""Prefect events of the served gate without a server: ``labelgate submit`` with no server to submit to, a decision
that an announcement failure never changes, an emit to an unreachable API, and the gate deployment's event trigger.
(Against a real ``prefect server start``: tests/services/test_prefect_events.py.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from labelgate.gate.watch import DropFolder, serve_settings
from labelgate.pipeline.config import config_from_dict
from tests.gate.test_drop_folder import SERVE_APP, gate_config, write_batches

#: A named SQL source: the event gives its name and the value of :batch, never SQL or credentials.
SQL_SOURCES = {"vendor_db": {"format": "sql", "url_env": "LG_TEST_SOURCE_DB",
                             "query": "SELECT item_id, rater_id, label, pool FROM judgements WHERE batch = :batch"}}


def judgements_database(path: Path) -> str:
    """A SQLite table of two batches (both pools each): ``good`` from the trusted raters' process, ``bad`` the xRR
    paper's contentment case; returns its URL."""
    import sqlite3

    from labelgate.pipeline.synth import scenario_named, simulate

    with sqlite3.connect(path) as conn:
        for batch, scenario in (("good", "good"), ("bad", "contentment")):
            frame = simulate(scenario_named(scenario, 600), seed=3).assign(batch=batch)
            frame[["batch", "item_id", "rater_id", "label", "pool"]].to_sql("judgements", conn, if_exists="append",
                                                                           index=False)
    return f"sqlite:///{path.as_posix()}"



def test_submit_without_a_server_says_so_in_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    (tmp_path / "b.csv").write_text("item_id,rater_id,label,pool\n", encoding="utf-8")
    out = subprocess.run([sys.executable, "-c", SERVE_APP, "submit", "--batch", str(tmp_path / "b.csv")], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 3 and out.stderr.startswith("error: No LabelGate server to submit to")


def test_an_announcement_failure_never_changes_a_decision(tmp_path):
    write_batches(tmp_path / "drop", batches=[("contentment", 3, "REJECT")])
    cfg = config_from_dict(gate_config(tmp_path))

    def broken(summary: dict[str, Any]) -> None:
        raise ConnectionError("the Prefect API is down")

    folder = DropFolder(cfg, serve_settings(cfg), on_decision=broken)
    folder.scan()
    assert [s["decision"] for s in folder.drain()] == ["REJECT"]
    assert [row["status"] for row in folder.ledger.decisions()] == ["done"]
    folder.close()


def test_emit_decided_to_an_unreachable_api_is_harmless(monkeypatch):
    import socket

    from labelgate.flows.gate import emit_decided

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    monkeypatch.setenv("PREFECT_API_URL", f"http://127.0.0.1:{port}/api")
    summary = {"decision": "ACCEPT", "batch_id": "b1", "reasons": [], "metrics": {}, "run_id": "r1"}
    assert emit_decided(summary) in (True, False)  # handed to the events worker, or refused: never raises
    assert summary["decision"] == "ACCEPT"


def test_the_gate_deployment_is_declared_with_its_event_trigger():
    import yaml

    spec = yaml.safe_load((Path(__file__).resolve().parents[2] / "flows" / "prefect.yaml").read_text())
    (gate,) = [d for d in spec["deployments"] if d["name"] == "labelgate-gate"]
    assert gate["entrypoint"] == "src/labelgate/flows/gate.py:gate_flow"
    (trigger,) = gate["triggers"]
    assert trigger["expect"] == ["labelgate.batch.ready"]
    assert trigger["parameters"] == {"batch": "{{ event.payload.get('path') }}",
                                     "batch_id": "{{ event.payload.batch_id }}",
                                     "source": "{{ event.payload.get('source') }}"}
