"""Drift detection: false alarms on a stationary run, detection delay on the drift scenario, episode alerts."""

from __future__ import annotations

import numpy as np
import pytest

from labelgate.monitor import Monitor, history, monitor_config_from_dict
from labelgate.monitor import drift as D  # noqa: N812
from labelgate.monitor import windows as W  # noqa: N812
from labelgate.monitor.arl import cusum_limit, siegmund_arl
from labelgate.monitor.state import Meta
from labelgate.monitor.streams import stream, write_deliveries
from labelgate.pipeline.config import ChangeDetector, Drift
from tests.loopback import Receiver

META = Meta("nominal", ["neg", "neu", "pos"], None)
CODES = {c: i for i, c in enumerate(META.categories)}
# Documented in docs/monitoring.md (measured by benchmarks/bench_monitor.py over 16 seeds)
MAX_FALSE_ALARMS_PER_1000 = 2
MAX_DELAY_WINDOWS = {"irr_crowd": 4, "cross_kappa": 8}


def window_series(frame, metrics, n_boot=200):
    frame = frame.assign(code=frame["label"].map(CODES))
    out = {m: [] for m in metrics}
    for index, rows in frame.groupby("window"):
        measured = W.measure(
            rows[rows["pool"] == "crowd"],
            rows[rows["pool"] == "trusted"],
            META,
            metrics,
            ci=0.95,
            n_boot=n_boot,
            seed=[0, int(index)],
        )
        for m in metrics:
            out[m].append(
                {
                    **measured[m],
                    "window_index": int(index),
                    "window_start": int(index),
                    "window_end": int(index) + 1,
                }
            )
    return out


def run_detector(rows, drift, threshold=None, baseline=False):
    state, events = D.new_state(), []
    for row in rows:
        events += D.step(state, row, threshold=threshold, baseline=baseline, change=True, drift=drift)
    return events


def row(i, value, half=0.05, n=50):
    return {
        "window_index": i,
        "window_start": i,
        "window_end": i + 1,
        "value": value,
        "ci_low": value - half,
        "ci_high": value + half,
        "n_items": n,
    }


def test_baseline_detector_opens_on_a_breach_and_closes_after_the_configured_windows():
    drift = Drift(open_after=2, close_after=3, cooldown=0)
    values = [0.9, 0.7, 0.9, 0.7, 0.7, 0.7, 0.9, 0.9, 0.7, 0.9, 0.9, 0.9, 0.9]
    state, events = D.new_state(), []
    for i, v in enumerate(values):
        events += [
            (e.transition, i, e.since)
            for e in D.step(state, row(i, v), threshold=0.8, baseline=True, change=False, drift=drift)
        ]
    # one isolated breach (window 1) does not open; 3-4 open it (since 3); 6-7 in bounds, 8 breaches: still open
    assert events == [("open", 4, 3), ("close", 11, 3)]


def test_baseline_rule_uses_the_upper_end_of_the_interval_by_default():
    state = D.new_state()
    # value 0.78 below 0.8, but the interval reaches 0.83: no breach with ci_high, a breach with value
    assert D.step(state, row(0, 0.78), threshold=0.8, baseline=True, change=False, drift=Drift()) == []
    events = D.step(
        D.new_state(),
        row(0, 0.78),
        threshold=0.8,
        baseline=True,
        change=False,
        drift=Drift(baseline_rule="value"),
    )
    assert [e.transition for e in events] == ["open"]


def test_small_windows_and_undefined_values_are_skipped():
    state = D.new_state()
    assert D.step(state, row(0, 0.1, n=3), threshold=0.8, baseline=True, change=True, drift=Drift()) == []
    assert (
        D.step(
            state, {**row(1, 0.1), "value": None}, threshold=0.8, baseline=True, change=True, drift=Drift()
        )
        == []
    )
    assert state["change"]["n"] == 0


def test_stationary_run_of_1000_windows_raises_at_most_the_documented_false_alarms():
    series = window_series(stream(1000, seed=2026), ["irr_crowd", "cross_kappa"])
    drift = Drift(change=ChangeDetector(metrics=["irr_crowd", "cross_kappa"]))
    counts = {m: sum(e.transition == "open" for e in run_detector(rows, drift)) for m, rows in series.items()}
    print(f"false alarms in 1000 stationary windows: {counts}")
    assert all(n <= MAX_FALSE_ALARMS_PER_1000 for n in counts.values())
    # and the detector is not blind: shifting the same series down by 3 SE from window 500 is caught fast
    rows = series["irr_crowd"]
    se = np.median([D.standard_error(r) for r in rows])
    shifted = [r if r["window_index"] < 500 else {**r, "value": r["value"] - 3 * se} for r in rows]
    opens = [
        e for e in run_detector(shifted, drift) if e.transition == "open" and e.window["window_index"] >= 500
    ]
    assert opens and opens[0].window["window_index"] <= 503


