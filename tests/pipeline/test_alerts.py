"""Alert delivery through Prefect notification blocks to a local HTTP receiver on 127.0.0.1."""

from __future__ import annotations

import json
import logging
import socket
import time

import pytest

from labelgate.pipeline.alerts import build_message, deliver
from labelgate.pipeline.config import Alerts
from labelgate.pipeline.store import GateRecord, ResultsStore
from tests.loopback import Receiver

SUMMARY = {
    "batch_id": "batch-0007",
    "run_id": "run-1",
    "batch_hash": "bh1",
    "config_hash": "ch1",
    "reasons": ["label: normalized_cross_kappa 0.41 below 0.8"],
    "metrics": {"label": {"normalized_cross_kappa": {"value": 0.41, "ci_low": 0.30, "ci_high": 0.52},
                          "krippendorff_alpha": {"value": float("nan"), "ci_low": None, "ci_high": None}}},
}


@pytest.fixture
def receiver():
    rec = Receiver()
    yield rec
    rec.close()


def _dead_port() -> int:
    # bind to get a free port, then close it: nothing listens there
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _webhook_config(**kw) -> Alerts:
    return Alerts(channels=[{"type": "webhook", "url_env": "LG_TEST_HOOK"}], **kw)


def test_reject_reaches_the_local_receiver_once(receiver, monkeypatch):
    monkeypatch.setenv("LG_TEST_HOOK", f"http://127.0.0.1:{receiver.port}/hooks/gate")
    out = deliver("REJECT", SUMMARY, _webhook_config(), dedupe_key="bh1:ch1")
    assert len(receiver.requests) == 1
    req = receiver.requests[0]
    assert req["path"] == "/hooks/gate"
    body = json.loads(req["body"])
    assert body["decision"] == "REJECT"
    assert body["batch_id"] == "batch-0007"
    assert body["subject"] == "LabelGate: REJECT batch batch-0007"
    assert body["reasons"] == SUMMARY["reasons"]
    assert body["metrics"]["label/normalized_cross_kappa"] == {"value": 0.41, "ci_low": 0.30, "ci_high": 0.52}
    assert body["metrics"]["label/krippendorff_alpha"]["value"] is None  # NaN -> null, valid JSON
    assert body["dedupe_key"] == "bh1:ch1"
    assert req["headers"]["Idempotency-Key"] == "bh1:ch1"
    assert req["headers"]["Content-Type"] == "application/json"
    assert out == [{"channel": "webhook:LG_TEST_HOOK", "type": "webhook", "ok": True, "attempts": 1,
                    "error": None, "sent_at": out[0]["sent_at"], "decision": "REJECT", "dedupe_key": "bh1:ch1"}]
    assert out[0]["sent_at"] is not None


def test_accept_sends_nothing_when_not_in_notify_on(receiver, monkeypatch):
    monkeypatch.setenv("LG_TEST_HOOK", f"http://127.0.0.1:{receiver.port}/hooks/gate")
    assert deliver("ACCEPT", SUMMARY, _webhook_config()) == []
    assert receiver.requests == []
    # and ACCEPT is sent when asked for
    out = deliver("ACCEPT", SUMMARY, _webhook_config(notify_on=["ACCEPT"]))
    assert out[0]["ok"] and len(receiver.requests) == 1


def test_dead_receiver_fails_after_the_retries_without_raising(monkeypatch):
    monkeypatch.setenv("LG_TEST_HOOK", f"http://127.0.0.1:{_dead_port()}/hooks/gate")
    t0 = time.perf_counter()
    out = deliver("REJECT", SUMMARY, _webhook_config(retries=2, timeout_seconds=2), backoff_seconds=0.05)
    assert time.perf_counter() - t0 < 10
    assert len(out) == 1
    assert out[0]["ok"] is False and out[0]["attempts"] == 3 and out[0]["sent_at"] is None
    assert "ConnectError" in out[0]["error"] or "refused" in out[0]["error"].lower()


def test_dead_receiver_does_not_change_the_stored_decision(tmp_path, monkeypatch):
    store = ResultsStore(f"sqlite:///{tmp_path / 'r.db'}")
    from labelgate.pipeline.alert_ledger import record
    from labelgate.pipeline.store import gate_alert_key

    rec = store.append(GateRecord(batch_id="b", batch_hash="h", config_hash="c", decision="REJECT",
                                  reasons=["kappa too low"]))
    monkeypatch.setenv("LG_TEST_HOOK", f"http://127.0.0.1:{_dead_port()}/x")
    out = deliver("REJECT", rec.to_dict(), _webhook_config(retries=1), backoff_seconds=0.01)
    record(store.engine, gate_alert_key(rec.run_id), "REJECT", out)
    got = store.get(rec.run_id)
    assert got.decision == "REJECT" and got.reasons == ["kappa too low"]
    assert got.alerts[0]["ok"] is False and got.alerts[0]["attempts"] == 2


