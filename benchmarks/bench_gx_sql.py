"""The gate suite on a GX SQL data source (statistics in the database) vs ``read_sql`` of the table + the pandas path.

One table of judgements (default 10^7: two pools, 3 categories, 25 ratings per item — 20 crowd, 5 trusted — so
400,000 items) in the PostgreSQL database named by ``--url`` (loaded with ``COPY``; the table's name carries its
size and seed, and a complete table from an earlier run is reused) — or, without ``--url``, in a SQLite file.
The gate's suite (κx, normalized κx and the IRR baseline with Krippendorff's α, SPA; 200 bootstrap resamples,
seed 0) — or with ``--suite raters`` the rater-specific metrics (the labeler ICC, normalized κx with Conger's κ, the
IRR baseline with ι; point values, since a SQL batch gives them without an interval) — is validated in two ways,
each in a fresh process:

* ``sql``: a GX SQL data source over the table; the providers fetch aggregates (``details.sql``);
* ``read_sql``: ``pandas.read_sql`` of the whole table, then a GX pandas data source (the rows sorted by item
  id: the SQL path's item order, so the intervals agree).

Paired, interleaved rounds (the order alternates), so load changes on a shared machine hit both alike. Printed per
way: median and range of the wall time of read + validation (imports excluded), rows fetched by the client, and
the peak resident memory of the process (``ru_maxrss``) — whole, and above the process's resident memory after
the imports (what reading and validating added). Every observed value and interval must agree to 1e-9.

Options of the database (PostgreSQL), printed in the header: ``--unique-key`` gives the table a unique index on
(item_id, rater_id, pool) — created if missing, dropped without the flag — so the plan skips the duplicate scan
(``details.sql.duplicates``); ``--work-mem 64MB`` sets ``work_mem`` for both ways' connections through the URL
(libpq ``options=-c work_mem=...``: the session only, the server's configuration unchanged);
``--parallel-workers N`` sets ``max_parallel_workers_per_gather`` the same way (0: no parallel workers; without the
flag the server's setting, printed). The load average (1 min) is printed for the start and for each run.

Run: ``python benchmarks/bench_gx_sql.py --url postgresql+psycopg://USER@HOST:PORT/DB [--judgements 10000000]
[--rounds 3] [--suite gate|raters] [--unique-key] [--work-mem 64MB] [--parallel-workers 2]`` (from the repository root, with the
project installed; ``--drop`` removes the cached table).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUN = r"""
import json, os, resource, sys, time
import great_expectations as gx
import pandas as pd
import sqlalchemy as sa
from great_expectations.data_context.types.base import ProgressBarsConfig
import labelgate.gx as lge

def rss_mib():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024

way, url, table, which = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
ctx = gx.get_context(mode="ephemeral")
ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
if which == "gate":
    common = {"n_boot": 200, "seed": 0, "ci": 0.95}
    suite = gx.ExpectationSuite(name="gate", expectations=[
        lge.ExpectCrossKappaToBeAtLeast(min_value=0.3, **common),
        lge.ExpectNormalizedCrossKappaToBeAtLeast(min_value=0.5, irr="krippendorff_alpha", **common),
        lge.ExpectIrrAtOrAboveTrustedBaseline(tolerance=0.1, irr="krippendorff_alpha", **common),
        lge.ExpectSpaToBeBetween(min_value=0.2, max_value=1.0, **common)])
else:  # the rater-specific metrics: point values (a SQL batch gives them without an interval)
    common = {"ci": None, "level": "interval"}
    suite = gx.ExpectationSuite(name="raters", expectations=[
        lge.ExpectLabelerIccBelowItemIcc(margin=0.0, **common),
        lge.ExpectNormalizedCrossKappaToBeAtLeast(min_value=0.5, irr="conger_kappa", **common),
        lge.ExpectIrrAtOrAboveTrustedBaseline(tolerance=0.1, irr="janson_olsson_iota", **common)])
engine = sa.create_engine(url)
with engine.connect() as conn:  # connect once before the clock: both ways pay the driver's import alike
    conn.execute(sa.text("SELECT 1"))
base = rss_mib()
load = os.getloadavg()[0]
start = time.perf_counter()
if way == "sql":
    add = ctx.data_sources.add_sqlite if url.startswith("sqlite") else ctx.data_sources.add_postgres
    batch = (add("db", connection_string=url).add_table_asset("j", table_name=table)
             .add_batch_definition_whole_table("all").get_batch())
else:
    df = pd.read_sql(f"SELECT * FROM {table}", engine)
    batch = (ctx.data_sources.add_pandas("p").add_dataframe_asset("j").add_batch_definition_whole_dataframe("all")
             .get_batch(batch_parameters={"dataframe": df.sort_values("item_id", kind="stable")}))
