"""Calibrated alarms: limits from a stated false-alarm rate, one alert per incident, a level at a gate's threshold.

Seeded simulated window series (value = level + N(0, se), interval ± 1.96 se) and a few measured windows; the long
calibration is ``benchmarks/bench_drift_calibration.py`` and ``benchmarks/bench_monitor_calibration.py``.
"""

from __future__ import annotations

from pathlib import Path
from statistics import NormalDist

import numpy as np
import pytest

from labelgate.monitor import arl, cusum, episodes
from labelgate.monitor import drift as D  # noqa: N812
from labelgate.monitor import windows as W  # noqa: N812
from labelgate.monitor.state import Meta
from labelgate.monitor.streams import stream
from labelgate.pipeline.config import ChangeDetector, Drift, load_monitor_config

EXAMPLE = Path(__file__).resolve().parents[2] / "configs" / "monitor.example.yaml"
SE = 0.02


def rows(values, rng, se=SE):
    out = []
    for i, v in enumerate(values):
        x = float(v + rng.normal(0.0, se))
        out.append({"window_index": i, "window_start": i, "window_end": i + 1, "value": x,
                    "ci_low": x - 1.96 * se, "ci_high": x + 1.96 * se, "n_items": 150})
    return out


def feed(series, drift, h, threshold=None, change=True):
    state, events = D.new_state(), []
    for r in series:
        events += D.step(state, r, threshold=threshold, baseline=threshold is not None, change=change, drift=drift,
                         h=h)
    return events


@pytest.fixture(scope="module")
def example():
    cfg = load_monitor_config(EXAMPLE)
    n = episodes.series_count(cfg)
    return cfg.monitor.drift, n, arl.cusum_limit(cfg.monitor.drift.change, n)


def test_the_example_states_a_target_split_over_every_series_it_watches(example):
    drift, n, h = example
    # 2 change-detected metrics + 4 gated window metrics (irr_trusted has no window gate)
    assert drift.change.arl0 == 120 and n == 6
    assert arl.run_length(drift.change.k, h) == pytest.approx(6 * 120, rel=1e-9)
    # the baseline rule's persistence from the same run length: a level at the threshold breaches 2.5 % of windows
    assert arl.baseline_persistence(drift, h, 0.95, 1.0, 1.0) == arl.persistence(720, 0.025) == 2
    # excess window-to-window spread makes stable windows breach more often: a longer run is needed
    assert arl.baseline_persistence(drift, h, 0.95, 1.0, 2.0) > 2
    # without a target, the stated open_after
    assert arl.baseline_persistence(Drift(open_after=3), 6.0, 0.95, 1.0, 1.0) == 3


def test_runs_and_breach_probabilities():
    assert arl.runs_arl(0.5, 3) == pytest.approx(14.0)
    assert arl.runs_arl(0.0, 2) == float("inf")
    # the level at the threshold: the ci_high rule breaches when the value falls z SE below it
    z = NormalDist().inv_cdf(0.975)
    assert arl.breach_probability(0.5, 0.1, 0.1, 0.5, z) == pytest.approx(0.025, abs=1e-12)
    # no spread at all (against the scale of the numbers): the sign decides
    assert arl.breach_probability(0.5, 0.0, 1e-15, 0.6, z) == 1.0
    assert arl.breach_probability(0.7, 0.0, 1e-15, 0.6, z) == 0.0


def test_the_baseline_rule_opens_after_the_derived_persistence(example):
    drift, _, h = example
    breach, fine = 0.5, 0.9  # threshold 0.8, intervals ± 0.05
    values = [fine] * 12 + [breach, fine, breach, breach, breach]
    series = [{"window_index": i, "window_start": i, "window_end": i + 1, "value": v, "ci_low": v - 0.05,
               "ci_high": v + 0.05, "n_items": 50} for i, v in enumerate(values)]
    opened = [e.window["window_index"] for e in feed(series, drift, h, threshold=0.8, change=False)
              if e.transition == "open"]
    assert opened == [15]  # the isolated breach at 12 does not open; two in a row (14, 15) do
    stated = [e.window["window_index"] for e in feed(series, Drift(), 6.0, threshold=0.8, change=False)
              if e.transition == "open"]
    assert stated == [12]  # no target: open_after = 1


def test_the_excursion_cusum_allows_for_the_reference_error():
    # one window: the usual z with the reference's variance in its scale
    assert cusum.excursion_cusum(2.0, 1.0, 1, 0.25, 0.5) == pytest.approx(2.0 / np.sqrt(1.25) - 0.5)
    # m windows a against a reference of n: the sum m·a scaled to the variance m it would have with a known one
    m, n, a = 20, 40, 1.0
    assert cusum.excursion_cusum(m * a, float(m), m, 1.0 / n, 0.5) == pytest.approx(
        m * a * np.sqrt(m / (m + m * m / n)) - 0.5 * m)


def test_the_false_alarm_rate_is_near_its_target():
    target = 720.0
    h = arl.cusum_limit(ChangeDetector(arl0=target))
    drift = Drift(change=ChangeDetector(arl0=target))
    alarms, judged = 0, 0
    for seed in range(60):
        series = rows(np.full(400, 0.6), np.random.default_rng(seed))
        alarms += sum(e.transition == "open" for e in feed(series, drift, h))
        judged += 400 - drift.change.reference_windows
    ratio = alarms / judged * target
    print(f"{alarms} false alarms in {judged} windows: {ratio:.2f} x the target")
    assert 0.5 <= ratio <= 1.5  # measured 0.8-1.0 (benchmarks/bench_drift_calibration.py)


