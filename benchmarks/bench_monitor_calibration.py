"""Calibration of the monitor's alarms with the shipped example configuration, on measured windows of stationary
streams: false alarms of the whole monitor against its stated target (change detector and baseline gates), one alert
per incident on the same windows with a drop or a decline added, and a level sitting at a gate's threshold.

Each stream is :func:`labelgate.monitor.streams.stream` (a window = a batch of new items, crowd and trusted judgements
on them). Its windows are measured as the monitor measures them (:func:`labelgate.monitor.windows.measure`, the
example's metrics, ``n_boot`` and interval), the baseline thresholds are the example's gates
(:func:`labelgate.monitor.episodes.thresholds`, the crowd-IRR gate from the trusted IRR of the judgements so far), and
every window goes through :func:`labelgate.monitor.drift.step` with the example's ``drift`` settings, the nominal limit
``h`` of its budget (:func:`labelgate.monitor.arl.cusum_limit` over
:func:`labelgate.monitor.episodes.series_count`) and the change detectors' limit recomputed before every window as a
pass does (:func:`labelgate.monitor.drift.change_limit`). A gate above its series' level is out of control: its
episodes are listed but not counted as false alarms. Only the storage of a pass is left out.

Measuring windows is the slow part (about 15 ms a window at 150 items): ``--windows-cache FILE`` keeps them (an
``.npz``) so the detector part can be rerun. Rates are printed with their Monte-Carlo standard error (across streams).

Run: ``python benchmarks/bench_monitor_calibration.py [--streams 200] [--windows 100] [--quick]``; ``--diagnose`` prints
only whether the change metrics' window statistics are what the detector assumes (normal, independent, spread as
their bootstrap says).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from labelgate.monitor import arl, cusum, episodes
from labelgate.monitor import drift as D  # noqa: N812
from labelgate.monitor import windows as W  # noqa: N812
from labelgate.monitor.state import Meta
from labelgate.monitor.streams import stream
from labelgate.pipeline.config import MonitorConfig, load_monitor_config
from labelgate.pipeline.synth import PoolSpec

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
from bench_drift_calibration import classify, summary  # noqa: E402  (the simulated series' incident accounting)

EXAMPLE = Path(__file__).resolve().parents[1] / "configs" / "monitor.example.yaml"
CATEGORIES = ["neg", "neu", "pos"]
FIELDS = ("value", "ci_low", "ci_high", "n_items")


@dataclass(frozen=True)
class Setting:
    """A window size and rater mix of the stream generator."""

    name: str
    items: int
    crowd: PoolSpec
    trusted: PoolSpec


SETTINGS = (
    Setting("150 items, 80 crowd raters (2-4 per item, noise 0.2), trusted on half the items", 150,
            PoolSpec("crowd", n_raters=80, ratings_per_item=(2, 4), noise=0.2),
            PoolSpec("trusted", n_raters=12, ratings_per_item=(3, 3), noise=0.1, item_share=0.5)),
    Setting("75 items, same mix", 75,
            PoolSpec("crowd", n_raters=80, ratings_per_item=(2, 4), noise=0.2),
            PoolSpec("trusted", n_raters=12, ratings_per_item=(3, 3), noise=0.1, item_share=0.5)),
    Setting("300 items, 300 biased crowd raters (3 per item, noise 0.3), trusted on a third", 300,
            PoolSpec("crowd", n_raters=300, ratings_per_item=(3, 3), noise=0.3, bias=0.5),
            PoolSpec("trusted", n_raters=8, ratings_per_item=(2, 3), noise=0.05, item_share=0.33)),
)


def measure_stream(cfg: MonitorConfig, setting: Setting, n_windows: int, seed: int) -> dict[str, np.ndarray]:
    """Window rows of every window metric of one stream (arrays of FIELDS) and the trusted IRR after each window."""
    meta = Meta("nominal", CATEGORIES, None, irr=cfg.monitor.irr, weighting=cfg.monitor.spa_weighting)
    codes = {c: i for i, c in enumerate(CATEGORIES)}
    frame = stream(n_windows, items_per_window=setting.items, seed=seed, crowd=setting.crowd,
                   trusted=setting.trusted)
    frame = frame.assign(code=frame["label"].map(codes))
    metrics = [m for m in cfg.monitor.metrics if m in W.WINDOW_METRICS]
    out = {f"{m}:{f}": np.full(n_windows, np.nan) for m in metrics for f in FIELDS}
    out["irr_trusted"] = np.full(n_windows, np.nan)
    trusted_all = frame[frame["pool"] == "trusted"]
    for index, rows in frame.groupby("window", sort=True):
        i = int(index)
        numbers = W.measure(rows[rows["pool"] == "crowd"], rows[rows["pool"] == "trusted"], meta, metrics,
                            ci=cfg.interval.ci, n_boot=cfg.monitor.n_boot, seed=[seed, i])
        for m in metrics:
            for f in FIELDS:
                value = numbers[m][f]
                out[f"{m}:{f}"][i] = np.nan if value is None else value
        so_far = trusted_all[trusted_all["window"] <= i]
        trusted, _ = W.build_pools(so_far, so_far.iloc[:0], meta)
        out["irr_trusted"][i] = W.IRR_FUNCTIONS[meta.irr](trusted).value if len(so_far) else np.nan
    return out


def measured(cfg: MonitorConfig, setting: Setting, streams: int, n_windows: int, cache: Path | None,
             first_seed: int) -> list[dict[str, np.ndarray]]:
    """Measured streams of a setting, from the cache file when it holds them."""
    if cache is not None and cache.exists():
        with np.load(cache) as data:
            found = [{k.split("/", 1)[1]: data[k] for k in data.files if k.startswith(f"{s}/")}
                     for s in range(streams)]
        if all(found) and len(next(iter(found[0].values()))) == n_windows:
            return found
    t0 = time.perf_counter()
    out = [measure_stream(cfg, setting, n_windows, first_seed + s) for s in range(streams)]
    print(f"  (measured {streams} x {n_windows} windows in {time.perf_counter() - t0:.0f} s)", flush=True)
    if cache is not None:
        np.savez_compressed(cache, **{f"{s}/{k}": v for s, one in enumerate(out) for k, v in one.items()})
    return out


def rows_of(one: dict[str, np.ndarray], metric: str, shift: np.ndarray | None = None) -> list[dict[str, Any]]:
    """Window rows of one metric of a measured stream; ``shift`` is added to value and interval."""
    n = len(one["irr_trusted"])
    delta = np.zeros(n) if shift is None else shift
    rows = []
    for i in range(n):
        row: dict[str, Any] = {"window_index": i, "window_start": i, "window_end": i + 1}
        for f in FIELDS:
            x = float(one[f"{metric}:{f}"][i])
            row[f] = None if np.isnan(x) else (x + delta[i] if f != "n_items" else int(x))
        rows.append(row)
    return rows


def run_monitor(cfg: MonitorConfig, one: dict[str, np.ndarray], h: float, *, shifts: dict[str, np.ndarray] | None = None,
                gates: dict[str, float] | None = None, baseline: bool = True) -> dict[str, list[D.Event]]:
    """Every window of a measured stream through the detectors of the configuration; events per metric."""
    drift, question, level = cfg.monitor.drift, cfg.questions[0], cfg.interval.ci or 0.95
    metrics = [m for m in cfg.monitor.metrics if m in W.WINDOW_METRICS]
    gated, changed = episodes.question_series(cfg, question)
    events: dict[str, list[D.Event]] = {m: [] for m in metrics}
    states = {m: D.new_state() for m in metrics}
    series = {m: rows_of(one, m, (shifts or {}).get(m)) for m in metrics}
    for i in range(len(one["irr_trusted"])):
        thresholds = gates if gates is not None else episodes.thresholds(cfg, question, float(one["irr_trusted"][i]))
        change_h = D.change_limit(states, thresholds, gated, changed, drift, level, h)  # as the monitor's pass does
        for m in metrics:
            events[m] += D.step(states[m], series[m][i], threshold=thresholds.get(m),
                                baseline=baseline and m in gated, change=m in changed,
                                drift=drift, level=level, h=h, change_h=change_h)
    return events


def _mc(counts: list[int], exposure: int) -> tuple[float, float]:
    per = np.asarray(counts, dtype=float) * 1000.0 / exposure
    return float(per.mean()), float(per.std(ddof=1) / np.sqrt(len(per)))


def false_alarms(cfg: MonitorConfig, data: list[dict[str, np.ndarray]], h: float, n_series: int,
                 gates_at_level: bool = False) -> list[str]:
    """The monitor's false alarms per 1,000 windows (by series and in all) against the target."""
    drift = cfg.monitor.drift
    n = len(data[0]["irr_trusted"])
    metrics = [m for m in cfg.monitor.metrics if m in W.WINDOW_METRICS]
    gates = None
    if gates_at_level:  # the worst in-control case of the baseline rule: the level exactly at the threshold
        gates = {m: float(np.nanmean([one[f"{m}:value"] for one in data])) for m in metrics}
    per: dict[tuple[str, str], list[int]] = {}
    flapping = 0
    for one in data:
        found = run_monitor(cfg, one, h, gates=gates)
        for m, events in found.items():
            for kind in ("change", "baseline"):
                opens = sum(e.transition == "open" and e.kind == kind for e in events)
                per.setdefault((m, kind), []).append(opens)
                flapping += kind == "baseline" and opens > 1
    target = 1000.0 / drift.change.arl0 if drift.change.arl0 else float("nan")
    lines, totals = [], {True: np.zeros(len(data)), False: np.zeros(len(data))}
    for (m, kind), counts in sorted(per.items()):
        watched = m in drift.change.metrics if kind == "change" else (gates_at_level or m in _gated(cfg))
        if not watched:
            continue
        exposure = n - drift.change.reference_windows if kind == "change" else n
        mean, se = _mc(counts, exposure)
        levels = float(np.nanmean([one[f"{m}:value"] for one in data]))
        # a gate above its series' level is out of control: its episodes are right, not false alarms
        above = kind == "baseline" and gates is None and _mean_gate(cfg, data, m) > levels
        totals[not above] += np.asarray(counts, dtype=float) * 1000.0 / exposure
        lines.append(f"    {kind:8s} {m:24s} {mean:6.2f} ± {se:.2f} per 1000 windows (level {levels:.3f}"
                     f"{_gate_text(cfg, data, m, gates)})" + ("  <- the gate lies above the level: not counted"
                                                              if above else ""))
    rate = totals[True]
    head = (f"  monitor: {rate.mean():.2f} ± {rate.std(ddof=1) / np.sqrt(len(rate)):.2f} false alarms per 1000 "
            f"windows, target {target:.2f} (arl0 {drift.change.arl0:g}, {n_series} series, nominal h = {h:.2f}, "
            f"change detectors' h {_change_h(cfg, data, h, gates)}); streams with more than one baseline episode on "
            f"a series: {flapping}")
    if totals[False].any():
        both = totals[True] + totals[False]
        head += (f"\n  with the episodes of the gates above their level: {both.mean():.2f} ± "
                 f"{both.std(ddof=1) / np.sqrt(len(both)):.2f} per 1000 windows")
    return [head, *lines]


