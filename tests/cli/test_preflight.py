"""The CLI checks what it can before anything heavy starts: one line on stderr, exit 3, no Prefect or GX import.

Each case runs the CLI in a fresh interpreter and reports which heavy packages it loaded.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from labelgate.pipeline.synth import scenario_named, simulate

RUNNER = """
import json, sys
from labelgate.cli.main import app
code = 0
try:
    app(sys.argv[1:], prog_name="labelgate")
except SystemExit as exit:
    code = exit.code if isinstance(exit.code, int) else 1
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"prefect", "great_expectations"})
print(json.dumps({"code": code, "heavy": heavy}), file=sys.__stdout__)
"""

CONFIG = """
gates:
  - type: normalized_cross_kappa
    min_value: 0.8
interval: {n_boot: 100, seed: 0}
store: {url: "sqlite:///results.db"}
reports: {dir: "reports"}
"""


def cli(*args: str, cwd: Path) -> tuple[dict, str, str]:
    out = subprocess.run([sys.executable, "-c", RUNNER, *args], capture_output=True, text=True, timeout=600,
                         cwd=cwd)
    lines = out.stdout.strip().splitlines()
    return json.loads(lines[-1]), "\n".join(lines[:-1]), out.stderr


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cli")
    (root / "conf").mkdir()
    (root / "conf" / "gate.yaml").write_text(CONFIG, encoding="utf-8")  # relative paths: against conf/
    frame = simulate(scenario_named("good", 300), seed=5)
    frame[frame["pool"] == "crowd"].to_csv(root / "batch.csv", index=False)
    frame[frame["pool"] == "trusted"].to_csv(root / "trusted.csv", index=False)
    frame[frame["pool"] == "crowd"].rename(columns={"rater_id": "worker"}).to_csv(root / "renamed.csv", index=False)
    (root / "bad.yaml").write_text("gates:\n  - type: cross_kappa\n    min_valu: 0.3\n", encoding="utf-8")
    return root


def test_help_loads_neither_prefect_nor_gx(project):
    result, stdout, _ = cli("--help", cwd=project)
    assert result == {"code": 0, "heavy": []}
    assert "gate" in stdout


@pytest.mark.parametrize(("args", "needle"), [
    (["--config", "bad.yaml", "--batch", "batch.csv"], "gates[0].min_valu: unknown key"),
    (["--config", "missing.yaml", "--batch", "batch.csv"], "missing.yaml"),
    (["--config", "conf/gate.yaml", "--batch", "nofile.csv", "--trusted", "trusted.csv"], "nofile.csv"),
    (["--config", "conf/gate.yaml", "--batch", "renamed.csv", "--trusted", "trusted.csv"], "'rater_id'"),
])
def test_config_and_input_errors_exit_3_with_one_line_and_no_heavy_import(project, args, needle):
    result, _, stderr = cli("gate", *args, cwd=project)
    assert result == {"code": 3, "heavy": []}
    assert "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and needle in errors[0], stderr
    assert [line for line in stderr.splitlines() if not line.startswith(("error:", "hint:"))] == []


def test_relative_paths_resolve_against_the_config_file_and_a_rerun_reuses_the_decision(project):
    args = ["gate", "--config", "conf/gate.yaml", "--batch", "batch.csv", "--trusted", "trusted.csv", "--json"]
    first, stdout, stderr = cli(*args, cwd=project)
    assert first["code"] == 0, stderr
    assert (project / "conf" / "results.db").is_file() and (project / "conf" / "reports").is_dir()
    assert not (project / "results.db").exists()
    assert "Traceback" not in stderr
    again, stdout, _ = cli(*args, cwd=project)
    assert again == {"code": 0, "heavy": []}  # the stored decision, without Prefect or GX
    assert json.loads(stdout)["reused"] is True
