"""``--prefect auto|always|never``: the gate runs as a Prefect flow only when an API is named or a flow is asked for.

Each gate runs in a fresh interpreter with an environment of its own (no ``PREFECT_*`` variable, an empty
``PREFECT_HOME``, a working directory without settings files), which reports whether it imported Prefect: without a
named API, ``auto`` must not even import it, let alone start Prefect's temporary server. The run record (the audit
log's ``validation.orchestration``), ``--json`` and the text output say which way each request went. The same gate
against a real ``prefect server start`` is in tests/services/test_gate_prefect_server.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

RUNNER = """
import json, sys
from labelgate.cli.main import main
sys.argv = ["labelgate", *sys.argv[1:]]
code = 0
try:
    main()
except SystemExit as exit:
    code = exit.code if isinstance(exit.code, int) else 1
prefect = sorted(m for m in sys.modules if m == "prefect" or m.startswith("prefect."))
print(json.dumps({"code": code, "prefect": prefect[:3]}), file=sys.__stdout__)
"""

CONFIG = """
gates:
  - {type: normalized_cross_kappa, min_value: 0.8}
interval: {n_boot: 100, seed: 0}
store: {url: "sqlite:///results.db"}
reports: {dir: "reports"}
"""

UNREACHABLE = "http://127.0.0.1:9/api"  # the discard port: nothing answers there


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    from labelgate.pipeline.synth import scenario_named, simulate

    root = tmp_path_factory.mktemp("prefect-mode")
    (root / "gate.yaml").write_text(CONFIG, encoding="utf-8")
    frame = simulate(scenario_named("good", 300), seed=3)
    frame[frame["pool"] == "crowd"].to_csv(root / "batch.csv", index=False)
    frame[frame["pool"] == "trusted"].to_csv(root / "trusted.csv", index=False)
    (root / "prefect-home").mkdir()
    return root


def environment(project: Path, **extra: str) -> dict[str, str]:
    """The environment of a user who named no Prefect API: no PREFECT_* variable, no profile, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    return {**env, "PREFECT_HOME": str(project / "prefect-home"), **extra}


def gate(project: Path, *args: str, env: dict[str, str] | None = None) -> tuple[dict[str, Any], str, str]:
    """``labelgate gate`` on the project's batch in a fresh interpreter: (``{code, prefect}``, stdout, stderr)."""
    argv = ["gate", "--config", "gate.yaml", "--batch", "batch.csv", "--trusted", "trusted.csv", *args]
    out = subprocess.run([sys.executable, "-c", RUNNER, *argv], capture_output=True, text=True, timeout=600,
                         cwd=project, env=env or environment(project))
    lines = out.stdout.strip().splitlines()
    return json.loads(lines[-1]), "\n".join(lines[:-1]), out.stderr


def record(project: Path, run_id: str) -> dict[str, Any]:
    from labelgate.pipeline.store import ResultsStore

    found = [r for r in ResultsStore(f"sqlite:///{project / 'results.db'}").list_runs() if r.run_id == run_id]
    assert len(found) == 1
    return found[0].to_dict()


def test_auto_without_an_api_gates_in_process_without_importing_prefect(project):
    result, stdout, stderr = gate(project, "--force", "--json")
    assert result == {"code": 0, "prefect": []}, stderr  # not imported: no temporary Prefect server either
    payload = json.loads(stdout)
    assert payload["decision"] == "ACCEPT"
    assert payload["orchestration"] == {"mode": "in-process", "reason": "no Prefect API is named", "api": None,
                                        "api_url": None, "flow_run_id": None}
    assert record(project, payload["run_id"])["validation"]["orchestration"] == payload["orchestration"]
    # the same steps as the flow: the HTML report is written and the record names it
    assert Path(payload["report"]).is_file() and record(project, payload["run_id"])["reports"]["html"]


def test_the_text_output_says_which_way_the_run_went(project):
    result, stdout, stderr = gate(project, "--force")
    assert result["code"] == 0, stderr
    lines = stdout.splitlines()
    assert lines[0].startswith("ACCEPT  batch batch") and lines[2] == (
        "  ran: in-process, without Prefect (no Prefect API is named)")


