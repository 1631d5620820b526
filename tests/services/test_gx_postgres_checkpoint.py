"""A GX checkpoint with the shipped suite over a PostgreSQL table: Data Docs show the values and intervals.

The shipped ``crowd_vs_trusted`` suite (``expectations/``) in a LabelGate GX project (:func:`project_context`),
one validation definition over a GX PostgreSQL table asset, a checkpoint that builds Data Docs. Every expectation
runs from the database's aggregates (``details.sql``), its result equals the pandas path's on the same rows sorted
by item id, and the validation page states each observed value with its interval.

Needs ``LABELGATE_TEST_POSTGRES_URL`` and the psycopg driver (skipped with the reason otherwise).
"""

from __future__ import annotations

import html
import os
import re
import uuid

import numpy as np
import pandas as pd
import pytest

gx = pytest.importorskip("great_expectations")
sa = pytest.importorskip("sqlalchemy")

from great_expectations.checkpoint import UpdateDataDocsAction  # noqa: E402
from great_expectations.data_context.types.base import ProgressBarsConfig  # noqa: E402

import labelgate.gx as lge  # noqa: E402
from labelgate.gx.project import project_context  # noqa: E402

PG_URL = os.environ.get("LABELGATE_TEST_POSTGRES_URL")


def two_pools(seed: int = 21, n_items: int = 120) -> pd.DataFrame:
    """A crowd of 3-6 raters and a trusted pool of 2-3 per item, three categories, string ids."""
    rng = np.random.default_rng(seed)
    rows = []
    for item in rng.permutation(n_items):
        truth = int(rng.integers(3))
        for pool, k, p in (("crowd", int(rng.integers(3, 7)), 0.75), ("trusted", int(rng.integers(2, 4)), 0.9)):
            for rater in rng.choice(20, k, replace=False):
                label = truth if rng.random() < p else int(rng.integers(3))
                rows.append((f"doc-{item:03d}", f"{pool}-{rater}", ["neg", "neu", "pos"][label], pool))
    return pd.DataFrame(rows, columns=["item_id", "rater_id", "label", "pool"])


@pytest.fixture(scope="module")
def pg_table():
    if not PG_URL:
        pytest.skip("LABELGATE_TEST_POSTGRES_URL is not set: start a server with "
                    "`eval \"$(scripts/services.sh postgres)\"` to run the GX PostgreSQL checkpoint test")
    pytest.importorskip("psycopg", reason="the PostgreSQL tests need the psycopg driver")
    engine = sa.create_engine(PG_URL, connect_args={"connect_timeout": 5})
    name = f"judgements_{uuid.uuid4().hex[:10]}"
    df = two_pools()
    try:
        df.to_sql(name, engine, index=False)
    except sa.exc.OperationalError as exc:
        engine.dispose()
        pytest.skip(f"the PostgreSQL server is not reachable: {str(exc).splitlines()[0]}")
    yield name, df
    with engine.begin() as conn:
        conn.execute(sa.text(f'DROP TABLE IF EXISTS "{name}"'))
    engine.dispose()


def page_text(path) -> str:
    raw = path.read_text(encoding="utf-8")
    raw = re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", raw, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", raw)))


def test_shipped_suite_checkpoint_on_a_postgres_table_builds_data_docs(pg_table, tmp_path):
    table, df = pg_table
    ctx = project_context(tmp_path)
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    batch = (ctx.data_sources.add_postgres("labels", connection_string=PG_URL)
             .add_table_asset("judgements", table_name=table).add_batch_definition_whole_table("all"))
    suite = ctx.suites.add(lge.load_suite("crowd_vs_trusted"))
    vd = ctx.validation_definitions.add(gx.ValidationDefinition(name="vd_pg", data=batch, suite=suite))
    checkpoint = ctx.checkpoints.add(gx.Checkpoint(name="gate_pg", validation_definitions=[vd],
                                                   actions=[UpdateDataDocsAction(name="docs")],
                                                   result_format={"result_format": "COMPLETE"}))
    lge.verify_checkpoint(checkpoint)
    params = lge.expectation_parameters(suite)
    result = checkpoint.run(expectation_parameters=params)

    # the pandas path on the same rows, sorted by item id (the SQL path's item order)
    pandas_suite = lge.load_suite("crowd_vs_trusted")
    pandas_batch = (ctx.data_sources.add_pandas("frames").add_dataframe_asset("rows")
                    .add_batch_definition_whole_dataframe("all")
                    .get_batch(batch_parameters={"dataframe": df.sort_values("item_id", kind="stable")}))
    on_pandas = {r.expectation_config.type: r.result
                 for r in pandas_batch.validate(pandas_suite, expectation_parameters=params).results}

    site = tmp_path / "gx" / "uncommitted" / "data_docs" / "local_site"
    pages = list((site / "validations").rglob("*.html"))
    assert len(pages) == 1
    text = page_text(pages[0])
    (run,) = result.run_results.values()
    assert len(run.results) == len(suite.expectations) == 4
    for evr in run.results:
        type_, r = evr.expectation_config.type, evr.result
        assert lge.raised_exception(evr) is None, (type_, lge.raised_exception(evr))
        details = r["details"]
        # computed in the database: aggregates fetched, fewer rows than the judgements
        assert details["sql"]["dialect"] == "postgresql", type_
        assert 0 < details["sql"]["rows_fetched"] < details["sql"]["rows_aggregated"] == len(df), type_
        reference = on_pandas[type_]
        for key in ("value", "ci_low", "ci_high"):
            assert abs(details[key] - reference["details"][key]) <= 1e-12, (type_, key)
        interval = f"{details['ci_low']:.2f}–{details['ci_high']:.2f}".replace("-", "−")
        assert f"— observed {r['observed_value']:.2f} (95% CI {interval})" in text, (type_, interval)
