"""The gate on label sets, text spans and image boxes: a crowd drawn like the trusted pool is accepted, a crowd that
misses half of the tags / entities / boxes is rejected; every gate type applies; the report shows each label."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from labelgate.gate import Hooks, run
from labelgate.reporting.report import write_gate_report
from tests.gate import drawn

GATES = """
gates:
  - {type: normalized_cross_kappa, min_value: 0.75}
  - {type: cross_kappa, min_value: 0.6}
  - {type: irr_baseline, tolerance: 0.1}
  - {type: spa, min_value: 0.5, severity: warning}
interval: {n_boot: 100, seed: 0}
"""

QUESTIONS = {
    "sets": "questions: [{name: topics, level: set, distance: masi, sep: '|'}]\n",
    "spans": "questions: [{name: ner, kind: spans, categories: [PER, LOC, ORG]}]\n",
    "boxes": "questions: [{name: objects, kind: boxes, boxes: {iou: 0.5}}]\n",
}


def _write(frame: pd.DataFrame, path: Path, kind: str) -> None:
    if kind == "sets" and path.suffix == ".csv":  # a CSV cell holds the set joined by the configured separator;
        # the empty set ("none applies") is the separator alone: an empty cell is no judgement
        frame = frame.assign(label=frame["label"].map(lambda tags: "|".join(tags) or "|"))
    if path.suffix == ".csv":
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path, index=False)


def _gate(tmp_path: Path, kind: str, frame: pd.DataFrame, name: str, suffix: str = ".csv") -> dict[str, Any]:
    config = tmp_path / f"{kind}.yaml"
    config.write_text(QUESTIONS[kind] + GATES + f'store: {{url: "sqlite:///{(tmp_path / "r.db").as_posix()}"}}\n'
                      f'reports: {{dir: "{(tmp_path / "reports").as_posix()}"}}\n')
    crowd, trusted = tmp_path / f"{name}-crowd{suffix}", tmp_path / f"{name}-trusted{suffix}"
    _write(frame[frame["pool"] == "crowd"], crowd, kind)
    _write(frame[frame["pool"] == "trusted"], trusted, kind)
    return run(config, crowd, trusted, hooks=Hooks(publish=write_gate_report))


BUILD = {"sets": drawn.sets, "spans": drawn.spans, "boxes": drawn.boxes}


@pytest.mark.parametrize("kind", ["sets", "spans", "boxes"])
def test_a_crowd_like_the_trusted_pool_is_accepted_and_one_missing_half_rejected(tmp_path: Path, kind: str):
    good = _gate(tmp_path, kind, BUILD[kind](seed=1), "good")
    assert good["decision"] == "ACCEPT", good["reasons"]
    assert {m for m in good["metrics"][next(iter(good["metrics"]))]} >= {
        "normalized_cross_kappa", "cross_kappa", "irr_baseline", "spa"}
    bad = _gate(tmp_path, kind, BUILD[kind](miss=0.5, seed=2), "bad")
    assert bad["decision"] == "REJECT", bad["reasons"]
    assert any("irr_baseline" in r or "kappa" in r for r in bad["reasons"])


def test_a_parquet_set_cell_is_a_list(tmp_path: Path):
    frame = drawn.sets(seed=3)
    csv = _gate(tmp_path, "sets", frame, "csv")
    parquet = _gate(tmp_path, "sets", frame, "parquet", suffix=".parquet")
    assert parquet["decision"] == csv["decision"] == "ACCEPT"
    # the same judgements, whatever the file format: the same values (and the same batch)
    assert parquet["metrics"]["topics"]["cross_kappa"]["value"] == pytest.approx(
        csv["metrics"]["topics"]["cross_kappa"]["value"], abs=1e-12)


@pytest.mark.parametrize("kind", ["spans", "boxes"])
def test_the_report_shows_the_agreement_on_each_label(tmp_path: Path, kind: str):
    summary = _gate(tmp_path, kind, BUILD[kind](seed=4), "good")
    units = summary["units"]
    question = next(iter(units))
    labels = [row["label"] for row in units[question]["labels"]]
    assert labels == (["PER", "LOC", "ORG"] if kind == "spans" else sorted(drawn.BOX_LABELS))
    assert all(row["alpha_crowd"] > 0.8 and row["cross_kappa"] > 0.8 for row in units[question]["labels"])
    html = Path(summary["report"]).read_text()
    assert "Agreement per label" in html
    for label in labels:
        assert f">{label}<" in html
    if kind == "boxes":
        assert units[question]["iou"], "the mean matched IoU is reported for boxes"
        assert "matched IoU" in html
    result = json.loads((Path(summary["report"]).parent / "result.json").read_text())
    assert result["units"][question]["labels"] == units[question]["labels"]


@pytest.mark.parametrize("kind", ["spans", "boxes"])
def test_a_reused_decision_shows_the_same_agreement_per_label_as_the_fresh_one(tmp_path: Path, kind: str):
    fresh = _gate(tmp_path, kind, BUILD[kind](seed=9), "good")
    assert not fresh["reused"] and fresh["units"]
    again = _gate(tmp_path, kind, BUILD[kind](seed=9), "good")  # the same inputs: the recorded decision is served
    assert again["reused"] and again["reused_from"] == fresh["run_id"]
    assert again["units"] == fresh["units"]
    question = next(iter(fresh["units"]))
    assert [row["label"] for row in again["units"][question]["labels"]]
    if kind == "boxes":  # per rater too: this request's expansion computes it (the record keeps the pools' only)
        assert again["units"][question]["iou"]["raters"] == fresh["units"][question]["iou"]["raters"]
    # the CLI's early look-up serves it the same way, and a report rebuilt from the reused summary shows it
    from labelgate.gate.audit import stored_decision

    config, crowd, trusted = tmp_path / f"{kind}.yaml", tmp_path / "good-crowd.csv", tmp_path / "good-trusted.csv"
    served = stored_decision(config, crowd, trusted, batch_id="served")
    assert served is not None and served["reused"] and served["units"] == fresh["units"]
    page = write_gate_report(again, tmp_path / "reused-report")
    html = Path(page["html"]).read_text(encoding="utf-8")
    assert "Agreement per label" in html and all(f">{row['label']}<" in html
                                                 for row in fresh["units"][question]["labels"])
    # the decision was recorded once and served twice: three records, the first untouched
    from labelgate.pipeline.store import ResultsStore

    store = ResultsStore(f"sqlite:///{(tmp_path / 'r.db').as_posix()}")
    first = store.get(fresh["run_id"])
    assert first is not None and first.reused_from is None and first.decision == fresh["decision"]
    assert len(store.list_runs(None)) == 3


def test_a_span_table_without_its_offsets_is_an_error_naming_the_column(tmp_path: Path):
    frame = drawn.spans(n_docs=5, seed=5).drop(columns=["end"])
    summary = _gate(tmp_path, "spans", frame, "broken")
    assert summary["decision"] == "ERROR"
    assert any("'end'" in r for r in summary["reasons"]), summary["reasons"]


def test_a_span_without_its_rater_is_an_error_naming_the_row(tmp_path: Path):
    frame = drawn.spans(n_docs=5, seed=6)
    crowd_rows = frame.index[frame["pool"] == "crowd"]
    frame.loc[crowd_rows[3], "rater_id"] = None
    summary = _gate(tmp_path, "spans", frame, "no-rater")
    assert summary["decision"] == "ERROR"
    assert any("'rater_id' is empty in 1 row(s) of the batch table, the first row 3" in r
               for r in summary["reasons"]), summary["reasons"]


def test_spans_beside_another_question_in_one_table(tmp_path: Path):
    spans = drawn.spans(n_docs=30, seed=8).assign(question="ner")
    docs = spans[["item_id", "rater_id", "pool"]].drop_duplicates()
    tone = docs.assign(question="tone", label=[("pos", "neg")[int(i[1:]) % 2] for i in docs["item_id"]])
    frame = pd.concat([spans, tone], ignore_index=True)
    config = tmp_path / "mixed.yaml"
    config.write_text("columns: {question: question}\n"
                      "questions: [{name: ner, kind: spans, categories: [PER, LOC, ORG]}, {name: tone}]\n"
                      + GATES + f'store: {{url: "sqlite:///{(tmp_path / "r.db").as_posix()}"}}\n'
                      f'reports: {{dir: "{(tmp_path / "reports").as_posix()}"}}\n')
    frame.to_csv(tmp_path / "both.csv", index=False)
    summary = run(config, tmp_path / "both.csv")
    assert summary["decision"] == "ACCEPT", summary["reasons"]
    assert set(summary["metrics"]) == {"ner", "tone"} and set(summary["units"]) == {"ner"}