def test_never_decides_in_process_even_with_an_api_named(project):
    env = environment(project, PREFECT_API_URL=UNREACHABLE)
    result, stdout, stderr = gate(project, "--force", "--json", "--prefect", "never", env=env)
    assert result == {"code": 0, "prefect": []}, stderr  # no flow, no health check, no decided event
    payload = json.loads(stdout)
    assert payload["decision"] == "ACCEPT" and payload["orchestration"]["mode"] == "in-process"
    assert payload["orchestration"]["reason"] == "--prefect never"
    assert record(project, payload["run_id"])["validation"]["orchestration"]["reason"] == "--prefect never"


def test_always_with_an_unreachable_api_is_a_recorded_error(project):
    env = environment(project, PREFECT_API_URL=UNREACHABLE)
    result, stdout, stderr = gate(project, "--force", "--json", "--prefect", "always", "--batch-id", "unreachable",
                                  env=env)
    assert result["code"] == 3, stderr
    errors = stderr.strip().splitlines()
    assert len(errors) == 2 and errors[0].startswith(f"error: The Prefect API at {UNREACHABLE} is not reachable")
    assert errors[1].startswith("hint: ") and "--prefect never" in errors[1]
    payload = json.loads(stdout)
    assert payload["decision"] == "ERROR"
    stored = record(project, payload["run_id"])
    assert stored["decision"] == "ERROR" and stored["batch_id"] == "unreachable"
    assert stored["validation"]["orchestration"] == {"mode": "prefect", "reason": "--prefect always",
                                                     "api": "server", "api_url": UNREACHABLE, "flow_run_id": None}


def test_auto_finds_the_api_the_active_profile_names(project, tmp_path):
    # no PREFECT_API_URL in the environment: the active profile of PREFECT_HOME names the (unreachable) API, so auto
    # asks Prefect's settings and runs against it: an ERROR, recorded, instead of a silent in-process run
    home = tmp_path / "home"
    home.mkdir()
    (home / "profiles.toml").write_text(f'active = "team"\n\n[profiles.team]\nPREFECT_API_URL = "{UNREACHABLE}"\n',
                                        encoding="utf-8")
    env = environment(project, PREFECT_HOME=str(home))
    result, stdout, stderr = gate(project, "--force", "--json", "--batch-id", "profile", env=env)
    assert result["code"] == 3, stderr
    stored = record(project, json.loads(stdout)["run_id"])
    assert stored["decision"] == "ERROR"
    assert stored["validation"]["orchestration"]["reason"] == "a Prefect API is named"
    assert stored["validation"]["orchestration"]["api_url"] == UNREACHABLE


def test_a_stored_decision_records_how_this_request_ran(project):
    first, stdout, stderr = gate(project, "--force", "--json", "--batch-id", "first")
    assert first["code"] == 0, stderr
    again, stdout, stderr = gate(project, "--json", "--batch-id", "again")
    assert again == {"code": 0, "prefect": []}, stderr
    payload = json.loads(stdout)
    assert payload["reused"] is True
    assert payload["orchestration"]["reason"] == "the stored decision of these inputs, served without a run"
    assert record(project, payload["run_id"])["validation"]["orchestration"] == payload["orchestration"]


