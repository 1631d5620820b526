"""Raters in the decision: the flagged raters of the collusion scenario reach the record, the JSON and the text
output, and the rater policy (``raters``: warn / review / exclude) acts on them (issue 18, defect 7)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from labelgate.cli.main import app, gate_json, gate_text
from labelgate.gate import raters, run
from labelgate.gate.decision import GateDecision
from labelgate.pipeline.config import ConfigError, GateConfig, config_from_dict
from labelgate.pipeline.store import ResultsStore
from labelgate.pipeline.synth import scenario_named, simulate

# The demo's gates (`labelgate demo`), with fewer resamples.
CONFIG = """
gates:
  - {{type: normalized_cross_kappa, min_value: 0.8}}
  - {{type: irr_baseline, tolerance: 0.1, max_excess: 0.25}}
  - {{type: cross_kappa, min_value: 0.2, severity: warning}}
  - {{type: spa, min_value: 0.4, severity: warning}}
interval: {{n_boot: 200, seed: 0, diagnose_n_boot: 200}}
raters: {policy}
store: {{url: "sqlite:///{store}"}}
reports: {{dir: "{reports}"}}
"""
COLLUDERS = [f"crowd-colluder{k:02d}" for k in range(4)]


@pytest.fixture(scope="module")
def collusion(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("collusion")
    data = simulate(scenario_named("collusion", 800), seed=0)
    paths = {"batch": root / "batch.csv", "trusted": root / "trusted.csv"}
    data[data["pool"] == "crowd"].to_csv(paths["batch"], index=False)
    data[data["pool"] == "trusted"].to_csv(paths["trusted"], index=False)
    return paths


def gate(folder: Path, files: dict[str, Path], policy: str = "{}", **kw):
    config = folder / "gate.yaml"
    config.write_text(CONFIG.format(policy=policy, store=(folder / "r.db").as_posix(),
                                    reports=(folder / "reports").as_posix()), encoding="utf-8")
    return config, run(config, files["batch"], files["trusted"], **kw)


def colluders_of(section):
    return sorted({r["rater_id"] for r in section["flagged"] if "collusion" in r["flags"]})


def test_warn_keeps_the_decision_names_the_colluders_and_warns(tmp_path, collusion):
    _, summary = gate(tmp_path, collusion)
    # with its colluders this batch's normalized κx interval straddles the minimum: REVIEW, for that reason only
    assert summary["decision"] == "REVIEW", summary["reasons"]
    assert not any("rater" in reason for reason in summary["reasons"])
    section = summary["raters"]
    assert section["policy"] == {"low_agreement": "warn", "collusion": "warn"}
    assert colluders_of(section) == COLLUDERS
    assert section["excluded"] is None and section["with_flagged"] is None
    assert any("flagged collusion" in w and "crowd-colluder00" in w for w in summary["warnings"])
    # the evidence of every flagged rater: flags, items, agreement and its interval, the partners of a colluder
    row = next(r for r in section["flagged"] if r["rater_id"] == "crowd-colluder00")
    assert row["actions"]["collusion"] == "warn" and row["n_items"] > 0 and row["n_agreement_items"] > 0
    assert row["ci_low"] <= row["agreement"] <= row["ci_high"]
    assert sorted(row["partners"]) == COLLUDERS[1:]
    payload = json.loads(json.dumps(gate_json(summary)))
    assert colluders_of(payload["raters"]) == COLLUDERS
    assert payload["warnings"] == summary["warnings"]
    text = gate_text(summary)
    assert all(f"rater {c} [label]: " in text for c in COLLUDERS) and "collusion → warn" in text
    # the decision record holds them too
    stored = ResultsStore(f"sqlite:///{(tmp_path / 'r.db').as_posix()}").get(summary["run_id"])
    assert colluders_of(stored.validation[raters.RECORD_KEY]) == COLLUDERS


def test_review_sends_the_batch_to_review_naming_the_colluders(tmp_path, collusion):
    _, summary = gate(tmp_path, collusion, "{collusion: review}")
    assert summary["decision"] == "REVIEW"
    [reason] = [r for r in summary["reasons"] if "collusion" in r]
    assert "rater policy: review" in reason and all(c in reason for c in COLLUDERS)


def test_exclude_decides_without_the_colluders_and_records_both_decisions(tmp_path, collusion):
    config, summary = gate(tmp_path, collusion, "{collusion: exclude}")
    section = summary["raters"]
    assert section["excluded"]["raters"] == COLLUDERS
    # exactly the colluders' rows are excluded, listed by their row in the batch file
    batch = pd.read_csv(collusion["batch"])
    theirs = batch.index[batch["rater_id"].isin(COLLUDERS)].tolist()
    listed = pd.read_csv(section["excluded"]["file"])
    assert sorted(listed["_row"]) == theirs and section["excluded"]["n_rows"] == len(theirs)
    assert listed["_reasons"].str.contains("excluded by the rater policy: flagged collusion").all()
    assert Path(section["excluded"]["file"]).parent == Path(summary["reports"]["excluded_raters"]).parent
    # the batch is decided without them (ACCEPT); the decision with them (REVIEW) is kept for the audit
    kept = section["with_flagged"]
    assert summary["decision"] == "ACCEPT" and kept["decision"] == "REVIEW", (summary["reasons"], kept)
    assert summary["reasons"] == [] and "straddles" in kept["reasons"][0]
    without = summary["metrics"]["label"]["normalized_cross_kappa"]["value"]
    with_them = kept["metrics"]["label"]["normalized_cross_kappa"]["value"]
    assert without > with_them
    assert any("decided without 4 rater(s)" in w and "would be REVIEW" in w for w in summary["warnings"])
    assert "with the excluded raters the decision would be REVIEW" in gate_text(summary)
    stored = ResultsStore(f"sqlite:///{(tmp_path / 'r.db').as_posix()}").get(summary["run_id"])
    record = stored.validation[raters.RECORD_KEY]
    assert stored.decision == "ACCEPT" and record["with_flagged"]["decision"] == "REVIEW"
    assert record["excluded"]["n_rows"] == len(theirs)
    # the CLI serves the stored decision (without starting Prefect) and its JSON still names them
    result = CliRunner().invoke(app, ["gate", "--batch", str(collusion["batch"]), "--trusted",
                                      str(collusion["trusted"]), "--config", str(config), "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["reused"] and payload["raters"]["excluded"]["raters"] == COLLUDERS
    assert payload["raters"]["with_flagged"]["decision"] == "REVIEW"
    assert any("decided without" in w for w in payload["warnings"])


def test_the_policy_of_each_flag_applies_to_a_rater_with_several():
    cfg = GateConfig.model_validate({"raters": {"low_agreement": "review", "collusion": "exclude"}})
    rows = [{"rater_id": "c1", "flags": ["low_agreement", "collusion"], "partners": ["c2"], "n_ratings": 40,
             "n_shared_items": 3, "n_loo_items": 30, "agreement_basis": "peers", "loo_agreement": 0.05,
             "loo_ci_low": -0.1, "loo_ci_high": 0.15, "kappa_vs_trusted": 0.9},
            {"rater_id": "c2", "flags": ["collusion"], "partners": ["c1"], "n_ratings": 40},
            {"rater_id": "ok", "flags": [], "n_ratings": 40}]
    found = raters.find(cfg, {"q": {"raters": rows}})
    assert found.excluded == ["c1", "c2"]
    assert [r["rater_id"] for r in found.flagged] == ["c1", "c2"]
    # judged on its co-raters: that agreement and interval are the evidence, not the trusted kappa
    assert found.flagged[0]["agreement"] == 0.05 and found.flagged[0]["n_agreement_items"] == 30
    decided = raters.decide(GateDecision("ACCEPT", [], []), found, GateDecision("REJECT", ["x"], []), 80)
    assert decided.decision == "REVIEW"
    assert any("would be REJECT" in w for w in decided.warnings)
    assert raters.nothing_left(found, 80).decision == "REJECT"


def test_the_rater_policy_is_validated():
    with pytest.raises(ConfigError, match="low_agreement"):
        config_from_dict({"raters": {"spammer": "review"}})
    with pytest.raises(ConfigError, match=r"raters\.collusion"):
        config_from_dict({"raters": {"collusion": "drop"}})
    with pytest.raises(ConfigError, match=r"raters\.bias"):
        config_from_dict({"raters": {"bias": "warn"}})
    for key, value in (("fdr", 0), ("fdr", 1), ("power", 0.3), ("power", 1), ("effect", 0), ("min_agreement", 1.5),
                       ("min_shared_items", 0)):
        with pytest.raises(ConfigError, match=rf"raters\.{key}"):
            config_from_dict({"raters": {key: value}})
    # the judging settings are not flags: the policy (and the record) lists the flags' actions only
    cfg = GateConfig.model_validate({"raters": {"fdr": 0.05, "low_agreement": "review"}})
    assert cfg.raters.actions() == {"low_agreement": "review", "collusion": "warn"}


def test_raters_with_too_few_items_are_said_so_in_the_record_the_text_and_the_report(tmp_path, collusion):
    # a small effect needs a large workload: no unflagged rater of this batch has it
    _, summary = gate(tmp_path, collusion, "{effect: 0.05}")
    rows = summary["diagnostics"]["label"]["raters"]
    judging = summary["raters"]["judging"]["label"]
    assert judging["n_raters"] == len(rows) and judging["fdr"] == 0.1
    waiting = [r for r in rows if not r["judged"]]
    assert judging["n_too_few"] == len(waiting) > 0
    assert all(r["needs_items"] > r["n_shared_items"] for r in waiting
               if r["agreement_basis"] == "trusted" and r["needs_items"] is not None)
    assert judging["needs_min"] == min(r["needs_items"] for r in waiting if r["needs_items"] is not None)
    text = gate_text(summary)
    assert f"[label] {len(waiting)} of {len(rows)} raters have too few items to judge (each needs ≥ " in text
    from labelgate.reporting.report import render_gate_report

    page = render_gate_report(summary)
    assert "have too few items to judge." in page and f"too few items to judge (needs ≥ {judging['needs_min']:,} " in page
    # the default effect (a rater at chance) needs far fewer items
    (tmp_path / "default").mkdir()
    _, default = gate(tmp_path / "default", collusion)
    assert default["raters"]["judging"]["label"]["needs_max"] < judging["needs_min"]


@pytest.mark.usefixtures("prefect_api")
def test_exclude_under_the_prefect_flow_measures_the_rest_as_a_task(tmp_path, collusion):
    from labelgate.flows.gate import run_gate_flow

    config = tmp_path / "gate.yaml"
    config.write_text(CONFIG.format(policy="{collusion: exclude}", store=(tmp_path / "r.db").as_posix(),
                                    reports=(tmp_path / "reports").as_posix()), encoding="utf-8")
    summary = run_gate_flow(str(config), batch=str(collusion["batch"]), trusted=str(collusion["trusted"]))
    assert summary["decision"] == "ACCEPT", summary["reasons"]
    assert summary["raters"]["with_flagged"]["decision"] == "REVIEW"
    assert {"measure", "measure_without_flagged"} <= set(summary["timing"])