def _mean_gate(cfg: MonitorConfig, data: list[dict[str, np.ndarray]], metric: str) -> float:
    found = [episodes.thresholds(cfg, cfg.questions[0], float(one["irr_trusted"][-1])).get(metric) for one in data]
    return float(np.mean(found)) if found[0] is not None else -np.inf


def _change_h(cfg: MonitorConfig, data: list[dict[str, np.ndarray]], h: float,
              gates: dict[str, float] | None) -> str:
    """Median and range over streams of the change detectors' limit at the end of a stream."""
    drift, question, level = cfg.monitor.drift, cfg.questions[0], cfg.interval.ci or 0.95
    gated, changed = episodes.question_series(cfg, question)
    found = []
    for one in data:
        states = {m: D.new_state() for m in W.WINDOW_METRICS}
        thresholds = gates if gates is not None else episodes.thresholds(cfg, question, float(one["irr_trusted"][-1]))
        for m in gated:
            for row in rows_of(one, m):
                D.step(states[m], row, threshold=thresholds.get(m), baseline=False, change=False, drift=drift,
                       level=level, h=h)
        found.append(D.change_limit(states, thresholds, gated, changed, drift, level, h))
    return f"{np.median(found):.2f} ({min(found):.2f}-{max(found):.2f})"


def _gated(cfg: MonitorConfig) -> set[str]:
    found = episodes.thresholds(cfg, cfg.questions[0], 1.0)
    return {m for m, t in found.items() if t is not None}