# ------------------------------------------------------------------------------------ the choice, in pieces
def test_the_settings_files_that_could_name_an_api(tmp_path, monkeypatch):
    from labelgate.flows.api import _settings_may_name_api

    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    for name in ("PREFECT_API_URL", "PREFECT_PROFILE", "PREFECT_PROFILES_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(home))
    monkeypatch.chdir(work)
    assert not _settings_may_name_api()  # no profiles file: Prefect's built-in active profile names no API
    profiles = home / "profiles.toml"
    profiles.write_text('active = "ephemeral"\n[profiles.ephemeral]\nPREFECT_SERVER_EPHEMERAL_ENABLED = "true"\n'
                        '[profiles.local]\nPREFECT_API_URL = "http://127.0.0.1:4200/api"\n', encoding="utf-8")
    assert not _settings_may_name_api()
    profiles.write_text(profiles.read_text(encoding="utf-8").replace('active = "ephemeral"', 'active = "local"'),
                        encoding="utf-8")
    assert _settings_may_name_api()
    profiles.unlink()
    monkeypatch.setenv("PREFECT_PROFILE", "local")  # Prefect's built-in "local" profile names an API
    assert _settings_may_name_api()
    monkeypatch.delenv("PREFECT_PROFILE")
    (work / ".env").write_text("PREFECT_API_URL=http://prefect.internal/api\n", encoding="utf-8")
    assert _settings_may_name_api()
    (work / ".env").write_text("OTHER=1\n", encoding="utf-8")
    assert not _settings_may_name_api()
    (work / "pyproject.toml").write_text('[tool.prefect.api]\nurl = "http://prefect.internal/api"\n',
                                         encoding="utf-8")
    assert _settings_may_name_api()


def test_an_api_url_is_shown_without_credentials():
    from labelgate.flows.api import api_kind, without_credentials

    assert without_credentials("https://u:secret@prefect.example.com/api?key=k#x") == "https://prefect.example.com/api"
    assert without_credentials("http://[::1]:4200/api") == "http://[::1]:4200/api"
    assert api_kind("https://api.prefect.cloud/api/accounts/a/workspaces/w") == "cloud"
    assert api_kind("http://127.0.0.1:4200/api") == "server" and api_kind(None) == "ephemeral"


WITHOUT_PREFECT = """
import json, sys
sys.modules["prefect"] = None  # importlib.util.find_spec now says: not installed
from labelgate.extras import MissingExtraError
from labelgate.flows.api import choose
auto = choose("auto").to_dict()
try:
    choose("always")
    always = None
except MissingExtraError as exc:
    always = [exc.extra, exc.hint]
print(json.dumps({"auto": auto, "always": always}))
"""


def test_never_and_a_missing_prefect_extra(monkeypatch):
    from labelgate.flows.api import choose

    assert choose("never").to_dict()["reason"] == "--prefect never"
    with pytest.raises(ValueError, match="--prefect must be one of"):
        choose("sometimes")
    monkeypatch.setenv("PREFECT_API_URL", UNREACHABLE)  # named, but nothing could report to it
    out = subprocess.run([sys.executable, "-c", WITHOUT_PREFECT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["auto"]["mode"] == "in-process" and result["auto"]["reason"] == "Prefect is not installed"
    assert result["always"] == ["prefect", "pip install 'labelgate[prefect]'"]


# ------------------------------------------------------------------------------------------- monitor
MONITOR = """
store: {url: "sqlite:///monitor.db"}
monitor: {source: {path: "drop"}}
"""


def test_monitor_takes_the_same_choice_and_keeps_no_prefect(project):
    drop = project / "drop"
    drop.mkdir(exist_ok=True)
    (drop / "d1.csv").write_text("item_id,rater_id,label,pool\n1,a,x,crowd\n1,b,x,crowd\n2,a,y,crowd\n"
                                 "2,b,x,crowd\n1,t,x,trusted\n", encoding="utf-8")
    (project / "monitor.yaml").write_text(MONITOR, encoding="utf-8")

    def monitor(*args: str) -> tuple[dict[str, Any], str, str]:
        out = subprocess.run([sys.executable, "-c", RUNNER, "monitor", "--config", "monitor.yaml", *args],
                             capture_output=True, text=True, timeout=600, cwd=project, env=environment(project))
        lines = out.stdout.strip().splitlines()
        return json.loads(lines[-1]), "\n".join(lines[:-1]), out.stderr

    result, stdout, stderr = monitor("--json")
    assert result == {"code": 0, "prefect": []}, stderr
    summary = json.loads(stdout)
    assert summary["n_new"] == 5 and summary["orchestration"]["mode"] == "in-process"
    result, stdout, stderr = monitor("--no-prefect")  # the old flag: --prefect never
    assert result == {"code": 0, "prefect": []}, stderr
    assert "  ran: in-process, without Prefect (--prefect never)" in stdout.splitlines()
    result, stdout, stderr = monitor("--no-prefect", "--prefect", "always")
    assert result["code"] == 3 and stderr.startswith("error: ") and "contradicts --prefect always" in stderr
