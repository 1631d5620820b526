"""Dask backend at 10^6-10^7 judgements: time and peak memory against the in-memory path.

Generates a partitioned Parquet dataset (``--rows`` judgements, 5 per item: 3 crowd + 2 trusted, 5 categories,
string ids, items spread across neighbouring files), then measures, each in a fresh process on the same
machine:

* ``dask``: a 2-worker ``LocalCluster`` (processes, one thread each) reads the dataset with
  ``dask.dataframe.read_parquet`` and builds both pools with :func:`labelgate.pipeline.dask_ratings.ratings_by_pool_dask`;
* ``memory``: ``pandas.read_parquet`` + :func:`labelgate.ratings_by_pool` in one process;

then the same metrics on both: point values of Krippendorff's alpha, Fleiss' kappa, Gwet's AC1, SPA, kappa_x and
normalized kappa_x (no per-judgement codes needed), Conger's kappa (fetches the codes), and normalized kappa_x
with a 95% bootstrap interval (``--n-boot`` resamples; the bootstrap runs on the driver in both paths). It reports
wall times, the peak RSS of each process (driver, each worker; ``ru_maxrss``) and the largest difference
between the two paths' values.

With ``--rounds R`` both paths run R times per size, paired and interleaved (the order alternates every round), and
the script prints ``RATIO`` lines — Dask over in-memory, median of the per-round ratios with min–max — for the whole
fresh process (imports, the LocalCluster's start, read, build, point metrics: what a user's run costs) and for the
work timed inside it, then the size where the whole-process ratio crosses 1 (``CROSSOVER``).

Run: ``python benchmarks/bench_dask.py [--rows 1000000 3000000 10000000] [--n-boot 200] [--rounds 1] [--data DIR]
[--json out.json]``. Needs the ``dask`` extra. The dataset is written under ``--data`` (not in the repository)
and reused when present.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROWS_PER_FILE = 500_000
CROWD, TRUSTED = 3, 2  # ratings per item in each pool
N_CROWD_RATERS, N_TRUSTED_RATERS, Q = 5000, 100, 5


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ------------------------------------------------------------------------------------------- dataset
def generate(folder: Path, rows: int, seed: int = 0) -> Path:
    """``rows`` judgements as ``part-XXXX.parquet`` files of 500,000 rows (reused when complete)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = folder / f"judgements-{rows}"
    done = out / "_COMPLETE"
    if done.exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    n_items = rows // (CROWD + TRUSTED)
    truth = rng.integers(0, Q, n_items)
    item = np.repeat(np.arange(n_items), CROWD + TRUSTED)
    slot = np.tile(np.arange(CROWD + TRUSTED), n_items)
    crowd = slot < CROWD
    # distinct raters per item: base + k * step (mod the pool size)
    base_c = rng.integers(0, N_CROWD_RATERS, n_items)[item]
    step_c = rng.integers(1, N_CROWD_RATERS // CROWD, n_items)[item]
    base_t = rng.integers(0, N_TRUSTED_RATERS, n_items)[item]
    step_t = rng.integers(1, N_TRUSTED_RATERS // TRUSTED, n_items)[item]
    rater = np.where(crowd, (base_c + slot * step_c) % N_CROWD_RATERS,
                     N_CROWD_RATERS + (base_t + (slot - CROWD) * step_t) % N_TRUSTED_RATERS)
    correct = rng.random(item.size) < np.where(crowd, 0.7, 0.85)
    label = np.where(correct, truth[item], rng.integers(0, Q, item.size)) + 1
    # arrival order: items in sequence, each judgement a little early or late, so items straddle files
    order = np.argsort(item + rng.normal(0.0, 3.0, item.size), kind="stable")
    item, rater, label, crowd = item[order], rater[order], label[order], crowd[order]
    rater_names = np.array([f"c{r:05d}" for r in range(N_CROWD_RATERS)]
                           + [f"t{r:04d}" for r in range(N_TRUSTED_RATERS)], dtype=object)
    for k, start in enumerate(range(0, item.size, ROWS_PER_FILE)):
        sl = slice(start, start + ROWS_PER_FILE)
        table = pa.table({
            "item_id": pa.array([f"i{i:08d}" for i in item[sl]], type=pa.string()),
            "rater_id": pa.array(rater_names[rater[sl]], type=pa.string()),
            "label": pa.array(label[sl], type=pa.int64()),
            "pool": pa.array(np.where(crowd[sl], "crowd", "trusted"), type=pa.string()),
        })
        pq.write_table(table, out / f"part-{k:04d}.parquet")
    done.write_text(str(rows))
    return out


# ------------------------------------------------------------------------------------------- metrics
def measure(pools: dict, n_boot: int) -> tuple[dict[str, float], dict[str, float]]:
    import labelgate as lg

    crowd, trusted = pools["crowd"], pools["trusted"]
    values, times = {}, {}
    for name, func in [("krippendorff_alpha", lambda: lg.krippendorff_alpha(crowd)),
                       ("fleiss_kappa", lambda: lg.fleiss_kappa(crowd)),
                       ("gwet_ac", lambda: lg.gwet_ac(crowd)),
                       ("spa", lambda: lg.spa(crowd)),
                       ("cross_kappa", lambda: lg.cross_kappa(crowd, trusted)),
                       ("normalized_cross_kappa", lambda: lg.normalized_cross_kappa(crowd, trusted)),
                       ("conger_kappa", lambda: lg.conger_kappa(crowd))]:
        start = time.perf_counter()
        values[name] = float(func())
        times[name] = time.perf_counter() - start
    if n_boot:
        start = time.perf_counter()
        est = lg.normalized_cross_kappa(crowd, trusted, ci=0.95, n_boot=n_boot, seed=0)
        times["bootstrap"] = time.perf_counter() - start
        values["bootstrap_ci_low"], values["bootstrap_ci_high"] = est.ci
    else:
        times["bootstrap"] = 0.0
    return values, times


def run_memory(data: Path, n_boot: int) -> dict:
    import pandas as pd

    import labelgate as lg

    base = peak_rss_mb()
    start = time.perf_counter()
    df = pd.read_parquet(data)
    read = time.perf_counter() - start
    pools = lg.ratings_by_pool(df, level="nominal")
    build = time.perf_counter() - start
    del df
    values, times = measure(pools, n_boot)
    return {"path": "memory", "read_s": read, "build_s": build, "metric_s": times, "values": values,
            "driver_peak_mb": peak_rss_mb(), "driver_import_mb": base}


def run_dask(data: Path, n_boot: int, workers: int) -> dict:
    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    from labelgate.pipeline.dask_ratings import ratings_by_pool_dask

    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                           memory_limit=0)
    client = Client(cluster)
    try:
        # import the library on the workers first, so that the baseline includes it
        client.run(lambda: __import__("labelgate.pipeline.dask_ratings"))
        worker_base = client.run(peak_rss_mb)
        start = time.perf_counter()
        ddf = dd.read_parquet(str(data))
        pools = ratings_by_pool_dask(ddf, level="nominal")
        build = time.perf_counter() - start
        worker_peak = client.run(peak_rss_mb)
        values, times = measure(pools, n_boot)
        return {"path": "dask", "workers": workers, "partitions": ddf.npartitions, "build_s": build,
                "metric_s": times, "values": values, "driver_peak_mb": peak_rss_mb(),
                "worker_import_mb": sorted(worker_base.values()), "worker_peak_mb": sorted(worker_peak.values())}
    finally:
        client.close()
        cluster.close()


# ------------------------------------------------------------------------------------------- driver
def in_subprocess(kind: str, data: Path, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, __file__, "--_run", kind, "--_path", str(data), "--n-boot", str(args.n_boot),
           "--workers", str(args.workers)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{kind} run failed:\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 3_000_000, 10_000_000])
    parser.add_argument("--n-boot", type=int, default=200, help="resamples of the timed bootstrap (0: none)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1, help="paired rounds per size (the order alternates)")
    parser.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "labelgate-bench-dask")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--_run", help=argparse.SUPPRESS)
    parser.add_argument("--_path", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._run:
        result = run_dask(args._path, args.n_boot, args.workers) if args._run == "dask" else \
            run_memory(args._path, args.n_boot)
        print(json.dumps(result))
        return 0
    if args.rounds < 1 or args.n_boot < 0:
        parser.error("--rounds must be >= 1 and --n-boot >= 0")
    results, ratios = [], []
    for rows in args.rows:
        start = time.perf_counter()
        data = generate(args.data, rows)
        print(f"# {rows:,} judgements: dataset ready in {time.perf_counter() - start:.1f} s ({data.name} under --data)",
              flush=True)
        for round_ in range(args.rounds):
            for kind in ("dask", "memory") if round_ % 2 == 0 else ("memory", "dask"):
                start = time.perf_counter()
                result = in_subprocess(kind, data, args)
                result["process_s"] = time.perf_counter() - start
                result["rows"], result["round"] = rows, round_
                results.append(result)
                print(json.dumps(result), flush=True)
        ratios.append((rows, paired_ratios(rows, [r for r in results if r["rows"] == rows])))
    print(report([r for r in results if r["round"] == args.rounds - 1], os.getloadavg()))
    print(f"\n{args.rounds} paired rounds per size (order alternating); process = the whole fresh process seen from "
          "outside (imports, LocalCluster start, read, build, point metrics"
          + (", bootstrap" if args.n_boot else "") + "); inside = read + build + point metrics, timed in the process")
    for _, lines in ratios:
        print("\n".join(lines))
    print(crossover([(rows, statistics.median(per_round(rows, results))) for rows, _ in ratios]))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


def _inside(result: dict) -> float:
    """Read + build + the point metrics (no Conger, no bootstrap), timed inside the process."""
    return result["build_s"] + sum(v for k, v in result["metric_s"].items() if k not in ("conger_kappa", "bootstrap"))


def per_round(rows: int, results: list[dict]) -> list[float]:
    """Dask / in-memory whole-process time, per round, at ``rows``."""
    by_round: dict[int, dict[str, float]] = {}
    for r in results:
        if r["rows"] == rows:
            by_round.setdefault(r["round"], {})[r["path"]] = r["process_s"]
    return [pair["dask"] / pair["memory"] for _, pair in sorted(by_round.items())]


def paired_ratios(rows: int, results: list[dict]) -> list[str]:
    """``RATIO`` lines (median of the per-round ratios, min–max) of the Dask path over the in-memory path."""
    from timing import process_lines, ratio_line

    dask, memory = f"dask ({rows:,} judgements)", f"in-memory ({rows:,} judgements)"
    times: dict[str, dict[str, list[float]]] = {dask: {"process": [], "inside": []},
                                                memory: {"process": [], "inside": []}}
    for r in sorted(results, key=lambda r: r["round"]):
        name = dask if r["path"] == "dask" else memory
        times[name]["process"].append(r["process_s"])
        times[name]["inside"].append(_inside(r))
    return [*process_lines(times), ratio_line(times, dask, memory, None, clock="process"),
            ratio_line(times, dask, memory, None, clock="inside")]


def crossover(points: list[tuple[int, float]]) -> str:
    """Where the Dask / in-memory ratio (whole process) crosses 1: log(ratio) interpolated linearly in log(size)."""
    points = sorted(points)
    text = ", ".join(f"{rows:,}: {ratio:.2f}x" for rows, ratio in points)
    for (n0, r0), (n1, r1) in itertools.pairwise(points):
        if (r0 - 1) * (r1 - 1) <= 0 and r0 != r1:
            at = np.exp(np.log(n0) + np.log(r0) / (np.log(r0) - np.log(r1)) * (np.log(n1) - np.log(n0)))
            return f"  CROSSOVER dask / in-memory (process) = 1 at about {at:,.0f} judgements (medians {text})"
    if len(points) >= 2:
        (n0, r0), (n1, r1) = points[0], points[-1]
        side = "in-memory" if r0 > 1 else "Dask"
        slope = (np.log(r1) - np.log(r0)) / (np.log(n1) - np.log(n0))
        return (f"  CROSSOVER none measured: {side} faster at every size (medians {text}); the ratio changes by "
                f"x{10 ** slope:.2f} per tenfold size between the measured sizes (not extrapolated)")
    return f"  CROSSOVER none measured (medians {text})"


def report(results: list[dict], load: tuple[float, float, float]) -> str:
    lines = ["", f"load average at the end: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}", "",
             "| judgements | path | partitions | build s | point metrics s | build + metrics s | conger s | "
             "bootstrap s | driver peak MB | worker peak MB | max abs diff |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    by_rows: dict[int, dict[str, dict]] = {}
    for r in results:
        by_rows.setdefault(r["rows"], {})[r["path"]] = r
    for rows, pair in by_rows.items():
        diff = max(abs(pair["dask"]["values"][k] - pair["memory"]["values"][k]) for k in pair["memory"]["values"]) \
            if len(pair) == 2 else float("nan")
        for path, r in pair.items():
            t = r["metric_s"]
            point = sum(v for k, v in t.items() if k not in ("conger_kappa", "bootstrap"))
            workers = "/".join(f"{m:.0f}" for m in r.get("worker_peak_mb", [])) or "-"
            lines.append(f"| {rows:,} | {path} | {r.get('partitions', 1)} | {r['build_s']:.1f} | {point:.2f} | "
                         f"{r['build_s'] + point:.1f} | {t['conger_kappa']:.1f} | {t['bootstrap']:.1f} | "
                         f"{r['driver_peak_mb']:.0f} | {workers} | {diff:.1e} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
