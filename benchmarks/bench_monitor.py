"""Monitor benchmarks: cost of a pass vs the history merged before it, false alarms on a stationary run, detection delay.

    python benchmarks/bench_monitor.py cost --sizes 10000,1000000,10000000 --rounds 9   # pass cost vs history
    python benchmarks/bench_monitor.py cost --sizes 10000,10000000 --rounds 4 --cycle   # a whole fold cycle a round
    python benchmarks/bench_monitor.py statements --sizes 10000,10000000   # CPU seconds per SQL statement of a pass
    python benchmarks/bench_monitor.py false-alarms --seeds 16 --windows 1000
    python benchmarks/bench_monitor.py delay --seeds 20

``cost`` builds one monitor state per history size in SQLite files (merged through the monitor itself, in
deliveries of ``--chunk`` judgements; built once and cached under ``--cache``, reused while its ``meta.json`` is
there), then runs ``--rounds`` rounds. A round copies every state to a scratch folder and runs **one pass in a fresh
process** on each copy, in an order that rotates between rounds (load on a shared machine hits every size alike). A
pass merges one window of new judgements: ``--window`` crowd annotations (90 % on new items, 3 crowd ratings each,
10 % new ratings of items already merged) plus the trusted ratings of about 10 % of the new items, and closes
exactly one count window of ``--window`` annotations (4 metrics, 200 bootstrap resamples). Printed per size: median
and range of the pass's wall and CPU seconds; the ratio of medians to the smallest history, and the per-round
(paired) ratios. With ``--cycle`` a round runs, on one fresh copy of each state, consecutive passes (each in a fresh
process, the sizes alternating pass by pass) up to and including the first that folds the pending pair tallies into
the main table: printed per size are the first pass (nothing pending before it: it never folds), the folding pass,
the mean of the cycle's passes (the amortized cost a pass) and that mean with the first pass standing for every pass
that does not fold (the cycle's later passes run on a history grown by the earlier ones, which matters at the
smallest size), each with its ratio to the smallest history, medians and per round. Every pass runs with one BLAS thread, as the ``labelgate`` command sets (``OPENBLAS_NUM_THREADS``; idle OpenBLAS
worker threads otherwise spin and are counted in the process's CPU time). A cached state written by an older schema
is copied and the copy migrated (``…-schema<N>``), never rebuilt. ``false-alarms`` runs the change detector with
the default settings on stationary streams (:func:`labelgate.monitor.streams.stream`) and counts episodes; ``delay`` measures how many windows after the crowd
noise doubles an episode opens.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the labelgate command sets; before numpy is imported

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from bench_core import _machine  # noqa: E402
from sqlalchemy import func, select  # noqa: E402

from labelgate.monitor import Monitor, monitor_config_from_dict  # noqa: E402
from labelgate.monitor import drift as D  # noqa: E402, N812
from labelgate.monitor import windows as W  # noqa: E402, N812
from labelgate.monitor.state import Meta  # noqa: E402
from labelgate.monitor.streams import stream  # noqa: E402
from labelgate.pipeline.config import ChangeDetector, Drift  # noqa: E402
from labelgate.pipeline.database import make_engine  # noqa: E402
from labelgate.pipeline.migrations import SCHEMA_VERSION, migrate, schema_version  # noqa: E402
from labelgate.pipeline.synth import distinct_draws  # noqa: E402
from labelgate.pipeline.tables import pair_deltas_table  # noqa: E402

LABELS = np.asarray(["neg", "neu", "pos"], dtype=object)
HOUR_US = 3_600_000_000


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
    raters = distinct_draws(rng, 2000, n_items, 3)
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


def state_config(root: Path, window: int) -> dict:
    """The monitor configuration of a state folder (its database and drop folder)."""
    return {
        "store": {"url": f"sqlite:///{root / 'results.db'}"},
        "columns": {"timestamp": "timestamp"},
        "monitor": {
            "source": {"path": str(root / "drop"), "pattern": "*.parquet"},
            "window": {"annotations": window},
            "n_boot": 200,
            "metrics": ["spa", "irr_crowd", "irr_trusted", "cross_kappa", "normalized_cross_kappa"],
        },
    }


def build_state(root: Path, total: int, chunk: int, window: int, seed: int) -> dict:
    """Merge about ``total`` judgements through the monitor, in deliveries of ``chunk``; ``meta.json`` last."""
    shutil.rmtree(root, ignore_errors=True)
    (root / "drop").mkdir(parents=True)
    cfg = state_config(root, window)
    rng = np.random.default_rng(seed)
    items_per_judgement = 1 / 3.3  # 3 crowd + 0.3 trusted judgements per item
    n_items, t = 0, 1_767_225_600_000_000  # 2026-01-01
    started = time.perf_counter()
    while n_items * 3.3 < total:
        size = int(min(chunk, total - n_items * 3.3) * items_per_judgement) + 1
        part = judgements(rng, n_items, size, t, HOUR_US)
        part.to_parquet(root / "drop" / f"base-{n_items:010d}.parquet", index=False)
        Monitor(cfg).run_pass(send_alerts=False)
        n_items += size
        t += HOUR_US
        print(f"  merged {n_items * 3.3:,.0f} judgements in {time.perf_counter() - started:.0f} s", flush=True)
    meta = {"total": total, "chunk": chunk, "window": window, "seed": seed, "n_items": n_items, "t": t,
            "build_seconds": round(time.perf_counter() - started, 1)}
    (root / "meta.json").write_text(json.dumps(meta))
    return meta


def cached_state(cache: Path, total: int, chunk: int, window: int, seed: int) -> tuple[Path, dict]:
    """The state folder of a history size: reused when built before with the same parameters, else built."""
    root = cache / f"state-{total}-{chunk}-{window}-{seed}"
    if (root / "meta.json").exists():
        meta = json.loads((root / "meta.json").read_text())
        print(f"reusing the state of {total:,} judgements ({root})", flush=True)
    else:
        print(f"building the state of {total:,} judgements ({root})", flush=True)
        meta = build_state(root, total, chunk, window, seed)
    return migrated(root, window), meta


def migrated(root: Path, window: int) -> Path:
    """The state itself when it has the current schema; else a copy of it migrated by the migrator (made once,
    ``<state>-schema<N>``; the state built by an older schema is kept as it is)."""
    if schema_version(make_engine(state_config(root, window)["store"]["url"])) == SCHEMA_VERSION:
        return root
    target = root.with_name(f"{root.name}-schema{SCHEMA_VERSION}")
    if not (target / "meta.json").exists():
        print(f"migrating a copy of {root.name} to schema {SCHEMA_VERSION} ({target})", flush=True)
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(root, partial)
        migrate(make_engine(state_config(partial, window)["store"]["url"]))
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
    return target


def new_delivery(root: Path, meta: dict, window: int, k: int) -> None:
    """Exactly ``window`` new crowd annotations (90 % on new items, 10 % late ratings) and trusted ones."""
    rng = np.random.default_rng([2, k])
    t = meta["t"] + k * 600_000_000
    fresh = judgements(rng, 10**9 + k * window, int(window * 0.9) // 3, t, 600_000_000)  # items never seen
    late = extra_ratings(rng, window - 3 * (int(window * 0.9) // 3), meta["n_items"], k, t)
    pd.concat([fresh, late], ignore_index=True).to_parquet(root / "drop" / f"new-{k:03d}.parquet", index=False)


def copy_state(state: Path, scratch: Path) -> None:
    """Copy a state folder and flush the copy of its database to disk: the first commit of a pass on the copy must
    not pay for writing back the copy (at 10⁷ judgements, 1.2 GB of dirty page cache, which its fsync would flush)."""
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(state, scratch)  # copy2: the drop folder's files keep their times (known, not re-read)
    with open(scratch / "results.db", "rb") as db:
        os.fsync(db.fileno())


def one_pass(args: argparse.Namespace) -> None:
    """In a fresh process: copy a state, add one window of new judgements, time one pass; prints JSON."""
    state, scratch = Path(args.state), Path(args.scratch)
    meta = json.loads((state / "meta.json").read_text())
    if not args.keep:  # a fresh copy of the state; --keep: the scratch copy as the previous pass left it
        copy_state(state, scratch)
    new_delivery(scratch, meta, meta["window"], args.round)
    monitor = Monitor(monitor_config_from_dict(state_config(scratch, meta["window"])))
    wall, cpu = time.perf_counter(), time.process_time()
    summary = monitor.run_pass(send_alerts=False)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    question = summary["questions"]["label"]
    with monitor.engine.connect() as conn:
        pending = conn.execute(select(func.count()).select_from(pair_deltas_table)).scalar()
    print(json.dumps({"wall": wall, "cpu": cpu, "n_new": summary["n_new"], "windows": question["windows"],
                      "pending_pairs": pending, "timing": summary["timing"]}))


def statements(args: argparse.Namespace) -> dict:
    """One pass on a copy of each cached state, with the CPU seconds of every SQL statement (grouped by its text)
    and of the commit: where a pass's cost grows with the history."""
    from sqlalchemy import event

    cache, out = Path(args.cache), {}
    for n in [int(float(x)) for x in args.sizes.split(",")]:
        state, meta = cached_state(cache, n, args.chunk, args.window, seed=1)
        scratch = cache / "scratch" / f"statements-{n}"
        copy_state(state, scratch)
        new_delivery(scratch, meta, meta["window"], args.round)
        monitor = Monitor(monitor_config_from_dict(state_config(scratch, meta["window"])))
        spent: dict[str, list[float]] = {}

        def _before(conn: Any, *_: Any) -> None:
            conn.info["cpu"] = time.process_time()

        def _after(conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, many: bool,
                   spent: dict[str, list[float]] = spent) -> None:
            row = spent.setdefault(" ".join(statement.split())[:100], [0.0, 0])
            row[0] += time.process_time() - conn.info["cpu"]
            row[1] += len(parameters) if many else 1

        event.listen(monitor.engine, "before_cursor_execute", _before)
        event.listen(monitor.engine, "after_cursor_execute", _after)
        cpu = time.process_time()
        summary = monitor.run_pass(send_alerts=False)
        cpu = time.process_time() - cpu
        print(f"history {n:,}: pass {cpu:.3f} s cpu; timing {summary['timing']}")
        for text, (seconds, rows) in sorted(spent.items(), key=lambda kv: -kv[1][0])[: args.top]:
            print(f"  {seconds:6.3f} s cpu {rows:7,} rows  {text}")
        out[n] = {"cpu": cpu, "statements": {k: v[0] for k, v in spent.items()}}
        shutil.rmtree(scratch, ignore_errors=True)
    return {"sizes": {n: round(v["cpu"], 3) for n, v in out.items()}}


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):6.3f} ({min(values):.3f}–{max(values):.3f})"


