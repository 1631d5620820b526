"""The monitor's pre-flight check: from the stored windows, which gates sit within noise, and what the change
detector can see."""

from __future__ import annotations

import json
from pathlib import Path
from statistics import NormalDist

import pytest
import yaml
from typer.testing import CliRunner

from labelgate.cli.main import app
from labelgate.monitor import Monitor, arl, monitor_config_from_dict, preflight
from labelgate.monitor.streams import stream, write_deliveries


def _monitor(root, gates, windows=30):
    files = write_deliveries(stream(windows, seed=5), root / "staging", windows_per_file=windows)
    (root / "drop").mkdir()
    for path in files:
        path.rename(root / "drop" / path.name)
    config = {"store": {"url": f"sqlite:///{(root / 'r.db').as_posix()}"}, "columns": {"timestamp": "timestamp"},
              "gates": gates, "interval": {"seed": 1},
              "monitor": {"source": {"path": str(root / "drop")}, "window": {"hours": 1}, "n_boot": 200,
                          "metrics": ["spa", "irr_crowd", "cross_kappa"]}}
    cfg = monitor_config_from_dict(config)
    Monitor(cfg).run_pass()
    return cfg, config


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    root = tmp_path_factory.mktemp("preflight")
    # cross_kappa's level on this stream is about 0.37: a gate at 0.36 sits within noise, spa's at 0.10 does not
    cfg, raw = _monitor(root, [{"type": "cross_kappa", "min_value": 0.36}, {"type": "spa", "min_value": 0.1}])
    return cfg, raw, {f["metric"]: f for f in preflight.check(cfg)}


def test_a_gate_far_below_the_level_is_quiet_and_one_at_the_level_warns(checked):
    _, _, found = checked
    assert not found["spa"]["warn"] and found["spa"]["breaches_per_100"] < 0.1
    kx = found["cross_kappa"]
    assert kx["warn"] and kx["breaches_per_100"] > 1.0 and kx["windows"] >= 10
    assert kx["false_episode_every"] < kx["target_every"]
    # at the suggested threshold, false episodes come exactly as often as the series' share of the target allows
    z = NormalDist().inv_cdf(0.975)
    p = arl.breach_probability(kx["level"], kx["window_se"], kx["spread"], kx["suggested_threshold"], z)
    assert kx["suggested_threshold"] < kx["threshold"]
    assert arl.runs_arl(p, kx["persistence"]) == pytest.approx(kx["target_every"], rel=1e-6)
    assert "lower it to" in kx["message"]
    # detectors: the drop the change detector sees within 10 windows is a few window SEs
    assert kx["window_se"] < kx["detectable_drop"] < 5 * kx["spread"]


def test_the_breach_probability_is_the_normal_tail():
    z = NormalDist().inv_cdf(0.975)
    # threshold at the level: a stable window breaches when its value falls z·s below: Φ(−z) = 2.5 %
    assert arl.breach_probability(0.5, 0.1, 0.1, 0.5, z) == pytest.approx(0.025, abs=1e-12)
    # value rule (z = 0): half of the windows fall below a threshold at the level
    assert arl.breach_probability(0.5, 0.1, 0.1, 0.5, 0.0) == pytest.approx(0.5)
    # larger windows help only against sampling noise: the item/rater spread beyond it stays
    assert preflight._items_needed(0.6, 0.04, 0.04, 0.5, z, 100, 0.001) > 100
    assert preflight._items_needed(0.6, 0.04, 0.2, 0.5, z, 100, 0.001) is None


def test_too_few_windows_are_said_not_guessed(tmp_path):
    cfg, _ = _monitor(tmp_path, [{"type": "cross_kappa", "min_value": 0.36}], windows=6)
    found = {f["metric"]: f for f in preflight.check(cfg)}
    assert not found["cross_kappa"]["warn"] and "needed to check" in found["cross_kappa"]["message"]


def test_the_cli_prints_one_line_per_series(checked, tmp_path):
    _, raw, _ = checked
    config = tmp_path / "monitor.yaml"
    config.write_text(json.dumps(raw), encoding="utf-8")  # JSON is YAML
    result = CliRunner().invoke(app, ["monitor", "--config", str(config), "--check"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert any(line.startswith("warning: [label] gate cross_kappa >= 0.360") for line in lines)
    assert any(line.startswith("[label] gate spa >= 0.100") for line in lines)
    as_json = json.loads(CliRunner().invoke(app, ["monitor", "--config", str(config), "--check", "--json"]).stdout)
    assert {f["metric"] for f in as_json} >= {"cross_kappa", "spa"}


def test_the_shipped_example_gates_warn_on_the_example_stream(tmp_path):
    """configs/monitor.example.yaml's gates and drift settings on the project's stream (150 items per window)."""
    example = yaml.safe_load((Path(__file__).resolve().parents[2] / "configs" / "monitor.example.yaml").read_text())
    files = write_deliveries(stream(30, seed=5), tmp_path / "staging", windows_per_file=30)
    (tmp_path / "drop").mkdir()
    for path in files:
        path.rename(tmp_path / "drop" / path.name)
    monitor = {**example["monitor"], "source": {"path": str(tmp_path / "drop")}, "window": {"hours": 1},
               "n_boot": 200}
    cfg = monitor_config_from_dict({**{k: v for k, v in example.items() if k not in ("trusted", "store", "monitor")},
                                    "store": {"url": f"sqlite:///{(tmp_path / 'r.db').as_posix()}"},
                                    "monitor": monitor})
    Monitor(cfg).run_pass()
    found = {f["metric"]: f for f in preflight.check(cfg)}
    # the crowd's κx (about 0.38 on this stream) sits at the example's gate of 0.4: within noise, it warns
    kx = found["cross_kappa"]
    assert kx["warn"] and kx["threshold"] == pytest.approx(0.4) and "lower it to" in kx["message"]
    # the stated target (arl0) sets how many breaching windows in a row open an episode: 2 at 6 series
    assert kx["persistence"] == 2 and kx["false_episode_every"] < 1000
    assert not found["spa"]["warn"] and not found["normalized_cross_kappa"]["warn"]
