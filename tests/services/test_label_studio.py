"""The Label Studio connector against a real Label Studio 1.23.2 server (the JSON-export reader on a committed export:
tests/pipeline/test_label_studio_export.py).

The server tests use the ``label_studio_server`` fixture (tests/services/conftest.py): they skip, saying why, where
no server can be started. Crowds come from :mod:`labelgate.pipeline.synth` and are imported with their annotators
(one request per project); the annotations the reader must exclude or refuse (cancelled, draft, a label outside the
choices) are posted one by one, as an annotator's client would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import labelgate as lg
from labelgate.errors import InputError, Reason
from tests.conftest import wait_for
from tests.pipeline.test_label_studio_export import CONFIG, STARS


def _results(label: Any, stars: bool = True) -> list[dict[str, Any]]:
    out = [{"from_name": "sentiment", "to_name": "text", "type": "choices", "value": {"choices": [label]}}]
    if stars:
        out.append({"from_name": "stars", "to_name": "text", "type": "rating", "value": {"rating": STARS.get(label, 2)}})
    return out


class Server:
    """The test server through its REST API (legacy token enabled, a personal access token, annotator users)."""

    def __init__(self, info: dict[str, str]) -> None:
        import httpx

        self.url = info["url"].rstrip("/")
        session = httpx.Client(base_url=self.url, timeout=60, follow_redirects=False)
        session.get("/user/login/")
        session.post("/user/login/", data={"email": info["user"], "password": info["password"],
                                           "csrfmiddlewaretoken": session.cookies.get("csrftoken", "")},
                     headers={"Referer": f"{self.url}/user/login/"})
        headers = {"X-CSRFToken": session.cookies.get("csrftoken", ""), "Referer": self.url}
        # Legacy tokens are off per organisation since Label Studio 1.17 until an owner enables them.
        enabled = session.post("/api/jwt/settings", json={"legacy_api_tokens_enabled": True,
                                                          "api_tokens_enabled": True}, headers=headers)
        assert enabled.status_code == 200, enabled.text
        self.legacy = info["token"]
        self.pat = self._personal_token(session, headers, info.get("dir") or "")
        session.close()
        self.api = httpx.Client(base_url=self.url, timeout=60, headers={"Authorization": f"Token {self.legacy}"})
        self.users: dict[str, int] = {}

    @staticmethod
    def _personal_token(session: Any, headers: dict[str, str], folder: str) -> str:
        # A user has one personal access token, shown once: kept in the server's folder for the next test session.
        saved = Path(folder) / "labelgate-test-pat.txt" if folder else None
        if saved is not None and saved.is_file():
            return saved.read_text(encoding="utf-8").strip()
        answer = session.post("/api/token/", headers=headers)
        if answer.status_code == 409:
            pytest.skip("the test user already has a personal access token that was not saved in the server's folder "
                        "(LABELGATE_TEST_LS_DIR): restart the server with scripts/label_studio.sh")
        token = str(answer.json()["token"])
        if saved is not None:
            saved.write_text(token, encoding="utf-8")
        return token

    def user(self, name: str) -> int:
        if name not in self.users:
            email = f"{name}@example.com"
            known = {u["email"]: u["id"] for u in self.api.get("/api/users").json()}
            if email in known:
                self.users[name] = known[email]
            else:
                answer = self.api.post("/api/users/", json={"email": email, "username": name,
                                                            "password": "annotator-password"})
                assert answer.status_code == 201, answer.text
                self.users[name] = answer.json()["id"]
        return self.users[name]

    def project(self, title: str, config: str = CONFIG) -> int:
        answer = self.api.post("/api/projects", json={"title": title, "label_config": config})
        assert answer.status_code == 201, answer.text
        return int(answer.json()["id"])

    def tasks(self, project: int) -> list[dict[str, Any]]:
        return self.api.get("/api/tasks", params={"project": project, "fields": "all",
                                                  "page_size": 1000}).json()["tasks"]

    def annotate(self, task: int, body: dict[str, Any]) -> dict[str, Any]:
        answer = self.api.post(f"/api/tasks/{task}/annotations", json=body)
        assert answer.status_code == 201, answer.text
        return dict(answer.json())


@pytest.fixture(scope="module")
def server(label_studio_server: dict[str, str]) -> Server:
    return Server(label_studio_server)


@pytest.fixture
def legacy(server: Server, monkeypatch: pytest.MonkeyPatch) -> Server:
    monkeypatch.setenv("LABEL_STUDIO_TOKEN", server.legacy)
    return server


def _synthetic_project(server: Server, title: str, scenario: str) -> tuple[int, pd.DataFrame]:
    """A project whose tasks and annotations (with their annotators) are a synthetic crowd and trusted pool."""
    from labelgate.pipeline.synth import PoolSpec, Scenario, simulate

    spec = Scenario(n_items=150, difficulty=0.1,
                    pools=(PoolSpec("crowd", n_raters=6, ratings_per_item=(3, 3), noise=0.05),
                           PoolSpec("trusted", n_raters=4, ratings_per_item=(3, 3), noise=0.05)),
                    contentment=scenario == "contentment")
    judgements = simulate(spec, seed=3)
    users = {(p, r): server.user(f"{p}-{r}") for p, r in judgements[["pool", "rater_id"]].drop_duplicates()
             .itertuples(index=False)}
    tasks = [{"data": {"text": f"item {item}"},
              "annotations": [{"result": _results(row.label), "completed_by": users[(row.pool, row.rater_id)]}
                              for row in rows.itertuples()]}
             for item, rows in judgements.groupby("item_id", sort=True)]
    # the test server (SQLite) has been seen to answer 201 to an import made while another test imported, with the
    # tasks created and none of their annotations: such a project is left and the import made again
    for attempt in range(3):
        project = server.project(title)
        imported = server.api.post(f"/api/projects/{project}/import", json=tasks)
        assert imported.status_code == 201, imported.text
        try:
            wait_for(lambda project=project: sum(len(t["annotations"]) for t in server.tasks(project))
                     == len(judgements), timeout=120, interval=0.5, what="the imported annotations listed by the API")
            break
        except TimeoutError:
            if attempt == 2:
                raise
    judgements["ls_user"] = [users[(p, r)] for p, r in zip(judgements["pool"], judgements["rater_id"], strict=True)]
    return project, judgements


def _gate_config(tmp_path: Path, trusted: Any) -> dict[str, Any]:
    return {"batch": {"format": "label_studio", "control": "sentiment", "trusted": trusted},
            "questions": [{"name": "label", "level": "nominal", "categories": ["neg", "neu", "pos"]}],
            # 150 tasks give wide intervals: the IRR baseline's tolerance is 0.2 (the demo's 0.1 needs more items)
            "gates": [{"type": "normalized_cross_kappa", "min_value": 0.8}, {"type": "irr_baseline", "tolerance": 0.2}],
            "interval": {"n_boot": 300, "diagnose_n_boot": 50},
            "store": {"url": f"sqlite:///{(tmp_path / 'results.db').as_posix()}"},
            "reports": {"dir": str(tmp_path / "reports")}}


@pytest.mark.parametrize(("scenario", "expected"), [("good", "ACCEPT"), ("contentment", "REJECT")])
def test_gate_a_label_studio_project(legacy: Server, tmp_path: Path, scenario: str, expected: str) -> None:
    from labelgate.gate import run
    from labelgate.gate.label_studio import META_KEY, write_back

    project, judgements = _synthetic_project(legacy, f"gate {scenario}", scenario)
    url = f"{legacy.url}/projects/{project}"
    trusted_ids = sorted(judgements.loc[judgements["pool"] == "trusted", "ls_user"].unique().tolist())
    table = lg.read_label_studio(url, control="sentiment", trusted=trusted_ids)
    assert len(table) == len(judgements)
    assert table.groupby("pool").size().to_dict() == judgements.groupby("pool").size().to_dict()
    assert table.attrs["label_studio"]["categories"] == ["neg", "neu", "pos"]
    stars = lg.read_label_studio(url, control="stars", trusted=trusted_ids)
    assert stars.attrs["label_studio"]["level"] == "ordinal" and set(stars["label"]) <= {1, 3, 5}

    # the project has two controls: one configuration, one run decides both questions
    config = _gate_config(tmp_path, trusted_ids)
    config["batch"]["control"] = ["sentiment", "stars"]
    config["questions"] = [{"name": "sentiment", "label_column": "sentiment"},  # nominal, as the config's Choices
                           {"name": "stars", "label_column": "stars", "level": "ordinal"}]
    summary = run(config, batch=url, batch_id=f"ls-{scenario}")
    assert summary["decision"] == expected, summary["reasons"]
    assert set(summary["metrics"]) == {"sentiment", "stars"}

    written = write_back(summary, url=url, task_ids=table["item_id"].unique())
    assert written == table["item_id"].nunique()
    task = legacy.api.get(f"/api/tasks/{table['item_id'].iloc[0]}").json()
    assert task["meta"][META_KEY]["decision"] == expected
    assert set(task["meta"][META_KEY]["metrics"]) == {"sentiment", "stars"}
    assert task["meta"][META_KEY]["run_id"] == summary["run_id"]
    # the annotations are untouched (the route only updates meta)
    assert len(task["annotations"]) == (table["item_id"] == table["item_id"].iloc[0]).sum()


def test_a_configured_project_is_gated_and_the_decision_written_back(legacy: Server, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The config names the server (url_env) and the project: no file, no URL on the command line; the gate writes
    its decision into the tasks' meta by itself (``write_back: true``)."""
    from labelgate.gate import run
    from labelgate.gate.label_studio import META_KEY

    project, judgements = _synthetic_project(legacy, "configured", "contentment")
    trusted_ids = sorted(judgements.loc[judgements["pool"] == "trusted", "ls_user"].unique().tolist())
    monkeypatch.setenv("LG_TEST_LS_URL", legacy.url)
    config = _gate_config(tmp_path, trusted_ids)
    config["batch"].update(url_env="LG_TEST_LS_URL", project=project, write_back=True)
    summary = run(config, batch_id="ls-configured")
    assert summary["decision"] == "REJECT", summary["reasons"]
    assert summary["label_studio"]["tasks"] == judgements["item_id"].nunique()
    task = legacy.tasks(project)[0]
    assert task["meta"][META_KEY]["decision"] == "REJECT" and task["meta"][META_KEY]["run_id"] == summary["run_id"]


