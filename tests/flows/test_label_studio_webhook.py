"""The Label Studio webhook receiver without a server: deliveries parsed, verified and debounced, the receiver's
bounds, and the ``labelgate label-studio-webhook`` command's refusals and monitor passes. End to end (a real Label
Studio posting to the receiver, which emits ``labelgate.batch.ready`` to a real Prefect server):
tests/services/test_label_studio_webhook_events.py; the receiver's monitor listener against a real server:
tests/services/test_label_studio_monitor.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from labelgate.errors import InputError
from labelgate.gate import ls_webhook
from labelgate.gate.ls_webhook import Debouncer, ReadyBatch, parse_delivery

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
