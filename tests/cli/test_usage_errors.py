"""What the command line does with what it is given: ``--version``, usage errors (exit 3 with one ``error:`` and one
``hint:`` line, never 0, 1 or 2), ``--debug`` before or after the command, flags shown as flags in ``--help``, and a
missing extra said in one line naming it.

Each case runs the console script's ``main()`` in a fresh interpreter; a missing package is simulated there with
``sys.modules[name] = None`` (``importlib.util.find_spec`` then says it is not installed, and importing it raises
:class:`ModuleNotFoundError`), so that the tests run in the normal development environment.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

RUNNER = """
import json, sys
for name in {blocked!r}:
    sys.modules[name] = None
from labelgate.cli.main import main
sys.argv = ["labelgate", *sys.argv[1:]]
code = 0
try:
    main()
except SystemExit as exit:
    code = exit.code if isinstance(exit.code, int) else 1
heavy = sorted({{m.split(".")[0] for m in sys.modules}} & {{"pandas", "prefect", "great_expectations", "pydantic_settings",
                                                          "sqlalchemy", "yaml"}})
config = "labelgate.pipeline.config" in sys.modules
print(json.dumps({{"code": code, "heavy": heavy, "config": config}}), file=sys.__stdout__)
"""

CONFIG = """
gates:
  - {type: normalized_cross_kappa, min_value: 0.8}
interval: {n_boot: 50, seed: 0}
store: {url: "sqlite:///results.db"}
reports: {dir: "reports"}
"""


def cli(*args: str, cwd: Path, blocked: tuple[str, ...] = ()) -> tuple[dict, str, str]:
    out = subprocess.run([sys.executable, "-c", RUNNER.format(blocked=blocked), *args], capture_output=True,
                         text=True, timeout=600, cwd=cwd)
    lines = out.stdout.strip().splitlines()
    return json.loads(lines[-1]), "\n".join(lines[:-1]), out.stderr


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("usage")
    (root / "gate.yaml").write_text(CONFIG, encoding="utf-8")
    rows = ["item_id,rater_id,label,pool"]
    for item in range(30):
        rows += [f"{item},c{r},{(item + (r == 2 and item % 4 == 0)) % 3},crowd" for r in range(3)]
        rows += [f"{item},t{r},{item % 3},trusted" for r in range(2)]
    (root / "both.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return root


def one_error(stderr: str) -> tuple[str, str]:
    """The ``error:`` and ``hint:`` lines, asserting that stderr holds nothing else."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), stderr
    return lines[0], lines[1]


def test_version_is_one_line_and_cheap(project):
    from labelgate._version import __version__

    result, stdout, stderr = cli("--version", cwd=project)
    assert result["code"] == 0 and stdout == f"labelgate {__version__}" and stderr == ""
    assert result["heavy"] == []


def test_help_exits_0_and_shows_flags_without_a_value(project):
    result, stdout, _ = cli("gate", "--help", cwd=project)
    assert result["code"] == 0 and result["heavy"] == []
    assert "<bool>" not in stdout
    assert re.search(r"^\s+--json\s+Print one JSON object\.", stdout, re.MULTILINE), stdout
    # typer 0.16-0.25 shows the choices as [auto|always|never], the locked release as <auto|always|never>
    assert re.search(r"^\s+--prefect [<\[]auto\|always\|never[>\]]", stdout, re.MULTILINE), stdout
    assert re.search(r"^\s+--debug\s+Show tracebacks", stdout, re.MULTILINE), stdout  # also after the command


@pytest.mark.parametrize(("args", "needle", "hint"), [
    (["gate", "--batch", "x.csv"], "Missing option '--config'", "labelgate gate --help"),
    (["gate", "--config", "gate.yaml", "--bogus"], "No such option:? '?--bogus", "labelgate gate --help"),
    (["gate", "--config", "gate.yaml", "--prefect", "bogus"], "'bogus' is not one of", "labelgate gate --help"),
    (["metrics"], "Missing argument", "labelgate metrics --help"),
    (["metrics", "both.csv", "--n-boot", "1"], "--n-boot", "labelgate metrics --help"),
    (["no-such-command"], "No such command", "labelgate --help"),
    (["alerts", "resend"], "No such command", "labelgate alerts --help"),
    (["--bogus", "gate"], "No such option:? '?--bogus", "labelgate --help"),
])
def test_a_usage_error_is_a_fault(project, args, needle, hint):
    result, stdout, stderr = cli(*args, cwd=project)
    assert result["code"] == 3, stderr
    error, said = one_error(stderr)
    # a regular expression: click's own and typer's vendored click word "no such option" differently
    assert re.search(needle, error) and hint in said, error
    assert stdout == ""


