"""The Label Studio connector without a server: the labeling config as questions, the gate's batch selections (task
ids, time range) on the committed export, the unknown-control and category checks of the gate, and the write-back's
per-annotator record. The server-side tests are in tests/test_label_studio.py and tests/test_label_studio_webhook.py.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import labelgate as lg
from labelgate.errors import InputError
from labelgate.pipeline.config import Source
from labelgate.pipeline.sources.label_studio import (
    Selection,
    controls,
    iter_annotations,
    selection_of_url,
    source_selection,
)
from labelgate.pipeline.sources.label_studio.labeling_config import Control, question_categories
from test_label_studio import CONFIG, EXPORT

TWO_CONTROLS = ('<View><Text name="text" value="$text"/>'
                '<Choices name="severity" toName="text"><Choice value="low"/><Choice value="mid"/>'
                '<Choice value="high"/></Choices>'
                '<Choices name="tags" toName="text" choice="multiple"><Choice value="a"/><Choice value="b"/></Choices>'
                '<Number name="score" toName="text"/>'
                '<Taxonomy name="topic" toName="text"><Choice value="A"><Choice value="A1"/></Choice></Taxonomy>'
                '<TextArea name="note" toName="text"/></View>')


def test_the_labeling_config_becomes_one_question_per_supported_control() -> None:
    questions = [c.question() for c in controls(TWO_CONTROLS)]
    assert questions == [{"name": "severity", "level": "nominal", "categories": ["low", "mid", "high"]},
                         {"name": "score", "level": "interval"},
                         {"name": "topic", "level": "nominal", "categories": ["A", "A / A1"]}]
    severity = Control("severity", "Choices", "nominal", ["low", "mid", "high"])
    # a Choices gated as ordinal keeps the config's order; listed categories must be the config's, in its order
    assert question_categories(severity, "ordinal", None, "q") == ("low", "mid", "high")
    assert question_categories(severity, "nominal", ["high", "low", "mid"], "q") == ("low", "mid", "high")
    with pytest.raises(InputError, match="order of an ordinal question") as order:
        question_categories(severity, "ordinal", ["high", "mid", "low"], "q", "project 3")
    assert order.value.context == {"project": "project 3", "control": "severity", "question": "q"}
    with pytest.raises(InputError, match="is a Choices \\(a question over it is nominal or ordinal\\)"):
        question_categories(severity, "interval", None, "q")
    number = Control("score", "Number", "interval", None)
    assert question_categories(number, "interval", None, "score") is None
    with pytest.raises(InputError, match="interval or ratio"):
        question_categories(number, "nominal", None, "score")


def test_a_result_of_a_control_the_config_does_not_have_names_the_annotation(tmp_path: Path) -> None:
    tasks = json.loads(EXPORT.read_text(encoding="utf-8"))
    tasks[1]["annotations"][1]["result"][0]["from_name"] = "mood"
    broken = tmp_path / "renamed.json"
    broken.write_text(json.dumps(tasks), encoding="utf-8")
    with pytest.raises(InputError, match="Annotation 30 \\(task 6\\) .* result of 'mood'") as unknown:
        lg.read_label_studio(broken, control="sentiment", label_config=CONFIG)
    assert unknown.value.context["annotation"] == 30 and unknown.value.context["control"] == "mood"
    assert unknown.value.context["project"] == "Label Studio export renamed.json"


def test_a_batch_of_tasks_and_a_time_range_on_the_export() -> None:
    by_tasks = lg.read_label_studio(EXPORT, control="sentiment", label_config=CONFIG,
                                    selection=Selection(tasks=(6, 7)))
    assert sorted(by_tasks["item_id"].unique()) == ["6", "7"] and len(by_tasks) == 6
    after = datetime(2026, 11, 25, 3, 49, 11, 500000, tzinfo=UTC)
    # the gate's batch: the crowd's annotations in the range, and the trusted annotations of their tasks, whenever made
    gate = lg.read_label_studio(EXPORT, control="sentiment", label_config=CONFIG,
                                selection=Selection(after=after, trusted_any_time=True))
    assert sorted(gate["annotation_id"].astype(int)) == [29, 30, 31, 32, 33, 34]
    assert gate.attrs["label_studio"]["outside_selection"] == 3  # task 5: its crowd's work is older (and its expert)
    # the monitor's reading: every annotation updated since the watermark, both pools
    pages = list(iter_annotations(EXPORT, "sentiment", label_config=CONFIG, updated_after=after))
    assert sorted(int(a) for page in pages for a in page["annotation_id"]) == [30, 31, 32, 33, 34]
    before = lg.read_label_studio(EXPORT, control="sentiment", label_config=CONFIG,
                                  selection=Selection(before=after))
    assert sorted(before["annotation_id"].astype(int)) == [26, 27, 28, 29]
    with pytest.raises(InputError, match="time range is empty"):
        Selection(after=after, before=after)
    with pytest.raises(InputError, match="view selects tasks on a server"):
        lg.read_label_studio(EXPORT, control="sentiment", label_config=CONFIG, selection=Selection(view=2))


def test_the_selection_of_a_project_url_and_of_the_source() -> None:
    url = selection_of_url("tasks=7,3,3&annotated_before=2026-01-02T00:00:00&time_field=created_at")
    assert url.tasks == (3, 7) and url.before == datetime(2026, 1, 2, tzinfo=UTC) and url.time_field == "created_at"
    assert selection_of_url("tab=4").view == 4
    with pytest.raises(InputError, match="not \\['page'\\]"):
        selection_of_url("page=2")
    with pytest.raises(InputError, match="integers"):
        selection_of_url("tasks=a,b")
    source = Source(format="label_studio", control="sentiment", tasks=[5, 6], annotated_after="2026-01-01T00:00:00Z")
    chosen = source_selection(source)
    assert chosen.tasks == (5, 6) and chosen.trusted_any_time and chosen.after == datetime(2026, 1, 1, tzinfo=UTC)
    # a URL given as the batch (the event's path) replaces the configuration's selection
    assert source_selection(source, "http://ls:8080/projects/3?tasks=9").tasks == (9,)
    with pytest.raises(ValueError, match="must be before"):
        Source(format="label_studio", control="s", annotated_after="2026-01-02", annotated_before="2026-01-01")


def _gate(tmp_path: Path, question: dict[str, Any]) -> dict[str, Any]:
    from labelgate.gate import run

    config = {"batch": {"format": "label_studio", "control": "sentiment", "label_config": CONFIG},
              "questions": [question], "interval": {"n_boot": 50, "diagnose_n_boot": 20},
              "store": {"url": f"sqlite:///{(tmp_path / 'results.db').as_posix()}"},
              "reports": {"dir": str(tmp_path / "reports")}}
    return run(config, batch=str(EXPORT), batch_id="export")


def test_a_question_that_contradicts_the_labeling_config_is_an_error(tmp_path: Path) -> None:
    summary = _gate(tmp_path, {"name": "label", "level": "ordinal", "categories": ["pos", "neu", "neg"]})
    assert summary["decision"] == "ERROR" and summary["error_step"] == "validate"
    assert "control 'sentiment' of Label Studio export" in summary["reasons"][0]


def test_the_write_back_names_the_flagged_annotators_of_each_task(monkeypatch: pytest.MonkeyPatch) -> None:
    from labelgate.gate import label_studio as wb

    patched: dict[str, Any] = {}

    class FakeClient:
        def __init__(self, base: str, env: str, timeout: float) -> None:
            assert base == "http://ls:8080"

        def __enter__(self) -> FakeClient:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def task(self, task: str) -> dict[str, Any]:
            return {"meta": {"team": "kept"}}

        def patch_task(self, task: str, body: dict[str, Any]) -> dict[str, Any]:
            patched[task] = body["meta"]
            return {}

    monkeypatch.setattr(wb, "LabelStudioClient", FakeClient)
    summary = {"decision": "REVIEW", "run_id": "r", "metrics": {}, "raters": {"flagged": [
        {"rater_id": "12", "question": "label", "flags": ["low_agreement"], "actions": {"low_agreement": "review"},
         "agreement": 0.05, "ci_low": -0.1, "ci_high": float("nan")}]}}
    written = wb.write_back(summary, url="http://ls:8080/projects/3?tasks=1,2", task_ids=["1", "2"],
                            annotators={"1": ["12", "13"], "2": ["13"]})
    assert written == 2 and patched["1"]["team"] == "kept"
    assert patched["1"][wb.META_KEY][wb.FLAGGED_KEY] == {"12": {"questions": {"label": {
        "flags": ["low_agreement"], "actions": {"low_agreement": "review"}, "agreement": 0.05, "ci_low": -0.1,
        "ci_high": None}}}}
    assert wb.FLAGGED_KEY not in patched["2"][wb.META_KEY] and patched["2"][wb.META_KEY]["decision"] == "REVIEW"


def test_a_config_file_keeps_a_project_url_and_resolves_its_labeling_config(tmp_path: Path) -> None:
    from labelgate.pipeline.config import load_config

    (tmp_path / "gate.yaml").write_text("batch: {format: label_studio, control: sentiment, path: "
                                        "'http://ls:8080/projects/5?tasks=1,2', label_config: config.xml}\n",
                                        encoding="utf-8")
    batch = load_config(tmp_path / "gate.yaml").batch
    assert batch.path == "http://ls:8080/projects/5?tasks=1,2"
    assert batch.label_config == str(tmp_path / "config.xml")


def test_a_server_that_is_down_or_a_missing_token_is_an_error_decision(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    from labelgate.gate import run

    with socket.socket() as s:  # a port nothing listens on once the socket is closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = {"batch": {"format": "label_studio", "control": "sentiment", "token_env": "LG_TEST_NO_TOKEN"},
              "store": {"url": f"sqlite:///{(tmp_path / 'results.db').as_posix()}"},
              "reports": {"dir": str(tmp_path / "reports")}}
    url = f"http://127.0.0.1:{port}/projects/3?tasks=1,2"
    monkeypatch.delenv("LG_TEST_NO_TOKEN", raising=False)
    unset = run(config, batch=url, batch_id="no-token")
    assert unset["decision"] == "ERROR" and "'LG_TEST_NO_TOKEN'" in unset["reasons"][0]
    monkeypatch.setenv("LG_TEST_NO_TOKEN", "a-token")
    down = run(config, batch=url, batch_id="down")
    assert down["decision"] == "ERROR" and "did not answer while reading project 3" in down["reasons"][0]
