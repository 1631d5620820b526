"""Calibration of the monitor's drift detectors on simulated window series: false-alarm rate against the stated
target, one alert per incident, detection delay, and the baseline rule at a threshold.

Each window of a series is the value ``level + N(0, se)`` with the interval value ± 1.96 se — what the monitor sees
when its windows measure a stationary process with a bootstrap standard error ``se`` (the per-window metric
computation is tested elsewhere; here only the detectors run, so hundreds of long series take seconds). Every setting
runs over ``--seeds`` independent series; rates are printed with their Monte-Carlo standard error.

Run: ``python benchmarks/bench_drift_calibration.py [--seeds 200]``.
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np

from labelgate.monitor import drift as D  # noqa: N812
from labelgate.monitor.arl import cusum_limit
from labelgate.pipeline.config import ChangeDetector, Drift

SE = 0.02
LEVEL = 0.6


def rows(values: np.ndarray, rng: np.random.Generator) -> list[dict]:
    noisy = values + rng.normal(0.0, SE, size=values.size)
    return [{"window_index": i, "window_start": i, "window_end": i + 1, "value": float(x),
             "ci_low": float(x - 1.96 * SE), "ci_high": float(x + 1.96 * SE), "n_items": 150}
            for i, x in enumerate(noisy)]


def run(series: list[dict], drift: Drift, *, h: float, threshold: float | None = None,
        change: bool = True) -> list[D.Event]:
    state, events = D.new_state(), []
    for row in series:
        events += D.step(state, row, threshold=threshold, baseline=threshold is not None, change=change,
                         drift=drift, h=h)
    return events


def false_alarms(seeds: int, drift: Drift, n_series: int, windows: int = 1000) -> str:
    h = cusum_limit(drift.change, n_series)
    counts = []
    for seed in range(seeds):
        rng = np.random.default_rng(10_000 + seed)
        counts.append(sum(e.transition == "open" for e in run(rows(np.full(windows, LEVEL), rng), drift, h=h)))
    per = np.asarray(counts) * 1000 / (windows - drift.change.reference_windows)
    target = "" if drift.change.arl0 is None else (f", target {1000 / (drift.change.arl0 * n_series):.2f} "
                                                   f"(arl0 {drift.change.arl0:g} for the monitor, {n_series} series)")
    return (f"stationary, h = {h:.2f}: {per.mean():.2f} false alarms per 1000 windows per series "
            f"(MC s.e. {per.std(ddof=1) / np.sqrt(seeds):.2f}; max {max(counts)} in one run){target}")


def incidents(seeds: int, drift: Drift, shape: str, size: float) -> str:
    h = cusum_limit(drift.change)
    delays, single, missed, after = [], 0, 0, 0
    for seed in range(seeds):
        rng = np.random.default_rng(20_000 + seed)
        if shape == "step":  # a sustained drop of `size` SE for 30 windows, then recovery
            values = np.r_[np.full(40, LEVEL), np.full(30, LEVEL - size * SE), np.full(60, LEVEL)]
        else:  # a slow linear decline of `size` SE per window for 60 windows, then recovery
            values = np.r_[np.full(40, LEVEL), LEVEL - size * SE * np.arange(1, 61), np.full(60, LEVEL)]
        opens = [e.window["window_index"] for e in run(rows(values, rng), drift, h=h) if e.transition == "open"]
        in_incident = [w for w in opens if w >= 40]
        single += len(opens) == 1 and bool(in_incident)
        missed += not in_incident
        after += any(w >= 40 + (30 if shape == "step" else 60) + drift.close_after + drift.cooldown for w in opens)
        if in_incident:
            delays.append(in_incident[0] - 40)
    q = statistics.quantiles(delays, n=10) if len(delays) > 1 else [float("nan")] * 9
    what = f"drop of {size:g} SE" if shape == "step" else f"decline of {size:g} SE per window"
    return (f"{what}: exactly one alert in {single / seeds:.1%} of runs, missed {missed / seeds:.1%}, an alert after "
            f"recovery and cool-down in {after / seeds:.1%}; delay median {statistics.median(delays):.0f} windows "
            f"(10-90 %: {q[0]:.0f}-{q[-1]:.0f})")


def at_threshold(seeds: int, close: str) -> str:
    drift = Drift(baseline_close=close)
    opens = []
    for seed in range(seeds):
        rng = np.random.default_rng(30_000 + seed)
        events = run(rows(np.full(100, LEVEL), rng), drift, h=6.0, threshold=LEVEL, change=False)
        opens.append(sum(e.transition == "open" for e in events))
    return (f"level at the baseline threshold, baseline_close={close}: {np.mean(opens):.2f} episodes per 100 windows "
            f"(max {max(opens)}; runs with more than one: {np.mean(np.asarray(opens) > 1):.1%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    seeds = parser.parse_args().seeds
    print(f"{seeds} simulated series per setting, window standard error {SE}")
    print("  " + false_alarms(seeds, Drift(), 1))
    for arl0, n_series in ((1000, 1), (500, 2)):
        print("  " + false_alarms(seeds, Drift(change=ChangeDetector(arl0=arl0)), n_series))
    for size in (1.0, 2.0, 3.0):
        print("  " + incidents(seeds, Drift(), "step", size))
    print("  " + incidents(seeds, Drift(), "decline", 0.1))
    for close in ("clear", "no_breach"):
        print("  " + at_threshold(seeds, close))


if __name__ == "__main__":
    main()
