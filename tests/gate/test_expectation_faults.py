"""An expectation that raises inside the gate's GX run is a fault: the run is an ERROR (exit 3) with its message.

A statistic that is undefined on the data (NaN, ``docs/degenerate-input.md``) was computed and stays decided by the
policy (REVIEW for a degenerate metric); an expectation that failed to run measured nothing, so no decision may rest
on it — on every route that measures: a table batch, a batch kept in its database, the Prefect flow.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
from typer.testing import CliRunner

from labelgate.cli.main import app
from labelgate.gate import run
from labelgate.gate.measure import ExpectationRunError, outcome_from_result
from labelgate.pipeline.store import ResultsStore
from labelgate.pipeline.synth import scenario_named, simulate
from tests.loopback import Receiver

MESSAGE = "the SPA provider broke on purpose"


def _broken_spa(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError(MESSAGE)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("faults")
    frame = simulate(scenario_named("good", 300), seed=1)
    frame[frame["pool"] == "crowd"].to_csv(root / "batch.csv", index=False)
    frame[frame["pool"] == "trusted"].to_csv(root / "trusted.csv", index=False)
    frame.to_csv(root / "both.csv", index=False)
    return {"root": root, "batch": root / "batch.csv", "trusted": root / "trusted.csv", "both": root / "both.csv"}


def config(folder: Path, severity: str = "blocking", **extra: Any) -> dict[str, Any]:
    return {"gates": [{"type": "cross_kappa", "min_value": 0.2},
                      {"type": "spa", "min_value": 0.1, "severity": severity}],
            "interval": {"n_boot": 50, "seed": 0},
            "store": {"url": f"sqlite:///{(folder / 'results.db').as_posix()}"},
            "reports": {"dir": (folder / "reports").as_posix()}, **extra}


@pytest.fixture
def broken_spa(monkeypatch):
    """SPA raises inside its GX metric provider (on pandas and on SQL engines alike)."""
    monkeypatch.setattr("labelgate.gx._metrics.spa", _broken_spa)


def test_without_the_fault_the_same_batch_is_accepted(files, tmp_path):
    assert run(config(tmp_path), files["batch"], files["trusted"])["decision"] == "ACCEPT"


@pytest.mark.usefixtures("broken_spa")
def test_an_expectation_that_raises_ends_the_cli_gate_in_error_with_its_message_everywhere(files, tmp_path,
                                                                                              monkeypatch):
    receiver = Receiver(json_bodies=True)
    try:
        monkeypatch.setenv("LG_TEST_FAULT_HOOK", receiver.url)
        cfg = config(tmp_path, alerts={"channels": [{"type": "webhook", "url_env": "LG_TEST_FAULT_HOOK"}]})
        path = tmp_path / "gate.yaml"
        path.write_text(json.dumps(cfg), encoding="utf-8")  # JSON is YAML
        result = CliRunner().invoke(app, ["gate", "--config", str(path), "--batch", str(files["batch"]),
                                          "--trusted", str(files["trusted"]), "--json", "--prefect", "never"])
    finally:
        receiver.close()
    assert result.exit_code == 3, result.output
    payload = json.loads(result.stdout)
    assert payload["decision"] == "ERROR"
    cause = f"measure: [label] the spa expectation failed to run: {MESSAGE}"
    assert payload["reasons"] == [cause]
    # the store
    records = ResultsStore(cfg["store"]["url"]).list_runs(batch_id="batch")
    assert [(r.decision, r.reasons) for r in records] == [("ERROR", [cause])]
    # result.json and the report beside it
    page = Path(payload["report"])
    stored = json.loads((page.parent / "result.json").read_text(encoding="utf-8"))
    assert stored["decision"] == "ERROR" and stored["reasons"] == [cause]
    assert MESSAGE in page.read_text(encoding="utf-8")
    # the alert
    assert len(receiver.requests) == 1
    assert MESSAGE in json.dumps(receiver.requests[0]["body"])


@pytest.mark.usefixtures("broken_spa")
def test_a_warning_expectation_that_raises_is_a_fault_too(files, tmp_path):
    summary = run(config(tmp_path, severity="warning"), files["batch"], files["trusted"])
    assert summary["decision"] == "ERROR"
    assert summary["error_step"] == "measure" and MESSAGE in summary["reasons"][0]


@pytest.mark.usefixtures("broken_spa")
def test_every_expectation_that_raised_is_named(files, tmp_path, monkeypatch):
    monkeypatch.setattr("labelgate.gx._metrics.cross_kappa", _broken_spa)
    summary = run(config(tmp_path), files["batch"], files["trusted"])
    assert summary["decision"] == "ERROR"
    assert "the cross_kappa expectation failed to run" in summary["reasons"][0]
    assert "the spa expectation failed to run" in summary["reasons"][0]


@pytest.mark.usefixtures("broken_spa")
def test_a_batch_kept_in_its_database_fails_closed_the_same_way(files, tmp_path, monkeypatch):
    sa = pytest.importorskip("sqlalchemy")
    url = f"sqlite:///{(tmp_path / 'judgements.db').as_posix()}"
    engine = sa.create_engine(url)
    pd.read_csv(files["both"]).sort_values("item_id", kind="stable").to_sql("judgements", engine, index=False)
    engine.dispose()
    monkeypatch.setenv("LG_TEST_FAULT_DB", url)
    cfg = config(tmp_path, batch={"format": "sql", "query": "SELECT * FROM judgements", "url_env": "LG_TEST_FAULT_DB",
                                  "aggregate": True})
    summary = run(cfg)
    assert summary["decision"] == "ERROR", summary["reasons"]
    assert summary["reasons"] == [f"measure: [label] the spa expectation failed to run: {MESSAGE}"]


def test_a_degenerate_statistic_is_no_fault_it_stays_an_undefined_outcome():
    """The rule itself: a NaN computed by the documented policy is an outcome; a raised exception is a fault."""
    config_ = SimpleNamespace(meta={"labelgate_gate": "spa", "labelgate_severity": "blocking"}, type="x",
                              kwargs={"question": "q"})
    nan = SimpleNamespace(expectation_config=config_, exception_info={}, result={"details": {
        "value": None, "reason": "no item has two or more ratings", "checks": [{"point": float("nan")}]}})
    outcome = outcome_from_result(nan)
    assert outcome.is_undefined and outcome.verdict == "review" and outcome.reason.startswith("no item")
    raised = SimpleNamespace(expectation_config=config_, result={}, exception_info={
        "MetricConfigurationID(...)": {"raised_exception": True, "exception_message": "boom\n  at line 2"}})
    with pytest.raises(ExpectationRunError) as caught:
        outcome_from_result(raised)
    assert caught.value.message == "[q] the spa expectation failed to run: boom at line 2"
    assert caught.value.to_dict()["code"] == "expectation_failed"
    assert caught.value.context["gate"] == "spa" and caught.value.context["question"] == "q"