@pytest.mark.parametrize("seed", [11, 12])
def test_drift_scenario_opens_an_episode_within_the_documented_windows(seed):
    drift_at = 30
    frame = stream(100, seed=seed, drift_windows=(drift_at, 45), drift_noise_factor=2.0)
    series = window_series(frame, ["irr_crowd", "cross_kappa"])
    drift = Drift(change=ChangeDetector(metrics=["irr_crowd", "cross_kappa"]))
    for metric, limit in MAX_DELAY_WINDOWS.items():
        events = run_detector(series[metric], drift)
        opens = [e for e in events if e.transition == "open"]
        assert opens, f"{metric}: no episode"
        first = opens[0].window["window_index"]
        assert drift_at <= first < drift_at + limit, f"{metric} opened at window {first}"
        assert drift_at - 8 <= opens[0].since <= first  # the change point: the start of the excursion
        closes = [e for e in events if e.transition == "close"]
        # closed only once back at the pre-episode reference (the return CUSUM), then the cool-down
        assert closes and 45 + drift.close_after + drift.cooldown <= closes[-1].window["window_index"] < 45 + 50


@pytest.fixture
def receiver():
    rec = Receiver(json_bodies=True)
    yield rec
    rec.close()


def test_one_open_and_one_close_alert_per_episode_also_on_reruns(tmp_path, receiver, monkeypatch):
    monkeypatch.setenv("LG_MONITOR_HOOK", f"http://127.0.0.1:{receiver.port}/hooks/monitor")
    frame = stream(50, seed=21, drift_windows=(22, 34), drift_noise_factor=2.5)
    files = write_deliveries(frame, tmp_path / "staging", windows_per_file=10)
    cfg = monitor_config_from_dict(
        {
            "store": {"url": f"sqlite:///{tmp_path / 'results.db'}"},
            "columns": {"timestamp": "timestamp"},
            "gates": [{"type": "cross_kappa", "min_value": 0.05}],
            "interval": {"seed": 3},
            "alerts": {"channels": [{"type": "webhook", "url_env": "LG_MONITOR_HOOK"}], "retries": 0},
            "monitor": {
                "source": {"path": str(tmp_path / "drop")},
                "window": {"hours": 1},
                "n_boot": 200,
                "metrics": ["spa", "irr_crowd", "cross_kappa"],
                "drift": {"change": {"metrics": ["irr_crowd"]}},
            },
        }
    )
    (tmp_path / "drop").mkdir()
    for path in files:  # one delivery per pass, as the schedule would see them
        path.rename(tmp_path / "drop" / path.name)
        Monitor(cfg).run_pass()
    episodes = history(cfg)["episodes"]
    assert episodes and all(e["closed_at"] is not None for e in episodes)
    change = [e for e in episodes if e["kind"] == "change"]
    assert change and change[0]["metric"] == "irr_crowd"
    assert "2026-01-05T22:00" <= change[0]["opened_at"] <= "2026-01-06T01:00"  # since, drift at 22:00
    assert change[0]["worst_raters"]

    def by_key():
        keys: dict[str, int] = {}
        for request in receiver.requests:
            keys[request["body"]["dedupe_key"]] = keys.get(request["body"]["dedupe_key"], 0) + 1
        return keys

    expected = {
        f"labelgate-monitor:default:{e['episode_id']}:{t}" for e in episodes for t in ("open", "close")
    }
    assert by_key() == {key: 1 for key in expected}
    opened = next(r["body"] for r in receiver.requests if r["body"]["dedupe_key"].endswith(":open"))
    assert opened["decision"] == "DRIFT_OPEN" and "since" in " ".join(opened["reasons"])
    assert any("worst raters" in line for line in opened["reasons"])
    # rerun: no new data, then a replay over the same windows — nothing is sent again
    Monitor(cfg).run_pass()
    replay = Monitor(cfg).run_pass(replay=True)
    assert replay["questions"]["label"]["windows"] == 49  # the last window is still open (watermark)
    assert {e["episode_id"] for e in history(cfg)["episodes"]} == {e["episode_id"] for e in episodes}
    assert by_key() == {key: 1 for key in expected}