def test_server_error_is_retried_then_delivered(monkeypatch):
    rec = Receiver(statuses=[503, 500])
    try:
        monkeypatch.setenv("LG_TEST_HOOK", f"http://127.0.0.1:{rec.port}/h")
        out = deliver("REVIEW", SUMMARY, _webhook_config(retries=2), backoff_seconds=0.01)
    finally:
        rec.close()
    assert out[0]["ok"] is True and out[0]["attempts"] == 3
    assert len(rec.requests) == 3


def test_client_error_is_not_retried(monkeypatch):
    rec = Receiver(statuses=[404, 404, 404])
    try:
        monkeypatch.setenv("LG_TEST_HOOK", f"http://127.0.0.1:{rec.port}/h")
        out = deliver("ERROR", SUMMARY, _webhook_config(retries=2), backoff_seconds=0.01)
    finally:
        rec.close()
    assert out[0]["ok"] is False and out[0]["attempts"] == 1
    assert out[0]["error"].startswith("HTTP 404")
    assert len(rec.requests) == 1


def test_missing_env_var_is_a_failed_outcome(monkeypatch, receiver):
    monkeypatch.delenv("LG_TEST_HOOK", raising=False)
    out = deliver("REJECT", SUMMARY, _webhook_config())
    assert out[0]["ok"] is False and out[0]["attempts"] == 0
    assert "LG_TEST_HOOK" in out[0]["error"] and "not set" in out[0]["error"]
    assert receiver.requests == []


def test_urls_never_reach_logs_or_outcomes(monkeypatch, caplog):
    secret = "T000SECRET/B000SECRET/XXXXSECRETTOKEN"
    rec = Receiver(statuses=[500, 500])
    try:
        monkeypatch.setenv("LG_TEST_HOOK", f"http://127.0.0.1:{rec.port}/services/{secret}")
        with caplog.at_level(logging.DEBUG):
            out = deliver("REJECT", SUMMARY, _webhook_config(retries=1), backoff_seconds=0.01)
    finally:
        rec.close()
    assert out[0]["ok"] is False and out[0]["error"].startswith("HTTP 500")
    assert len(rec.requests) == 2
    assert "failed (attempt 1/2)" in caplog.text  # the failure is logged...
    # ...without the URL, even in httpx's own INFO line "HTTP Request: POST <url>"
    assert "HTTP Request: POST <redacted>" in caplog.text
    assert "SECRET" not in caplog.text and "SECRET" not in json.dumps(out)


def test_apprise_logs_do_not_leak_the_url(monkeypatch, caplog):
    secret = "XXXXSECRETPATH"
    monkeypatch.setenv("LG_TEST_SLACK", f"json://127.0.0.1:{_dead_port()}/{secret}")
    cfg = Alerts(channels=[{"type": "slack", "url_env": "LG_TEST_SLACK"}], retries=0, timeout_seconds=2)
    with caplog.at_level(logging.DEBUG):
        out = deliver("REJECT", SUMMARY, cfg)
    assert out[0]["ok"] is False
    assert secret not in caplog.text and secret not in json.dumps(out)


def test_slack_channel_through_apprise_json_url(receiver, monkeypatch):
    # SlackWebhook accepts any apprise URL; json:// posts apprise's JSON envelope to the receiver
    monkeypatch.setenv("LG_TEST_SLACK", f"json://127.0.0.1:{receiver.port}/slack")
    cfg = Alerts(channels=[{"type": "slack", "url_env": "LG_TEST_SLACK"}])
    out = deliver("REJECT", SUMMARY, cfg)
    assert out[0]["ok"] is True, out
    assert len(receiver.requests) == 1
    body = json.loads(receiver.requests[0]["body"])
    assert body["title"] == "LabelGate: REJECT batch batch-0007"
    assert "Decision: REJECT" in body["message"] and "normalized_cross_kappa: 0.410 [0.300, 0.520]" in body["message"]


def test_slack_channel_with_unusable_url_fails_clearly(receiver, monkeypatch):
    # SlackWebhook("http://host/...") silently sends nothing; we report it instead of pretending
    monkeypatch.setenv("LG_TEST_SLACK", f"http://127.0.0.1:{receiver.port}/slack")
    cfg = Alerts(channels=[{"type": "slack", "url_env": "LG_TEST_SLACK"}])
    out = deliver("REJECT", SUMMARY, cfg)
    assert out[0]["ok"] is False and out[0]["attempts"] == 0
    assert "not a Slack webhook" in out[0]["error"]
    assert receiver.requests == []


