"""The Label Studio webhook receiver end to end: a real Label Studio 1.23.2 posts its webhooks to ``labelgate
label-studio-webhook``, which emits ``labelgate.batch.ready`` to a real Prefect server; the event's path reads exactly
the tasks that were annotated, and the served gate (``labelgate serve``) gates that batch and records its decision
under the event's batch id. (The receiver without a server: tests/flows/test_label_studio_webhook.py; its monitor
listener against the same server: tests/services/test_label_studio_monitor.py.)
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
from labelgate.pipeline.store import ResultsStore
from tests.conftest import wait_for
from tests.flows.test_label_studio_webhook import SECRET, _created
from tests.gate.test_drop_folder import SERVE_APP
from tests.services.conftest import stop_process_group
from tests.services.test_label_studio import Server, _results
from tests.services.test_prefect_events import deployment_status


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