@pytest.fixture(scope="module")
def small_project(server: Server) -> dict[str, Any]:
    """Three tasks annotated one by one: trusted (ground truth) and crowd annotations, a skip, a draft."""
    project = server.project("small project")
    server.api.post(f"/api/projects/{project}/import", json=[{"text": t} for t in ("good", "bad", "so-so")])
    tasks = [t["id"] for t in server.tasks(project)]
    expert, ann1, ann2 = server.user("expert"), server.user("ann1"), server.user("ann2")
    ids = {}
    for task, (truth, a, b) in zip(tasks, [("pos", "pos", "neu"), ("neg", "neg", "neg"), ("neu", "pos", "neu")],
                                   strict=True):
        ids[task] = [server.annotate(task, {"result": _results(truth), "completed_by": expert,
                                            "ground_truth": True})["id"],
                     server.annotate(task, {"result": _results(a), "completed_by": ann1})["id"],
                     server.annotate(task, {"result": _results(b, stars=False), "completed_by": ann2})["id"]]
    skipped = server.annotate(tasks[0], {"result": [], "was_cancelled": True, "completed_by": ann2})["id"]
    draft = server.api.post(f"/api/tasks/{tasks[1]}/drafts", json={"result": _results("pos")})
    assert draft.status_code == 201, draft.text
    return {"project": project, "tasks": tasks, "ids": ids, "skipped": skipped, "expert": expert}