def _gate_text(cfg: MonitorConfig, data: list[dict[str, np.ndarray]], metric: str,
               gates: dict[str, float] | None) -> str:
    if gates is not None:
        return f", gate at {gates[metric]:.3f}"
    thresholds = [episodes.thresholds(cfg, cfg.questions[0], float(one["irr_trusted"][-1])).get(metric)
                  for one in data]
    if thresholds[0] is None:
        return ", no gate"
    se = np.nanmean([(one[f"{metric}:ci_high"] - one[f"{metric}:ci_low"]) / 3.92 for one in data])
    return f", gate {np.mean(thresholds):.3f}, window SE {se:.3f}"


def joined(data: list[dict[str, np.ndarray]]) -> list[dict[str, np.ndarray]]:
    """Pairs of measured streams end to end: stationary series twice as long (an older reference before an
    incident)."""
    return [{k: np.concatenate([a[k], b[k]]) for k in a} for a, b in zip(data[::2], data[1::2], strict=True)]


def incidents(cfg: MonitorConfig, data: list[dict[str, np.ndarray]], h: float, shape: str, size: float,
              start: int, length: int) -> list[str]:
    """A drop of ``size`` window standard errors (or a decline of ``size`` per window) on each change metric from
    window ``start`` for ``length`` windows, added to measured stationary windows (value and interval shifted)."""
    drift = cfg.monitor.drift
    out = []
    for metric in drift.change.metrics:
        se = float(np.nanmean([(one[f"{metric}:ci_high"] - one[f"{metric}:ci_low"]) / 3.92 for one in data]))
        steps = np.zeros(len(data[0]["irr_trusted"]))
        steps[start:start + length] = -size * se * (np.ones(length) if shape == "step" else np.arange(1, length + 1))
        found = [classify(run_monitor(cfg, one, h, shifts={metric: steps}, baseline=False)[metric], start,
                          start + length, drift.cooldown) for one in data]
        what = f"drop of {size:g} SE" if shape == "step" else f"decline of {size:g} SE per window"
        out.append(f"  {metric:12s} " + summary(found, f"{what} for {length} windows from window {start}"))
    return out


