"""The Label Studio reader on exports of the richer controls: a multi-choice Choices and a multi-select Taxonomy read
as sets, Labels as spans, RectangleLabels as boxes; an empty result is "marked nothing", a cancelled annotation is no
judgement. The gate decides on such exports end to end (tests/services/test_label_studio_regions.py: a real server)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import labelgate as lg
from labelgate.errors import InputError
from labelgate.pipeline.sources.label_studio import parse_control
from tests.gate import drawn

TRUSTED = [100, 101, 102, 103]


def _export(tmp_path: Path, frame: pd.DataFrame, kind: str, name: str = "export") -> tuple[Path, Path]:
    path, config = tmp_path / f"{name}.json", tmp_path / f"{kind}.xml"
    path.write_text(json.dumps(drawn.label_studio_tasks(frame, kind)), encoding="utf-8")
    config.write_text(drawn.LS_CONFIGS[kind], encoding="utf-8")
    return path, config


def _read(path: Path, config: Path, kind: str) -> pd.DataFrame:
    return lg.read_label_studio(path, control=drawn.LS_CONTROLS[kind], trusted=TRUSTED, label_config=config)


def test_labels_are_read_as_spans_with_the_texts_length(tmp_path: Path) -> None:
    frame = drawn.spans(n_docs=6, miss=0.7, seed=11)
    table = _read(*_export(tmp_path, frame, "spans"), "spans")
    assert list(table.columns[-3:]) == ["start", "end", "length"]
    report = table.attrs["label_studio"]
    assert report["cancelled"] == 6 and report["type"] == "Labels"
    assert len(table) == len(frame)  # one row per span, and one per annotation that marked nothing
    nothing = table[table["start"].isna()]
    assert len(nothing) == frame["start"].isna().sum() > 0
    assert nothing["label"].isna().all() and nothing["end"].isna().all() and (nothing["length"] == 120).all()
    marked = table.dropna(subset=["start"]).sort_values(["item_id", "rater_id", "start"])
    expected = frame.dropna(subset=["start"]).assign(item_id=lambda f: f["item_id"].str[1:].astype(int) + 1)
    assert sorted(zip(marked["start"], marked["end"], marked["label"], strict=True)) == \
        sorted(zip(expected["start"], expected["end"], expected["label"], strict=True))
    assert set(table.loc[table["pool"] == "trusted", "rater_id"]) <= {str(t) for t in TRUSTED}


def test_rectangle_labels_are_read_as_boxes_in_percent(tmp_path: Path) -> None:
    frame = drawn.boxes(n_images=8, miss=0.6, seed=12)
    table = _read(*_export(tmp_path, frame, "boxes"), "boxes")
    assert list(table.columns[-4:]) == ["x", "y", "width", "height"]
    assert len(table) == len(frame) and table["x"].isna().sum() == frame["x"].isna().sum()
    assert sorted(table["x"].dropna().round(9)) == sorted(frame["x"].dropna().round(9))
    assert table.attrs["label_studio"]["cancelled"] == 8


def test_a_multi_choice_is_read_as_a_set_and_an_empty_result_as_the_empty_set(tmp_path: Path) -> None:
    frame = drawn.sets(n_items=30, seed=13)
    table = _read(*_export(tmp_path, frame, "sets"), "sets")
    assert table.attrs["label_studio"]["level"] == "set"
    assert len(table) == len(frame)
    assert sorted(map(sorted, table["label"])) == sorted(map(sorted, frame["label"]))
    assert (table["label"].map(len) == 0).sum() == (frame["label"].map(len) == 0).sum() > 0


def test_the_controls_map_to_kinds_and_levels() -> None:
    taxonomy = ('<View><Text name="t" value="$t"/><Taxonomy name="topic" toName="t"{}><Choice value="A">'
                '<Choice value="A1"/></Choice><Choice value="B"/></Taxonomy></View>')
    assert parse_control(taxonomy.format(""), "topic").level == "set"  # Label Studio's default: multi-select
    assert parse_control(taxonomy.format(' maxUsages="1"'), "topic").level == "nominal"
    ner = parse_control(drawn.LS_CONFIGS["spans"], "label")
    assert (ner.kind, ner.categories, ner.data_key) == ("spans", ["PER", "LOC", "ORG"], "text")
    assert parse_control(drawn.LS_CONFIGS["boxes"], "box").question() == {
        "name": "box", "kind": "boxes", "categories": ["car", "person", "bike"]}
    assert parse_control(drawn.LS_CONFIGS["sets"], "topics").question()["level"] == "set"


def test_a_multi_select_taxonomy_answer_is_the_set_of_its_paths(tmp_path: Path) -> None:
    xml = ('<View><Text name="t" value="$t"/><Taxonomy name="topic" toName="t"><Choice value="A">'
           '<Choice value="A1"/></Choice><Choice value="B"/></Taxonomy></View>')
    answer = {"from_name": "topic", "to_name": "t", "type": "taxonomy", "value": {"taxonomy": [["A", "A1"], ["B"]]}}
    tasks = [{"id": 1, "data": {"t": "x"}, "drafts": [], "annotations": [
        {"id": 1, "completed_by": 1, "ground_truth": True, "was_cancelled": False, "result": [answer]},
        {"id": 2, "completed_by": 2, "ground_truth": False, "was_cancelled": False, "result": []}]}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(tasks), encoding="utf-8")
    table = lg.read_label_studio(path, control="topic", label_config=xml)
    assert table["label"].tolist() == [("A / A1", "B"), ()]


@pytest.mark.parametrize(("change", "words"), [
    ({"rotation": 30}, "rotated"),
    ({"x": 95.0, "width": 20.0}, "outside the image"),
    ({"rectanglelabels": ["truck"]}, "not one of the labeling config's"),
])
def test_a_bad_box_names_the_annotation(tmp_path: Path, change: dict, words: str) -> None:
    frame = drawn.boxes(n_images=2, seed=14)
    path, config = _export(tmp_path, frame, "boxes")
    tasks = json.loads(path.read_text(encoding="utf-8"))
    annotation = tasks[0]["annotations"][0]
    annotation["result"][0]["value"].update(change)
    path.write_text(json.dumps(tasks), encoding="utf-8")
    with pytest.raises(InputError, match=words) as bad:
        _read(path, config, "boxes")
    assert bad.value.context["annotation"] == annotation["id"] and bad.value.context["task"] == tasks[0]["id"]


def test_a_span_outside_its_text_is_refused(tmp_path: Path) -> None:
    frame = drawn.spans(n_docs=2, seed=15)
    path, config = _export(tmp_path, frame, "spans")
    tasks = json.loads(path.read_text(encoding="utf-8"))
    tasks[1]["annotations"][0]["result"][0]["value"]["end"] = 500
    path.write_text(json.dumps(tasks), encoding="utf-8")
    with pytest.raises(InputError, match="outside its text of 120 characters"):
        _read(path, config, "spans")


def test_a_region_control_is_read_alone(tmp_path: Path) -> None:
    path, _ = _export(tmp_path, drawn.spans(n_docs=1, seed=16), "spans")
    both = drawn.LS_CONFIGS["spans"].replace("</View>", '<Choices name="other" toName="text"><Choice value="a"/>'
                                                         "</Choices></View>")
    with pytest.raises(InputError, match="read each in a source of its own"):
        lg.read_label_studio(path, control=["label", "other"], trusted=TRUSTED, label_config=both)


GATE = """
batch: {{format: label_studio, path: "{path}", control: {control}, label_config: "{config}", trusted: {trusted}}}
questions: [{{name: q}}]
gates:
  - {{type: normalized_cross_kappa, min_value: 0.75}}
  - {{type: irr_baseline, tolerance: 0.1}}
interval: {{n_boot: 100, seed: 0}}
coverage: {{min_common_items: 5}}
store: {{url: "sqlite:///{store}"}}
reports: {{dir: "{reports}"}}
"""


@pytest.mark.parametrize("kind", ["sets", "spans", "boxes"])
def test_the_gate_decides_on_an_export(tmp_path: Path, kind: str) -> None:
    from labelgate.gate import run

    build = {"sets": drawn.sets, "spans": drawn.spans, "boxes": drawn.boxes}[kind]
    decisions = {}
    for name, miss, seed in (("good", 0.0, 21), ("bad", 0.5, 22)):
        path, config = _export(tmp_path, build(miss=miss, seed=seed), kind, name)
        gate = tmp_path / f"{name}.yaml"
        gate.write_text(GATE.format(path=path.as_posix(), control=drawn.LS_CONTROLS[kind], config=config.as_posix(),
                                    trusted=TRUSTED, store=(tmp_path / "r.db").as_posix(),
                                    reports=(tmp_path / "reports").as_posix()))
        summary = run(gate)
        decisions[name] = summary["decision"], summary["reasons"]
    assert decisions["good"][0] == "ACCEPT", decisions["good"]
    assert decisions["bad"][0] == "REJECT", decisions["bad"]