def test_no_command_shows_the_help_and_is_a_fault(project):
    result, stdout, stderr = cli(cwd=project)
    assert result["code"] == 3 and "Commands:" in stdout
    assert one_error(stderr)[0] == "error: missing command"


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_is_accepted_before_or_after_the_command(project, where):
    gate = ["gate", "--config", "missing.yaml", "--batch", "both.csv"]
    args = ["--debug", *gate] if where == "before" else [*gate, "--debug"]
    result, _, stderr = cli(*args, cwd=project)
    assert result["code"] == 3
    assert "Traceback" in stderr and "missing.yaml" in stderr  # --debug: the traceback, still exit 3
    quiet, _, stderr = cli(*gate, cwd=project)
    assert quiet["code"] == 3 and "Traceback" not in stderr and "missing.yaml" in one_error(stderr)[0]


# ---------------------------------------------------------------------------------------- missing extras
@pytest.mark.parametrize(("args", "blocked", "extra"), [
    # asked for before anything starts (labelgate.extras.require)
    (["gate", "--config", "gate.yaml", "--batch", "both.csv"], ("great_expectations",), "gate"),
    (["gate", "--config", "gate.yaml", "--batch", "both.csv", "--prefect", "always"], ("prefect",), "prefect"),
    (["serve", "--config", "gate.yaml"], ("prefect",), "prefect"),
    (["demo", "--out", "demo"], ("pandera",), "gate"),
    # an import that fails inside a command, reported through the command's own error handling
    (["runs", "--config", "gate.yaml"], ("sqlalchemy",), "gate"),
    # ... and through the command line's handler (the import is outside any try of the command)
    (["history", "--config", "gate.yaml"], ("sqlalchemy",), "gate"),
])
def test_a_missing_extra_is_one_line_naming_it(project, args, blocked, extra):
    result, _, stderr = cli(*args, cwd=project, blocked=blocked)
    assert result["code"] == 3, stderr
    error, hint = one_error(stderr)
    assert error.startswith(f"error: labelgate {args[0]}") and f"'{extra}' extra" in error and blocked[0] in error
    assert hint == f"hint: pip install 'labelgate[{extra}]'"
    assert "Traceback" not in stderr


def test_metrics_runs_on_the_core_alone(project):
    # the packages of the 'gate' extra that the table reader could pull in are absent: metrics reads the CSV anyway
    result, stdout, stderr = cli("metrics", "both.csv", "--n-boot", "50", "--json", cwd=project,
                                 blocked=("yaml", "pyarrow", "sqlalchemy", "httpx", "great_expectations", "pandera"))
    assert result["code"] == 0, stderr
    assert not result["config"]  # the gate's configuration models (pydantic, PyYAML) were never imported
    panel = json.loads(stdout)
    assert set(panel) == {"crowd", "trusted", "crowd vs trusted"}
    assert panel["crowd vs trusted"]["cross_kappa"]["n_items"] == 30


def test_metrics_on_parquet_without_pyarrow_names_the_extra(project):
    (project / "both.parquet").write_bytes(b"PAR1")
    result, _, stderr = cli("metrics", "both.parquet", cwd=project, blocked=("pyarrow",))
    assert result["code"] == 3
    error, hint = one_error(stderr)
    assert "both.parquet" in error and "pyarrow" in error and hint == "hint: pip install 'labelgate[gate]'"


def test_alert_channels_without_prefect_are_a_recorded_error_never_a_decision(project):
    """Alert channels are Prefect notification blocks: a gate whose configuration names one, in an environment
    without the ``prefect`` extra, stops before measuring, says which extra, and records an ERROR (never the
    decision it would have sent no alert for)."""
    config = CONFIG.replace("results.db", "alerting.db") + "alerts: {channels: [{type: webhook, url_env: LG_NO_HOOK}]}\n"
    (project / "alerting.yaml").write_text(config, encoding="utf-8")
    result, _, stderr = cli("gate", "--config", "alerting.yaml", "--batch", "both.csv", "--batch-id", "owed",
                            cwd=project, blocked=("prefect",))
    assert result["code"] == 3, stderr
    error, hint = one_error(stderr)
    assert "alert channels" in error and "'prefect' extra" in error and hint == "hint: pip install 'labelgate[prefect]'"
    from labelgate.pipeline.store import ResultsStore

    with ResultsStore(f"sqlite:///{project / 'alerting.db'}") as store:
        records = store.list_runs(batch_id="owed")
    assert [r.decision for r in records] == ["ERROR"]
    assert "prefect" in " ".join(records[0].reasons)