res = batch.validate(suite)
seconds = time.perf_counter() - start
values, fetches, duplicates = [], {}, None
for r in res.results:
    d = r.result["details"]
    assert r.exception_info.get("raised_exception") is not True, r.exception_info
    values.append([d["value"], d.get("ci_low"), d.get("ci_high")])
    if d.get("sql"):  # expectations that shared one fetch report it once each
        fetches[d["sql"]["fetch_id"]] = d["sql"]["rows_fetched"]
        duplicates = d["sql"].get("duplicates")
fetched = sum(fetches.values())
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "values": values, "rows_fetched": fetched if way == "sql" else len(df),
                  "peak_mib": peak, "added_mib": peak - base, "duplicates": duplicates, "load": load}))
"""


def table_name(judgements: int, seed: int) -> str:
    return f"labelgate_bench_{judgements}_{seed}"


def generate(judgements: int, seed: int, chunk_items: int = 200_000):
    """Chunks of (item, rater, label, pool) arrays: 20 crowd raters of 500 and 5 trusted of 30 per item."""
    import numpy as np

    rng = np.random.default_rng(seed)
    per_item = 25
    n_items = judgements // per_item
    for first in range(0, n_items, chunk_items):
        m = min(chunk_items, n_items - first)
        item = np.repeat(np.arange(first, first + m), per_item)
        slot = np.tile(np.arange(per_item), m)
        crowd = slot < 20
        offset = np.repeat(rng.integers(0, 500, m), per_item)  # distinct raters within an item
        rater = np.where(crowd, (offset + slot) % 500, 1000 + (offset + slot - 20) % 30)
        truth = np.repeat(rng.integers(0, 3, m), per_item)
        agree = rng.random(item.size) < np.where(crowd, 0.7, 0.85)
        label = np.where(agree, truth, rng.integers(0, 3, item.size))
        yield item, rater, label, np.where(crowd, "crowd", "trusted")


def load_postgres(url: str, table: str, judgements: int, seed: int) -> None:
    """``COPY`` the table in, unless a complete one (its row count in the table's comment) is there already."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    with engine.connect() as conn:
        comment = conn.execute(sa.text("SELECT obj_description(to_regclass(:t), 'pg_class')"), {"t": table}).scalar()
    if comment == f"complete {judgements}":
        print(f"reusing table {table}", file=sys.stderr)
        return
    start = time.perf_counter()
    raw = engine.raw_connection()
    try:
        cur = raw.cursor()
        cur.execute(f"DROP TABLE IF EXISTS {table}")
        cur.execute(f"CREATE TABLE {table} (item_id bigint, rater_id integer, label integer, pool text)")
        with cur.copy(f"COPY {table} (item_id, rater_id, label, pool) FROM STDIN") as copy:
            for item, rater, label, pool in generate(judgements, seed):
                buffer = io.StringIO()
                for i, r, lab, p in zip(item.tolist(), rater.tolist(), label.tolist(), pool.tolist(), strict=True):
                    buffer.write(f"{i}\t{r}\t{lab}\t{p}\n")
                copy.write(buffer.getvalue())
        cur.execute(f"ANALYZE {table}")
        cur.execute(f"COMMENT ON TABLE {table} IS 'complete {judgements}'")
        raw.commit()
    finally:
        raw.close()
        engine.dispose()
    print(f"loaded {judgements:,} rows into {table} in {time.perf_counter() - start:.0f} s", file=sys.stderr)


def key_index(url: str, table: str, wanted: bool) -> None:
    """Create (``wanted``) or drop the unique index on (item_id, rater_id, pool) of the PostgreSQL ``table``."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    with engine.begin() as conn:
        index = f"{table}_key"
        conn.execute(sa.text(f"CREATE UNIQUE INDEX IF NOT EXISTS {index} ON {table} (item_id, rater_id, pool)"
                             if wanted else f"DROP INDEX IF EXISTS {index}"))
    engine.dispose()


def server_setting(url: str, name: str) -> str:
    """A setting of a session opened with ``url`` (its options applied)."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    with engine.connect() as conn:
        value = str(conn.execute(sa.text(f"SHOW {name}")).scalar())
    engine.dispose()
    return value


def load_sqlite(url: str, table: str, judgements: int, seed: int) -> None:
    import pandas as pd
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    for item, rater, label, pool in generate(judgements, seed):
        pd.DataFrame({"item_id": item, "rater_id": rater, "label": label, "pool": pool}).to_sql(
            table, engine, index=False, if_exists="append", chunksize=100_000)
    engine.dispose()


def run(way: str, url: str, table: str, suite: str) -> dict:
    out = subprocess.run([sys.executable, "-c", RUN, way, url, table, suite], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{way} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judgements", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=3, help="paired rounds (0: only load the table)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--url", help="a PostgreSQL URL (default: a SQLite file in a temporary folder)")
    parser.add_argument("--drop", action="store_true", help="drop the cached PostgreSQL table and exit")
    parser.add_argument("--unique-key", action="store_true", help="PostgreSQL: a unique index on (item_id, "
                        "rater_id, pool), created if missing (dropped without the flag)")
    parser.add_argument("--work-mem", help="PostgreSQL: work_mem of both ways' sessions, e.g. 64MB")
    parser.add_argument("--suite", choices=("gate", "raters"), default="gate",
                        help="gate: κx, normalized κx and the IRR baseline with α, SPA (200 resamples); raters: the "
                        "labeler ICC, normalized κx with Conger's κ and the IRR baseline with ι (point values)")
    parser.add_argument("--parallel-workers", type=int, help="PostgreSQL: max_parallel_workers_per_gather of both "
                        "ways' sessions (default: the server's)")
    args = parser.parse_args()
    table = table_name(args.judgements, args.seed)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        url = args.url or f"sqlite:///{Path(tmp) / 'judgements.db'}"
        if args.drop:
            import sqlalchemy as sa

            with sa.create_engine(url).begin() as conn:
                conn.execute(sa.text(f"DROP TABLE IF EXISTS {table}"))
            return
        (load_postgres if args.url else load_sqlite)(url, table, args.judgements, args.seed)
        if args.url:
            key_index(url, table, args.unique_key)
            settings = [f"-c%20{name}%3D{value}" for name, value in (("work_mem", args.work_mem), (
                "max_parallel_workers_per_gather", args.parallel_workers)) if value is not None]
            if settings:
                url += ("&" if "?" in url else "?") + "options=" + "%20".join(settings)
            workers = server_setting(url, "max_parallel_workers_per_gather")
        if args.rounds == 0:  # load (and cache) the table only
            return
        results: dict[str, list[dict]] = {"sql": [], "read_sql": []}
        for k in range(args.rounds):
            for way in (("sql", "read_sql") if k % 2 == 0 else ("read_sql", "sql")):
                results[way].append(run(way, url, table, args.suite))
    reference = results["sql"][0]["values"]
    for rs in results.values():
        for r in rs:
            for got, want in zip(r["values"], reference, strict=True):
                assert all((a is None and b is None) or abs(a - b) < 1e-9
                           for a, b in zip(got, want, strict=True)), (got, want)
    options = (f"; duplicate rule: {results['sql'][0]['duplicates']}; work_mem "
               f"{args.work_mem or 'the server default'}; max_parallel_workers_per_gather {workers}"
               ) if args.url else ""
    what = ("gate suite (4 expectations, 200 resamples)" if args.suite == "gate" else
            "rater suite (labeler ICC, Conger's κ, ι; point values)")
    print(f"# bench_gx_sql: {args.judgements:,} judgements, {url.split(':')[0]}, {what}, {args.rounds} paired rounds; load average at start {load:.2f}, at the end "
          f"{os.getloadavg()[0]:.2f}{options}")
    for way, rs in results.items():
        seconds = [r["seconds"] for r in rs]
        peak = [r["peak_mib"] for r in rs]
        added = [r["added_mib"] for r in rs]
        loads = " ".join(f"{r['load']:.2f}" for r in rs)
        print(f"{way:>9}: {statistics.median(seconds):7.2f} s ({min(seconds):.2f}-{max(seconds):.2f}), rows fetched "
              f"{rs[0]['rows_fetched']:>11,}, peak RSS {statistics.median(peak):6.0f} MiB "
              f"({min(peak):.0f}-{max(peak):.0f}), above the imports {statistics.median(added):6.0f} MiB "
              f"({min(added):.0f}-{max(added):.0f}); load average {loads}")
    med = {w: {k: statistics.median(r[k] for r in results[w]) for k in ("seconds", "peak_mib", "added_mib")}
           for w in results}
    print(f"read_sql + pandas / sql: {med['read_sql']['seconds'] / med['sql']['seconds']:.1f}x time, "
          f"{med['read_sql']['peak_mib'] / med['sql']['peak_mib']:.1f}x peak RSS, "
          f"{med['read_sql']['added_mib'] / med['sql']['added_mib']:.1f}x memory above the imports")
    print("values (value, ci_low, ci_high) per expectation: " + json.dumps(
        [[None if v is None else round(v, 6) for v in row] for row in reference]))


if __name__ == "__main__":
    main()
