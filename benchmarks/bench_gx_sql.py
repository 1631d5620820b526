"""A LabelGate expectation on a GX SQL data source (statistics in the database) vs ``read_sql`` + the pandas path.

One table of judgements (default 10^6: two pools, 3 categories, 25 ratings per item) in SQLite — or in the
PostgreSQL database named by ``--url`` — validated with ``ExpectNormalizedCrossKappaToBeAtLeast`` (200 bootstrap
resamples) in two ways, each in a fresh process:

* ``sql``: a GX SQL data source over the table; the provider fetches aggregates (``details.sql``);
* ``read_sql``: ``pandas.read_sql`` of the whole table, then a GX pandas data source.

Paired, interleaved rounds (the order alternates), so load changes on a shared machine hit both alike. Printed per
way: median and range of the wall time of read + validation (GX import excluded), rows fetched, and the peak
resident memory of the process (``ru_maxrss``, GX's import included in both). The two observed values must agree.

Run: ``python benchmarks/bench_gx_sql.py [--judgements 1000000] [--rounds 3] [--url postgresql+psycopg://...]``
(from the repository root, with the project installed).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

RUN = r"""
import json, resource, sys, time
import great_expectations as gx
import pandas as pd
import sqlalchemy as sa
from great_expectations.data_context.types.base import ProgressBarsConfig
import labelgate.gx as lge

way, url = sys.argv[1], sys.argv[2]
ctx = gx.get_context(mode="ephemeral")
ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
exp = lge.ExpectNormalizedCrossKappaToBeAtLeast(min_value=0.5, n_boot=200, seed=0)
start = time.perf_counter()
if way == "sql":
    add = ctx.data_sources.add_sqlite if url.startswith("sqlite") else ctx.data_sources.add_postgres
    batch = (add("db", connection_string=url).add_table_asset("j", table_name="judgements")
             .add_batch_definition_whole_table("all").get_batch())
else:
    df = pd.read_sql("SELECT * FROM judgements", sa.create_engine(url))
    batch = (ctx.data_sources.add_pandas("p").add_dataframe_asset("j").add_batch_definition_whole_dataframe("all")
             .get_batch(batch_parameters={"dataframe": df.sort_values("item_id", kind="stable")}))
res = batch.validate(exp)
seconds = time.perf_counter() - start
sql = res.result["details"]["sql"]
print(json.dumps({"seconds": seconds, "value": res.result["observed_value"],
                  "rows_fetched": sql["rows_fetched"] if sql else len(df),
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def make_table(url: str, judgements: int, seed: int = 0) -> None:
    import numpy as np
    import pandas as pd
    import sqlalchemy as sa

    rng = np.random.default_rng(seed)
    per_item = 25  # 20 crowd + 5 trusted ratings
    n_items = judgements // per_item
    truth = rng.integers(0, 3, n_items)
    item = np.repeat(np.arange(n_items), per_item)
    slot = np.tile(np.arange(per_item), n_items)
    pool = np.where(slot < 20, "crowd", "trusted")
    rater = np.where(slot < 20, rng.integers(0, 500, item.size), 1000 + rng.integers(0, 30, item.size))
    agree = rng.random(item.size) < np.where(slot < 20, 0.7, 0.85)
    label = np.where(agree, truth[item], rng.integers(0, 3, item.size))
    df = pd.DataFrame({"item_id": item, "rater_id": rater, "label": label, "pool": pool})
    df = df.drop_duplicates(["item_id", "rater_id", "pool"]).sample(frac=1.0, random_state=seed)
    df.to_sql("judgements", sa.create_engine(url), index=False, if_exists="replace", chunksize=100_000)


def run(way: str, url: str) -> dict:
    out = subprocess.run([sys.executable, "-c", RUN, way, url], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judgements", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--url", help="a PostgreSQL URL (default: a SQLite file in a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.url or f"sqlite:///{Path(tmp) / 'judgements.db'}"
        make_table(url, args.judgements)
        results: dict[str, list[dict]] = {"sql": [], "read_sql": []}
        for k in range(args.rounds):
            for way in (("sql", "read_sql") if k % 2 == 0 else ("read_sql", "sql")):
                results[way].append(run(way, url))
    values = {r["value"] for rs in results.values() for r in rs}
    assert max(values) - min(values) < 1e-12, values
    print(f"{args.judgements:,} judgements, {url.split(':')[0]}, {args.rounds} paired rounds")
    for way, rs in results.items():
        seconds = [r["seconds"] for r in rs]
        print(f"{way:>9}: {statistics.median(seconds):6.2f} s ({min(seconds):.2f}-{max(seconds):.2f}), "
              f"rows fetched {rs[0]['rows_fetched']:>9,}, peak memory {statistics.median(r['peak_mib'] for r in rs):7.0f} MiB")
    sql, pandas = (statistics.median(r["seconds"] for r in results[w]) for w in ("sql", "read_sql"))
    print(f"read_sql + pandas / sql: {pandas / sql:.1f}x time")


if __name__ == "__main__":
    main()
