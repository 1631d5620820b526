"""The Label Studio connector without a server: the labeling config as questions, the gate's batch selections (task
ids, time range) on the committed export, the unknown-control and category checks of the gate, and the write-back's
per-annotator record. The server-side tests are in tests/services/test_label_studio.py and
tests/services/test_label_studio_webhook_events.py; the export reader in tests/pipeline/test_label_studio_export.py.
"""

from __future__ import annotations

import json
import re
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
from tests.pipeline.test_label_studio_export import CONFIG, EXPORT, STARS

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
                         {"name": "tags", "level": "set", "distance": "jaccard", "categories": ["a", "b"]},
                         {"name": "score", "level": "interval"},
                         {"name": "topic", "level": "set", "distance": "jaccard", "categories": ["A", "A / A1"]}]
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


def _synthetic_export(folder: Path) -> tuple[Path, list[int]]:
    """A JSON export (the server's shape) of a synthetic crowd and trusted pool over two controls: ``sentiment`` and a
    ``stars`` rating drawn around the sentiment (seeded), with the trusted annotators' ids."""
    import numpy as np

    from labelgate.pipeline.synth import PoolSpec, Scenario, simulate

    spec = Scenario(n_items=120, difficulty=0.1, pools=(PoolSpec("crowd", n_raters=5, ratings_per_item=(3, 3)),
                                                        PoolSpec("trusted", n_raters=3, ratings_per_item=(2, 2))))
    judgements = simulate(spec, seed=11)
    rng = np.random.default_rng(11)
    users = {key: k + 1 for k, key in enumerate(judgements[["pool", "rater_id"]].drop_duplicates()
                                                .itertuples(index=False, name=None))}
    tasks, annotation = [], 0
    for task, (_, rows) in enumerate(judgements.groupby("item_id", sort=True), start=1):
        annotations = []
        for row in rows.itertuples():
            annotation += 1
            stars = int(np.clip(STARS[row.label] + rng.integers(-1, 2), 1, 5))
            annotations.append({"id": annotation, "completed_by": users[(row.pool, row.rater_id)], "task": task,
                                "was_cancelled": False, "ground_truth": False, "updated_at": "2026-11-25T00:00:00Z",
                                "result": [{"from_name": "sentiment", "type": "choices",
                                            "value": {"choices": [row.label]}},
                                           {"from_name": "stars", "type": "rating", "value": {"rating": stars}}]})
        tasks.append({"id": task, "annotations": annotations, "drafts": []})
    path = folder / "two-controls.json"
    path.write_text(json.dumps(tasks), encoding="utf-8")
    return path, sorted(u for (pool, _), u in users.items() if pool == "trusted")


def _config(tmp_path: Path, control: Any, questions: list[dict[str, Any]], trusted: list[int]) -> dict[str, Any]:
    return {"batch": {"format": "label_studio", "control": control, "label_config": CONFIG, "trusted": trusted},
            "questions": questions, "interval": {"n_boot": 50, "diagnose_n_boot": 20},
            "gates": [{"type": "normalized_cross_kappa", "min_value": 0.5}, {"type": "irr_baseline", "tolerance": 0.3}],
            "store": {"url": f"sqlite:///{(tmp_path / 'results.db').as_posix()}"},
            "reports": {"dir": str(tmp_path / "reports")}}


def test_one_gate_run_decides_every_control_as_separate_runs_would(tmp_path: Path) -> None:
    """``control: [sentiment, stars]``: one reading, one run, one decision over both questions, whose metrics are those
    of two single-control runs; the level and the categories of each question come from the labeling config."""
    from labelgate.gate import run

    export, trusted = _synthetic_export(tmp_path)
    long = lg.read_label_studio(export, control=["sentiment", "stars"], trusted=trusted, label_config=CONFIG)
    assert long.groupby("question").size().to_dict() == {"sentiment": 600, "stars": 600}
    assert long.attrs["label_studio"]["controls"]["stars"] == {"type": "Rating", "level": "ordinal",
                                                               "categories": [1, 2, 3, 4, 5]}
    one = lg.read_label_studio(export, control="stars", trusted=trusted, label_config=CONFIG)
    assert long.loc[long["question"] == "stars", "label"].tolist() == one["label"].tolist()

    questions = [{"name": "sentiment", "label_column": "sentiment"},
                 {"name": "stars", "label_column": "stars", "level": "ordinal"}]
    both = run(_config(tmp_path, ["sentiment", "stars"], questions, trusted), batch=str(export), batch_id="both")
    assert both["decision"] in ("ACCEPT", "REJECT", "REVIEW") and set(both["metrics"]) == {"sentiment", "stars"}
    decisions = []
    for question in questions:
        alone = {k: v for k, v in question.items() if k != "label_column"}
        single = run(_config(tmp_path, question["name"], [alone], trusted), batch=str(export),
                     batch_id=f"only-{question['name']}")
        decisions.append(single["decision"])
        for metric, row in single["metrics"][question["name"]].items():
            if isinstance(row, dict) and row.get("value") is not None:
                assert both["metrics"][question["name"]][metric]["value"] == pytest.approx(row["value"], abs=1e-12)
    worst = ["ACCEPT", "REVIEW", "REJECT"]
    assert both["decision"] == max(decisions, key=worst.index)