def cost(args: argparse.Namespace) -> dict:
    """Build or reuse the states, then one pass per state and round, each in a fresh process (paired rounds)."""
    sizes = [int(float(x)) for x in args.sizes.split(",")]
    cache, scratch = Path(args.cache), Path(args.cache) / "scratch"
    states = {n: cached_state(cache, n, args.chunk, args.window, seed=1) for n in sizes}
    print(f"# bench_monitor cost: one pass of {args.window:,} new crowd annotations (+ trusted), closing one count "
          f"window of {args.window:,}; SQLite; {args.rounds} rounds, one fresh process per pass; OPENBLAS_NUM_THREADS="
          f"{os.environ['OPENBLAS_NUM_THREADS']}; {_machine()}",
          flush=True)
    if args.cycle:
        return _cycles(args, sizes, states, scratch)
    runs: dict[int, list[dict]] = {n: [] for n in sizes}
    for k in range(args.rounds):
        order = sizes[k % len(sizes):] + sizes[: k % len(sizes)]
        for n in order:
            command = [sys.executable, __file__, "one-pass", "--state", str(states[n][0]), "--scratch",
                       str(scratch / str(n)), "--round", str(k)]
            out = subprocess.run(command, capture_output=True, text=True, check=True, env=os.environ.copy())
            run = json.loads(out.stdout.strip().splitlines()[-1])
            runs[n].append(run)
            print(f"  round {k} history {n:>12,}: {run['wall']:.3f} s wall, {run['cpu']:.3f} s cpu, "
                  f"{run['n_new']} new, {run['windows']} window(s)  {run['timing']}", flush=True)
        shutil.rmtree(scratch, ignore_errors=True)
    smallest = sizes[0]
    print(f"{'history (judgements)':>22}  {'wall s: median (range)':<26}{'cpu s: median (range)':<26}database")
    result: dict = {"rounds": args.rounds, "window": args.window, "sizes": {}}
    for n in sizes:
        wall, cpu = [r["wall"] for r in runs[n]], [r["cpu"] for r in runs[n]]
        db_mb = (states[n][0] / "results.db").stat().st_size / 1e6
        print(f"{n:>22,}  {_spread(wall):<26}{_spread(cpu):<26}{db_mb:,.0f} MB")
        result["sizes"][n] = {"wall": wall, "cpu": cpu, "db_mb": round(db_mb, 1),
                              "build_seconds": states[n][1].get("build_seconds")}
    steps = ("collect", "merge[label]", "cumulative[label]", "windows[label]", "commit")
    print("median seconds of the pass's own timing: " + ", ".join(steps))
    for n in sizes:
        medians = [statistics.median(r["timing"].get(step, float("nan")) for r in runs[n]) for step in steps]
        print(f"{n:>22,}  " + "  ".join(f"{m:.3f}" for m in medians))
    for n in sizes[1:]:
        for clock in ("wall", "cpu"):
            mine, ref = result["sizes"][n][clock], result["sizes"][smallest][clock]
            paired = [a / b for a, b in zip(mine, ref, strict=True)]
            line = (f"ratio {n:,} / {smallest:,} ({clock}): medians {statistics.median(mine) / statistics.median(ref):.2f}"
                    f", paired {statistics.median(paired):.2f} ({min(paired):.2f}–{max(paired):.2f})")
            print(line)
            result[f"ratio_{n}_{clock}"] = round(statistics.median(mine) / statistics.median(ref), 3)
    return result