def _incident(events, start, end, cooldown):
    """None when a false alarm before the incident left an episode open; else whether the incident got exactly one
    alert: one open within it, no close before its end, no other open until the close and its cool-down passed."""
    opens = [e.window["window_index"] for e in events if e.transition == "open"]
    closes = [e.window["window_index"] for e in events if e.transition == "close"]
    if any(w < start for w in opens) and not any(start > w >= max(o for o in opens if o < start) for w in closes):
        return None
    closed = min((w for w in closes if w >= end), default=None)
    settle = closed + cooldown if closed is not None else float("inf")
    mine = [w for w in opens if start <= w <= settle]
    return len(mine) == 1 and mine[0] < end and not any(mine[0] <= w < end for w in closes)


@pytest.mark.parametrize(("shape", "size", "start"), [("step", 1.0, 100), ("step", 2.0, 40), ("step", 3.0, 40),
                                                      ("decline", 0.1, 40)])
def test_a_sustained_drop_or_a_decline_is_one_alert(example, shape, size, start):
    drift, _, h = example
    length = 60
    drop = size * SE * (np.ones(length) if shape == "step" else np.arange(1, length + 1))
    found = []
    for seed in range(40):
        values = np.r_[np.full(start, 0.6), 0.6 - drop, np.full(50, 0.6)]
        events = feed(rows(values, np.random.default_rng(100 + seed)), drift, h)
        found.append(_incident(events, start, start + length, drift.cooldown))
    runs = [f for f in found if f is not None]
    assert len(runs) >= 30  # false alarms before the incident are rare (the calibration's business)
    assert sum(runs) >= 0.95 * len(runs), f"{sum(runs)} of {len(runs)} runs with exactly one alert"


@pytest.mark.parametrize("seed", range(10))
def test_a_level_at_a_gate_threshold_is_at_most_one_episode(example, seed):
    drift, _, h = example
    series = rows(np.full(100, 0.6), np.random.default_rng(seed), se=0.03)
    events = [e for e in feed(series, drift, h, threshold=0.6) if e.kind == "baseline"]
    assert sum(e.transition == "open" for e in events) <= 1
    assert [e.transition for e in events] in ([], ["open"], ["open", "close"])


def test_measured_windows_at_a_gate_threshold_give_at_most_one_episode(example):
    drift, _, h = example
    meta = Meta("nominal", ["neg", "neu", "pos"], None)
    frame = stream(100, seed=3)
    frame = frame.assign(code=frame["label"].map({c: i for i, c in enumerate(meta.categories)}))
    series = []
    for index, part in frame.groupby("window"):
        found = W.measure(part[part["pool"] == "crowd"], part[part["pool"] == "trusted"], meta, ["irr_crowd"],
                          ci=0.95, n_boot=200, seed=[0, int(index)])["irr_crowd"]
        series.append({**found, "window_index": int(index), "window_start": int(index),
                       "window_end": int(index) + 1})
    level = float(np.mean([r["value"] for r in series]))  # the gate sits exactly at the crowd's IRR
    events = [e for e in feed(series, drift, h, threshold=level) if e.kind == "baseline"]
    assert [e.transition for e in events] in ([], ["open"], ["open", "close"])


def _learned(level, se, n=40, seed=0):
    """The detector state of a series after ``n`` stationary windows at ``level`` (no detection)."""
    state = D.new_state()
    for r in rows(np.full(n, level), np.random.default_rng(seed), se=se):
        D.step(state, r, threshold=None, baseline=False, change=False, drift=Drift())
    return state


def test_the_change_detectors_take_what_the_baseline_rules_leave(example):
    drift, _, h = example
    gated, changed = ["spa", "irr_crowd", "cross_kappa", "normalized_cross_kappa"], ["irr_crowd", "cross_kappa"]
    fresh = {m: D.new_state() for m in gated}
    # before any reference: every rule charged its worst in-control spend, 1/ARL(2.5 %, 2) = 1/1640 a window
    worst = D.change_limit(fresh, dict.fromkeys(gated, 0.5), gated, changed, drift, 0.95, h)
    assert worst == pytest.approx(arl.limit_for(drift.change.k, 2 / (6 / 720 - 4 / 1640)), rel=1e-9)
    assert worst < h  # a whole number of windows cannot spend the share: the change detectors get the rest
    # gates far below their levels spend nothing: the change detectors share the question's whole budget
    far = {m: _learned(0.6, 0.02, seed=i) for i, m in enumerate(gated)}
    below = D.change_limit(far, dict.fromkeys(gated, 0.3), gated, changed, drift, 0.95, h)
    assert below == pytest.approx(arl.limit_for(drift.change.k, 2 / (6 / 720)), rel=1e-6)
    # a gate that rises towards the level spends more, up to its worst case (a gate above the level: no more)
    limits = [D.change_limit(far, {**dict.fromkeys(gated, 0.3), "spa": t}, gated, changed, drift, 0.95, h)
              for t in (0.3, 0.62, 0.64, 0.66, 0.9)]
    assert limits == sorted(limits) and limits[0] < limits[-1] <= worst + 1e-9
    # without a stated target: the stated h
    assert D.change_limit(far, dict.fromkeys(gated, 0.3), gated, changed, Drift(), 0.95, 6.0) == 6.0


def test_a_young_change_detector_says_it_is_still_learning():
    state = _learned(0.6, 0.02, n=cusum.LEARNING_WINDOWS - 1)
    note = cusum.learning(state["change"], "irr_crowd")
    assert note is not None and note["reference_windows"] == cusum.LEARNING_WINDOWS - 1
    assert "still learning" in note["message"]
    D.step(state, rows([0.6], np.random.default_rng(9))[0], threshold=None, baseline=False, change=False,
           drift=Drift())
    assert cusum.learning(state["change"], "irr_crowd") is None
