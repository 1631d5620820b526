"""Each synthetic scenario shows what it is named for at its default size, through `labelgate synth`'s files:
the gate flags the spammers of ``spammers`` (and no one else), names the colluders of ``collusion``.
(``drift`` through the monitor: tests/monitor/test_quickstart.py.)"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from labelgate.cli.main import write_synthetic
from labelgate.gate import run
from labelgate.pipeline.synth import SPAMMER_CROWD_RATERS

# The demo's gates (`labelgate demo`), with fewer resamples.
CONFIG = """
gates:
  - {{type: normalized_cross_kappa, min_value: 0.8}}
  - {{type: irr_baseline, tolerance: 0.1, max_excess: 0.25}}
  - {{type: cross_kappa, min_value: 0.2, severity: warning}}
  - {{type: spa, min_value: 0.4, severity: warning}}
interval: {{n_boot: 200, seed: 0, diagnose_n_boot: 200}}
store: {{url: "sqlite:///{store}"}}
reports: {{dir: "{reports}"}}
"""


def gate_scenario(folder: Path, scenario: str) -> dict:
    files = write_synthetic(folder / "data", scenario, None, seed=0)  # the defaults of `labelgate synth`
    config = folder / "gate.yaml"
    config.write_text(CONFIG.format(store=(folder / "r.db").as_posix(), reports=(folder / "reports").as_posix()),
                      encoding="utf-8")
    return run(config, files["batch"], files["trusted"])


def flagged(summary: dict, flag: str) -> set[str]:
    return {r["rater_id"] for r in summary["raters"]["flagged"] if flag in r["flags"]}


def test_the_spammers_scenario_has_its_spammers_flagged(tmp_path):
    summary = gate_scenario(tmp_path, "spammers")
    spammers = {str(r) for r in pd.read_csv(tmp_path / "data" / "batch.csv")["rater_id"].unique() if "spammer" in str(r)}
    assert spammers, "the scenario planted no spammer"
    caught = flagged(summary, "low_agreement")
    # every flag is a spammer, and most spammers are flagged (each has about 150 items: enough to be judged)
    assert caught and caught <= spammers and len(caught) >= len(spammers) - 1, (caught, spammers)
    text = " ".join(summary["warnings"])
    assert "low_agreement" in text and f"{SPAMMER_CROWD_RATERS} of {SPAMMER_CROWD_RATERS} raters" not in text
    assert summary["decision"] in ("REJECT", "REVIEW")  # a fifth of the crowd guessing lowers the crowd's IRR


def test_the_collusion_scenario_names_its_colluders(tmp_path):
    summary = gate_scenario(tmp_path, "collusion")
    assert flagged(summary, "collusion") == {f"crowd-colluder{k:02d}" for k in range(4)}
    assert any("flagged collusion" in w for w in summary["warnings"])


@pytest.mark.parametrize("scenario", ["good", "spammers", "drift"])
def test_synth_writes_timed_daily_deliveries_of_the_crowd(tmp_path, scenario):
    files = write_synthetic(tmp_path, scenario, 300, seed=1)
    days = sorted(files["deliveries"].glob("day-*.csv"), key=lambda p: (len(p.name), p.name))
    batch = pd.read_csv(files["batch"])
    parts = [pd.read_csv(p) for p in days]
    assert sum(map(len, parts)) == len(batch) and all(set(p["pool"]) == {"crowd"} for p in parts)
    for path, part in zip(days, parts, strict=True):
        last = pd.to_datetime(part["timestamp"], utc=True).max()
        assert abs(path.stat().st_mtime - last.timestamp()) < 2  # delivered when its last judgement was made
        assert pd.to_datetime(part["timestamp"], utc=True).dt.normalize().nunique() == 1  # one day a file
