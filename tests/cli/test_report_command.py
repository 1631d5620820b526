"""``labelgate report --config … [--since …] [--out …]`` on a results store filled with synthetic runs."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from labelgate.cli import report as report_cli
from labelgate.pipeline.store import GateRecord, ResultsStore
from tests.reporting.test_report import HOSTILE_RATER, T0, gate_summary

runner = CliRunner()


def make_app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _main() -> None:  # a group, so the command is called by name as in `labelgate report`
        pass

    report_cli.register(app)
    return app


@pytest.fixture
def store_config(tmp_path: Path) -> Path:
    """A gate configuration whose SQLite store holds 4 runs one day apart (the third is an ERROR)."""
    db = tmp_path / "results.db"
    store = ResultsStore(f"sqlite:///{db.as_posix()}")
    for k, decision in enumerate(["ACCEPT", "REJECT", "ERROR", "REVIEW"]):
        summary = gate_summary("ACCEPT" if decision == "ERROR" else decision, n_questions=2)
        store.append(GateRecord(
            batch_id=f"batch-{k} {HOSTILE_RATER}", batch_hash=f"h{k}", config_hash="c", decision=decision,
            reasons=summary["reasons"] if decision != "ERROR" else ["load: InputError: no file"],
            metrics=summary["metrics"] if decision != "ERROR" else {}, coverage=summary["coverage"],
            reports={"html": str(tmp_path / f"run{k}" / "report.html")},
            created_at=T0 + timedelta(days=k), finished_at=T0 + timedelta(days=k, seconds=30)))
    config = tmp_path / "gate.yaml"
    config.write_text(f'store: {{url: "sqlite:///{db.as_posix()}"}}\nreports: {{dir: "{(tmp_path / "reports").as_posix()}"}}\n',
                      encoding="utf-8")
    return config


def test_report_command_writes_the_monitoring_report(store_config: Path) -> None:
    result = runner.invoke(make_app(), ["report", "--config", str(store_config)])
    assert result.exit_code == 0, result.output
    assert "4 gate run(s)" in result.output
    path = Path(re.search(r"report: (.+)", result.output).group(1).strip())
    assert path == store_config.parent / "reports" / "monitor-report.html"
    page = path.read_text(encoding="utf-8")
    assert page.count('<td><span class="badge"') == 4  # one row per run, ERROR included
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and HOSTILE_RATER not in page
    # windows from the 3 non-ERROR runs: the normalized κx chart of each question has 3 points
    nk = [s for s in re.findall(r"<svg\b.*?</svg>", page, flags=re.S) if "<title>normalized κx over time" in s]
    assert len(nk) == 2 and all('<g class="mark point" data-n="3">' in s for s in nk)
    assert "windows from the gate runs (one window per gated batch)" in page


def test_since_and_out_select_the_period_and_the_file(store_config: Path, tmp_path: Path) -> None:
    out = tmp_path / "custom" / "r.html"
    since = (T0 + timedelta(days=2)).date().isoformat()
    result = runner.invoke(make_app(), ["report", "--config", str(store_config), "--since", since, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "2 gate run(s)" in result.output and f"since {since}T00:00:00+00:00" in result.output
    page = out.read_text(encoding="utf-8")
    assert "batch-3" in page and "batch-2" in page and "batch-1" not in page


def test_bad_since_or_config_exits_3_with_a_hint(store_config: Path, tmp_path: Path) -> None:
    result = runner.invoke(make_app(), ["report", "--config", str(store_config), "--since", "yesterday"])
    assert result.exit_code == 3
    assert "The '--since' option must be an ISO 8601 date" in result.output and "hint:" in result.output
    result = runner.invoke(make_app(), ["report", "--config", str(tmp_path / "missing.yaml")])
    assert result.exit_code == 3 and "missing.yaml" in result.output


def test_parse_since_durations() -> None:
    now = datetime(2024, 5, 10, 12, tzinfo=UTC)
    assert report_cli.parse_since("30m", now) == now - timedelta(minutes=30)
    assert report_cli.parse_since("2w", now) == now - timedelta(weeks=2)
    assert report_cli.parse_since("2024-05-01T10:00+02:00", now) == datetime(2024, 5, 1, 8, tzinfo=UTC)


def test_monitor_history_is_used_when_the_monitor_provides_it(store_config: Path, monkeypatch) -> None:
    import types

    calls = []
    window = {"question": "q", "metric": "normalized_cross_kappa", "window_start": "2024-03-01T00:00:00+00:00",
              "window_end": "2024-03-02T00:00:00+00:00", "scope": "window", "value": 0.9, "ci_low": 0.8,
              "ci_high": 1.0, "n_items": 50, "n_ratings": 150, "threshold": 0.8}
    fake = types.SimpleNamespace(history=lambda cfg, since=None: calls.append(since) or {
        "windows": [window], "episodes": [], "raters": {"q": [{"rater_id": HOSTILE_RATER, "pool": "crowd",
                                                                "n_ratings": 30, "kappa_vs_trusted": 0.1,
                                                                "flags": ["low_agreement"]}]}})
    monkeypatch.setitem(__import__("sys").modules, "labelgate.monitor", fake)
    cfg = report_cli.load_any_config(store_config)
    cfg_with_monitor = types.SimpleNamespace(store=cfg.store, reports=cfg.reports,
                                             monitor=types.SimpleNamespace(name="m1"))
    view = report_cli.build_view(cfg_with_monitor, None)
    assert calls == [None] and view["windows"] == [window] and view["source"] == "the monitor 'm1'"
    from labelgate.reporting.report import render_monitor_report

    page = render_monitor_report(view)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "1 flagged (low_agreement × 1)" in page
