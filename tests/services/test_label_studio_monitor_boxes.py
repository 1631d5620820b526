"""The monitor on a real Label Studio server's detection project (``RectangleLabels``: ``kind: boxes``): passes that
relabel, move and delete boxes (a trusted box moved regroups the crowd's objects of its image), empty, cancel and
delete annotations and delete a task; after every pass each cumulative metric equals the gate's on
``lg.read_label_studio`` of the project as it is now (every image's boxes grouped into objects over both pools by
``labelgate.pipeline.units.expand``, then the core's metrics), and the stored boxes are exactly the project's.

Uses the ``label_studio_server`` fixture (tests/services/conftest.py): skips, saying why, where no server can be
started.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import labelgate as lg
from labelgate.monitor import Monitor, monitor_config_from_dict
from labelgate.pipeline.units import expand
from tests.gate import drawn
from tests.monitor.test_boxes import close, metrics
from tests.services.test_label_studio_monitor import Api, annotations, api, counts  # noqa: F401 (fixture)
from tests.services.test_label_studio_monitor_regions import _config, _import

QUESTION = {"name": "objects", "kind": "boxes", "label_column": "box"}


def _project_boxes(ls: Api, pid: int, trusted: list[int]) -> pd.DataFrame:
    """The project's boxes as the gate reads them (one row per box, one empty row per annotation that drew none)."""
    table = lg.read_label_studio(f"{ls.url}/projects/{pid}", "box", trusted, token_env="LG_TEST_LS_TOKEN")
    return table.rename(columns={"label": "box"})


def _assert_gates(summary: dict[str, Any], cfg: Any, table: pd.DataFrame, root: Path) -> None:
    """Every cumulative metric equals the gate's on ``table``; the monitor holds exactly its boxes."""
    _, crowd, ref, _ = expand(cfg, table[table["pool"] == "crowd"], table[table["pool"] == "trusted"])
    units = pd.concat([crowd, ref], ignore_index=True).rename(columns={"box": "label"})
    pools = lg.ratings_by_pool(units.astype({c: object for c in ("item_id", "rater_id", "label", "pool")}))
    cumulative = summary["questions"]["objects"]["cumulative"]
    for metric, expected in metrics(pools).items():
        close(cumulative[metric]["value"], expected, metric)
    with sqlite3.connect(root / "results.db") as conn:
        stored = conn.execute("select item_id, rater_id, x, y, width, height from labelgate_monitor_boxes").fetchall()
    project = [(str(r.item_id), str(r.rater_id), *(None if pd.isna(v) else float(v)
                                                  for v in (r.x, r.y, r.width, r.height)))
               for r in table.itertuples(index=False)]
    assert sorted(stored, key=repr) == sorted(project, key=repr)


def test_a_detection_project_is_monitored_per_object(api: Api, tmp_path: Path,  # noqa: F811
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    frame = drawn.boxes(n_images=12, seed=47)
    nothing = frame[frame["item_id"] == "img0"].drop_duplicates("rater_id").assign(  # an image nobody drew on
        item_id="blank", x=float("nan"), y=float("nan"), width=float("nan"), height=float("nan"), label=None)
    frame = pd.concat([frame, nothing], ignore_index=True)
    pid, trusted, users = _import(api, "boxes", frame, "monitor boxes")
    cfg = monitor_config_from_dict(_config(tmp_path, api, pid, trusted, QUESTION, monkeypatch))
    first = Monitor(cfg).run_pass(send_alerts=False)
    assert first["n_new"] > 0
    _assert_gates(first, cfg, _project_boxes(api, pid, trusted), tmp_path)
    assert counts(Monitor(cfg).run_pass(send_alerts=False), "objects") == (0, 0, 0)  # nothing changed

    # on distinct tasks: a crowd box relabelled, a trusted box moved off its object (the crowd's objects of that
    # image regrouped), a crowd box deleted from its annotation, a crowd annotation emptied (it drew nothing), one
    # cancelled (no judgement), one deleted
    crowd_ids = {users[r] for r in users if r.startswith("c")}
    drawn_on: dict[int, dict[str, Any]] = {}
    for a in annotations(api, pid):
        if len(a["result"]) >= 2 and a["completed_by"] in crowd_ids and a["task"] not in drawn_on:
            drawn_on[a["task"]] = a
    assert len(drawn_on) >= 5, "the drawn project has too few tasks with two crowd boxes"
    relabelled, shrunk, emptied, cancelled, deleted = list(drawn_on.values())[:5]
    expert = next(a for a in annotations(api, pid) if a["result"] and a["completed_by"] in set(trusted)
                  and a["task"] not in {x["task"] for x in (relabelled, shrunk, emptied, cancelled, deleted)})
    result = [dict(r, value=dict(r["value"])) for r in relabelled["result"]]
    label = result[0]["value"]["rectanglelabels"][0]
    result[0]["value"]["rectanglelabels"] = [next(x for x in ("car", "person", "bike") if x != label)]
    api.call("PATCH", f"/api/annotations/{relabelled['id']}", 200, json={"result": result})
    moved = [dict(r, value=dict(r["value"])) for r in expert["result"]]
    box = moved[0]["value"]
    box["y"] = min(box["y"] + 0.7 * box["height"], 99.0 - box["height"])  # below the IoU threshold of its object
    api.call("PATCH", f"/api/annotations/{expert['id']}", 200, json={"result": moved})
    api.call("PATCH", f"/api/annotations/{shrunk['id']}", 200, json={"result": shrunk["result"][1:]})
    api.call("PATCH", f"/api/annotations/{emptied['id']}", 200, json={"result": []})
    api.call("PATCH", f"/api/annotations/{cancelled['id']}", 200, json={"was_cancelled": True, "result": []})
    api.call("DELETE", f"/api/annotations/{deleted['id']}", 204)
    second = Monitor(cfg).run_pass(send_alerts=False)
    _new, replaced, removed = counts(second, "objects")
    assert replaced > 0 and removed > 0
    table = _project_boxes(api, pid, trusted)
    _assert_gates(second, cfg, table, tmp_path)
    assert not ((table["item_id"].astype(str) == str(cancelled["task"]))
                & (table["rater_id"].astype(str) == str(cancelled["completed_by"]))).any()  # no judgement
    assert counts(Monitor(cfg).run_pass(send_alerts=False), "objects") == (0, 0, 0)

    # whole tasks deleted (no updated_at moves): found by the reconciliation, every unit and box of them removed; one
    # of them an image nobody drew on (boxes stored, no unit: its raters are found among the stored boxes)
    blank = next(t["id"] for t in api.call("GET", "/api/tasks", 200, params={"project": pid, "page_size": 1000,
                                                                              "fields": "all"})["tasks"]
                 if t["data"]["image"].endswith("/blank.png"))
    api.call("DELETE", f"/api/tasks/{relabelled['task']}", 204)
    api.call("DELETE", f"/api/tasks/{blank}", 204)
    third = Monitor(cfg).run_pass(send_alerts=False)
    assert counts(third, "objects")[2] > 0
    _assert_gates(third, cfg, _project_boxes(api, pid, trusted), tmp_path)
