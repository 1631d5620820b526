"""A Label Studio NER project (Labels), a detection project (RectangleLabels) and a multi-label project (Choices
choice="multiple") on a real Label Studio server, gated end to end: a crowd drawn like the trusted annotators is
accepted, a crowd that misses half of the entities / boxes / tags is rejected. The readers' rules (an empty result is
"marked nothing", a cancelled annotation is no judgement) are checked on the server's own answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import labelgate as lg
from tests.gate import drawn
from tests.services.test_label_studio import Server, legacy, server  # noqa: F401 (fixtures)

BUILD = {"sets": drawn.sets, "spans": drawn.spans, "boxes": drawn.boxes}
SIZES = {"sets": {"n_items": 80}, "spans": {"n_docs": 30}, "boxes": {"n_images": 40}}


def _project(ls: Server, kind: str, frame: pd.DataFrame, title: str) -> tuple[int, list[int]]:
    """A project holding ``frame``'s annotations, each by its rater's user; the trusted users' ids."""
    users = {rater: ls.user(f"{kind}-{rater}") for rater in frame["rater_id"].unique()}
    tasks = [{"data": task["data"], "annotations": [
        {"result": a["result"], "completed_by": users[_rater(a["completed_by"])]} for a in task["annotations"]]}
        for task in drawn.label_studio_tasks(frame, kind, cancelled=False)]
    project = ls.project(title, drawn.LS_CONFIGS[kind])
    imported = ls.api.post(f"/api/projects/{project}/import", json=tasks)
    assert imported.status_code == 201, imported.text
    return project, sorted(users[r] for r in users if str(r).startswith("t"))


def _rater(user: int) -> str:
    return f"{'t' if user < 200 else 'c'}{user % 100}"


def _config(tmp_path: Path, kind: str, trusted: list[int]) -> dict[str, Any]:
    return {"batch": {"format": "label_studio", "control": drawn.LS_CONTROLS[kind], "trusted": trusted},
            "questions": [{"name": kind}],  # its kind (spans, boxes) or level (set) comes from the control
            "gates": [{"type": "normalized_cross_kappa", "min_value": 0.75}, {"type": "irr_baseline", "tolerance": 0.1}],
            "interval": {"n_boot": 200, "diagnose_n_boot": 50},
            "coverage": {"min_common_items": 10},
            "store": {"url": f"sqlite:///{(tmp_path / 'results.db').as_posix()}"},
            "reports": {"dir": str(tmp_path / "reports")}}


@pytest.mark.parametrize("kind", ["spans", "boxes", "sets"])
def test_a_project_of_each_kind_is_gated_end_to_end(legacy: Server, tmp_path: Path, kind: str) -> None:  # noqa: F811
    from labelgate.gate import run
    from labelgate.gate.label_studio import META_KEY

    decisions = {}
    for name, miss, seed in (("good", 0.0, 31), ("bad", 0.5, 32)):
        frame = BUILD[kind](miss=miss, seed=seed, **SIZES[kind])
        project, trusted = _project(legacy, kind, frame, f"{kind} {name}")
        url = f"{legacy.url}/projects/{project}"
        table = lg.read_label_studio(url, control=drawn.LS_CONTROLS[kind], trusted=trusted)
        assert len(table) == len(frame)  # every span / box / set, and one row per annotation that marked nothing
        assert table.groupby("pool").size().to_dict() == frame.groupby("pool").size().to_dict()
        config = _config(tmp_path, kind, trusted)
        config["batch"]["write_back"] = True
        summary = run(config, batch=url, batch_id=f"ls-{kind}-{name}")
        decisions[name] = summary["decision"], summary["reasons"]
        # the decision is written into the project's tasks (not into units of them)
        assert summary["label_studio"]["tasks"] == frame["item_id"].nunique(), summary["label_studio"]
        assert legacy.tasks(project)[0]["meta"][META_KEY]["decision"] == summary["decision"]
        if name == "good" and kind != "sets":
            assert [row["label"] for row in summary["units"][kind]["labels"]]
    assert decisions["good"][0] == "ACCEPT", decisions["good"]
    assert decisions["bad"][0] == "REJECT", decisions["bad"]


def test_an_empty_result_is_marked_nothing_and_a_cancelled_annotation_no_judgement(
        legacy: Server) -> None:  # noqa: F811
    frame = drawn.spans(n_docs=2, seed=33)
    project, trusted = _project(legacy, "spans", frame, "spans posted")
    task = legacy.tasks(project)[0]
    text_length = len(task["data"]["text"])
    nobody = legacy.user("spans-nothing")
    legacy.annotate(task["id"], {"result": [], "completed_by": nobody})
    legacy.annotate(task["id"], {"result": [{"from_name": "label", "to_name": "text", "type": "labels",
                                             "value": {"start": 0, "end": 4, "labels": ["PER"]}}],
                                 "was_cancelled": True, "completed_by": legacy.user("spans-skipper")})
    table = lg.read_label_studio(f"{legacy.url}/projects/{project}", control="label", trusted=trusted)
    report = table.attrs["label_studio"]
    assert report["cancelled"] == 1
    mine = table[table["rater_id"] == str(nobody)]
    assert len(mine) == 1 and mine["start"].isna().all() and (mine["length"] == text_length).all()
    assert str(legacy.user("spans-skipper")) not in set(table["rater_id"])
