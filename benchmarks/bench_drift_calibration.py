"""Calibration of the monitor's drift detectors on simulated window series: false-alarm rate against the stated
target, one alert per incident, detection delay, and the baseline rule at a threshold.

Each window of a series is the value ``level + N(0, se)`` with the interval value ± 1.96 se — what the monitor sees
when its windows measure a stationary process with a bootstrap standard error ``se`` (the windows' own metrics and the
shipped configuration are calibrated by ``bench_monitor_calibration.py``; here only the detectors run, so thousands of
long series take a minute). The detector settings are the shipped example's (``configs/monitor.example.yaml``: its
``drift`` section and the limit ``h`` of its budget). Rates are printed with their Monte-Carlo standard error.

Run: ``python benchmarks/bench_drift_calibration.py [--seeds 1000] [--quick]``.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import numpy as np

from labelgate.monitor import arl, episodes
from labelgate.monitor import drift as D  # noqa: N812
from labelgate.pipeline.config import ChangeDetector, Drift, load_monitor_config

SE = 0.02
LEVEL = 0.6
EXAMPLE = Path(__file__).resolve().parents[1] / "configs" / "monitor.example.yaml"


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


def false_alarms(seeds: int, drift: Drift, target: float, windows: int) -> str:
    """False alarms of one change-detected series per 1000 windows at the limit of a per-series run length."""
    h = arl.cusum_limit(ChangeDetector(arl0=target, k=drift.change.k))
    counts = []
    for seed in range(seeds):
        rng = np.random.default_rng(10_000 + seed)
        counts.append(sum(e.transition == "open" for e in run(rows(np.full(windows, LEVEL), rng), drift, h=h)))
    per = np.asarray(counts) * 1000 / (windows - drift.change.reference_windows)
    return (f"stationary, {windows} windows, h = {h:.2f}: {per.mean():.2f} false alarms per 1000 windows "
            f"(MC s.e. {per.std(ddof=1) / np.sqrt(seeds):.2f}), target {1000 / target:.2f} (run length {target:g})")


def classify(events: list[D.Event], start: int, end: int, cooldown: int) -> dict:
    """What the change detector did with an incident from window ``start`` to ``end`` (exclusive).

    ``pre``: an episode was already open when the incident began (a false alarm before it: not an incident run).
    ``alerts``: opens from ``start`` until the incident's episode has closed after the recovery and ``cooldown`` more
    windows passed (the end of the run if it never closed); ``single``: exactly one, within the incident, and its
    episode did not close before ``end``; ``after``: an open within ``cooldown`` windows after that close (an
    alert after the recovery within the cool-down); ``delay``: windows from ``start`` to the first open, counting
    the first drifted window; ``closed``: windows from the recovery to the close alert (None: still open).
    """
    opens = [(e.window["window_index"], e.transition) for e in events]
    state_open = False
    for index, transition in opens:
        if index >= start:
            break
        state_open = transition == "open"
    first = next((i for i, t in opens if t == "open" and i >= start), None)
    closes_during = any(t == "close" and first is not None and first <= i < end for i, t in opens)
    closed = next((i for i, t in opens if t == "close" and i >= end), None)
    settle = closed + cooldown if closed is not None else float("inf")
    alerts = sum(t == "open" and start <= i <= (closed if closed is not None else settle) for i, t in opens)
    return {
        "pre": state_open,
        "detected": first is not None and first < end,
        "single": alerts == 1 and first is not None and first < end and not closes_during,
        "after": any(t == "open" and closed is not None and closed < i <= settle for i, t in opens),
        "delay": None if first is None or first >= end else first - start + 1,
        "closed": None if closed is None else closed - end + 1,
    }


def summary(found: list[dict], what: str) -> str:
    """One line of incident statistics over runs (runs with a false alarm before the incident set apart)."""
    runs = [f for f in found if not f["pre"]]
    delays = [f["delay"] for f in runs if f["delay"] is not None]
    q = statistics.quantiles(delays, n=10) if len(delays) > 1 else [float("nan")] * 9
    n = max(len(runs), 1)
    closed = [f["closed"] for f in runs if f["closed"] is not None]
    c = statistics.quantiles(closed, n=10) if len(closed) > 1 else [float("nan")] * 9
    return (f"{what}: exactly one alert in {sum(f['single'] for f in runs) / n:.1%} of {len(runs)} runs, missed "
            f"{sum(not f['detected'] for f in runs) / n:.1%}, an alert within the cool-down after the close "
            f"{sum(f['after'] for f in runs) / n:.1%}; delay median {statistics.median(delays):.0f} windows "
            f"(10-90 %: {q[0]:.0f}-{q[-1]:.0f}, max {max(delays)}); closed {statistics.median(closed):.0f} windows after "
            f"the recovery (10-90 %: {c[0]:.0f}-{c[-1]:.0f}, max {max(closed)}; never: {len(runs) - len(closed)}); set apart: {len(found) - len(runs)} runs with an "
            "episode already open (a false alarm before the incident)")


def incidents(seeds: int, drift: Drift, h: float, shape: str, size: float, length: int = 60,
              start: int = 40) -> str:
    """A sustained drop of ``size`` SE (or a decline of ``size`` SE per window) from window ``start`` for ``length``
    windows, then 80 windows back at the level."""
    end = start + length
    found = []
    for seed in range(seeds):
        rng = np.random.default_rng(20_000 + seed)
        drop = size * SE * (np.ones(length) if shape == "step" else np.arange(1, length + 1))
        values = np.r_[np.full(start, LEVEL), LEVEL - drop, np.full(80, LEVEL)]
        found.append(classify(run(rows(values, rng), drift, h=h), start, end, drift.cooldown))
    what = f"drop of {size:g} SE" if shape == "step" else f"decline of {size:g} SE per window"
    return summary(found, f"{what} for {length} windows from window {start}")


def at_threshold(seeds: int, drift: Drift, h: float, close: str) -> str:
    """A level exactly at a baseline gate's threshold: episodes per 100 windows."""
    drift = drift.model_copy(update={"baseline_close": close})
    opens = []
    for seed in range(seeds):
        rng = np.random.default_rng(30_000 + seed)
        events = run(rows(np.full(100, LEVEL), rng), drift, h=h, threshold=LEVEL, change=False)
        opens.append(sum(e.transition == "open" for e in events))
    return (f"level at the baseline threshold, baseline_close={close}: {np.mean(opens):.3f} episodes per 100 windows "
            f"(max {max(opens)}; runs with more than one: {np.mean(np.asarray(opens) > 1):.1%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="200 seeds")
    args = parser.parse_args()
    seeds = 200 if args.quick else args.seeds
    cfg = load_monitor_config(EXAMPLE)
    drift, n_series = cfg.monitor.drift, episodes.series_count(cfg)
    h = arl.cusum_limit(drift.change, n_series)
    per_series = drift.change.arl0 * n_series
    print(f"{seeds} simulated series per setting, window standard error {SE}; the example's drift settings: "
          f"arl0 {drift.change.arl0:g} over {n_series} series = run length {per_series:g} per series, h = {h:.2f}")
    for target, windows in ((per_series, 100), (per_series, 1000), (5000, 1000)):
        print("  " + false_alarms(seeds if windows == 100 else seeds // 4, drift, target, windows))
    for shape, size in (("step", 1.0), ("step", 2.0), ("step", 3.0), ("decline", 0.1)):
        print("  " + incidents(seeds, drift, h, shape, size))
    print("  " + incidents(seeds, drift, h, "step", 1.0, start=100))  # an older reference: less of its own error
    for close in ("clear", "no_breach"):
        print("  " + at_threshold(seeds, drift, h, close))


if __name__ == "__main__":
    main()
