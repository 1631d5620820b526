"""``labelgate gate`` with a Prefect API named (``--prefect auto``, the default) runs as a Prefect flow run on that
server, against a real ``prefect server start`` on 127.0.0.1: the flow run exists on the server, completed, and the
record, ``--json`` and the text output name it. ``--prefect never`` on the same server stays in the process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

CONFIG = """
gates:
  - {type: normalized_cross_kappa, min_value: 0.8}
interval: {n_boot: 100, seed: 0}
store: {url: "sqlite:///results.db"}
reports: {dir: "reports"}
"""


@pytest.fixture()
def project(tmp_path) -> Path:
    from labelgate.pipeline.synth import scenario_named, simulate

    (tmp_path / "gate.yaml").write_text(CONFIG, encoding="utf-8")
    frame = simulate(scenario_named("good", 300), seed=4)
    frame[frame["pool"] == "crowd"].to_csv(tmp_path / "batch.csv", index=False)
    frame[frame["pool"] == "trusted"].to_csv(tmp_path / "trusted.csv", index=False)
    return tmp_path


def gate(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "labelgate", "gate", "--config", "gate.yaml", "--batch", "batch.csv",
                           "--trusted", "trusted.csv", "--force", *args], capture_output=True, text=True, timeout=600,
                          cwd=project, env=env)


def flow_run(api: str, run_id: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{api}/flow_runs/{run_id}", timeout=30) as response:
        return json.loads(response.read())


def test_auto_with_a_named_api_runs_as_a_flow_on_it(project, prefect_server_session):
    api, env = prefect_server_session["url"], prefect_server_session["env"]
    out = gate(project, env, "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    payload = json.loads(out.stdout)
    how = payload["orchestration"]
    assert payload["decision"] == "ACCEPT"
    assert how["mode"] == "prefect" and how["api"] == "server" and how["api_url"] == api and how["flow_run_id"]
    run = flow_run(api, how["flow_run_id"])
    assert run["flow_id"] and run["state"]["type"] == "COMPLETED"
    from labelgate.pipeline.store import ResultsStore

    stored = ResultsStore(f"sqlite:///{project / 'results.db'}").current("batch")
    assert stored is not None and stored.validation["orchestration"]["flow_run_id"] == how["flow_run_id"]

    text = gate(project, env)
    assert text.returncode == 0, text.stderr[-2000:]
    assert text.stdout.splitlines()[2].startswith("  ran: Prefect flow run ") and text.stdout.splitlines()[2].endswith(
        f" on {api}")


def test_never_stays_in_the_process_with_a_named_api(project, prefect_server_session):
    out = gate(project, prefect_server_session["env"], "--json", "--prefect", "never")
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout)["orchestration"]["reason"] == "--prefect never"
