"""The Label Studio webhook receiver: deliveries parsed, verified and debounced (no server), and end to end — a real
Label Studio 1.23.2 posts its webhooks to ``labelgate label-studio-webhook``, which emits ``labelgate.batch.ready`` to
a real Prefect server; the event's path reads exactly the tasks that were annotated, and the served gate
(``labelgate serve``) gates that batch and records its decision under the event's batch id. (The receiver's monitor
listener against the same server: tests/test_label_studio_monitor.py.)
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

import labelgate as lg
from conftest import stop_process_group, wait_for
from labelgate.errors import InputError
from labelgate.gate import ls_webhook
from labelgate.gate.ls_webhook import Debouncer, ReadyBatch, parse_delivery
from labelgate.pipeline.store import ResultsStore
from test_events import deployment_status
from test_label_studio import Server, _results
from test_serve import SERVE_APP

SECRET = "test-secret-4f2a"


def _created(project: int, task: int, annotation: int) -> dict[str, Any]:
    """A delivery as Label Studio 1.23 posts it with ``send_payload``."""
    return {"action": "ANNOTATION_CREATED", "project": {"id": project, "title": "p"},
            "task": {"id": task, "data": {"text": "x"}}, "annotation": {"id": annotation, "task": task, "result": []}}


def test_deliveries_are_parsed_and_refused_with_reasons() -> None:
    assert parse_delivery(_created(3, 8, 80)) == ls_webhook.Delivery("ANNOTATION_CREATED", 3, (8,), (80,))
    imported = parse_delivery({"action": "ANNOTATIONS_CREATED", "project": {"id": 3},
                               "annotation": None, "annotations": [{"id": 1, "task": 9}, {"id": 2, "task": 8}]})
    assert imported.task_ids == (8, 9) and imported.annotation_ids == (1, 2)
    with pytest.raises(InputError, match="send_payload"):
        parse_delivery({"action": "ANNOTATION_CREATED"})
    with pytest.raises(InputError, match="'PROJECT_CREATED' is not handled"):
        parse_delivery({"action": "PROJECT_CREATED", "project": {"id": 1}})
    with pytest.raises(InputError, match="not an integer"):
        parse_delivery({"action": "ANNOTATION_UPDATED", "project": {"id": 1}, "annotation": {"id": 1.5, "task": 2}})
    with pytest.raises(InputError, match="JSON object"):
        parse_delivery([1, 2])


def test_the_debouncer_waits_for_a_quiet_project_and_bounds_its_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    debouncer = Debouncer(quiet_seconds=10, max_wait_seconds=25)
    for k, now in enumerate((0.0, 8.0, 16.0)):  # a delivery every 8 s: never quiet for 10 s
        debouncer.add(parse_delivery(_created(1, 100 + k, k)), now)
    debouncer.add(parse_delivery({"action": "ANNOTATIONS_DELETED", "project": {"id": 2},
                                  "annotations": [{"id": 7}]}), 20.0)
    assert debouncer.due(24.0) == []
    ready = debouncer.due(25.0)  # project 1: 25 s after its first delivery; project 2 is not quiet yet
    assert [(b.project, b.task_ids) for b in ready] == [(1, (100, 101, 102))]
    assert ready[0].actions == {"ANNOTATION_CREATED": 3}
    [deleted] = debouncer.due(30.0)
    assert (deleted.project, deleted.task_ids, deleted.deleted_annotations) == (2, (), (7,))
    monkeypatch.setattr(ls_webhook, "MAX_TASKS_PER_BATCH", 2)
    for task in (5, 6, 7):
        debouncer.add(parse_delivery(_created(1, task, task)), 40.0)
    assert [b.task_ids for b in debouncer.flush()] == [(5, 6), (7,)]
    batch = ReadyBatch(4, (2, 9), (), {}, 0.0, 0.0)
    assert batch.payload("http://ls:8080/")["path"] == "http://ls:8080/projects/4?tasks=2,9"
    assert batch.batch_id.startswith("ls-4-2-9-2-") and batch.batch_id == ReadyBatch(4, (2, 9), (), {}, 1, 1).batch_id
    with pytest.raises(InputError, match="seconds >= 0"):
        Debouncer(quiet_seconds=float("nan"))


def test_the_receiver_verifies_queues_and_hands_batches_to_listeners() -> None:
    from fastapi.testclient import TestClient

    from labelgate.flows.label_studio_webhook import ROUTE, WebhookReceiver

    seen: list[ReadyBatch] = []

    def broken(batch: ReadyBatch) -> None:
        raise RuntimeError("a listener that fails")

    receiver = WebhookReceiver(SECRET, quiet_seconds=5, projects=[3], listeners=[broken])
    receiver.add_listener(seen.append)
    client = TestClient(receiver.app())
    good = {"X-LabelGate-Secret": SECRET}
    assert client.post(ROUTE, json=_created(3, 8, 80)).status_code == 401
    assert client.post(ROUTE, json=_created(3, 8, 80), headers={"X-LabelGate-Secret": "guess"}).status_code == 401
    bad = client.post(ROUTE, content=b"not json", headers=good)
    assert bad.status_code == 400 and "JSON object" in bad.json()["detail"]
    other = client.post(ROUTE, json=_created(4, 1, 1), headers=good)
    assert other.status_code == 202 and other.json()["queued"] is False
    assert client.post(ROUTE, json=_created(3, 8, 80), headers=good).json() == {"queued": True, "project": 3}
    assert client.get("/health").json()["pending"] == {"3": 1}
    assert receiver.tick(now=0.0) == [] and seen == []
    [ready] = receiver.tick(flush=True)
    assert seen == [ready] and ready.task_ids == (8,)
    with pytest.raises(InputError, match="non-empty shared secret"):
        WebhookReceiver("")


def test_the_receiver_bounds_a_delivery(monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi.testclient import TestClient

    from labelgate.flows import label_studio_webhook as receiving

    monkeypatch.setattr(receiving, "MAX_BODY_BYTES", 100)
    client = TestClient(receiving.WebhookReceiver(SECRET).app())
    body = json.dumps({**_created(3, 8, 80), "padding": "x" * 200})
    refused = client.post(receiving.ROUTE, content=body, headers={"X-LabelGate-Secret": SECRET})
    assert refused.status_code == 413 and "at most 100 bytes" in refused.json()["detail"]


def _ready_events(api: str) -> list[dict[str, Any]]:
    body = {"filter": {"event": {"name": ["labelgate.batch.ready"]}, "order": "ASC"}, "limit": 50}
    request = urllib.request.Request(f"{api}/events/filter", data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return list(json.loads(response.read())["events"])


def test_label_studio_webhooks_become_batch_ready_events(label_studio_server: dict[str, str],
                                                         prefect_server_session: dict[str, Any],
                                                         tmp_path: Path) -> None:
    server = Server(label_studio_server)
    project = server.project("webhook project")
    server.api.post(f"/api/projects/{project}/import", json=[{"text": t} for t in ("a", "b", "c")])
    tasks = [t["id"] for t in server.tasks(project)]
    expert, annotator = server.user("expert"), server.user("ann1")
    store = f"sqlite:///{(tmp_path / 'results.db').as_posix()}"
    config = {"batch": {"format": "label_studio", "control": "sentiment", "url_env": "LG_TEST_LS_URL",
                        "project": project},
              "questions": [{"name": "label", "categories": ["neg", "neu", "pos"]}],
              "interval": {"n_boot": 50, "diagnose_n_boot": 20}, "store": {"url": store},
              "reports": {"dir": (tmp_path / "reports").as_posix()}}
    (tmp_path / "gate.yaml").write_text(json.dumps(config), encoding="utf-8")
    env = {**prefect_server_session["env"], "LG_TEST_LS_URL": server.url, "LABELGATE_WEBHOOK_SECRET": SECRET,
           "LABEL_STUDIO_TOKEN": server.legacy, "OPENBLAS_NUM_THREADS": "1"}
    log_path, served_log = tmp_path / "webhook.log", tmp_path / "serve.log"
    with open(log_path, "w") as log, open(served_log, "w") as served_out:
        receiver = subprocess.Popen([sys.executable, "-c", SERVE_APP, "label-studio-webhook", "--config",
                                     str(tmp_path / "gate.yaml"), "--port", "0", "--quiet-seconds", "2"],
                                    env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        served = subprocess.Popen([sys.executable, "-c", SERVE_APP, "serve", "--config", str(tmp_path / "gate.yaml")],
                                  env=env, cwd=tmp_path, stdout=served_out, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    try:
        # the served gate's event trigger must exist before the event is emitted
        wait_for(lambda: deployment_status(prefect_server_session["url"]) == "READY", timeout=180, interval=0.5,
                 give_up=lambda: served.poll() is not None, what="the served gate deployment to be ready")
        listening = wait_for(lambda: re.search(r"listening on (http://\S+)", log_path.read_text(encoding="utf-8")),
                             timeout=120, interval=0.2, give_up=lambda: receiver.poll() is not None,
                             what="the webhook receiver listening")
        hook = listening.group(1)
        registered = server.api.post("/api/webhooks/", json={
            "project": project, "url": hook, "send_payload": True, "send_for_all_actions": False,
            "headers": {"X-LabelGate-Secret": SECRET},
            "actions": ["ANNOTATION_CREATED", "ANNOTATIONS_CREATED", "ANNOTATION_UPDATED", "ANNOTATIONS_DELETED"]})
        assert registered.status_code == 201, registered.text
        first = server.annotate(tasks[0], {"result": _results("pos"), "completed_by": expert, "ground_truth": True})
        server.annotate(tasks[0], {"result": _results("neu"), "completed_by": annotator})
        second = server.annotate(tasks[1], {"result": _results("neg"), "completed_by": annotator})
        assert server.api.patch(f"/api/annotations/{second['id']}",
                                json={"result": _results("neu")}).status_code == 200
        events = wait_for(lambda: _ready_events(prefect_server_session["url"]), timeout=120, interval=0.5,
                          give_up=lambda: receiver.poll() is not None, what="a labelgate.batch.ready event")
        [event] = events
        payload = event["payload"]
        assert payload["path"] == f"{server.url}/projects/{project}?tasks={tasks[0]},{tasks[1]}"
        assert payload["label_studio"]["actions"] == {"ANNOTATION_CREATED": 3, "ANNOTATION_UPDATED": 1}
        assert event["resource"]["prefect.resource.id"] == f"labelgate.batch.{payload['batch_id']}"
        # the event's path is a batch the gate reads: the two tasks annotated, the update's label
        os.environ.setdefault("LABEL_STUDIO_TOKEN", server.legacy)
        table = lg.read_label_studio(payload["path"], control="sentiment", trusted="ground_truth")
        assert sorted(table["item_id"].astype(int).unique()) == tasks[:2]
        assert table.loc[table["annotation_id"] == str(second["id"]), "label"].tolist() == ["neu"]
        # the served gate heard the event, read that batch from Label Studio and recorded its decision under its id
        record = wait_for(lambda: ResultsStore(store).current(payload["batch_id"]), timeout=300, interval=0.5,
                          give_up=lambda: served.poll() is not None, what="the served gate's decision of the batch")
        assert record.decision in ("ACCEPT", "REJECT", "REVIEW"), record.reasons  # read and measured, not a fault
        # a deletion alone is delivered, and emits no gate batch
        assert server.api.delete(f"/api/annotations/{first['id']}").status_code == 204
        health = f"{hook.rsplit('/label-studio', 1)[0]}/health"
        wait_for(lambda: json.loads(urllib.request.urlopen(health, timeout=10).read())["received"] == 5,
                 timeout=60, interval=0.2, what="the deletion delivered")
        wait_for(lambda: not json.loads(urllib.request.urlopen(health, timeout=10).read())["pending"], timeout=60,
                 interval=0.2, what="the deletion handed over")
        assert len(_ready_events(prefect_server_session["url"])) == 1
        wrong = urllib.request.Request(hook, data=json.dumps(_created(project, 1, 1)).encode(), method="POST",
                                       headers={"Content-Type": "application/json", "X-LabelGate-Secret": "guess"})
        with pytest.raises(urllib.error.HTTPError, match="401"):
            urllib.request.urlopen(wrong, timeout=10)
    finally:
        stop_process_group(receiver)
        stop_process_group(served)
        if os.environ.get("LABEL_STUDIO_TOKEN") == server.legacy:
            del os.environ["LABEL_STUDIO_TOKEN"]


def test_the_receiver_command_refuses_what_it_cannot_serve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import typer
    from typer.testing import CliRunner

    from labelgate.cli.serve import register

    app = typer.Typer()
    register(app)
    (tmp_path / "ls.yaml").write_text("batch: {format: label_studio, control: sentiment, url_env: LG_TEST_LS}\n",
                                      encoding="utf-8")
    (tmp_path / "csv.yaml").write_text("batch: {path: batch.csv}\n", encoding="utf-8")
    monkeypatch.delenv("LABELGATE_WEBHOOK_SECRET", raising=False)
    monkeypatch.setenv("LG_TEST_LS", "http://127.0.0.1:9")
    runner = CliRunner()
    unset = runner.invoke(app, ["label-studio-webhook", "--config", str(tmp_path / "ls.yaml")])
    assert unset.exit_code == 3 and "'LABELGATE_WEBHOOK_SECRET' is not set" in unset.output
    monkeypatch.setenv("LABELGATE_WEBHOOK_SECRET", SECRET)
    monkeypatch.delenv("LG_TEST_LS")
    no_url = runner.invoke(app, ["label-studio-webhook", "--config", str(tmp_path / "ls.yaml")])
    assert no_url.exit_code == 3 and "'LG_TEST_LS' is not set" in no_url.output
    csv = runner.invoke(app, ["label-studio-webhook", "--config", str(tmp_path / "csv.yaml")])
    assert csv.exit_code == 3 and "not label_studio" in csv.output


def test_the_receiver_command_runs_monitor_passes_for_its_project_only(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """``--monitor`` alone: no Prefect server needed; a ready batch of the monitor's project runs one pass (with the
    batch's tasks as hints), a batch of another project runs none; a monitor reading no Label Studio is refused."""
    import labelgate.monitor.label_studio as monitor_ls
    from labelgate.cli.label_studio import webhook_receiver

    monitor = tmp_path / "monitor.yaml"
    monitor.write_text("monitor:\n  source: {kind: label_studio, url_env: LG_TEST_LS, project: 7}\n",
                       encoding="utf-8")
    monkeypatch.setenv("LG_TEST_LS", "http://127.0.0.1:9")
    monkeypatch.setenv("LABELGATE_WEBHOOK_SECRET", SECRET)
    calls: list[tuple[int | None, tuple[int, ...]]] = []
    monkeypatch.setattr(monitor_ls, "run_label_studio_pass",
                        lambda config, project=None, *, hints=None, send_alerts=True:
                        calls.append((project, tuple(sorted(hints.tasks)) if hints else ())) or {})
    receiver, base = webhook_receiver(None, 0.0, None, "LABELGATE_WEBHOOK_SECRET", monitor)
    assert base == "http://127.0.0.1:9"
    headers = {"x-labelgate-secret": SECRET}
    for project, task in ((7, 3), (7, 4), (8, 5)):
        status, answer = receiver.receive(headers, _created(project, task, 10 * task), now=0.0)
        assert status == 202 and answer["queued"] == (project == 7)
    receiver.tick(now=100.0, flush=True)
    assert calls == [(7, (3, 4))]

    (tmp_path / "drop.yaml").write_text("monitor:\n  source: {path: incoming}\n", encoding="utf-8")
    with pytest.raises(ValueError, match="not label_studio"):
        webhook_receiver(None, 0.0, None, "LABELGATE_WEBHOOK_SECRET", tmp_path / "drop.yaml")
    with pytest.raises(ValueError, match="give --config .* and / or --monitor"):
        webhook_receiver(None, 0.0, None, "LABELGATE_WEBHOOK_SECRET", None)
    (tmp_path / "gate.yaml").write_text("batch: {format: label_studio, control: sentiment, url_env: LG_OTHER_LS}\n",
                                        encoding="utf-8")
    monkeypatch.setenv("LG_OTHER_LS", "http://127.0.0.1:10")
    with pytest.raises(ValueError, match="name different Label Studio servers"):
        webhook_receiver(tmp_path / "gate.yaml", 0.0, None, "LABELGATE_WEBHOOK_SECRET", monitor)
