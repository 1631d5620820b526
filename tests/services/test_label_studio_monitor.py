"""The monitor's Label Studio source against a real Label Studio 1.23.2 server: incremental passes, updates that
replace, deletions (one by one, in bulk from the data manager, a whole task, an annotation turned cancelled) that
remove, and passes triggered by real webhook deliveries; after every pass the monitor's cumulative statistics equal a
from-scratch computation (``lg.read_label_studio`` and the core metrics) on the project's current annotations.

Uses the ``label_studio_server`` fixture (tests/services/conftest.py): skips, saying why, where no server can be
started.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import labelgate as lg
from labelgate.errors import InputError
from labelgate.monitor import Monitor, monitor_config_from_dict
from labelgate.monitor.label_studio import hints_from_event, run_label_studio_pass
from tests.conftest import wait_for
from tests.monitor.test_incremental import assert_close, core_expected

CONFIG = ('<View><Text name="text" value="$text"/>'
          '<Choices name="sentiment" toName="text" choice="single"><Choice value="neg"/><Choice value="neu"/>'
          '<Choice value="pos"/></Choices><Rating name="stars" toName="text" maxRating="5"/></View>')
SENTIMENT = ["neg", "neu", "pos"]
CROWD = [f"crowd{k}" for k in range(5)]
EXPERTS = ["expert0", "expert1"]


def results(label: str, stars: int | None) -> list[dict[str, Any]]:
    out = [{"from_name": "sentiment", "to_name": "text", "type": "choices", "value": {"choices": [label]}}]
    if stars is not None:
        out.append({"from_name": "stars", "to_name": "text", "type": "rating", "value": {"rating": stars}})
    return out


class Api:
    """The server's REST API as an owner: legacy tokens enabled, annotator users, projects, annotations."""

    def __init__(self, info: dict[str, str]) -> None:
        import httpx

        self.url = info["url"].rstrip("/")
        session = httpx.Client(base_url=self.url, timeout=60)
        session.get("/user/login/")
        session.post("/user/login/", data={"email": info["user"], "password": info["password"],
                                           "csrfmiddlewaretoken": session.cookies.get("csrftoken", "")},
                     headers={"Referer": f"{self.url}/user/login/"})
        enabled = session.post("/api/jwt/settings", json={"legacy_api_tokens_enabled": True, "api_tokens_enabled": True},
                               headers={"X-CSRFToken": session.cookies.get("csrftoken", ""), "Referer": self.url})
        assert enabled.status_code == 200, enabled.text
        session.close()
        self.token = info["token"]
        self.http = httpx.Client(base_url=self.url, timeout=60, headers={"Authorization": f"Token {self.token}"})

    def call(self, method: str, route: str, status: int, **kwargs: Any) -> Any:
        answer = self.http.request(method, route, **kwargs)
        assert answer.status_code == status, f"{method} {route}: {answer.status_code} {answer.text[:300]}"
        return answer.json() if answer.content else None

    def user(self, name: str) -> int:
        email = f"{name}@example.com"
        known = {u["email"]: u["id"] for u in self.call("GET", "/api/users", 200)}
        if email in known:
            return int(known[email])
        return int(self.call("POST", "/api/users/", 201, json={"email": email, "username": name,
                                                                "password": "annotator-password"})["id"])

    def annotate(self, task: int, user: int, label: str, stars: int | None) -> int:
        body = {"result": results(label, stars), "completed_by": user}
        return int(self.call("POST", f"/api/tasks/{task}/annotations", 201, json=body)["id"])


@pytest.fixture(scope="module")
def api(label_studio_server: dict[str, str]) -> Api:
    return Api(label_studio_server)


class Receiver:
    """A local webhook receiver that records every delivery's JSON body."""

    def __init__(self) -> None:
        bodies: list[dict[str, Any]] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                bodies.append(json.loads(self.rfile.read(length) or b"{}"))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.bodies = bodies
        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/labelgate"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, action: str, timeout: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [b for b in self.bodies if b.get("action") == action]
            if found:
                return found[-1]
            time.sleep(0.05)
        raise AssertionError(f"no {action} delivery within {timeout} s (got {[b.get('action') for b in self.bodies]})")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    yield found
    found.server.shutdown()