def _run_pass(state: Path, scratch: Path, delivery: int, keep: bool) -> dict:
    """One pass in a fresh process (:func:`one_pass`): its JSON line."""
    command = [sys.executable, __file__, "one-pass", "--state", str(state), "--scratch", str(scratch), "--round",
               str(delivery)] + (["--keep"] if keep else [])
    out = subprocess.run(command, capture_output=True, text=True, check=True, env=os.environ.copy())
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _cycles(args: argparse.Namespace, sizes: list[int], states: dict, scratch: Path) -> dict:
    """``cost --cycle``: each round, consecutive passes on a fresh copy of each state until one folds (the sizes
    alternate pass by pass, the first size rotating between rounds); the first, the folding and the mean pass."""
    max_passes = 30
    kinds = ("first", "fold", "cycle", "nominal")
    measured: dict[int, dict[str, dict[str, list[float]]]] = {
        n: {kind: {"wall": [], "cpu": []} for kind in kinds} for n in sizes}
    lengths: dict[int, list[int]] = {n: [] for n in sizes}
    added: dict[int, list[int]] = {n: [] for n in sizes}
    for k in range(args.rounds):
        order = sizes[k % len(sizes):] + sizes[: k % len(sizes)]
        cycle: dict[int, list[dict]] = {n: [] for n in sizes}
        for j in range(max_passes):
            open_sizes = [n for n in order if not cycle[n] or cycle[n][-1]["pending_pairs"] >= _pending_before(cycle[n])]
            if not open_sizes:
                break
            for n in open_sizes:
                run = _run_pass(states[n][0], scratch / f"cycle-{n}", 100 * k + j, keep=j > 0)
                run["pending_before"] = cycle[n][-1]["pending_pairs"] if cycle[n] else 0
                cycle[n].append(run)
                print(f"  round {k} pass {j} history {n:>12,}: {run['wall']:.3f} s wall, {run['cpu']:.3f} s cpu, "
                      f"{run['n_new']} new, pending pair tallies {run['pending_before']:,} -> "
                      f"{run['pending_pairs']:,}", flush=True)
        else:
            raise RuntimeError(f"no pass folded in {max_passes} passes")
        for n in sizes:
            runs = cycle[n]
            for clock in ("wall", "cpu"):
                measured[n]["first"][clock].append(runs[0][clock])
                measured[n]["fold"][clock].append(runs[-1][clock])
                measured[n]["cycle"][clock].append(statistics.mean(r[clock] for r in runs))
                # the cycle with each pass that does not fold costed as the first (on the nominal history)
                measured[n]["nominal"][clock].append(((len(runs) - 1) * runs[0][clock] + runs[-1][clock]) / len(runs))
            lengths[n].append(len(runs))
            added[n].append(sum(r["n_new"] for r in runs[:-1]))
        shutil.rmtree(scratch, ignore_errors=True)
    print("cpu s: median (range) of the first pass (no fold), the folding pass, the mean pass of the cycle, and that "
          "mean with the first pass standing for each pass that does not fold")
    result: dict = {"rounds": args.rounds, "window": args.window, "cycle": True, "sizes": {}}
    for n in sizes:
        print(f"{n:>22,}  " + "  ".join(f"{kind} {_spread(measured[n][kind]['cpu'])}" for kind in kinds)
              + f"  passes a cycle {sorted(set(lengths[n]))}, judgements merged before the folding pass "
              f"{min(added[n]):,}–{max(added[n]):,}")
        result["sizes"][n] = {"measured": measured[n], "passes": lengths[n], "added_before_fold": added[n]}
    smallest = sizes[0]
    for n in sizes[1:]:
        for kind in kinds:
            for clock in ("wall", "cpu"):
                mine, ref = measured[n][kind][clock], measured[smallest][kind][clock]
                paired = [a / b for a, b in zip(mine, ref, strict=True)]
                print(f"ratio {n:,} / {smallest:,} {kind:>7} ({clock}): medians "
                      f"{statistics.median(mine) / statistics.median(ref):.2f}, paired {statistics.median(paired):.2f}"
                      f" ({min(paired):.2f}–{max(paired):.2f})")
                result[f"ratio_{n}_{kind}_{clock}"] = round(statistics.median(mine) / statistics.median(ref), 3)
    return result


