"""The monitor on a real Label Studio server's NER project (``Labels``: ``kind: spans``) and multi-label project
(``Choices choice="multiple"``: ``level: set``): passes that create, relabel, empty, cancel and delete annotations and
delete a task; after every pass each cumulative metric equals the core's on ``lg.read_label_studio`` of the project as
it is now (spans expanded into units by ``Ratings.from_spans``, sets by ``Ratings.from_long(level="set")``).

Uses the ``label_studio_server`` fixture (tests/services/conftest.py): skips, saying why, where no server can be
started.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import labelgate as lg
from labelgate.errors import InputError
from labelgate.monitor import Monitor, monitor_config_from_dict
from tests.conftest import wait_for
from tests.gate import drawn
from tests.services.test_label_studio_monitor import Api, annotations, api, counts  # noqa: F401 (fixture)

SPAN_COLUMNS = {"item": "item_id", "rater": "rater_id", "start": "start", "end": "end", "label": "label",
                "length": "length"}


def _import(ls: Api, kind: str, frame: pd.DataFrame, title: str) -> tuple[int, list[int], dict[str, int]]:
    """A project holding ``frame``'s annotations, each by its rater's user: its id, the trusted users' ids, the users."""
    users = {str(r): ls.user(f"mon-{kind}-{r}") for r in frame["rater_id"].unique()}
    tasks = [{"data": task["data"], "annotations": [{"result": a["result"], "completed_by": users[_rater(a)]}
                                                     for a in task["annotations"]]}
             for task in drawn.label_studio_tasks(frame, kind, cancelled=False)]
    pid = int(ls.call("POST", "/api/projects", 201, json={"title": title, "label_config": drawn.LS_CONFIGS[kind]})["id"])
    ls.call("POST", f"/api/projects/{pid}/import", 201, json=tasks)
    imported = sum(len(t["annotations"]) for t in tasks)
    wait_for(lambda: len(annotations(ls, pid)) == imported, timeout=300, interval=0.5,
             what="the imported annotations listed by the API")
    return pid, sorted(users[r] for r in users if r.startswith("t")), users


def _rater(annotation: dict[str, Any]) -> str:
    user = int(annotation["completed_by"])
    return f"{'t' if user < 200 else 'c'}{user % 100}"