def imported_project(api: Api, tasks: list[dict[str, Any]], attempts: int = 3) -> int:
    """A new project holding ``tasks`` with every annotation listed by the API. The test server (SQLite) has been
    seen to answer 201 to an import made while another test imported, with the tasks created and none of their
    annotations (never listed however long one waits): such a project is left and the import made again."""
    imported = sum(len(t["annotations"]) for t in tasks)
    for attempt in range(attempts):
        pid = int(api.call("POST", "/api/projects", 201, json={"title": "monitor", "label_config": CONFIG})["id"])
        api.call("POST", f"/api/projects/{pid}/import", 201, json=tasks)
        try:
            wait_for(lambda pid=pid: len(annotations(api, pid)) == imported, timeout=120, interval=0.5,
                     what="the imported annotations listed by the API")
            return pid
        except TimeoutError:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


@pytest.fixture
def project(api: Api, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A project of 24 tasks: five crowd annotators (two to four per task) and two experts (the trusted pool, named by
    e-mail and by id) on half of them; labels drawn around a per-task truth (seeded); imported in one request."""
    rng = np.random.default_rng(15)
    users = {name: api.user(name) for name in [*CROWD, *EXPERTS]}
    tasks = []
    for k in range(24):
        truth = int(rng.integers(0, 3))
        raters = [CROWD[j] for j in rng.choice(len(CROWD), size=int(rng.integers(2, 5)), replace=False)]
        raters += EXPERTS if k % 2 == 0 else []
        made = []
        for name in raters:
            code = truth if rng.random() < (0.9 if name in EXPERTS else 0.7) else int(rng.integers(0, 3))
            stars = 1 + 2 * code if rng.random() < 0.8 else None  # some annotations leave the rating out
            made.append({"result": results(SENTIMENT[code], stars), "completed_by": users[name]})
        tasks.append({"data": {"text": f"text {k}"}, "annotations": made})
    pid = imported_project(api, tasks)
    ids = [t["id"] for t in api.call("GET", "/api/tasks", 200, params={"project": pid, "page_size": 100,
                                                                       "fields": "task_only"})["tasks"]]
    monkeypatch.setenv("LG_TEST_LS_URL", api.url)
    monkeypatch.setenv("LG_TEST_LS_TOKEN", api.token)
    trusted: list[str | int] = [f"{EXPERTS[0]}@example.com", users[EXPERTS[1]]]
    data = {
        "store": {"url": f"sqlite:///{tmp_path / 'results.db'}"},
        "columns": {"timestamp": "updated_at"},  # a judgement's time: its annotation's updated_at
        "questions": [{"name": "sentiment", "label_column": "sentiment", "categories": SENTIMENT},
                      {"name": "stars", "label_column": "stars", "level": "ordinal", "categories": [1, 2, 3, 4, 5]}],
        "monitor": {"source": {"kind": "label_studio", "url_env": "LG_TEST_LS_URL", "token_env": "LG_TEST_LS_TOKEN",
                               "project": pid, "trusted": trusted},
                    "raters": {"min_pair_items": 2, "min_shared_items": 2}},
    }
    return {"id": pid, "tasks": sorted(ids), "users": users, "cfg": monitor_config_from_dict(data), "data": data,
            "trusted": trusted}


def annotations(api: Api, pid: int) -> list[dict[str, Any]]:
    """Every annotation of the project (with its task id)."""
    tasks = api.call("GET", "/api/tasks", 200, params={"project": pid, "page_size": 1000, "fields": "all"})["tasks"]
    return [a for t in tasks for a in t["annotations"]]


def assert_from_scratch(api: Api, project: dict[str, Any], summary: dict[str, Any]) -> None:
    """Every cumulative metric of the pass equals the core's on ``lg.read_label_studio`` of the project now."""
    for question, control, categories, level in (("sentiment", "sentiment", SENTIMENT, "nominal"),
                                                 ("stars", "stars", [1, 2, 3, 4, 5], "ordinal")):
        table = lg.read_label_studio(f"{api.url}/projects/{project['id']}", control, project["trusted"],
                                     token_env="LG_TEST_LS_TOKEN")
        expected = core_expected([table[["item_id", "rater_id", "label", "pool"]]], categories, level)
        cumulative = summary["questions"][question]["cumulative"]
        for metric, value in expected["metrics"].items():
            assert_close(cumulative[metric]["value"], value, f"{question} {metric}")


def counts(summary: dict[str, Any], question: str = "sentiment") -> tuple[int, int, int]:
    q = summary["questions"][question]
    return q["n_new"], q.get("n_replaced", 0), q.get("n_removed", 0)  # absent when nothing was merged


def test_incremental_passes_replace_updates_and_remove_deletions(api: Api, project: dict[str, Any]) -> None:
    pid, tasks, users, cfg = project["id"], project["tasks"], project["users"], project["cfg"]
    first = Monitor(cfg).run_pass(send_alerts=False)
    assert first["n_new"] > 0
    assert_from_scratch(api, project, first)
    crowd_ids = {users[u] for u in CROWD}
    stamps = [a["updated_at"] for a in annotations(api, pid) if a["completed_by"] in crowd_ids]  # the crowd's span
    window = first["questions"]["sentiment"]["cumulative"]["spa"]
    assert (window["window_start"], window["window_end"]) == (min(stamps).replace("Z", "+00:00"),
                                                              max(stamps).replace("Z", "+00:00"))
    assert counts(Monitor(cfg).run_pass(send_alerts=False)) == (0, 0, 0)  # nothing changed: nothing moves

    # more annotations; one relabelled; one deleted; one turned cancelled (skipped)
    done = {(a["task"], a["completed_by"]) for a in annotations(api, pid)}
    fresh = [(t, users[u]) for t in tasks[:8] for u in CROWD if (t, users[u]) not in done][:4]
    for task, user in fresh:
        api.annotate(task, user, "pos", 5)
    current = [a for a in annotations(api, pid) if a["result"]]
    updated, deleted, cancelled = [a for a in current if a["completed_by"] in crowd_ids][-3:]
    label = updated["result"][0]["value"]["choices"][0]
    api.call("PATCH", f"/api/annotations/{updated['id']}", 200,
             json={"result": results(SENTIMENT[(SENTIMENT.index(label) + 1) % 3], 2)})
    api.call("DELETE", f"/api/annotations/{deleted['id']}", 204)
    api.call("PATCH", f"/api/annotations/{cancelled['id']}", 200, json={"was_cancelled": True, "result": []})
    second = Monitor(cfg).run_pass(send_alerts=False)
    new, replaced, removed = counts(second)
    assert (new, replaced, removed) == (4, 1, 2)
    assert_from_scratch(api, project, second)

    # deleted without moving any task's updated_at: annotations in bulk from the data manager, and a whole task
    bulk_task, gone_task = tasks[10], tasks[11]
    api.call("POST", "/api/dm/actions", 200, params={"id": "delete_tasks_annotations", "project": pid},
             json={"selectedItems": {"all": False, "included": [bulk_task]}})
    api.call("DELETE", f"/api/tasks/{gone_task}", 204)
    third = Monitor(cfg).run_pass(send_alerts=False)
    assert counts(third)[2] > 0
    assert_from_scratch(api, project, third)


def test_webhook_deliveries_trigger_passes(api: Api, project: dict[str, Any], receiver: Receiver) -> None:
    """Real deliveries of ANNOTATION_UPDATED and TASKS_DELETED become hints; a deleted task, which no task listing
    shows, is removed by the pass its event triggers (and not by a plain pass without reconciliation)."""
    data = project["data"]
    data["monitor"]["source"]["reconcile_every"] = 0  # deletions are found only when an event asks for it
    pid, cfg = project["id"], monitor_config_from_dict(data)
    api.call("POST", "/api/webhooks/", 201, json={
        "project": pid, "url": receiver.url, "send_payload": True, "send_for_all_actions": False,
        "actions": ["ANNOTATION_UPDATED", "TASKS_DELETED"]})
    assert counts(run_label_studio_pass(cfg, pid, send_alerts=False))[0] > 0
    crowd_ids = {project["users"][u] for u in CROWD}
    target = next(a for a in annotations(api, pid) if a["result"] and a["completed_by"] in crowd_ids)
    label = target["result"][0]["value"]["choices"][0]
    api.call("PATCH", f"/api/annotations/{target['id']}", 200,
             json={"result": results(SENTIMENT[(SENTIMENT.index(label) + 1) % 3], 2)})
    hints = hints_from_event(receiver.wait_for("ANNOTATION_UPDATED"))
    assert hints.tasks == {target["task"]} and not hints.reconcile
    summary = run_label_studio_pass(cfg, pid, hints=hints, send_alerts=False)
    assert counts(summary) == (0, 1, 0)
    assert_from_scratch(api, project, summary)

    gone = target["task"]
    api.call("DELETE", f"/api/tasks/{gone}", 204)
    hints = hints_from_event(receiver.wait_for("TASKS_DELETED"))
    assert hints.tasks == {gone} and hints.reconcile
    quiet = Monitor(cfg).run_pass(send_alerts=False)  # a deleted task moves no updated_at: not seen without the event
    assert counts(quiet)[2] == 0
    summary = run_label_studio_pass(cfg, pid, hints=hints, send_alerts=False)
    assert counts(summary)[2] > 0
    assert_from_scratch(api, project, summary)


def test_faults_are_errors_naming_the_cause(project: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Another project's event is refused; a wrong token and an unset server variable fail the pass with a message
    naming the cause, and each failed pass is recorded as an error (never an empty ok pass)."""
    from labelgate.monitor.engine import count_passes

    cfg = project["cfg"]  # the server URL and the token are read from the environment at each pass
    with pytest.raises(InputError, match="reads project"):
        run_label_studio_pass(cfg, project["id"] + 1000, send_alerts=False)
    # a question that contradicts the labeling config: a Rating without a stated level, choices of another project
    for question, message in (({"name": "stars", "label_column": "stars", "categories": [1, 2, 3, 4, 5]},
                               "Question 'stars' states no level, but control 'stars' .* is a Rating"),
                              ({"name": "stars", "label_column": "sentiment", "categories": ["bad", "good"]},
                               "lists the categories \\['bad', 'good'\\], but control 'sentiment'")):
        data = {**project["data"], "questions": [question]}
        with pytest.raises(InputError, match=message):
            Monitor(monitor_config_from_dict(data)).run_pass(send_alerts=False)
    monkeypatch.setenv("LG_TEST_LS_TOKEN", "wrong-token")
    with pytest.raises(InputError, match="401"):
        Monitor(cfg).run_pass(send_alerts=False)
    monkeypatch.delenv("LG_TEST_LS_URL")
    with pytest.raises(InputError, match="LG_TEST_LS_URL"):
        Monitor(cfg).run_pass(send_alerts=False)
    assert count_passes(cfg, status="error") == 4


def second_annotation(api: Api, project: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """A crowd annotation whose annotator annotates its task again with another label (the second one counts), and
    that other label."""
    crowd_ids = {project["users"][u] for u in CROWD}
    first = next(a for a in annotations(api, project["id"]) if a["result"] and a["completed_by"] in crowd_ids
                 and a["result"][0]["value"]["choices"][0] != "pos")
    return first, "pos"


def test_a_deleted_second_annotation_of_an_annotator_is_seen_by_the_next_pass(api: Api,
                                                                               project: dict[str, Any]) -> None:
    """An annotator annotates a task twice; the second annotation counts; deleting it (its annotator keeps the first
    one, so the task's annotators do not change) moves the task's updated_at in Label Studio 1.23.2: the next plain
    pass, without any reconciliation, restates the task and the first annotation counts again."""
    data = project["data"]
    data["monitor"]["source"]["reconcile_every"] = 0
    cfg = monitor_config_from_dict(data)
    Monitor(cfg).run_pass(send_alerts=False)
    first, label = second_annotation(api, project)
    second = api.annotate(first["task"], first["completed_by"], label, 5)
    assert counts(Monitor(cfg).run_pass(send_alerts=False)) == (0, 1, 0)  # the second replaces the first
    api.call("DELETE", f"/api/annotations/{second}", 204)
    after = Monitor(cfg).run_pass(send_alerts=False)
    assert counts(after) == (0, 1, 0)  # the first annotation's label again: a replacement, not a removal
    assert_from_scratch(api, project, after)


SECRET = "monitor-test-secret"


def test_the_webhook_receiver_runs_monitor_passes_on_real_deliveries(api: Api, project: dict[str, Any]) -> None:
    """Label Studio posts its webhooks to LabelGate's receiver (registered through the API, with the shared secret);
    the receiver's monitor listener runs a pass per quiet period; once every delivery is handed over, the last pass's
    statistics equal a from-scratch computation on the project's current annotations."""
    from labelgate.flows.label_studio_webhook import ROUTE, WebhookReceiver, monitor_pass
    from tests.conftest import wait_for

    data = project["data"]
    data["monitor"]["source"]["reconcile_every"] = 0  # deletions are looked for only when a delivery asks for it
    pid, cfg = project["id"], monitor_config_from_dict(data)
    assert counts(Monitor(cfg).run_pass(send_alerts=False))[0] > 0
    passes: list[tuple[Any, dict[str, Any]]] = []
    receiver = WebhookReceiver(SECRET, quiet_seconds=1.0, projects=[pid],
                               listeners=[monitor_pass(cfg, on_summary=lambda b, s: passes.append((b, s)),
                                                       send_alerts=False)])
    stop, port = threading.Event(), []
    serving = threading.Thread(target=receiver.serve, args=("127.0.0.1", 0, stop),
                               kwargs={"tick_seconds": 0.2, "on_started": port.append}, daemon=True)
    serving.start()
    try:
        wait_for(lambda: port, timeout=60, interval=0.05, what="the receiver listening")
        api.call("POST", "/api/webhooks/", 201, json={
            "project": pid, "url": f"http://127.0.0.1:{port[0]}{ROUTE}", "send_payload": True,
            "send_for_all_actions": False, "headers": {"X-LabelGate-Secret": SECRET},
            "actions": ["ANNOTATION_CREATED", "ANNOTATION_UPDATED", "ANNOTATIONS_DELETED"]})

        def handed_over(n: int) -> bool:  # every delivery received, and passed to a finished monitor pass
            return receiver.received == n and sum(sum(b.actions.values()) for b, _ in passes) == n

        crowd_ids = {project["users"][u] for u in CROWD}
        done = {(a["task"], a["completed_by"]) for a in annotations(api, pid)}
        task, user = next((t, project["users"][u]) for t in project["tasks"] for u in CROWD
                          if (t, project["users"][u]) not in done)
        api.annotate(task, user, "neg", 1)
        target = next(a for a in annotations(api, pid) if a["result"] and a["completed_by"] in crowd_ids
                      and a["task"] != task)
        label = target["result"][0]["value"]["choices"][0]
        api.call("PATCH", f"/api/annotations/{target['id']}", 200,
                 json={"result": results(SENTIMENT[(SENTIMENT.index(label) + 1) % 3], 4)})
        wait_for(lambda: handed_over(2), timeout=120, interval=0.1, what="two deliveries and their monitor pass")
        assert {task, target["task"]} <= {t for b, _ in passes for t in b.task_ids}
        assert_from_scratch(api, project, passes[-1][1])

        first, other = second_annotation(api, project)
        second = api.annotate(first["task"], first["completed_by"], other, 5)
        wait_for(lambda: handed_over(3), timeout=120, interval=0.1, what="the second annotation's pass")
        api.call("DELETE", f"/api/annotations/{second}", 204)
        wait_for(lambda: handed_over(4), timeout=120, interval=0.1, what="the deletion's pass")
        batch, summary = passes[-1]
        assert batch.deleted_annotations == (second,) and counts(summary) == (0, 1, 0)
        assert_from_scratch(api, project, summary)
        assert receiver.refused == 0
    finally:
        stop.set()
        serving.join(timeout=30)