def test_a_question_that_states_no_level_is_decided_at_its_controls_level(tmp_path: Path) -> None:
    """A question over the ``Rating`` that states no level is gated as the labeling config's ordinal scale: the same
    numbers as a question that states ``level: ordinal``, not those of the default nominal level."""
    from labelgate.gate import run

    export, trusted = _synthetic_export(tmp_path)

    def values(question: dict[str, Any], batch_id: str) -> dict[str, float]:
        summary = run(_config(tmp_path, ["sentiment", "stars"], [question], trusted), batch=str(export),
                      batch_id=batch_id)
        assert summary["decision"] != "ERROR", summary["reasons"]
        return {metric: row["value"] for metric, row in summary["metrics"]["stars"].items()
                if isinstance(row, dict) and row.get("value") is not None}

    unstated = values({"name": "stars", "label_column": "stars"}, "unstated")
    ordinal = values({"name": "stars", "label_column": "stars", "level": "ordinal"}, "ordinal")
    nominal = values({"name": "stars", "label_column": "stars", "level": "nominal"}, "nominal")
    assert unstated and unstated.keys() == ordinal.keys()
    assert all(unstated[m] == pytest.approx(ordinal[m], abs=1e-12) for m in unstated)
    assert any(abs(unstated[m] - nominal[m]) > 1e-6 for m in unstated.keys() & nominal.keys())


@pytest.mark.parametrize(("control", "question", "message"), [
    (["sentiment", "stars"], {"name": "sentiment"}, "reads column 'label', but the label_studio source .* reads the "
                                                    "control\\(s\\) \\['sentiment', 'stars'\\] only"),
    ("sentiment", {"name": "stars", "label_column": "stars", "level": "ordinal"}, "list the controls in 'control'"),
])
def test_a_question_that_reads_no_control_is_an_error(tmp_path: Path, control: Any,
                                                                         question: dict[str, Any],
                                                                         message: str) -> None:
    from labelgate.gate import run

    export, trusted = _synthetic_export(tmp_path)
    summary = run(_config(tmp_path, control, [question], trusted), batch=str(export), batch_id="wrong")
    assert summary["decision"] == "ERROR" and summary["error_step"] == "validate"
    assert re.search(message, summary["reasons"][0]), summary["reasons"]


def test_the_batch_id_is_derived_from_what_selects_the_batch() -> None:
    from labelgate.pipeline.sources.label_studio import batch_id_of

    def source(**fields: Any) -> Source:
        return Source(**{"format": "label_studio", "control": "sentiment", "url_env": "LS", "project": 5, **fields})

    tasks = batch_id_of(source(tasks=[7, 3, 9]))
    assert tasks.startswith("ls-5-tasks-3-9-3-") and tasks == batch_id_of(source(tasks=[9, 7, 3]))
    assert tasks != batch_id_of(source(tasks=[3, 8, 9]))  # same ends and size, other tasks
    assert batch_id_of(source(view=4)).startswith("ls-5-view-4-")
    ranged = batch_id_of(source(annotated_after="2026-11-24T01:00:00+01:00"))
    assert ranged.startswith("ls-5-updated_at-20261124T000000Z-now-")
    assert ranged == batch_id_of(source(annotated_after="2026-11-24T00:00:00Z"))
    assert batch_id_of(source()) != batch_id_of(source(control=["sentiment", "stars"]))
    url = Source(format="label_studio", control="s", path="http://ls:8080/projects/12?tasks=1,2")
    assert batch_id_of(url).startswith("ls-12-tasks-1-2-2-")


def test_one_selection_has_one_batch_id_however_it_is_spelled(monkeypatch: pytest.MonkeyPatch) -> None:
    """A project URL (tasks in any order, a trailing slash, the host in capitals), a configuration whose URL variable
    holds that server (whatever the variable's name) and a webhook's event name one batch; another server, or an
    export in another folder, is another batch."""
    from labelgate.flows.label_studio_webhook import emit_ready
    from labelgate.gate.ls_webhook import ReadyBatch
    from labelgate.pipeline.sources.label_studio import batch_id_of

    def url(path: str) -> str:
        return batch_id_of(Source(format="label_studio", control="sentiment", path=path))

    def configured(env: str, value: str) -> str:
        monkeypatch.setenv(env, value)
        return batch_id_of(Source(format="label_studio", control="sentiment", url_env=env, project=5, tasks=[3, 1, 2]))

    one = url("http://ls:8080/projects/5?tasks=3,1,2")
    assert one == url("http://LS:8080/projects/5/?tasks=1,2,3")
    assert one == configured("LS_A", "http://ls:8080/") == configured("LS_B", "http://ls:8080")
    assert one != configured("LS_A", "http://ls-staging:8080")
    assert url("a/export.json") != url("b/export.json")

    emitted: list[dict[str, Any]] = []
    monkeypatch.setattr("prefect.events.emit_event", lambda **kw: emitted.append(kw["payload"]))
    emit_ready("http://ls:8080", Source(format="label_studio", control="sentiment", url_env="LS_A", project=5))(
        ReadyBatch(5, (1, 2, 3), (), {"ANNOTATION_CREATED": 3}, 0.0, 0.0))
    assert [e["batch_id"] for e in emitted] == [one]


