"""Monitor benchmarks: cost of a pass vs the state size, false alarms on a stationary run, detection delay.

    python benchmarks/bench_monitor.py cost --big 10000000 --new 10000      # pass cost ratio (target <= 2)
    python benchmarks/bench_monitor.py false-alarms --seeds 16 --windows 1000
    python benchmarks/bench_monitor.py delay --seeds 20

``cost`` builds two monitor states in SQLite files — one with ``--small`` judgements merged, one with ``--big``
(merged through the monitor itself, in deliveries of ``--chunk``) — then times ``--repeats`` passes of ``--new``
new judgements on each (90% on new items, 10% new ratings of items already merged, one closed count window of
``--new`` annotations per pass) and prints the median times and their ratio. ``false-alarms`` runs the change
detector with the default settings on stationary streams (:func:`labelgate.monitor.streams.stream`) and counts
episodes; ``delay`` measures how many windows after the crowd noise doubles an episode opens.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from labelgate.monitor import Monitor, monitor_config_from_dict
from labelgate.monitor import drift as D  # noqa: N812
from labelgate.monitor import windows as W  # noqa: N812
from labelgate.monitor.state import Meta
from labelgate.monitor.streams import stream
from labelgate.pipeline.config import ChangeDetector, Drift
from labelgate.pipeline.synth import distinct_draws

LABELS = np.asarray(["neg", "neu", "pos"], dtype=object)


# ------------------------------------------------------------------------------------------------- cost
def judgements(
    rng: np.random.Generator,
    first_item: int,
    n_items: int,
    start_us: int,
    span_us: int,
    trusted_share: float = 0.1,
) -> pd.DataFrame:
    """3 crowd ratings per item (2,000 raters) and 3 trusted ratings on a share of the items."""
    truth = rng.integers(0, 3, n_items)
    item = np.repeat(np.arange(first_item, first_item + n_items), 3)
    raters = distinct_raters(rng, n_items, 3, 2000)
    label = np.where(rng.random(item.size) < 0.7, np.repeat(truth, 3), rng.integers(0, 3, item.size))
    crowd = pd.DataFrame(
        {
            "item_id": pd.Series(item).map("i{:09d}".format),
            "rater_id": pd.Series(raters.ravel()).map("c{:04d}".format),
            "label": LABELS[label],
            "pool": "crowd",
        }
    )
    chosen = np.flatnonzero(rng.random(n_items) < trusted_share)
    t_item = np.repeat(first_item + chosen, 3)
    t_label = np.where(
        rng.random(t_item.size) < 0.85, np.repeat(truth[chosen], 3), rng.integers(0, 3, t_item.size)
    )
    trusted = pd.DataFrame(
        {
            "item_id": pd.Series(t_item).map("i{:09d}".format),
            "rater_id": pd.Series(np.tile(np.arange(3), chosen.size) + 3 * (chosen % 4).repeat(3)).map(
                "t{:02d}".format
            ),
            "label": LABELS[t_label],
            "pool": "trusted",
        }
    )
    out = pd.concat([crowd, trusted], ignore_index=True)
    out["timestamp"] = pd.to_datetime(
        start_us + np.sort(rng.integers(0, span_us, len(out))), unit="us", utc=True
    )
    return out


def distinct_raters(rng: np.random.Generator, rows: int, k: int, n: int) -> np.ndarray:
    """``k`` distinct random raters out of ``n`` for each of ``rows`` items."""
    return distinct_draws(rng, n, rows, k)

def extra_ratings(rng: np.random.Generator, n: int, n_items: int, tag: int, start_us: int) -> pd.DataFrame:
    """New ratings of items already merged, by raters never seen before (no conflict)."""
    item = rng.choice(n_items, size=n, replace=False)
    return pd.DataFrame(
        {
            "item_id": pd.Series(item).map("i{:09d}".format),
            "rater_id": [f"late{tag}-{k}" for k in range(n)],
            "label": LABELS[rng.integers(0, 3, n)],
            "pool": "crowd",
            "timestamp": pd.to_datetime(start_us + np.arange(n), unit="us", utc=True),
        }
    )


def build_state(root: Path, total: int, chunk: int, seed: int) -> tuple[dict, int, int]:
    shutil.rmtree(root, ignore_errors=True)
    (root / "drop").mkdir(parents=True)
    cfg = {
        "store": {"url": f"sqlite:///{root / 'results.db'}"},
        "columns": {"timestamp": "timestamp"},
        "monitor": {
            "source": {"path": str(root / "drop"), "pattern": "*.parquet"},
            "window": {"annotations": 10_000},
            "n_boot": 200,
            "metrics": ["spa", "irr_crowd", "irr_trusted", "cross_kappa", "normalized_cross_kappa"],
        },
    }
    rng = np.random.default_rng(seed)
    items_per_judgement = 1 / 3.3  # 3 crowd + 0.3 trusted judgements per item
    n_items, t = 0, 1_767_225_600_000_000  # 2026-01-01
    started = time.perf_counter()
    while n_items * 3.3 < total:
        size = int(min(chunk, total - n_items * 3.3) * items_per_judgement) + 1
        part = judgements(rng, n_items, size, t, 3_600_000_000)
        part.to_parquet(root / "drop" / f"base-{n_items:010d}.parquet", index=False)
        Monitor(cfg).run_pass(send_alerts=False)
        n_items += size
        t += 3_600_000_000
        print(
            f"  merged {n_items * 3.3:,.0f} judgements in {time.perf_counter() - started:.0f} s", flush=True
        )
    return cfg, n_items, t


def new_delivery(root: Path, rng: np.random.Generator, n_items: int, t: int, new: int, k: int) -> None:
    fresh = judgements(rng, 10**9 + k * new, int(new * 0.9 / 3.3), t, 600_000_000)  # items never seen
    late = extra_ratings(rng, new - len(fresh), n_items, k, t)
    pd.concat([fresh, late], ignore_index=True).to_parquet(
        root / "drop" / f"new-{k:03d}.parquet", index=False
    )


def cost(args: argparse.Namespace) -> dict:
    """Build both states, then alternate passes on them (load on a shared machine hits both alike)."""
    states = {}
    for label, size in (("small", args.small), ("big", args.big)):
        root = Path(args.workdir) / label
        print(f"building the {label} state ({size:,} judgements)", flush=True)
        started = time.perf_counter()
        cfg, n_items, t = build_state(root, size, args.chunk, seed=1)
        states[label] = {
            "root": root,
            "cfg": cfg,
            "n_items": n_items,
            "t": t,
            "build": time.perf_counter() - started,
            "times": [],
        }
    for k in range(args.repeats):
        for label, st in states.items():
            new_delivery(
                st["root"],
                np.random.default_rng([2, k]),
                st["n_items"],
                st["t"] + k * 600_000_000,
                args.new,
                k,
            )
            started = time.perf_counter()
            summary = Monitor(monitor_config_from_dict(st["cfg"])).run_pass(send_alerts=False)
            st["times"].append(time.perf_counter() - started)
            print(
                f"  {label} pass {k}: {summary['n_new']} new, {st['times'][-1]:.3f} s  {summary['timing']}",
                flush=True,
            )
    out: dict = {}
    for label, st in states.items():
        db = (st["root"] / "results.db").stat().st_size
        out[label] = {
            "merged": args.small if label == "small" else args.big,
            "build_seconds": round(st["build"], 1),
            "pass_seconds": [round(x, 3) for x in st["times"]],
            "median": round(statistics.median(st["times"]), 3),
            "db_mb": round(db / 1e6, 1),
        }
    out["ratio"] = round(out["big"]["median"] / out["small"]["median"], 2)
    out["paired_ratios"] = [
        round(b / s, 2) for s, b in zip(states["small"]["times"], states["big"]["times"], strict=True)
    ]
    return out


# ------------------------------------------------------------------------------------------------- drift
META = Meta("nominal", list(LABELS), None)
CODES = {c: i for i, c in enumerate(LABELS)}


def series(frame: pd.DataFrame, metrics: list[str]) -> dict[str, list[dict]]:
    frame = frame.assign(code=frame["label"].map(CODES))
    out: dict[str, list[dict]] = {m: [] for m in metrics}
    for index, rows in frame.groupby("window"):
        measured = W.measure(
            rows[rows["pool"] == "crowd"],
            rows[rows["pool"] == "trusted"],
            META,
            metrics,
            ci=0.95,
            n_boot=200,
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


def detect(rows: list[dict], drift: Drift) -> list[D.Event]:
    state, events = D.new_state(), []
    for row in rows:
        events += D.step(state, row, threshold=None, baseline=False, change=True, drift=drift)
    return events


def false_alarms(args: argparse.Namespace) -> dict:
    drift = Drift(change=ChangeDetector(metrics=["irr_crowd", "cross_kappa"]))
    counts: dict[str, list[int]] = {"irr_crowd": [], "cross_kappa": []}
    for seed in range(args.seeds):
        s = series(stream(args.windows, seed=1000 + seed), list(counts))
        for m, rows in s.items():
            counts[m].append(sum(e.transition == "open" for e in detect(rows, drift)))
        print(f"  seed {seed}: {[c[-1] for c in counts.values()]}", flush=True)
    return {
        m: {"per_run": c, "mean": round(float(np.mean(c)), 2), "max": int(max(c))} for m, c in counts.items()
    }


def delay(args: argparse.Namespace) -> dict:
    drift = Drift(change=ChangeDetector(metrics=["irr_crowd", "cross_kappa"]))
    at, end = 30, 45
    delays: dict[str, list[int | None]] = {"irr_crowd": [], "cross_kappa": [], "spa": []}
    for seed in range(args.seeds):
        s = series(
            stream(60, seed=2000 + seed, drift_windows=(at, end), drift_noise_factor=2.0), list(delays)
        )
        for m, rows in s.items():
            opens = [
                e.window["window_index"]
                for e in detect(rows, drift)
                if e.transition == "open" and e.window["window_index"] >= at
            ]
            delays[m].append(opens[0] - at + 1 if opens else None)
        print(f"  seed {seed}: {[d[-1] for d in delays.values()]}", flush=True)
    return {
        m: {
            "windows_to_open": d,
            "max": max((x for x in d if x is not None), default=None),
            "missed": sum(x is None for x in d),
        }
        for m, d in delays.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    c = sub.add_parser("cost")
    c.add_argument("--small", type=int, default=10_000)
    c.add_argument("--big", type=int, default=10_000_000)
    c.add_argument("--new", type=int, default=10_000)
    c.add_argument("--chunk", type=int, default=500_000)
    c.add_argument("--repeats", type=int, default=5)
    c.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "labelgate-bench-monitor"))
    f = sub.add_parser("false-alarms")
    f.add_argument("--seeds", type=int, default=16)
    f.add_argument("--windows", type=int, default=1000)
    d = sub.add_parser("delay")
    d.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    result = {"cost": cost, "false-alarms": false_alarms, "delay": delay}[args.what](args)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
