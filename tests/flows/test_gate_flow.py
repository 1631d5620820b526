"""The gate flow end to end under a temporary Prefect API: decisions, fail-closed errors, idempotency, alerts."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import ClassVar

import pandas as pd
import pytest

from labelgate.flows import gate as flow_module
from labelgate.flows.gate import run_gate_flow
from labelgate.gate import diagnose as diagnose_step
from labelgate.gate import measure as measure_step
from labelgate.gate import steps as gate_steps
from labelgate.pipeline.store import ResultsStore
from labelgate.pipeline.synth import PoolSpec, Scenario, scenario_named, simulate

pytestmark = pytest.mark.usefixtures("prefect_api")

CONFIG = """
gates:
  - type: normalized_cross_kappa
    min_value: 0.8
  - type: irr_baseline
    tolerance: 0.1
  - type: spa
    min_value: 0.3
    severity: warning
interval: {{n_boot: 300, seed: 0}}
coverage: {{min_coverage: 0.1, min_common_items: 10}}
store: {{url: "sqlite:///{store}"}}
reports: {{dir: "{reports}"}}
alerts: {alerts}
"""


def write_config(folder: Path, alerts: str = "{}") -> Path:
    path = folder / "gate.yaml"
    path.write_text(CONFIG.format(store=(folder / "results.db").as_posix(), reports=(folder / "reports").as_posix(),
                                  alerts=alerts), encoding="utf-8")
    return path


def write_batch(folder: Path, scenario: Scenario, seed: int) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    data = simulate(scenario, seed=seed)
    batch, trusted = folder / "batch.csv", folder / "trusted.csv"
    data[data["pool"] == "crowd"].to_csv(batch, index=False)
    data[data["pool"] == "trusted"].to_csv(trusted, index=False)
    return batch, trusted


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("gate")
    tiny = Scenario(n_items=40, pools=(PoolSpec("crowd", n_raters=20, ratings_per_item=(2, 3), noise=0.4),
                                       PoolSpec("trusted", n_raters=6, ratings_per_item=(2, 2), noise=0.4)))
    return {name: write_batch(root / name, scenario, seed) for name, scenario, seed in [
        ("good", scenario_named("good", 1500), 1), ("random", scenario_named("random", 1500), 2),
        ("contentment", scenario_named("contentment", 1500), 3), ("tiny", tiny, 4)]}


def run(tmp_path, batch, trusted, **kw):
    return run_gate_flow(str(write_config(tmp_path, kw.pop("alerts", "{}"))), batch=str(batch), trusted=str(trusted),
                     **kw)


def test_accept_on_a_batch_from_the_trusted_process(tmp_path, data):
    result = run(tmp_path, *data["good"])
    assert result["decision"] == "ACCEPT", result["reasons"]
    assert result["reasons"] == []
    nkx = result["metrics"]["label"]["normalized_cross_kappa"]
    assert nkx["ci_low"] >= 0.8 and nkx["verdict"] == "pass"
    assert Path(result["report"]).is_file() and Path(result["reports"]["json"]).is_file()
    assert result["coverage"]["common_items"] > 500
    raters = result["diagnostics"]["label"]["raters"]
    assert len(raters) > 100 and {"rater_id", "kappa_vs_trusted", "flags"} <= set(raters[0])
    assert "ratings_per_item_hist" in result["diagnostics"]["label"]["design"]["crowd"]
    page = Path(result["report"]).read_text(encoding="utf-8")
    assert "Per-rater diagnostics were not computed" not in page


def test_reject_on_random_labels(tmp_path, data):
    result = run(tmp_path, *data["random"])
    assert result["decision"] == "REJECT"
    assert any("irr_baseline" in r and "fails on the point value and on the whole interval" in r
               for r in result["reasons"])


def test_reject_on_the_contentment_case(tmp_path, data):
    result = run(tmp_path, *data["contentment"])
    assert result["decision"] == "REJECT"
    assert any(r.startswith("[label] normalized_cross_kappa") for r in result["reasons"])
    irr = result["metrics"]["label"]
    assert irr["irr_crowd"]["value"] > 0.3 and irr["irr_trusted"]["value"] > 0.3  # both pools agree internally


def test_review_on_a_tiny_batch_whose_interval_straddles(tmp_path, data):
    result = run(tmp_path, *data["tiny"])
    assert result["decision"] == "REVIEW", result
    assert any("straddles" in r or "undefined" in r for r in result["reasons"])


def test_error_on_a_malformed_batch(tmp_path, data):
    batch = tmp_path / "broken.csv"
    pd.read_csv(data["good"][0]).drop(columns=["label"]).to_csv(batch, index=False)
    result = run(tmp_path, batch, data["good"][1])
    assert result["decision"] == "ERROR"
    assert result["error_step"] == "validate"
    assert "label" in result["reasons"][0]


def test_error_on_a_malformed_config(tmp_path, data):
    config = tmp_path / "bad.yaml"
    config.write_text("gates:\n  - type: normalized_cross_kappa\n    min_valu: 0.8\n", encoding="utf-8")
    result = run_gate_flow(str(config), batch=str(data["good"][0]), trusted=str(data["good"][1]))
    assert result["decision"] == "ERROR"
    assert result["reasons"][0] == f"config: {config}: gates[0].min_valu: unknown key."
    # no configuration, no store: the ERROR says that it could not be recorded
    assert result["reasons"][1:] == ["the ERROR could not be recorded: the results store was not reached"]


STEPS = {"load": (gate_steps, "load"), "validate": (gate_steps, "prepare"), "align": (gate_steps, "coverage"),
         "measure": (measure_step, "measure"), "diagnose": (diagnose_step, "diagnose"),
         "decide": (gate_steps, "decide_batch"),
         "publish": (flow_module, "write_gate_report"), "persist": (ResultsStore, "append")}


@pytest.mark.parametrize("step", list(STEPS))
def test_an_exception_in_any_step_ends_in_error_never_accept(tmp_path, data, monkeypatch, step):
    owner, name = STEPS[step]

    def boom(*args, **kwargs):
        raise RuntimeError(f"injected failure in {step}")

    monkeypatch.setattr(owner, name, boom)
    result = run(tmp_path, *data["good"])
    assert result["decision"] == "ERROR"
    assert result["error_step"] == step
    assert any(f"injected failure in {step}" in r for r in result["reasons"])


def test_an_expectation_that_raises_inside_the_flow_is_an_error_with_its_message(tmp_path, data, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("SPA provider failure")

    monkeypatch.setattr("labelgate.gx._metrics.spa", broken)  # SPA is a warning here: a fault all the same
    result = run(tmp_path, *data["good"])
    assert result["decision"] == "ERROR" and result["error_step"] == "measure"
    assert result["reasons"] == ["measure: [label] the spa expectation failed to run: SPA provider failure"]


def test_rerun_is_recorded_without_recomputing_and_force_adds_history(tmp_path, data):
    first = run(tmp_path, *data["good"])
    again = run(tmp_path, *data["good"])
    assert again["reused"] and again["reused_from"] == first["run_id"] and again["decision"] == first["decision"]
    assert again["run_id"] != first["run_id"] and "measure" not in again["timing"]
    forced = run(tmp_path, *data["good"], force=True)
    assert not forced["reused"] and forced["run_id"] not in (first["run_id"], again["run_id"])
    store = ResultsStore(f"sqlite:///{(tmp_path / 'results.db').as_posix()}")
    runs = store.list_runs()
    assert [r.run_id for r in runs] == [forced["run_id"], again["run_id"], first["run_id"]]  # nothing replaced
    record = runs[0]
    assert store.current(record.batch_id).run_id == forced["run_id"]
    assert record.decision == "ACCEPT" and record.metrics["label"]["normalized_cross_kappa"]["ci_low"] is not None
    assert {"load", "validate", "measure", "publish"} <= set(record.timing)
    assert record.reports["html"].endswith("report.html")
    assert Path(record.reports["html"]).parent.name.endswith(forced["run_id"])  # one folder per run


def test_a_crash_after_measuring_stores_only_the_complete_error_record(tmp_path, data, monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr("labelgate.flows.gate.write_gate_report", boom)
    result = run(tmp_path, *data["good"])
    store = ResultsStore(f"sqlite:///{(tmp_path / 'results.db').as_posix()}")
    runs = store.list_runs()
    assert len(runs) == 1 and runs[0].decision == "ERROR" and runs[0].run_id == result["run_id"]
    assert runs[0].metrics == {}  # no half-filled ACCEPT-looking record


class _Receiver(BaseHTTPRequestHandler):
    received: ClassVar[list[dict]] = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).received.append(json.loads(body or b"{}"))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_an_alert_reaches_a_local_receiver_on_reject_and_a_dead_one_changes_nothing(tmp_path, data, monkeypatch):
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Receiver.received = []
    monkeypatch.setenv("LG_TEST_HOOK", f"http://127.0.0.1:{server.server_port}/hook")
    alerts = "{channels: [{type: webhook, url_env: LG_TEST_HOOK}], retries: 0}"
    (tmp_path / "live").mkdir()
    try:
        result = run(tmp_path / "live", *data["random"], alerts=alerts)
    finally:
        server.shutdown()
    assert result["decision"] == "REJECT"
    assert result["alerts"][0]["ok"] is True
    assert len(_Receiver.received) == 1 and "REJECT" in json.dumps(_Receiver.received[0])

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    monkeypatch.setenv("LG_TEST_HOOK", f"http://127.0.0.1:{dead}/hook")
    (tmp_path / "dead").mkdir()
    result = run(tmp_path / "dead", *data["random"], alerts=alerts)
    assert result["decision"] == "REJECT"
    assert result["alerts"][0]["ok"] is False and result["alerts"][0]["error"]
    stored = ResultsStore(f"sqlite:///{(tmp_path / 'dead' / 'results.db').as_posix()}").list_runs()[0]
    assert stored.decision == "REJECT" and stored.alerts and stored.alerts[0]["ok"] is False


def test_several_questions_in_a_question_column_and_artifacts(tmp_path):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    scenario = Scenario(n_items=600, questions=("sentiment", "topic"))
    batch, trusted = write_batch(tmp_path / "data", scenario, seed=5)
    config = write_config(tmp_path)
    config.write_text(config.read_text() + "columns: {question: question}\n"
                      "questions: [{name: sentiment}, {name: topic}]\n", encoding="utf-8")
    result = run_gate_flow(str(config), batch=str(batch), trusted=str(trusted))
    assert set(result["metrics"]) == {"sentiment", "topic"}
    assert result["decision"] in ("ACCEPT", "REVIEW"), result["reasons"]
    for question in ("sentiment", "topic"):
        assert result["metrics"][question]["normalized_cross_kappa"]["value"] > 0.8
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["labelgate-gate"])),
                                      limit=50)
    assert found and any("LabelGate" in str(a.data) for a in found)


def test_labeler_icc_gate_is_skipped_with_a_warning_on_text_labels(tmp_path, data):
    config = write_config(tmp_path)
    config.write_text(config.read_text().replace("gates:\n", "gates:\n  - type: labeler_icc\n"), encoding="utf-8")
    result = run_gate_flow(str(config), batch=str(data["good"][0]), trusted=str(data["good"][1]))
    assert result["decision"] == "ACCEPT", result["reasons"]
    assert any("labeler_icc skipped" in w for w in result["warnings"])


# ------------------------------------------------------------------ Prefect states a pipeline can act on
def test_the_flow_run_fails_on_error_and_names_reject_and_review(tmp_path, data):
    config = str(write_config(tmp_path))
    broken = tmp_path / "broken.csv"
    broken.write_text("item_id,rater_id\n1,a\n", encoding="utf-8")  # no label column: ERROR
    cases = {"ERROR": (broken, data["good"][1]), "REJECT": data["contentment"], "ACCEPT": data["good"]}
    for decision, (batch, trusted) in cases.items():
        state = flow_module.gate_flow(config, batch=str(batch), trusted=str(trusted), return_state=True)
        summary = flow_module.summary_of_state(state)
        assert summary["decision"] == decision, summary["reasons"]
        if decision == "ERROR":
            assert state.is_failed() and state.message.startswith("LabelGate ERROR")
            assert summary["error_step"] in {"load", "validate"}
        else:
            assert state.is_completed()
            assert state.name == {"REJECT": "Rejected", "ACCEPT": "Completed"}[decision]
    with pytest.raises(flow_module.GateRunError, match="LabelGate ERROR"):
        flow_module.gate_flow(config, batch=str(broken), trusted=str(data["good"][1]))
