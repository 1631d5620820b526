"""Where the time of the gate suite on a SQL table goes: each query of the aggregate plan, the build of the pools and
each metric's finish, timed one by one (the ``sql`` way of ``bench_gx_sql.py``, without GX around it).

The table is ``bench_gx_sql.py``'s (same generator, name and ``COPY`` load, reused when complete). The plan
(:class:`labelgate.sqlagg.AggregatePlan`) runs on a :class:`~labelgate.sqlagg.sql.SqlAlchemyBackend` whose every
operation is timed; then the four ``pools_*`` functions of the gate suite (κx, normalized κx and the IRR baseline
with Krippendorff's α, SPA; 200 resamples, seed 0, 95 %) finish from the pools, sharing their resamples as in a
validation (the first bootstrap draws them, the others with the same seed and items reuse them). One run, one
process.

Run: ``python benchmarks/profile_sql_plan.py --url postgresql+psycopg://USER@HOST:PORT/DB [--judgements 10000000]``
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gx_sql import key_index, load_postgres, table_name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="a PostgreSQL URL")
    parser.add_argument("--judgements", type=int, default=10_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--unique-key", action="store_true", help="with a unique index on (item_id, rater_id, "
                        "pool), created if missing (without the flag it is dropped): the duplicate scan is skipped")
    parser.add_argument("--raters", action="store_true", help="then the two queries of the crowd raters' "
                        "diagnostics in the database (labelgate.sqlagg.raters.rater_evidence) and their finish")
    parser.add_argument("--explain", action="store_true", help="then EXPLAIN ANALYZE the two slowest queries and "
                        "print their sort / aggregate lines (runs them again)")
    args = parser.parse_args()
    table = table_name(args.judgements, args.seed)
    load_postgres(args.url, table, args.judgements, args.seed)

    import sqlalchemy as sa

    from labelgate.gx._metrics import pools_cross_kappa, pools_irr_comparison, pools_normalized_cross_kappa, pools_spa
    from labelgate.metrics.diagnostics import rater_diagnostics
    from labelgate.pipeline.sources.sql_judgements import coded_judgements
    from labelgate.sqlagg import AggregatePlan
    from labelgate.sqlagg.raters import rater_evidence
    from labelgate.sqlagg.sql import SqlAlchemyBackend

    steps: list[tuple[str, float, int]] = []

    captured: list[tuple[str, Any]] = []

    class Timed(SqlAlchemyBackend):
        """Every protocol operation timed, with the rows it fetched; its statements kept for ``--explain``."""

        step = ""

        def fetch(self, query: Any) -> list[tuple[Any, ...]]:
            captured.append((self.step, query))
            return super().fetch(query)

        def stream(self, query: Any, width: int) -> Any:
            captured.append((self.step, query))
            return super().stream(query, width)

        def id_rows(self, scope: Any, query: Any, coded: bool, labels: Any) -> Any:
            captured.append((self.step, query))
            return super().id_rows(scope, query, coded, labels)

    def timed(name: str) -> Any:
        inner = getattr(SqlAlchemyBackend, name)

        def call(self: SqlAlchemyBackend, *a: Any, **k: Any) -> Any:
            label = name if name != "distinct" else f"distinct {a[1]}"
            self.step = label  # type: ignore[attr-defined]
            before, start = self.rows_fetched, time.perf_counter()
            out = inner(self, *a, **k)
            steps.append((label, time.perf_counter() - start, self.rows_fetched - before))
            return out
        return call

    for name in ("columns", "tallies", "count", "distinct", "duplicates", "item_label_counts", "rater_contexts",
                 "rater_pairs"):  # duplicates: the key inspection, or the scan
        setattr(Timed, name, timed(name))

    kw = {"item_column": "item_id", "rater_column": "rater_id", "label_column": "label", "pool_column": "pool",
          "question_column": None, "question": None, "crowd_pool": "crowd", "trusted_pool": "trusted",
          "level": "nominal", "categories": None, "duplicates": "error",
          "ci": 0.95, "n_boot": 200, "seed": 0, "irr": "krippendorff_alpha", "weighting": "annotations_m1",
          "ci_method": "auto"}
    engine = sa.create_engine(args.url)
    key_index(args.url, table, args.unique_key)
    load = os.getloadavg()[0]
    with engine.connect() as connection:
        start = time.perf_counter()
        plan = AggregatePlan(Timed.on_connection(connection, sa.table(table)), kw)
        pools = plan.pools(need_trusted=True)
        plan_seconds = time.perf_counter() - start
        plan_steps = len(steps)
        if args.raters:
            start = time.perf_counter()
            backend = Timed.on_connection(connection, sa.table(table))
            evidence = rater_evidence(backend, plan.scope, backend.distinct(plan.scope, "label", "labelled"),
                                      list(pools.crowd.categories), "nominal", center=pools.crowd.moment_center)
            rows = evidence.rows(pool_name="crowd", ci=0.95)
            raters_seconds = time.perf_counter() - start
            start = time.perf_counter()  # the route it replaces: every crowd judgement fetched, coded
            _, (crowd, trusted) = coded_judgements(
                connection, f"SELECT item_id, rater_id, label, pool, 'q' AS question FROM {table}", "nominal",
                None, "trusted")
            assert crowd is not None
            by_row = rater_diagnostics(crowd, trusted, pool_name="crowd", ci=0.95)
            row_seconds = time.perf_counter() - start
        plans = explain(connection, captured, steps) if args.explain else []
    engine.dispose()
    steps, rater_steps = steps[:plan_steps], steps[plan_steps:]
    queries = sum(s for _, s, _ in steps)
    finishes = []
    for name, finish in (("cross_kappa", pools_cross_kappa), ("normalized_cross_kappa", pools_normalized_cross_kappa),
                         ("irr_comparison", pools_irr_comparison), ("spa", pools_spa)):
        start = time.perf_counter()
        finish(pools, dict(kw))
        finishes.append((name, time.perf_counter() - start))
    print(f"# profile_sql_plan: {args.judgements:,} judgements in {table}, postgresql; load average at start "
          f"{load:.2f}")
    for name, seconds, fetched in steps:
        print(f"  query {name:<24} {seconds:8.2f} s  {fetched:>10,} rows")
    print(f"  pools from the aggregates    {plan_seconds - queries:8.2f} s  (Ratings.from_aggregates, re-coding)")
    for name, seconds in finishes:
        print(f"  finish {name:<23} {seconds:8.2f} s")
    total = plan_seconds + sum(s for _, s in finishes)
    print(f"total {total:.2f} s: queries {queries:.2f} s, client {total - queries:.2f} s; duplicate rule: "
          f"{plan.report()['duplicates']}; bootstraps that reused the pools' resamples: {pools.resamples.served}")
    if args.raters:
        for name, seconds, fetched in rater_steps:
            print(f"  raters: query {name:<17} {seconds:8.2f} s  {fetched:>10,} rows")
        client = raters_seconds - sum(s for _, s, _ in rater_steps)
        print(f"  raters: sums and rows (client) {client:6.2f} s  ({len(rows)} raters, "
              f"{evidence.parts[0].shape[0]:,} context rows for {int(evidence.sums.n_ratings.sum()):,} judgements)")
        print(f"  raters in the database {raters_seconds:8.2f} s; the judgements fetched and diagnosed in Python "
              f"{row_seconds:6.2f} s ({crowd.n_ratings + (trusted.n_ratings if trusted else 0):,} rows, "
              f"{len(by_row)} raters)")
    for line in plans:
        print(line)


def explain(connection: Any, captured: list[tuple[str, Any]], steps: list[tuple[str, float, int]]) -> list[str]:
    """The plan lines of the two slowest steps' statements that say how PostgreSQL sorted and aggregated."""
    import sqlalchemy as sa

    slowest = [name for name, _, _ in sorted(steps, key=lambda s: -s[1])[:2]]
    out = []
    for step, query in captured:
        if step not in slowest:
            continue
        sql = str(query.compile(dialect=connection.dialect, compile_kwargs={"literal_binds": True}))
        lines = [r[0] for r in connection.execute(sa.text(f"EXPLAIN (ANALYZE, BUFFERS) {sql}".replace(":", "\\:")))]
        keep = [x.strip() for x in lines if any(w in x for w in ("Sort Method", "Aggregate", "WindowAgg", "Disk",
                                                               "Batches", "Execution Time", "Sort  (", "Gather",
                                                               "Workers Launched"))]
        out += [f"# EXPLAIN ANALYZE, {step}:"] + [f"    {x}" for x in keep]
    return out


if __name__ == "__main__":
    main()
