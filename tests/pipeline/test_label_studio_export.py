"""The Label Studio JSON-export reader on a committed export, the labeling config mapping, and a server that is down.

The tests against a real Label Studio server are in tests/services/test_label_studio.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import labelgate as lg
from labelgate.errors import InputError, Reason
from labelgate.pipeline.sources.label_studio import parse_control

DATA = Path(__file__).resolve().parents[1] / "data"
EXPORT = DATA / "label_studio_export.json"
#: The labeling config of the project that produced tests/data/label_studio_export.json (an export has no config).
CONFIG = ('<View><Text name="text" value="$text"/>'
          '<Choices name="sentiment" toName="text" choice="single"><Choice value="neg"/><Choice value="neu"/>'
          '<Choice value="pos"/></Choices><Rating name="stars" toName="text" maxRating="5"/></View>')
STARS = {"neg": 1, "neu": 3, "pos": 5}


def test_a_server_that_is_down(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on once the socket is closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("LABEL_STUDIO_TOKEN", "whatever")
    with pytest.raises(InputError, match="did not answer") as down:
        lg.read_label_studio(f"http://127.0.0.1:{port}/projects/1", control="sentiment", trusted="ground_truth")
    assert down.value.code == Reason.UNREADABLE_INPUT


def test_the_committed_export() -> None:
    table = lg.read_label_studio(EXPORT, control="sentiment", trusted="ground_truth", label_config=CONFIG)
    report = table.attrs["label_studio"]
    assert (report["tasks"], report["judgements"], report["cancelled"], report["drafts"]) == (3, 9, 1, 1)
    assert table.groupby("pool").size().to_dict() == {"crowd": 6, "trusted": 3}
    assert set(table["label"]) <= {"neg", "neu", "pos"}
    stars = lg.read_label_studio(EXPORT, control="stars", trusted="ground_truth", label_config=CONFIG)
    assert stars["label"].map(type).eq(int).all() and report["categories"] == ["neg", "neu", "pos"]


def test_the_export_needs_its_config_and_refuses_bad_labels(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="label_config"):
        lg.read_label_studio(EXPORT, control="sentiment", trusted="ground_truth")
    tasks = json.loads(EXPORT.read_text(encoding="utf-8"))
    annotation = next(a for a in tasks[0]["annotations"] if not a["was_cancelled"])
    annotation["result"][0]["value"]["choices"] = ["meh"]
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(tasks), encoding="utf-8")
    with pytest.raises(InputError, match=f"annotation {annotation['id']} ") as outside:
        lg.read_label_studio(broken, control="sentiment", trusted="ground_truth", label_config=CONFIG)
    assert outside.value.context["annotation"] == annotation["id"]


def test_the_labeling_config_mapping() -> None:
    assert parse_control(CONFIG, "sentiment").categories == ["neg", "neu", "pos"]
    number = '<View><Number name="score" toName="t"/></View>'
    assert parse_control(number, "score").level == "interval"
    taxonomy = ('<View><Taxonomy name="topic" toName="t"><Choice value="A"><Choice value="A1"/></Choice>'
                '<Choice value="B"/></Taxonomy></View>')
    assert parse_control(taxonomy, "topic").categories == ["A", "A / A1", "B"]
    multiple = '<View><Choices name="tags" toName="t" choice="multiple"><Choice value="x"/></Choices></View>'
    assert parse_control(multiple, "tags", "project 7").level == "set"  # each judgement is the set chosen
    with pytest.raises(InputError, match="not valid XML"):
        parse_control("<View>", "tags")
