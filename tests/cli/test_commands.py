"""The command line: exit codes, the --json shape, the metrics panel, synthetic data, one-line errors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from labelgate.cli.main import app, write_synthetic

runner = CliRunner()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    good = write_synthetic(root / "good", "good", 800, seed=1)
    bad = write_synthetic(root / "bad", "random", 800, seed=2)
    config = root / "gate.yaml"
    config.write_text(f"""
gates:
  - {{type: normalized_cross_kappa, min_value: 0.8}}
  - {{type: irr_baseline, tolerance: 0.1}}
interval: {{n_boot: 200}}
store: {{url: "sqlite:///{(root / 'results.db').as_posix()}"}}
reports: {{dir: "{(root / 'reports').as_posix()}"}}
""", encoding="utf-8")
    return {"good": good, "bad": bad, "config": config}


@pytest.mark.usefixtures("prefect_api")
@pytest.mark.parametrize(("name", "code", "decision"), [("good", 0, "ACCEPT"), ("bad", 1, "REJECT")])
def test_gate_exit_codes_and_json_shape(files, name, code, decision):
    result = runner.invoke(app, ["gate", "--batch", str(files[name]["batch"]), "--trusted",
                                 str(files[name]["trusted"]), "--config", str(files["config"]), "--json"])
    assert result.exit_code == code, result.output
    payload = json.loads(result.stdout)
    assert payload["decision"] == decision and payload["batch_id"] == "batch"
    assert {"decision", "batch_id", "reasons", "coverage", "metrics", "report"} <= payload.keys()
    row = payload["metrics"]["label"]["normalized_cross_kappa"]
    assert set(row) == {"value", "ci_low", "ci_high"}


@pytest.mark.usefixtures("prefect_api")
def test_gate_one_file_with_pool_column_and_text_summary(files):
    runner.invoke(app, ["gate", "--batch", str(files["good"]["batch"]), "--trusted", str(files["good"]["trusted"]),
                        "--config", str(files["config"])])
    args = ["gate", "--batch", str(files["good"]["both"]), "--config", str(files["config"]), "--batch-id", "both"]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    # the crowd rows are the content gated from batch.csv already: the stored decision is reused
    assert "stored decision reused" in first.stdout
    forced = runner.invoke(app, [*args, "--force"])
    assert forced.exit_code == 0, forced.output
    assert forced.stdout.startswith("ACCEPT  batch both\n")
    assert "normalized_cross_kappa" in forced.stdout and "report:" in forced.stdout


@pytest.mark.usefixtures("prefect_api")
def test_gate_error_exit_code_three(files, tmp_path):
    missing = tmp_path / "nope.csv"
    result = runner.invoke(app, ["gate", "--batch", str(missing), "--trusted", str(files["good"]["trusted"]),
                                 "--config", str(files["config"]), "--json"])
    assert result.exit_code == 3
    payload = json.loads(result.stdout)
    assert payload["decision"] == "ERROR" and "nope.csv" in payload["reasons"][0]


def test_metrics_panel_two_pools_json(files):
    result = runner.invoke(app, ["metrics", str(files["good"]["both"]), "--json", "--n-boot", "100"])
    assert result.exit_code == 0, result.output
    panel = json.loads(result.stdout)
    assert set(panel) == {"crowd", "trusted", "crowd vs trusted"}
    assert panel["crowd vs trusted"]["normalized_cross_kappa"]["ci_low"] is not None
    assert panel["crowd"]["krippendorff_alpha"]["n_items"] > 0


def test_metrics_error_is_one_line_with_a_hint(files):
    result = runner.invoke(app, ["metrics", str(files["good"]["both"]), "--label", "grade"])
    assert result.exit_code == 3
    lines = [line for line in result.output.splitlines() if line]
    assert lines[0].startswith("error: Column 'grade'") and lines[1].startswith("hint:")
    assert "Traceback" not in result.output


def test_synth_writes_three_files_and_the_daily_deliveries(tmp_path):
    result = runner.invoke(app, ["synth", "--out", str(tmp_path), "--scenario", "spammers", "--n-items", "50"])
    assert result.exit_code == 0
    assert {p.name for p in tmp_path.iterdir()} == {"batch.csv", "trusted.csv", "both.csv", "deliveries"}
    assert {p.name for p in (tmp_path / "deliveries").iterdir()} == {"day-1.csv", "day-2.csv", "day-3.csv"}
    assert "(day-1.csv, day-2.csv, day-3.csv)" in result.output
    bad = runner.invoke(app, ["synth", "--out", str(tmp_path), "--scenario", "chaos"])
    assert bad.exit_code == 3 and "must be one of" in bad.output


def test_rows_left_out_of_the_measurement_are_printed_and_in_the_json():
    from labelgate.cli.main import gate_json, gate_text

    left = {"label empty (question 'a')": 27, "label empty (question 'b')": 151}
    summary = {"decision": "ACCEPT", "batch_id": "b", "metrics": {},
               "validation": {"trusted": {"n_rows": 13597, "n_valid": 13597, "n_invalid": 0, "error_counts": {},
                                          "left_out": left}, "orchestration": {"mode": "in-process"}}}
    assert ("  validation (trusted): rows left out of the measurement: label empty (question 'a') 27, label empty "
            "(question 'b') 151") in gate_text(summary)
    assert gate_json(summary)["validation"] == {"trusted": {"n_rows": 13597, "n_valid": 13597, "n_invalid": 0,
                                                            "error_counts": {}, "left_out": left}}


def test_gate_with_a_duplicate_config_key_exits_three_naming_it(tmp_path):
    config = tmp_path / "gate.yaml"
    config.write_text("gates:\n  - type: normalized_cross_kappa\n    min_value: 0.8\n"
                      "gates:\n  - type: normalized_cross_kappa\n    min_value: -1\n", encoding="utf-8")
    batch = tmp_path / "batch.csv"
    batch.write_text("item_id,rater_id,label,pool\ni1,r1,a,crowd\n", encoding="utf-8")
    result = runner.invoke(app, ["gate", "--batch", str(batch), "--config", str(config), "--prefect", "never"])
    assert result.exit_code == 3, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "'gates'" in errors[0] and "line 4" in errors[0] and "gate.yaml" in errors[0]
    assert "Traceback" not in result.output
