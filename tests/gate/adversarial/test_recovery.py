"""Recovery after a crash adopts only the decision its own claim produced (the review's first probe)."""

from __future__ import annotations

from typing import Any

import pytest

from labelgate.gate import run
from labelgate.gate.watch import DropFolder, serve_settings
from labelgate.pipeline.config import config_from_dict
from labelgate.pipeline.synth import scenario_named, simulate
from tests.gate.test_drop_folder import Killed, gate_config, write_batches


def test_recovery_never_adopts_a_decision_another_request_made_for_the_same_batch_id(tmp_path):
    # wk7 (random labels, REJECT when gated) is claimed and the server dies before its record; meanwhile
    # `labelgate gate --batch <a good batch> --batch-id wk7` records an ACCEPT under the same batch id, after the
    # claim. Recovery used to adopt that ACCEPT for the file it never read.
    drop = tmp_path / "drop"
    write_batches(drop, batches=[("contentment", 3, "REJECT")])
    (drop / "0-contentment3.csv").rename(drop / "wk7.csv")
    cfg = config_from_dict(gate_config(tmp_path))

    def killed(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise Killed

    folder = DropFolder(cfg, serve_settings(cfg), gate=killed)
    folder.scan()
    with pytest.raises(Killed):
        folder.drain()
    folder.close()
    good = tmp_path / "good.csv"
    simulate(scenario_named("good", 600), seed=1).to_csv(good, index=False)
    other = run(cfg, good, batch_id="wk7")
    assert other["decision"] == "ACCEPT"

    restarted = DropFolder(cfg, serve_settings(cfg))
    assert restarted.recover() == []  # nothing adopted: the ACCEPT does not carry this file's claim
    (summary,) = restarted.drain()
    assert summary["batch_id"] == "wk7" and summary["decision"] == "REJECT"  # gated from its own content
    assert summary["run_id"] != other["run_id"]
    assert [row["decision"] for row in restarted.ledger.decisions()] == ["REJECT"]
    restarted.close()


def killed_after_recording(cfg: Any) -> tuple[DropFolder, list[dict[str, Any]]]:
    """A drop folder whose server dies right after the gate recorded its decision (the folder left open, its job
    running), and the summaries those runs returned."""
    seen: list[dict[str, Any]] = []

    def gate(*args: Any, **kwargs: Any) -> dict[str, Any]:
        seen.append(run(*args, **kwargs))
        raise Killed

    folder = DropFolder(cfg, serve_settings(cfg), gate=gate)
    folder.scan()
    with pytest.raises(Killed):
        folder.drain()
    return folder, seen


def test_the_record_a_claim_produced_is_adopted_and_carries_the_claim(tmp_path):
    write_batches(tmp_path / "drop", batches=[("good", 1, "ACCEPT")])
    cfg = config_from_dict(gate_config(tmp_path))
    folder, seen = killed_after_recording(cfg)
    (job,) = folder.ledger.jobs("running")
    assert job.claim == seen[0]["run_id"]  # the token in the ledger row is the run id of the record
    folder.close()
    restarted = DropFolder(cfg, serve_settings(cfg))
    (recovered,) = restarted.recover()
    assert recovered["run_id"] == seen[0]["run_id"] and recovered["decision"] == "ACCEPT"
    restarted.close()


def test_a_recovered_span_decision_shows_its_agreement_per_label(tmp_path):
    # the record a killed run left is adopted with the span section its decision was made with, as a fresh or a
    # reused decision shows it
    from tests.gate import drawn

    drop = tmp_path / "drop"
    drop.mkdir()
    drawn.spans(seed=9).to_csv(drop / "ner1.csv", index=False)
    cfg = config_from_dict({**gate_config(tmp_path),
                            "questions": [{"name": "ner", "kind": "spans", "categories": ["PER", "LOC", "ORG"]}]})
    folder, seen = killed_after_recording(cfg)
    folder.close()
    restarted = DropFolder(cfg, serve_settings(cfg))
    (recovered,) = restarted.recover()
    restarted.close()
    assert recovered["run_id"] == seen[0]["run_id"]
    labels = [row["label"] for row in seen[0]["units"]["ner"]["labels"]]
    assert labels and [row["label"] for row in recovered["units"]["ner"]["labels"]] == labels
    assert recovered["units"]["ner"]["labels"] == seen[0]["units"]["ner"]["labels"]