def test_dead_slack_receiver_raises_nothing_and_reports(monkeypatch):
    monkeypatch.setenv("LG_TEST_SLACK", f"json://127.0.0.1:{_dead_port()}/slack")
    cfg = Alerts(channels=[{"type": "slack", "url_env": "LG_TEST_SLACK"}], retries=1, timeout_seconds=2)
    out = deliver("ERROR", SUMMARY, cfg, backoff_seconds=0.01)
    assert out[0]["ok"] is False and out[0]["attempts"] == 2
    assert out[0]["error"].startswith("notification failed")


def test_several_channels_each_get_an_outcome(receiver, monkeypatch):
    monkeypatch.setenv("LG_TEST_HOOK", f"http://127.0.0.1:{receiver.port}/a")
    monkeypatch.setenv("LG_TEST_DEAD", f"http://127.0.0.1:{_dead_port()}/b")
    cfg = Alerts(channels=[{"type": "webhook", "url_env": "LG_TEST_DEAD"},
                           {"type": "webhook", "url_env": "LG_TEST_HOOK"}], retries=0)
    out = deliver("REJECT", SUMMARY, cfg)
    assert [o["ok"] for o in out] == [False, True]
    assert [o["channel"] for o in out] == ["webhook:LG_TEST_DEAD", "webhook:LG_TEST_HOOK"]
    assert len(receiver.requests) == 1


def test_deliver_from_a_running_event_loop(receiver, monkeypatch):
    # Prefect's async_dispatch would return an un-awaited coroutine here; deliver forces the sync path
    import asyncio

    monkeypatch.setenv("LG_TEST_HOOK", f"http://127.0.0.1:{receiver.port}/h")

    async def main():
        return deliver("REJECT", SUMMARY, _webhook_config())

    out = asyncio.run(main())
    assert out[0]["ok"] is True and len(receiver.requests) == 1


def test_broken_summary_does_not_raise(receiver, monkeypatch):
    monkeypatch.setenv("LG_TEST_HOOK", f"http://127.0.0.1:{receiver.port}/h")
    out = deliver("REJECT", {"batch_id": "b", "reasons": None, "metrics": {"q": {"m": object()}}},
                  _webhook_config())
    assert out[0]["ok"] is True  # unknown metric objects are skipped from the digest, not fatal
    assert deliver("REJECT", None, _webhook_config())[0]["ok"] is False  # type: ignore[arg-type]


def test_build_message_limits_reasons_and_metrics():
    many = {"batch_id": "b", "reasons": [f"r{i}" for i in range(25)],
            "metrics": {f"q{i}": {"m": {"value": i}} for i in range(30)}}
    subject, payload = build_message("REVIEW", many)
    assert subject == "LabelGate: REVIEW batch b"
    assert len(payload["reasons"]) == 10 and payload["n_reasons"] == 25
    assert len(payload["metrics"]) == 20
    json.dumps(payload, allow_nan=False)


