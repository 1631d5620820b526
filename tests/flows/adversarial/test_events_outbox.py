"""The labelgate.gate.decided event owed to Prefect is kept in the outbox while Prefect is down and delivered once
when it is back (the review's eighth probe: the event used to be dropped with the process)."""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest

pytest.importorskip("prefect")

from labelgate.gate import alerting, run
from labelgate.pipeline.alert_ledger import owed_keys
from labelgate.pipeline.config import config_from_dict
from labelgate.pipeline.store import ResultsStore
from labelgate.pipeline.synth import scenario_named, simulate


def _dead_api() -> str:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/api"


@pytest.fixture
def decided(tmp_path) -> tuple[Any, ResultsStore, dict[str, Any]]:
    batch = tmp_path / "b1.csv"
    simulate(scenario_named("good", 300), seed=1).to_csv(batch, index=False)
    cfg = config_from_dict({"gates": [{"type": "normalized_cross_kappa", "min_value": 0.8}],
                            "interval": {"n_boot": 100, "seed": 0},
                            "store": {"url": f"sqlite:///{(tmp_path / 'r.db').as_posix()}"},
                            "reports": {"dir": (tmp_path / "rep").as_posix()}})
    summary = run(cfg, batch)
    return cfg, ResultsStore.from_config(cfg.store), summary


def test_an_event_prefect_did_not_take_is_owed_and_sent_once_when_it_is_back(decided):
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from labelgate.flows.gate import emit_decided

    cfg, store, summary = decided
    with temporary_settings({PREFECT_API_URL: _dead_api()}):
        started = time.monotonic()
        assert emit_decided(summary, cfg) is False  # the API is down: not delivered, and not lost
        assert time.monotonic() - started < 60
    assert owed_keys(store.engine, alerting.EVENT_CHANNEL) == [alerting.event_key(summary["run_id"])]

    received: list[dict[str, Any]] = []
    assert alerting.retry_events(store, received.append) == {summary["run_id"]: True}  # Prefect is back
    assert [s["run_id"] for s in received] == [summary["run_id"]] and received[0]["decision"] == "ACCEPT"
    assert owed_keys(store.engine, alerting.EVENT_CHANNEL) == []
    assert alerting.retry_events(store, received.append) == {} and len(received) == 1  # never twice


def test_a_failed_retry_keeps_the_event_owed(decided):
    _, store, summary = decided

    def down(_: Any) -> None:
        raise ConnectionRefusedError("Prefect is down")

    assert alerting.deliver_event(store, summary, down) is False
    assert alerting.retry_events(store, down) == {summary["run_id"]: False}
    assert owed_keys(store.engine, alerting.EVENT_CHANNEL) == [alerting.event_key(summary["run_id"])]


def test_alerts_retry_sends_owed_events_through_the_command(decided, tmp_path, monkeypatch):
    import json

    import typer
    from typer.testing import CliRunner

    from labelgate.cli.audit import register
    from labelgate.flows import gate as gate_flows

    cfg, store, summary = decided

    def down(_: Any) -> None:
        raise ConnectionRefusedError("Prefect is down")

    alerting.deliver_event(store, summary, down)
    sent: list[str] = []
    monkeypatch.setattr(gate_flows, "send_decided_event", lambda s: sent.append(s["run_id"]))
    config = tmp_path / "gate.yaml"
    config.write_text(json.dumps(cfg.model_dump(mode="json", exclude_defaults=True)), encoding="utf-8")
    app = typer.Typer()
    register(app)
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: _dead_api()}):  # configured; the sender is the test's
        result = CliRunner().invoke(app, ["alerts", "retry", "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert sent == [summary["run_id"]]
    assert f"run {summary['run_id']}  {alerting.EVENT_CHANNEL}  sent" in result.output