def _config(tmp_path: Path, ls: Api, pid: int, trusted: list[int], question: dict[str, Any],
            monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setenv("LG_TEST_LS_URL", ls.url)
    monkeypatch.setenv("LG_TEST_LS_TOKEN", ls.token)
    return {"store": {"url": f"sqlite:///{tmp_path / 'results.db'}"}, "columns": {"timestamp": "updated_at"},
            "questions": [question],
            "monitor": {"source": {"kind": "label_studio", "url_env": "LG_TEST_LS_URL", "token_env": "LG_TEST_LS_TOKEN",
                                   "project": pid, "trusted": trusted}, "n_boot": 20}}


def _expected(ls: Api, pid: int, control: str, trusted: list[int], build) -> dict[str, float | None]:
    table = lg.read_label_studio(f"{ls.url}/projects/{pid}", control, trusted, token_env="LG_TEST_LS_TOKEN")
    crowd, ref = (build(table.loc[table["pool"] == pool]) for pool in ("crowd", "trusted"))

    def value(est: Any) -> float | None:
        return None if np.isnan(est.value) else float(est.value)

    return {"spa": value(lg.spa(crowd)), "irr_crowd": value(lg.krippendorff_alpha(crowd)),
            "irr_trusted": value(lg.krippendorff_alpha(ref)), "cross_kappa": value(lg.cross_kappa(crowd, ref)),
            "normalized_cross_kappa": value(lg.normalized_cross_kappa(crowd, ref))}


def _assert_equal(summary: dict[str, Any], question: str, expected: dict[str, float | None]) -> None:
    cumulative = summary["questions"][question]["cumulative"]
    for metric, value in expected.items():
        got = cumulative[metric]["value"]
        if value is None:
            assert got is None, metric
        else:
            assert got == pytest.approx(value, rel=1e-9, abs=1e-9), metric


def _spans(table: pd.DataFrame) -> lg.Ratings:
    return lg.Ratings.from_spans(table, **SPAN_COLUMNS)


def test_an_ner_project_is_monitored_per_position(api: Api, tmp_path: Path,  # noqa: F811
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    frame = drawn.spans(n_docs=10, length=60, seed=41)
    pid, trusted, users = _import(api, "spans", frame, "monitor spans")
    cfg = monitor_config_from_dict(_config(tmp_path, api, pid, trusted, {"name": "ner", "kind": "spans",
                                                                          "label_column": "label"}, monkeypatch))
    first = Monitor(cfg).run_pass(send_alerts=False)
    assert first["n_new"] == sum(frame.groupby(["item_id", "rater_id"]).size().index.map(
        lambda key: 60) > 0) * 60  # every position of every annotated text, by every annotator of it
    _assert_equal(first, "ner", _expected(api, pid, "label", trusted, _spans))
    assert counts(Monitor(cfg).run_pass(send_alerts=False), "ner") == (0, 0, 0)  # nothing changed: nothing moves

    # a crowd span relabelled, a crowd annotation emptied (marked nothing), one deleted, one cancelled
    crowd_ids = {users[r] for r in users if r.startswith("c")}
    current = [a for a in annotations(api, pid) if a["result"] and a["completed_by"] in crowd_ids]
    relabelled, emptied, deleted, cancelled = current[:4]
    result = [dict(r, value=dict(r["value"])) for r in relabelled["result"]]
    first_label = result[0]["value"]["labels"][0]
    result[0]["value"]["labels"] = [next(x for x in drawn.SPAN_LABELS if x != first_label)]
    api.call("PATCH", f"/api/annotations/{relabelled['id']}", 200, json={"result": result})
    api.call("PATCH", f"/api/annotations/{emptied['id']}", 200, json={"result": []})
    api.call("DELETE", f"/api/annotations/{deleted['id']}", 204)
    api.call("PATCH", f"/api/annotations/{cancelled['id']}", 200, json={"was_cancelled": True, "result": []})
    second = Monitor(cfg).run_pass(send_alerts=False)
    _new, replaced, removed = counts(second, "ner")
    assert replaced > 0 and removed > 0  # relabelled and emptied positions replaced; the deleted ones' units removed
    _assert_equal(second, "ner", _expected(api, pid, "label", trusted, _spans))

    # a whole task deleted (no updated_at moves): found by the reconciliation, every unit of it removed
    gone = relabelled["task"]
    api.call("DELETE", f"/api/tasks/{gone}", 204)
    third = Monitor(cfg).run_pass(send_alerts=False)
    assert counts(third, "ner")[2] > 0
    _assert_equal(third, "ner", _expected(api, pid, "label", trusted, _spans))


def test_a_multi_label_project_is_monitored_as_sets(api: Api, tmp_path: Path,  # noqa: F811
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    frame = drawn.sets(n_items=30, seed=43)
    pid, trusted, users = _import(api, "sets", frame, "monitor sets")
    question = {"name": "topics", "label_column": "topics", "level": "set", "distance": "masi",
                "categories": list(drawn.TAGS)}
    cfg = monitor_config_from_dict(_config(tmp_path, api, pid, trusted, question, monkeypatch))

    def build(table: pd.DataFrame) -> lg.Ratings:
        return lg.Ratings.from_long(table, level="set", distance="masi")

    first = Monitor(cfg).run_pass(send_alerts=False)
    assert first["n_new"] == len(frame)
    _assert_equal(first, "topics", _expected(api, pid, "topics", trusted, build))
    crowd_ids = {users[r] for r in users if r.startswith("c")}
    changed = next(a for a in annotations(api, pid) if a["result"] and a["completed_by"] in crowd_ids)
    api.call("PATCH", f"/api/annotations/{changed['id']}", 200, json={"result": []})  # nothing applies: the empty set
    second = Monitor(cfg).run_pass(send_alerts=False)
    assert counts(second, "topics") == (0, 1, 0)
    _assert_equal(second, "topics", _expected(api, pid, "topics", trusted, build))
    # a span question over the Choices control: the pass fails naming the kind, not reading labels as spans
    wrong = _config(tmp_path / "wrong", api, pid, trusted, {"name": "topics", "label_column": "topics",
                                                           "kind": "spans"}, monkeypatch)
    (tmp_path / "wrong").mkdir()
    with pytest.raises(InputError, match="is 'kind: spans', but control 'topics'"):
        Monitor(monitor_config_from_dict(wrong)).run_pass(send_alerts=False)
