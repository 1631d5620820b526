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

Run: ``python benchmarks/bench_dask.py [--rows 1000000 3000000 10000000] [--n-boot 200] [--data DIR]
[--json out.json]``. Needs the ``dask`` extra. The dataset is written under ``--data`` (not in the repository)
and reused when present.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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
    start = time.perf_counter()
    est = lg.normalized_cross_kappa(crowd, trusted, ci=0.95, n_boot=n_boot, seed=0)
    times["bootstrap"] = time.perf_counter() - start
    values["bootstrap_ci_low"], values["bootstrap_ci_high"] = est.ci
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
    parser.add_argument("--n-boot", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
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
    results = []
    for rows in args.rows:
        start = time.perf_counter()
        data = generate(args.data, rows)
        print(f"# {rows:,} judgements: dataset ready in {time.perf_counter() - start:.1f} s ({data})", flush=True)
        for kind in ("dask", "memory"):
            result = in_subprocess(kind, data, args)
            result["rows"] = rows
            results.append(result)
            print(json.dumps(result), flush=True)
    print(report(results, os.getloadavg()))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


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