def test_read_with_both_token_kinds(server: Server, small_project: dict[str, Any],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"{server.url}/projects/{small_project['project']}"
    tables = []
    for token in (server.legacy, server.pat):
        monkeypatch.setenv("LS_TOKEN", token)
        tables.append(lg.read_label_studio(url, control="sentiment", trusted="ground_truth", token_env="LS_TOKEN"))
    legacy, pat = tables
    pd.testing.assert_frame_equal(legacy, pat)
    assert legacy.groupby("pool").size().to_dict() == {"crowd": 6, "trusted": 3}
    assert set(legacy.loc[legacy["pool"] == "trusted", "rater_id"]) == {str(small_project["expert"])}
    report = legacy.attrs["label_studio"]
    assert (report["cancelled"], report["drafts"], report["judgements"]) == (1, 1, 9)
    # the base URL with `project=` reads the same; the Rating control: ann2 never answered it
    stars = lg.read_label_studio(server.url, control="stars", project=small_project["project"],
                                 token_env="LS_TOKEN")
    assert stars.attrs["label_studio"]["without_answer"] == 3 and len(stars) == 6
    assert stars["label"].tolist() == [STARS[v] for v in legacy.loc[legacy["rater_id"] != str(
        server.users["ann2"]), "label"]]


def test_server_errors_are_input_errors(server: Server, small_project: dict[str, Any],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"{server.url}/projects/{small_project['project']}"
    monkeypatch.setenv("LABEL_STUDIO_TOKEN", "not-a-token")
    with pytest.raises(InputError, match="401") as bad:
        lg.read_label_studio(url, control="sentiment", trusted="ground_truth")
    assert bad.value.context["status"] == 401 and bad.value.code == Reason.UNREADABLE_INPUT
    monkeypatch.delenv("LABEL_STUDIO_TOKEN")
    with pytest.raises(InputError, match="LABEL_STUDIO_TOKEN") as unset:
        lg.read_label_studio(url, control="sentiment", trusted="ground_truth")
    assert unset.value.code == Reason.MISSING_SETTING
    monkeypatch.setenv("LABEL_STUDIO_TOKEN", server.legacy)
    with pytest.raises(InputError, match="404"):
        lg.read_label_studio(f"{server.url}/projects/987654", control="sentiment", trusted="ground_truth")
    with pytest.raises(InputError, match="no Choices / Rating / Number / Taxonomy / Labels / RectangleLabels control named 'mood'") as unknown:
        lg.read_label_studio(url, control="mood", trusted="ground_truth")
    assert unknown.value.context["project"].startswith(f"Label Studio project {small_project['project']}")


def test_a_label_outside_the_choices_names_the_annotation(legacy: Server) -> None:
    project = legacy.project("outside the choices")
    legacy.api.post(f"/api/projects/{project}/import", json=[{"text": "x"}])
    task = legacy.tasks(project)[0]["id"]
    annotation = legacy.annotate(task, {"result": _results("meh", stars=False)})["id"]
    with pytest.raises(InputError, match=f"annotation {annotation} \\(task {task}\\)") as outside:
        lg.read_label_studio(f"{legacy.url}/projects/{project}", control="sentiment", trusted="ground_truth")
    assert outside.value.code == Reason.UNKNOWN_CATEGORY and outside.value.context["control"] == "sentiment"


def test_a_time_range_on_the_server(server: Server, small_project: dict[str, Any],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The server narrows the tasks (data manager filter on the task's updated_at), the reader checks every
    annotation's time: the gate's batch is the crowd's work in the range with the trusted annotations of its tasks."""
    from datetime import datetime

    from labelgate.pipeline.sources.label_studio import Selection, iter_annotations

    monkeypatch.setenv("LABEL_STUDIO_TOKEN", server.legacy)
    url = f"{server.url}/projects/{small_project['project']}"
    whole = lg.read_label_studio(url, control="sentiment", trusted="ground_truth")
    second_task = small_project["tasks"][1]
    after = datetime.fromisoformat(whole.loc[whole["item_id"] == str(second_task), "updated_at"].min()
                                   .replace("Z", "+00:00"))
    stamps = whole["updated_at"].map(lambda s: datetime.fromisoformat(s.replace("Z", "+00:00")))
    expected = whole.loc[stamps >= after, "annotation_id"].tolist()
    batch = lg.read_label_studio(url, control="sentiment", selection=Selection(after=after, trusted_any_time=True))
    assert sorted(batch["item_id"].astype(int).unique()) == small_project["tasks"][1:]
    assert sorted(batch["annotation_id"]) == sorted(expected)  # the expert of tasks 2 and 3 came first: in range
    query = f"{url}?annotated_after={after.isoformat().replace('+00:00', 'Z')}"
    monitor = [a for page in iter_annotations(query, "sentiment") for a in page["annotation_id"]]
    assert sorted(monitor) == sorted(expected)
    assert lg.read_label_studio(url, control="sentiment", selection=Selection(before=after))["item_id"].tolist() == \
        [str(small_project["tasks"][0])] * 3


def test_a_batch_of_tasks_is_gated_and_flagged_annotators_written_back(legacy: Server, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The configuration selects some tasks of the project; a crowd annotator who guesses is flagged, and the tasks
    it annotated carry its flags in their meta, read back through the API; the others carry the decision only."""
    import numpy as np

    from labelgate.gate import run
    from labelgate.gate.label_studio import FLAGGED_KEY, META_KEY

    project, judgements = _synthetic_project(legacy, "spammer", "good")
    spammer = judgements.loc[judgements["pool"] == "crowd", "ls_user"].iloc[0]
    tasks = legacy.tasks(project)
    guesses = np.random.default_rng(5)
    for task in tasks:  # the spammer's annotations become guesses (updated through the API, as its client would)
        for annotation in task["annotations"]:
            if annotation["completed_by"] == spammer:
                label = ["neg", "neu", "pos"][int(guesses.integers(3))]
                assert legacy.api.patch(f"/api/annotations/{annotation['id']}",
                                        json={"result": _results(label)}).status_code == 200
    chosen = sorted(t["id"] for t in tasks)[:120]
    trusted_ids = sorted(judgements.loc[judgements["pool"] == "trusted", "ls_user"].unique().tolist())
    monkeypatch.setenv("LG_TEST_LS_URL", legacy.url)
    config = _gate_config(tmp_path, trusted_ids)
    config["batch"].update(url_env="LG_TEST_LS_URL", project=project, write_back=True, tasks=chosen)
    config["raters"] = {"low_agreement": "review"}
    config["interval"] = {"n_boot": 200, "diagnose_n_boot": 50}
    summary = run(config, batch_id="ls-spammer")
    flagged = {row["rater_id"] for row in summary["raters"]["flagged"]}
    assert str(spammer) in flagged, summary["raters"]
    assert summary["decision"] in ("REVIEW", "REJECT") and summary["label_studio"]["tasks"] == len(chosen)
    by_id = {t["id"]: t for t in legacy.tasks(project)}
    assert all(META_KEY not in (by_id[t]["meta"] or {}) for t in by_id if t not in chosen)
    for task_id in chosen:
        ours = by_id[task_id]["meta"][META_KEY]
        annotators = {str(a["completed_by"]) for a in by_id[task_id]["annotations"]}
        assert ours["decision"] == summary["decision"]
        assert set(ours.get(FLAGGED_KEY, {})) == flagged & annotators
    spammed = next(t for t in chosen if str(spammer) in {str(a["completed_by"]) for a in by_id[t]["annotations"]})
    evidence = by_id[spammed]["meta"][META_KEY][FLAGGED_KEY][str(spammer)]["questions"]["label"]
    assert "low_agreement" in evidence["flags"] and evidence["actions"] == {"low_agreement": "review"}