def diagnose(cfg: MonitorConfig, data: list[dict[str, np.ndarray]]) -> list[str]:
    """Is a change metric's window statistic what the detector assumes (normal, independent, with the bootstrap
    standard error as its spread)? Per metric, over the streams: the lag-1 autocorrelation of the values about
    their stream mean, the ratio of their variance to the mean squared bootstrap SE (1: no excess between-window
    variance), and the skewness, excess kurtosis and lower 1 % tail of the values standardised within their stream."""
    out = []
    for metric in cfg.monitor.drift.change.metrics:
        lag, ratio, pooled = [], [], []
        for one in data:
            x = one[f"{metric}:value"]
            se = (one[f"{metric}:ci_high"] - one[f"{metric}:ci_low"]) / 3.92
            keep = np.isfinite(x) & np.isfinite(se)
            x, se = x[keep], se[keep]
            r = x - x.mean()
            lag.append(float(np.sum(r[1:] * r[:-1]) / np.sum(r * r)))
            ratio.append(float(x.var(ddof=1) / np.mean(se * se)))
            pooled.append(r / x.std(ddof=1))
        z = np.concatenate(pooled)
        skew, kurt = float(np.mean(z**3)), float(np.mean(z**4) - 3.0)
        out.append(f"  {metric:12s} lag-1 autocorrelation {np.mean(lag):+.3f} ± {np.std(lag) / np.sqrt(len(lag)):.3f}; "
                   f"variance / mean SE² {np.mean(ratio):.3f} ± {np.std(ratio) / np.sqrt(len(ratio)):.3f}; skewness "
                   f"{skew:+.3f}, excess kurtosis {kurt:+.3f}; below -2.33: {np.mean(z < -2.33):.4f} (normal 0.0099)")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=EXAMPLE)
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--windows", type=int, default=100)
    parser.add_argument("--settings", default="0,1,2", help="indices of SETTINGS to run")
    parser.add_argument("--windows-cache", type=Path, default=None, help="folder for the measured windows (.npz)")
    parser.add_argument("--quick", action="store_true", help="20 streams of the first setting")
    parser.add_argument("--diagnose", action="store_true", help="only the change metrics' window statistics")
    args = parser.parse_args()
    cfg = load_monitor_config(args.config)
    chosen = [0] if args.quick else [int(s) for s in args.settings.split(",")]
    streams = 20 if args.quick else args.streams
    n_series = episodes.series_count(cfg)
    h = arl.cusum_limit(cfg.monitor.drift.change, n_series)
    print(f"{args.config.name}: {streams} stationary streams of {args.windows} windows per setting; "
          f"n_boot {cfg.monitor.n_boot}; {n_series} series watched")
    for index in chosen:
        setting = SETTINGS[index]
        cache = None
        if args.windows_cache is not None:
            args.windows_cache.mkdir(parents=True, exist_ok=True)
            cache = args.windows_cache / f"setting{index}-{streams}x{args.windows}-nboot{cfg.monitor.n_boot}.npz"
        data = measured(cfg, setting, streams, args.windows, cache, first_seed=1000 * (index + 1))
        print(f"{setting.name}:")
        if args.diagnose:
            print("\n".join(diagnose(cfg, data)))
            continue
        print("\n".join(false_alarms(cfg, data, h, n_series)))
        print("  every gate at its series' level (the worst in-control case of the baseline rule):")
        print("\n".join(false_alarms(cfg, data, h, n_series, gates_at_level=True)))
        if index == chosen[0]:
            print("  incidents on the same windows (change detectors; SE = the windows' mean bootstrap standard "
                  "error):")
            longer = joined(data)
            for shape, size in (("step", 1.0), ("step", 2.0), ("step", 3.0), ("decline", 0.1)):
                print("\n".join(incidents(cfg, longer, h, shape, size, start=100, length=60)))
            print("  a young monitor: a drop of 40 windows after 30, 50 or 80 windows (the change detectors' "
                  f"reference; still learning below {cusum.LEARNING_WINDOWS}):")
            for start, size in ((30, 1.0), (50, 1.0), (80, 1.0), (30, 2.0)):
                print("\n".join(incidents(cfg, longer, h, "step", size, start=start, length=40)))


if __name__ == "__main__":
    main()
