"""The monitor's quick start (README, "Monitoring during collection"): `labelgate synth --scenario drift` writes what
configs/monitor.example.yaml reads, and its passes show the drift where it is: no episode on days 1-3, one episode
with one alert on day 4 (every series and rule that fires joins it), nothing new on day 6; no stored row is dated
1970; windows are counted as windows. The missing files are errors that name the key to fix."""

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
from tests.loopback import Receiver

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


@pytest.fixture
def receiver():
    rec = Receiver(json_bodies=True)
    yield rec
    rec.close()


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


def with_webhook(root: Path, env: str) -> None:
    """The example configuration with a webhook alert channel (its URL in ``env``), as a team would add one."""
    path = root / "configs" / "monitor.example.yaml"
    text = path.read_text(encoding="utf-8")
    assert "  channels: []" in text
    path.write_text(text.replace("  channels: []", f"  channels: [{{type: webhook, url_env: {env}}}]"), encoding="utf-8")


def test_the_drift_quick_start_is_one_episode_with_one_alert_on_day_4(checkout, receiver, monkeypatch):
    root = checkout
    with_webhook(root, "LG_QUICKSTART_HOOK")
    monkeypatch.setenv("LG_QUICKSTART_HOOK", f"http://127.0.0.1:{receiver.port}/hooks/monitor")
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
    assert "11 window(s) closed" in first and "episode " not in first and "alert " not in first
    assert "monitor.drift.change.reference_windows" in first
    deliver(root, 4, 5)
    drop = monitor()
    # the drop is one incident: the first alarm opens the episode, the others (both series, both rules) join it
    opened = [line for line in drop.splitlines() if "episode open:" in line]
    joined = [line for line in drop.splitlines() if "episode joined:" in line]
    assert len(opened) == 1 and f"since {DRIFT_DAY}" in opened[0], drop
    alarms = {tuple(line.split(": ", 1)[1].split()[:2]) for line in opened + joined}
    assert alarms == {("irr_crowd", "(baseline)"), ("irr_crowd", "(change)"), ("cross_kappa", "(baseline)"),
                      ("cross_kappa", "(change)")}, drop
    episode = opened[0].rsplit("[episode ", 1)[1].rstrip("]")
    assert all(line.endswith(f"[episode {episode}]") for line in joined)
    assert [line for line in drop.splitlines() if line.lstrip().startswith("alert ")] == [
        "  alert DRIFT_OPEN via webhook:LG_QUICKSTART_HOOK: sent"]
    deliver(root, 6)
    later = monitor()
    assert "episode open" not in later and "alert " not in later
    again = monitor()  # nothing new: nothing again
    assert "episode " not in again and "alert " not in again

    out = history("configs/monitor.example.yaml")
    assert len(out["episodes"]) == 1
    (one,) = out["episodes"]
    assert one["closed_at"] is None and one["opened_at"] >= DRIFT_DAY and one["episode_id"].startswith(episode)
    assert set(one["metrics"]) == {"irr_crowd", "cross_kappa"} and len(one["alarms"]) == 4
    assert all(a["since"] >= DRIFT_DAY and a["recovered_at"] is None and a["value"] is not None
               for a in one["alarms"])
    # one alert, sent once, with a key of the episode, listing every alarm with its numbers and start
    assert len(receiver.requests) == 1
    body = receiver.requests[0]["body"]
    assert body["decision"] == "DRIFT_OPEN"
    assert body["dedupe_key"] == f"labelgate-monitor:default:{one['episode_id']}:open"
    text = " ".join(body["reasons"])
    assert "irr_crowd (change) since" in text and "irr_crowd (baseline) since" in text
    assert "cross_kappa (change) since" in text and "cross_kappa (baseline) since" in text
    assert "gate threshold 0.330" in text and "SE below the reference" in text
    with engine.connect() as conn:
        ledger = conn.execute(select(alert_deliveries_table.c.dedupe_key)).scalars().all()
    assert ledger == [body["dedupe_key"]]

    assert min(stored_ends()) > 0 and all(not str(w["window_end"]).startswith("1970") for w in out["windows"])
    n_windows = len({w["window_end"] for w in out["windows"] if w["scope"] == "window"})
    assert n_windows == 23
    # history and report count windows, not rows, and show the one episode with its alarms
    text = CliRunner().invoke(app, ["history", "--config", "configs/monitor.example.yaml"]).output
    assert f"\n{n_windows} window(s); " in text and "1970" not in text
    assert f"episode {episode} [label] opened " in text and "OPEN: 4 alarm(s)" in text
    report = CliRunner().invoke(app, ["report", "--config", "configs/monitor.example.yaml"])
    assert report.exit_code == 0, report.output
    assert f"{n_windows} window(s), 1 drift episode(s) (1 open)" in report.output
    page = (root / "labelgate-demo/monitor/reports/monitor-report.html").read_text(encoding="utf-8")
    assert f"{n_windows} window(s)" in page and "1970" not in page and "2026-01-08" in page
    assert "irr_crowd (change), irr_crowd (baseline), cross_kappa (change), cross_kappa (baseline)" in page