def test_a_receiver_for_a_gate_and_a_monitor_asks_the_gate_only_for_its_project(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import labelgate.cli.label_studio as cli_ls
    import labelgate.flows.label_studio_webhook as flows_ls
    import labelgate.monitor.label_studio as monitor_ls

    (tmp_path / "gate.yaml").write_text("batch: {format: label_studio, control: sentiment, url_env: LG_LS, "
                                        "project: 7}\n", encoding="utf-8")
    (tmp_path / "monitor.yaml").write_text("monitor:\n  source: {kind: label_studio, url_env: LG_LS, project: 8}\n",
                                           encoding="utf-8")
    monkeypatch.setenv("LG_LS", "http://127.0.0.1:9")
    monkeypatch.setenv("LABELGATE_WEBHOOK_SECRET", "s")
    monkeypatch.setattr(cli_ls, "_require_prefect", lambda: None)
    gated: list[int] = []
    passes: list[int | None] = []
    monkeypatch.setattr(flows_ls, "emit_ready", lambda base, source=None: lambda batch: gated.append(batch.project))
    monkeypatch.setattr(monitor_ls, "run_label_studio_pass",
                        lambda config, project=None, *, hints=None, send_alerts=True: passes.append(project) or {})
    receiver, _ = cli_ls.webhook_receiver(tmp_path / "gate.yaml", 0.0, None, "LABELGATE_WEBHOOK_SECRET",
                                          tmp_path / "monitor.yaml")
    for project in (7, 8, 9):
        receiver.receive({"x-labelgate-secret": "s"},
                         {"action": "ANNOTATION_CREATED", "project": {"id": project},
                          "annotation": {"id": project, "task": 10 * project}}, now=0.0)
    receiver.tick(now=100.0, flush=True)
    assert gated == [7] and passes == [8]


def test_a_stored_decision_is_found_under_the_level_the_run_decided_at(tmp_path: Path) -> None:
    """The look-up before a run keys a Label Studio request as the run does: a question that states no level is
    the control's ordinal, so its stored decision is found, and a nominal decision is not served for it."""
    from labelgate.gate import run
    from labelgate.gate.audit import stored_decision

    export, trusted = _synthetic_export(tmp_path)
    unstated = _config(tmp_path, ["sentiment", "stars"], [{"name": "stars", "label_column": "stars"}], trusted)
    nominal = _config(tmp_path, ["sentiment", "stars"],
                      [{"name": "stars", "label_column": "stars", "level": "nominal"}], trusted)
    decided = run(nominal, batch=str(export), batch_id="nominal")
    assert decided["decision"] != "ERROR", decided["reasons"]
    assert stored_decision(unstated, str(export), batch_id="again") is None
    first = run(unstated, batch=str(export), batch_id="ordinal")
    again = stored_decision(unstated, str(export), batch_id="again")
    assert again is not None and again["reused_from"] == first["run_id"]
    assert again["inputs_digest"] == first["inputs_digest"] != decided["inputs_digest"]


@pytest.mark.usefixtures("prefect_api")
def test_gate_without_batch_reads_the_configured_selection(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from labelgate.cli.main import app
    from labelgate.pipeline.config import load_config
    from labelgate.pipeline.sources.label_studio import batch_id_of

    export, trusted = _synthetic_export(tmp_path)
    config = _config(tmp_path, "sentiment", [{"name": "sentiment"}], trusted)
    config["batch"].update(path=str(export), tasks=list(range(1, 61)))
    (tmp_path / "ls.yaml").write_text(json.dumps(config), encoding="utf-8")
    runner = CliRunner()
    result = runner.invoke(app, ["gate", "--config", str(tmp_path / "ls.yaml"), "--json"])
    payload = json.loads(result.stdout)
    expected = batch_id_of(load_config(tmp_path / "ls.yaml").batch)
    assert payload["batch_id"] == expected and expected.startswith("ls-two-controls-tasks-1-60-60-")
    assert payload["decision"] in ("ACCEPT", "REJECT", "REVIEW") and payload["coverage"]["batch_items"] == 60
    assert result.exit_code == {"ACCEPT": 0, "REJECT": 1, "REVIEW": 2}[payload["decision"]]
    (tmp_path / "csv.yaml").write_text("batch: {path: batch.csv}\n", encoding="utf-8")
    refused = runner.invoke(app, ["gate", "--config", str(tmp_path / "csv.yaml")])
    assert refused.exit_code == 3 and "only a label_studio or sql source selects its own batch" in refused.output
