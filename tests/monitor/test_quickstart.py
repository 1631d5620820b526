"""The monitor's quick start (README, "Monitoring during collection"): `labelgate synth --scenario drift` writes what
configs/monitor.example.yaml reads, and its passes show the drift where it is: no episode on days 1-3, episodes that
open on day 4, none new on day 6; no stored row is dated 1970; windows are counted as
windows. The missing files are errors that name the key to fix."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from labelgate.cli.main import app, write_synthetic
from labelgate.monitor import history
from labelgate.pipeline.database import make_engine
from labelgate.pipeline.tables import alert_deliveries_table, windows_table

ROOT = Path(__file__).resolve().parents[2]
DRIFT_DAY = "2026-01-08"  # day 4 of the drift scenario (from 2026-01-05): the crowd's noise rises at its start


@pytest.fixture
def checkout(tmp_path, monkeypatch) -> Path:
    """The example configuration at configs/ of a folder that is the working directory (as in a checkout)."""
    (tmp_path / "configs").mkdir()
    shutil.copy2(ROOT / "configs" / "monitor.example.yaml", tmp_path / "configs" / "monitor.example.yaml")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    return tmp_path


def monitor(*extra: str) -> str:
    result = CliRunner().invoke(app, ["monitor", "--config", "configs/monitor.example.yaml", "--prefect", "never",
                                      *extra])
    assert result.exit_code == 0, result.output
    return result.output


def deliver(root: Path, *days: int) -> None:
    for day in days:
        shutil.copy2(root / "labelgate-demo/monitor/deliveries" / f"day-{day}.csv",
                     root / "labelgate-demo/monitor/incoming")  # copy2 keeps the delivery time, as cp -p does


def test_missing_files_name_the_key_to_fix_before_anything_runs(checkout):
    result = CliRunner().invoke(app, ["monitor", "--config", "configs/monitor.example.yaml"])
    assert result.exit_code == 3
    assert "trusted.path" in result.stderr and "labelgate synth --scenario drift" in result.stderr
    assert not (checkout / "labelgate-demo").exists()  # no store was created
    write_synthetic(checkout / "labelgate-demo" / "monitor", "drift", None, seed=0)
    result = CliRunner().invoke(app, ["monitor", "--config", "configs/monitor.example.yaml"])
    assert result.exit_code == 3 and "monitor.source.path" in result.stderr
    assert "mkdir -p labelgate-demo/monitor/incoming" in result.stderr
    assert not (checkout / "labelgate-demo" / "monitor" / "results.db").exists()


def test_the_drift_quick_start_opens_its_episodes_on_day_4_and_none_again(checkout):
    root = checkout
    write_synthetic(root / "labelgate-demo" / "monitor", "drift", None, seed=0)
    (root / "labelgate-demo" / "monitor" / "incoming").mkdir()
    url = f"sqlite:///{(root / 'labelgate-demo/monitor/results.db').as_posix()}"
    engine = make_engine(url)

    def stored_ends() -> list[int]:
        with engine.connect() as conn:
            return [int(v) for v in conn.execute(select(windows_table.c.window_end)).scalars()]

    # a pass with the trusted replication alone stores no point of the series (it has no time of the data)
    monitor()
    assert stored_ends() == []
    deliver(root, 1, 2, 3)
    first = monitor()
    assert "11 window(s) closed" in first and "episode open" not in first
    assert "monitor.drift.change.reference_windows" in first
    deliver(root, 4, 5)
    drop = monitor()
    opened = [line for line in drop.splitlines() if "episode open:" in line]
    assert opened and all(f"since {DRIFT_DAY}" in line for line in opened), drop
    assert {"irr_crowd", "cross_kappa"} <= {line.split("episode open: ")[1].split()[0] for line in opened}
    deliver(root, 6)
    assert "episode open" not in monitor()
    assert "episode open" not in monitor()  # nothing new: nothing again

    out = history("configs/monitor.example.yaml")
    assert len(out["episodes"]) == len(opened) and all(e["closed_at"] is None for e in out["episodes"])
    assert all(e["opened_at"] >= DRIFT_DAY for e in out["episodes"])
    assert min(stored_ends()) > 0 and all(not str(w["window_end"]).startswith("1970") for w in out["windows"])
    n_windows = len({w["window_end"] for w in out["windows"] if w["scope"] == "window"})
    assert n_windows == 23
    # history and report count windows, not rows
    text = CliRunner().invoke(app, ["history", "--config", "configs/monitor.example.yaml"]).output
    assert f"\n{n_windows} window(s); " in text and "1970" not in text
    report = CliRunner().invoke(app, ["report", "--config", "configs/monitor.example.yaml"])
    assert report.exit_code == 0, report.output
    assert f"{n_windows} window(s), {len(opened)} drift episode(s)" in report.output
    page = (root / "labelgate-demo/monitor/reports/monitor-report.html").read_text(encoding="utf-8")
    assert f"{n_windows} window(s)" in page and "1970" not in page and "2026-01-08" in page
    # the example has no alert channel: nothing was delivered, nothing is owed twice
    with engine.connect() as conn:
        assert conn.execute(select(alert_deliveries_table)).all() == []
