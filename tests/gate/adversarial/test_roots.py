"""Files outside the configured roots are never read, and nothing of them is disclosed (the review's fifth probe)."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from labelgate.gate import run
from labelgate.gate.watch import DropFolder, event_roots, serve_settings
from labelgate.pipeline.config import config_from_dict, load_config
from labelgate.pipeline.store import ResultsStore
from tests.gate.test_drop_folder import gate_config, write_batches

SECRET = "root:x:0:0:SECRET-LINE-7f3a:/root:/bin/bash"


def _secret(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "passwd.csv"
    secret.write_text(SECRET + "\nsecond,line\n", encoding="utf-8")
    return secret


def _no_secret(*texts: object) -> None:
    for text in texts:
        assert "SECRET-LINE" not in json.dumps(text, default=str)


def test_a_symlink_out_of_the_drop_folder_is_an_error_that_discloses_nothing(tmp_path, caplog):
    secret = _secret(tmp_path)
    write_batches(tmp_path / "drop", batches=[("good", 1, "ACCEPT")])
    os.symlink(secret, tmp_path / "drop" / "passwd.csv")
    os.utime(tmp_path / "drop" / "passwd.csv", (0, 0), follow_symlinks=False)
    cfg = config_from_dict(gate_config(tmp_path))
    announced: list[dict] = []
    folder = DropFolder(cfg, serve_settings(cfg), on_decision=announced.append)
    folder.scan()
    with caplog.at_level(logging.DEBUG):
        summaries = {s["batch_id"]: s for s in folder.drain()}
    folder.close()
    bad = summaries["passwd"]
    assert bad["decision"] == "ERROR" and summaries["0-good1"]["decision"] == "ACCEPT"
    assert "outside the folders LabelGate may read" in bad["reasons"][0]
    records = ResultsStore(cfg.store.url).list_runs(None)
    _no_secret(summaries, announced, caplog.text, [r.__dict__ for r in records])
    for report in (tmp_path / "reports").rglob("*"):
        if report.is_file() and report.suffix in (".html", ".json", ".md"):
            assert "SECRET-LINE" not in report.read_text(encoding="utf-8", errors="replace")


def test_a_symlinked_sidecar_out_of_the_folder_is_not_read(tmp_path):
    secret = _secret(tmp_path)
    write_batches(tmp_path / "drop", batches=[("good", 1, "ACCEPT")])
    os.symlink(secret, tmp_path / "drop" / "0-good1.json")
    folder = DropFolder(config_from_dict(gate_config(tmp_path)), None)
    (job,) = folder.scan()
    folder.close()
    assert job.problem is not None and "SECRET-LINE" not in job.problem


@pytest.mark.parametrize("where", ["outside", "dotdot", "symlink_dir"])
def test_an_event_path_outside_the_roots_is_an_error_and_is_not_read(tmp_path, where):
    secret = _secret(tmp_path)
    (tmp_path / "drop").mkdir()
    cfg = config_from_dict(gate_config(tmp_path))
    roots = event_roots(cfg)
    assert roots == [str((tmp_path / "drop").resolve())]
    named = {"outside": secret, "dotdot": tmp_path / "drop" / ".." / "outside" / "passwd.csv",
             "symlink_dir": tmp_path / "drop" / "link" / "passwd.csv"}[where]
    if where == "symlink_dir":
        os.symlink(tmp_path / "outside", tmp_path / "drop" / "link")
    summary = run(cfg, named, batch_id="payroll", roots=roots)
    assert summary["decision"] == "ERROR" and summary["error_step"] == "load"
    assert "outside the folders" in summary["reasons"][0]
    _no_secret(summary, [r.__dict__ for r in ResultsStore(cfg.store.url).list_runs(None)])


def test_an_event_path_inside_the_roots_is_gated(tmp_path):
    write_batches(tmp_path / "drop", batches=[("good", 1, "ACCEPT")])
    cfg = config_from_dict(gate_config(tmp_path))
    summary = run(cfg, tmp_path / "drop" / "0-good1.csv", roots=event_roots(cfg))
    assert summary["decision"] == "ACCEPT"


def test_the_event_deployment_carries_the_roots_and_the_trigger_cannot_set_them(tmp_path):
    pytest.importorskip("prefect")
    from labelgate.flows.serve import event_deployment

    (tmp_path / "drop").mkdir()
    config = tmp_path / "gate.yaml"
    config.write_text(json.dumps(gate_config(tmp_path, roots=["batches"])), encoding="utf-8")
    deployment = event_deployment(config)
    expected = [str((tmp_path / "drop").resolve()), str((tmp_path / "batches").resolve())]
    assert deployment.parameters["roots"] == expected == event_roots(load_config(config))
    (trigger,) = deployment.triggers
    assert "roots" not in trigger.parameters


def _label_studio_config(tmp_path: Path) -> dict:
    config = gate_config(tmp_path)
    config["batch"] = {"format": "label_studio", "control": "mood", "path": "http://127.0.0.1:8081/projects/3"}
    return config


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/projects/3?tasks=1,2", "https://attacker.example/projects/3",
                                 "http://127.0.0.1:8081.attacker.example/projects/3"])
def test_an_event_url_on_another_server_is_an_error_and_nothing_is_fetched(tmp_path, monkeypatch, url):
    # an event sender must not make the gate send the Label Studio token to a host of its choosing
    import labelgate.pipeline.sources.label_studio.source as source

    fetched: list[str] = []
    monkeypatch.setattr(source, "read_label_studio", lambda given, *a, **k: fetched.append(str(given)))
    (tmp_path / "drop").mkdir()
    cfg = config_from_dict(_label_studio_config(tmp_path))
    summary = run(cfg, url, batch_id="ls", roots=event_roots(cfg))
    assert summary["decision"] == "ERROR" and summary["error_step"] == "load" and not fetched
    assert "not on the configured server" in summary["reasons"][0]


def test_an_event_url_on_the_configured_server_is_read(tmp_path, monkeypatch):
    import labelgate.pipeline.sources.label_studio.source as source

    fetched: list[str] = []

    def reader(given, *args, **kwargs):
        fetched.append(str(given))
        raise RuntimeError("reached the reader")

    monkeypatch.setattr(source, "read_label_studio", reader)
    (tmp_path / "drop").mkdir()
    cfg = config_from_dict(_label_studio_config(tmp_path))
    summary = run(cfg, "http://127.0.0.1:8081/projects/3?tasks=1,2", batch_id="ls", roots=event_roots(cfg))
    assert summary["decision"] == "ERROR" and fetched == ["http://127.0.0.1:8081/projects/3?tasks=1,2"]