def test_blocks_built_from_a_url_need_no_prefect_api(receiver, tmp_path):
    # A fresh interpreter with no API URL and the ephemeral server disabled: flows would fail with
    # "No Prefect API URL provided", but webhook/slack delivery works outside any flow.
    import os
    import subprocess
    import sys

    code = (
        "import json, sys\n"
        "from labelgate.pipeline.alerts import deliver\n"
        "from labelgate.pipeline.config import Alerts\n"
        "cfg = Alerts(channels=[{'type': 'webhook', 'url_env': 'LG_TEST_HOOK'}, "
        "{'type': 'slack', 'url_env': 'LG_TEST_SLACK'}])\n"
        "print(json.dumps(deliver('REJECT', {'batch_id': 'b9'}, cfg)))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_SERVER_EPHEMERAL_ENABLED="false", PREFECT_HOME=str(tmp_path / "prefect-home"),
               LG_TEST_HOOK=f"http://127.0.0.1:{receiver.port}/np",
               LG_TEST_SLACK=f"json://127.0.0.1:{receiver.port}/ns")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [o["ok"] for o in out] == [True, True], out
    assert sorted(r["path"] for r in receiver.requests) == ["/np", "/ns"]
    # and a saved block cannot be loaded there: a failed outcome, not an exception
    code2 = code.replace("{'type': 'webhook', 'url_env': 'LG_TEST_HOOK'}, {'type': 'slack', 'url_env': "
                         "'LG_TEST_SLACK'}", "{'type': 'prefect_block', 'block': 'x'}")
    proc = subprocess.run([sys.executable, "-c", code2], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out[0]["ok"] is False and "No Prefect API URL" in out[0]["error"], out


# --- saved Prefect blocks (need a Prefect API: the test harness's temporary server) -------------------------


def test_saved_prefect_block_channel(prefect_api, receiver):
    from prefect.blocks.notifications import CustomWebhookNotificationBlock

    CustomWebhookNotificationBlock(name="lg", url=f"http://127.0.0.1:{receiver.port}/saved",
                                   json_data={"text": "{{subject}}", "payload": "{{body}}"}
                                   ).save("lg-test-hook", overwrite=True)
    for name in ("lg-test-hook", "custom-webhook/lg-test-hook"):  # bare name and full slug
        cfg = Alerts(channels=[{"type": "prefect_block", "block": name}])
        out = deliver("REJECT", SUMMARY, cfg)
        assert out[0]["ok"] is True, out
        assert out[0]["channel"] == f"prefect_block:{name}"
    assert len(receiver.requests) == 2
    body = json.loads(receiver.requests[0]["body"])
    assert body["text"] == "LabelGate: REJECT batch batch-0007"
    assert json.loads(body["payload"])["decision"] == "REJECT"
    missing = deliver("REJECT", SUMMARY, Alerts(channels=[{"type": "prefect_block", "block": "nope"}]))
    assert missing[0]["ok"] is False and "no saved Prefect block" in missing[0]["error"]


def test_real_slack_url_is_accepted_and_gets_the_timeout():
    # no network: only the block set-up (apprise must recognise hooks.slack.com URLs; the timeout is applied)
    from labelgate.pipeline.alerts import _make_block

    class Channel:
        type = "slack"
        url_env = "LG_TEST_REAL_SLACK"

    import os

    os.environ["LG_TEST_REAL_SLACK"] = "https://hooks.slack.com/services/T0000AAAA/B0000BBBB/abcdefghijklmnopqrstuvwx"
    try:
        secrets: list[str] = []
        block = _make_block(Channel(), Alerts(timeout_seconds=3.5), None, secrets)
    finally:
        del os.environ["LG_TEST_REAL_SLACK"]
    servers = list(block._apprise_client)
    assert len(servers) == 1 and type(servers[0]).__name__ == "NotifySlack"
    assert servers[0].socket_connect_timeout == 3.5 and servers[0].socket_read_timeout == 3.5
    assert any("abcdefghijklmnopqrstuvwx" in s for s in secrets)


def test_the_ledger_sends_each_key_once_per_channel_and_retries_failures(tmp_path, monkeypatch):
    from labelgate.pipeline.alert_ledger import deliver_once, delivered_channels
    from labelgate.pipeline.database import make_engine
    from labelgate.pipeline.migrations import migrate

    engine = make_engine(f"sqlite:///{tmp_path / 'ledger.db'}")
    migrate(engine)
    good, failing = Receiver(), Receiver(statuses=[503, 503, 503])  # the second fails all three attempts once
    try:
        monkeypatch.setenv("LG_TEST_HOOK", f"http://127.0.0.1:{good.port}/a")
        monkeypatch.setenv("LG_TEST_HOOK_2", f"http://127.0.0.1:{failing.port}/b")
        cfg = Alerts(channels=[{"type": "webhook", "url_env": "LG_TEST_HOOK"},
                               {"type": "webhook", "url_env": "LG_TEST_HOOK_2"}], retries=2)
        out, complete = deliver_once(engine, "REJECT", SUMMARY, cfg, "k1")
        assert [o["ok"] for o in out] == [True, False] and not complete
        assert delivered_channels(engine, "k1") == {"webhook:LG_TEST_HOOK"}
        out, complete = deliver_once(engine, "REJECT", SUMMARY, cfg, "k1")  # only the failed channel again
        assert [o["channel"] for o in out] == ["webhook:LG_TEST_HOOK_2"] and complete
        assert deliver_once(engine, "REJECT", SUMMARY, cfg, "k1") == ([], True)  # nothing twice
        assert len(good.requests) == 1 and len(failing.requests) == 4
        with engine.connect() as conn:
            attempts = conn.exec_driver_sql("SELECT channel, attempts, ok FROM labelgate_alert_deliveries "
                                            "ORDER BY channel").all()
        assert [tuple(a) for a in attempts] == [("webhook:LG_TEST_HOOK", 1, 1), ("webhook:LG_TEST_HOOK_2", 4, 1)]
    finally:
        good.close()
        failing.close()
