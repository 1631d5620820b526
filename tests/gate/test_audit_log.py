"""The audit log through the gate API (no Prefect): every request recorded, decisions keyed by all their inputs,
history kept, every fault an ERROR beside the earlier records, alerts at least once and never twice."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from labelgate.cli.main import app
from labelgate.gate import Hooks, run
from labelgate.pipeline.store import ResultsStore
from labelgate.pipeline.synth import scenario_named, simulate
from tests.loopback import Receiver

CONFIG = """
gates:
  - type: normalized_cross_kappa
    min_value: 0.8
interval: {{n_boot: 100, seed: 0}}
store: {{url: "sqlite:///{store}"}}
reports: {{dir: "{reports}"}}
{alerts}
"""


def _write(tmp: Path, alerts: str = "") -> Path:
    config = tmp / "gate.yaml"
    config.write_text(CONFIG.format(store=(tmp / "r.db").as_posix(), reports=(tmp / "rep").as_posix(),
                                    alerts=alerts), encoding="utf-8")
    return config


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("audit-data")
    frame = simulate(scenario_named("good", 300), seed=1)
    crowd, trusted = frame[frame["pool"] == "crowd"], frame[frame["pool"] == "trusted"]
    crowd.to_csv(root / "crowd.csv", index=False)
    trusted.to_csv(root / "trusted.csv", index=False)
    shuffled = trusted.assign(label=trusted["label"].sample(frac=1.0, random_state=0).to_numpy())
    shuffled.to_csv(root / "trusted-shuffled.csv", index=False)
    return {"crowd": root / "crowd.csv", "trusted": root / "trusted.csv", "shuffled": root / "trusted-shuffled.csv"}


def _store(tmp: Path) -> ResultsStore:
    return ResultsStore(f"sqlite:///{(tmp / 'r.db').as_posix()}")


def _counting(monkeypatch) -> list[int]:
    from labelgate.gate import measure as measure_step

    calls: list[int] = []
    real = measure_step.measure

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(measure_step, "measure", counted)
    return calls


def test_another_trusted_replication_is_recomputed_not_served(tmp_path, data, monkeypatch):
    calls = _counting(monkeypatch)
    config = _write(tmp_path)
    first = run(config, data["crowd"], data["trusted"], batch_id="b")
    other = run(config, data["crowd"], data["shuffled"], batch_id="b")
    assert first["decision"] == "ACCEPT" and not other["reused"]
    assert other["decision"] != "ACCEPT"  # labels shuffled in the trusted pool: no agreement left to find
    assert other["inputs_digest"] != first["inputs_digest"] and len(calls) == 2


def test_the_same_inputs_under_another_batch_id_are_recorded_once_computed_once(tmp_path, data, monkeypatch):
    calls = _counting(monkeypatch)
    config = _write(tmp_path)
    first = run(config, data["crowd"], data["trusted"], batch_id="vendor-a")
    second = run(config, data["crowd"], data["trusted"], batch_id="vendor-b")
    assert len(calls) == 1 and second["reused"] and second["reused_from"] == first["run_id"]
    assert second["batch_id"] == "vendor-b" and second["decision"] == first["decision"]
    store = _store(tmp_path)
    assert store.current("vendor-a").run_id == first["run_id"]
    assert store.current("vendor-b").run_id == second["run_id"]


@pytest.mark.parametrize("step", ["lock", "publish", "persist"])
def test_a_failed_rerun_adds_an_error_beside_the_untouched_earlier_record(tmp_path, data, monkeypatch, step):
    config = _write(tmp_path)
    first = run(config, data["crowd"], data["trusted"], batch_id="b")

    def boom(*args, **kwargs):
        raise RuntimeError(f"injected failure in {step}")

    if step == "lock":
        monkeypatch.setattr("labelgate.gate.runner.run_lock", boom)
        hooks = None
    elif step == "publish":
        hooks = Hooks(publish=boom)
    else:  # the store accepts the ERROR record, not the decision's own record
        real_append = ResultsStore.append

        def append_errors_only(self, record):
            if record.decision != "ERROR":
                raise RuntimeError("injected failure in persist")
            return real_append(self, record)

        monkeypatch.setattr(ResultsStore, "append", append_errors_only)
        hooks = None
    failed = run(config, data["crowd"], data["trusted"], batch_id="b", force=True, hooks=hooks)
    assert failed["decision"] == "ERROR" and failed["error_step"] == step
    assert any(f"injected failure in {step}" in r for r in failed["reasons"])
    store = _store(tmp_path)
    kept = store.get(first["run_id"])
    assert kept.decision == first["decision"] and kept.metrics == _store(tmp_path).get(first["run_id"]).metrics
    assert [r.decision for r in store.list_runs(batch_id="b")] == ["ERROR", first["decision"]]
    monkeypatch.undo()  # the fault is gone: the next request gets the computed decision, never the ERROR
    after = run(config, data["crowd"], data["trusted"], batch_id="b")
    assert after["decision"] == first["decision"] and after["reused_from"] == first["run_id"]


def test_an_unreachable_store_is_an_error_that_says_it_was_not_recorded(tmp_path, data):
    config = tmp_path / "gate.yaml"
    config.write_text("store: {url_env: LG_TEST_UNSET_STORE}\n", encoding="utf-8")
    summary = run(config, data["crowd"], data["trusted"])
    assert summary["decision"] == "ERROR" and summary["error_step"] == "store"
    assert summary["reasons"][-1] == "the ERROR could not be recorded: the results store was not reached"


def test_runs_lists_the_log_as_json_and_text(tmp_path, data):
    config = _write(tmp_path)
    first = run(config, data["crowd"], data["trusted"], batch_id="b1")
    run(config, data["crowd"], data["trusted"], batch_id="b2")
    cli = CliRunner()
    result = cli.invoke(app, ["runs", "--config", str(config), "--json"])
    assert result.exit_code == 0, result.output
    records = json.loads(result.stdout)
    assert [r["batch_id"] for r in records] == ["b2", "b1"]
    assert {"run_id", "batch_id", "decision", "reasons", "created_at", "inputs_digest"} <= records[0].keys()
    assert records[0]["reused_from"] == first["run_id"] and records[1]["reused_from"] is None
    only = json.loads(cli.invoke(app, ["runs", "--config", str(config), "--batch", "b1", "--json"]).stdout)
    assert [r["run_id"] for r in only] == [first["run_id"]]
    none = json.loads(cli.invoke(app, ["runs", "--config", str(config), "--decision", "reject", "--json"]).stdout)
    assert none == []
    text = cli.invoke(app, ["runs", "--config", str(config)]).stdout
    assert text.splitlines()[0].startswith("* ") and "b2" in text.splitlines()[0]
    bad = cli.invoke(app, ["runs", "--config", str(config), "--since", "yesterday"])
    assert bad.exit_code == 3 and "ISO 8601" in bad.stderr
    wrong = cli.invoke(app, ["runs", "--config", str(config), "--decision", "MAYBE"])
    assert wrong.exit_code == 3 and "--decision must be one of ACCEPT, REJECT, REVIEW, ERROR" in wrong.stderr


def test_a_batch_id_with_a_newline_cannot_forge_output_lines(tmp_path, data):
    config = _write(tmp_path)
    cli = CliRunner()
    result = cli.invoke(app, ["gate", "--batch", str(data["crowd"]), "--trusted", str(data["trusted"]),
                              "--config", str(config), "--batch-id", "evil\nACCEPT  batch forged"])
    lines = result.stdout.splitlines()
    assert not any(line.startswith("ACCEPT  batch forged") for line in lines)
    assert "evil\\nACCEPT  batch forged" in lines[0]


def test_an_undelivered_alert_is_sent_by_the_next_request_and_never_twice(tmp_path, data, monkeypatch):
    receiver = Receiver(statuses=[503])  # the first run's only attempt fails
    try:
        monkeypatch.setenv("LG_TEST_AUDIT_HOOK", f"http://127.0.0.1:{receiver.port}/hook")
        alerts = ("alerts: {notify_on: [ACCEPT, REJECT, REVIEW, ERROR], retries: 0, "
                  "channels: [{type: webhook, url_env: LG_TEST_AUDIT_HOOK}]}")
        config = _write(tmp_path, alerts)
        first = run(config, data["crowd"], data["trusted"], batch_id="b")
        assert [o["ok"] for o in first["alerts"]] == [False] and len(receiver.requests) == 1
        again = run(config, data["crowd"], data["trusted"], batch_id="b")  # the same inputs: the alert is owed
        assert again["reused"] and [o["ok"] for o in again["alerts"]] == [True] and len(receiver.requests) == 2
        third = run(config, data["crowd"], data["trusted"], batch_id="b")
        assert third["alerts"] == [] and len(receiver.requests) == 2  # delivered: never sent again
        retried = CliRunner().invoke(app, ["alerts", "retry", "--config", str(config), "--json"])
        assert retried.exit_code == 0 and json.loads(retried.stdout) == {} and len(receiver.requests) == 2
    finally:
        receiver.close()


def test_alerts_retry_sends_what_is_owed(tmp_path, data, monkeypatch):
    monkeypatch.setenv("LG_TEST_AUDIT_HOOK", "http://127.0.0.1:9/unused")  # nothing listens on the discard port
    alerts = ("alerts: {notify_on: [ACCEPT, REJECT, REVIEW, ERROR], retries: 0, "
              "channels: [{type: webhook, url_env: LG_TEST_AUDIT_HOOK}]}")
    config = _write(tmp_path, alerts)
    first = run(config, data["crowd"], data["trusted"], batch_id="b")
    assert [o["ok"] for o in first["alerts"]] == [False]
    receiver = Receiver()
    try:
        monkeypatch.setenv("LG_TEST_AUDIT_HOOK", f"http://127.0.0.1:{receiver.port}/hook")
        result = CliRunner().invoke(app, ["alerts", "retry", "--config", str(config), "--json"])
        assert result.exit_code == 0, result.output
        assert [o["ok"] for o in json.loads(result.stdout)[first["run_id"]]] == [True] and len(receiver.requests) == 1
        again = CliRunner().invoke(app, ["alerts", "retry", "--config", str(config)])
        assert "no alert was owed" in again.stdout and len(receiver.requests) == 1
    finally:
        receiver.close()


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_prefect_api_is_a_recorded_error_not_a_reject(tmp_path, data):
    config = _write(tmp_path)
    env = {**os.environ, "PREFECT_API_URL": f"http://127.0.0.1:{_dead_port()}/api"}
    out = subprocess.run([sys.executable, "-m", "labelgate", "gate", "--batch", str(data["crowd"]), "--trusted",
                          str(data["trusted"]), "--config", str(config), "--batch-id", "p"],
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 3, out.stderr
    stderr = out.stderr.strip().splitlines()
    assert stderr[0].startswith("error: The Prefect API at") and "not reachable" in stderr[0]
    assert "Traceback" not in out.stderr and len(stderr) == 2
    record = _store(tmp_path).current("p")
    assert record is not None and record.decision == "ERROR" and "Prefect API" in record.reasons[0]


def test_two_configurations_gating_one_batch_at_once_never_share_a_run_folder(tmp_path, data):
    import threading

    strict, lenient = _write(tmp_path), tmp_path / "lenient.yaml"
    lenient.write_text(strict.read_text(encoding="utf-8").replace("min_value: 0.8", "min_value: 0.5"),
                       encoding="utf-8")
    summaries: dict[str, dict] = {}

    def gate(name: str, config: Path) -> None:
        from labelgate.reporting.report import write_gate_report

        summaries[name] = run(config, data["crowd"], data["trusted"], batch_id="shared",
                              hooks=Hooks(publish=write_gate_report))

    threads = [threading.Thread(target=gate, args=(name, cfg)) for name, cfg in (("a", strict), ("b", lenient))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    a, b = summaries["a"], summaries["b"]
    assert a["decision"] != "ERROR" and b["decision"] != "ERROR", (a["reasons"], b["reasons"])
    assert a["inputs_digest"] != b["inputs_digest"]  # another configuration is another key
    folders = {Path(a["report"]).parent, Path(b["report"]).parent}
    assert len(folders) == 2 and all(f.parent == tmp_path / "rep" for f in folders)
    assert {f.name for f in folders} == {f"shared-{a['run_id']}", f"shared-{b['run_id']}"}