def _pending_before(runs: list[dict]) -> int:
    """The pending rows before the last of ``runs``: a pass that leaves fewer than it found has folded."""
    return int(runs[-1]["pending_before"])


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
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    c = sub.add_parser("cost")
    c.add_argument("--sizes", default="10000,1000000,10000000", help="histories (judgements merged), smallest first")
    c.add_argument("--window", type=int, default=10_000)
    c.add_argument("--chunk", type=int, default=500_000)
    c.add_argument("--rounds", type=int, default=9)
    c.add_argument("--cycle", action="store_true",
                   help="a round: consecutive passes on one copy of each state up to the first that folds")
    c.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "labelgate-bench-monitor"))
    t = sub.add_parser("statements", help="one pass per state with the CPU time of every SQL statement")
    t.add_argument("--sizes", default="10000,10000000")
    t.add_argument("--window", type=int, default=10_000)
    t.add_argument("--chunk", type=int, default=500_000)
    t.add_argument("--round", type=int, default=5, help="which new delivery (as in a round of cost)")
    t.add_argument("--top", type=int, default=6)
    t.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "labelgate-bench-monitor"))
    o = sub.add_parser("one-pass")
    o.add_argument("--state", required=True)
    o.add_argument("--scratch", required=True)
    o.add_argument("--round", type=int, required=True)
    o.add_argument("--keep", action="store_true", help="run on the scratch copy as it is (consecutive passes)")
    f = sub.add_parser("false-alarms")
    f.add_argument("--seeds", type=int, default=16)
    f.add_argument("--windows", type=int, default=1000)
    d = sub.add_parser("delay")
    d.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    if args.what == "one-pass":
        one_pass(args)
        return
    result = {"cost": cost, "statements": statements, "false-alarms": false_alarms, "delay": delay}[args.what](args)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