def _noisy_rows(values, se, rng, half_width=1.96):
    """Window rows whose value is ``value + N(0, se)`` and whose interval is the value ± 1.96 se."""
    out = []
    for i, v in enumerate(values):
        x = float(v + rng.normal(0.0, se))
        out.append({"window_index": i, "window_start": i, "window_end": i + 1, "value": x,
                    "ci_low": x - half_width * se, "ci_high": x + half_width * se, "n_items": 150})
    return out


@pytest.mark.parametrize("seed", range(5))
def test_a_level_at_the_threshold_is_one_lasting_incident_not_a_stream_of_alerts(seed):
    # the crowd's IRR sits at the gate threshold: its window intervals straddle it, window after window
    rng = np.random.default_rng(seed)
    rows = _noisy_rows(np.full(100, 0.6), 0.03, rng)
    state = D.new_state()
    events = [e for r in rows for e in D.step(state, r, threshold=0.6, baseline=True, change=False, drift=Drift())]
    assert sum(e.transition == "open" for e in events) <= 1
    flapping = D.new_state()
    old = [e for r in rows for e in D.step(flapping, r, threshold=0.6, baseline=True, change=False,
                                           drift=Drift(baseline_close="no_breach"))]
    assert sum(e.transition == "open" for e in old) >= sum(e.transition == "open" for e in events)


def test_the_baseline_episode_closes_only_when_windows_are_clearly_back():
    s, cfg = D.new_state(), Drift(close_after=1, cooldown=0)
    rows = [row(0, 0.50), row(1, 0.79), row(2, 0.90)]  # breach; straddling (0.74–0.84); clearly above 0.8
    events = [e for r in rows for e in D.step(s, r, threshold=0.8, baseline=True, change=False, drift=cfg)]
    assert [(e.transition, e.window["window_index"]) for e in events] == [("open", 0), ("close", 2)]


def test_a_slow_decline_is_caught():
    # 40 stable windows, then a decline of 0.15 SE per window
    rng = np.random.default_rng(7)
    se = 0.02
    rows = _noisy_rows([0.6] * 40 + [0.6 - 0.15 * se * t for t in range(1, 61)], se, rng)
    state, events = D.new_state(), []
    for r in rows:
        events += D.step(state, r, threshold=None, baseline=False, change=True, drift=Drift())
    opens = [e for e in events if e.transition == "open"]
    assert len(opens) == 1 and 40 < opens[0].window["window_index"] < 100


def test_the_windows_of_a_drop_on_its_way_to_an_alarm_never_enter_the_reference():
    # exact values: 40 windows at the level (z = 0, learned), then a sustained step down of 1 SE
    se = 0.02
    rows = [{**row(i, v), "ci_low": v - 1.96 * se, "ci_high": v + 1.96 * se}
            for i, v in enumerate([0.6] * 40 + [0.6 - se] * 20)]
    state, events = D.new_state(), []
    for r in rows:
        events += D.step(state, r, threshold=None, baseline=False, change=True, drift=Drift())
    opened = next(e for e in events if e.transition == "open")
    n = opened.details["reference_windows"]
    assert n == 40  # frozen from the first window of the excursion: not one window of the drop was learned
    assert state["change"]["n"] == n and state["change"]["pending"][0] == 0
    assert opened.details["reference"] == pytest.approx(0.6)
    # the drop goes on: the episode stays open (z = -1 every window: the return CUSUM never grows) ...
    assert [e.transition for e in events] == ["open"]
    # ... and closes once the series is back at the pre-episode reference, after the return and the cool-down
    back = [{**row(i, 0.6), "ci_low": 0.6 - 1.96 * se, "ci_high": 0.6 + 1.96 * se} for i in range(60, 100)]
    closes = [e for r in back for e in D.step(state, r, threshold=None, baseline=False, change=True, drift=Drift())]
    assert [e.transition for e in closes] == ["close"] and closes[0].since == opened.since
    # nothing of the episode entered the reference; learning resumed after the close
    assert state["change"]["n"] == 40 + (99 - closes[0].window["window_index"])
    assert state["change"]["sum"] / state["change"]["n"] == pytest.approx(0.6)


def test_the_alarm_limit_is_derived_from_the_stated_false_alarm_rate():
    assert cusum_limit(ChangeDetector()) == 6.0  # no target: the stated h
    one = cusum_limit(ChangeDetector(arl0=720), n_series=1)
    four = cusum_limit(ChangeDetector(arl0=720), n_series=4)
    assert one < four  # more series watched: each must alarm less often for the same monitor-wide rate
    assert siegmund_arl(0.5, four) == pytest.approx(4 * 720, rel=1e-9)
    with pytest.raises(ValueError, match="arl0"):
        ChangeDetector(arl0=0.5)
