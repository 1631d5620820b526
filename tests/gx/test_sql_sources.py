"""LabelGate's expectations on GX SQL data sources: the database aggregates, the results equal the pandas path's.

Every expectation that runs from aggregates is validated on a GX SQLite data source and — when
``LABELGATE_TEST_POSTGRES_URL`` names a reachable server (``eval "$(scripts/services.sh postgres)"``) — on a
GX PostgreSQL data source, and on a GX pandas data source over the same rows sorted by item id (the SQL path's
item order: the bootstrap draws items by position). ``success``, ``observed_value``, the interval and every
component must agree: point values to 1e-12, intervals to 1e-12 with the same seed (identical resamples; only
the rounding of sums may differ). The data: random, with missing labels, several questions, a row condition,
string and integer ids, nominal / ordinal / interval labels, rows in random order.
"""

from __future__ import annotations

import math
import os
import uuid
from typing import Any

import numpy as np
import pandas as pd
import pytest

gx = pytest.importorskip("great_expectations")
sa = pytest.importorskip("sqlalchemy")

from great_expectations.data_context.types.base import ProgressBarsConfig  # noqa: E402
from great_expectations.expectations.row_conditions import Column  # noqa: E402

import labelgate.gx as lge  # noqa: E402
from tests.oracles import without_standard_error  # noqa: E402

PG_URL = os.environ.get("LABELGATE_TEST_POSTGRES_URL")
NO_PG = ("LABELGATE_TEST_POSTGRES_URL is not set: start a server with `eval \"$(scripts/services.sh postgres)\"` "
         "to run the GX PostgreSQL tests")
TOL = 1e-12
BOOT = {"ci": 0.9, "n_boot": 200, "seed": 7}
POOLS = {"question_column": "question", "question": "q2"}


# ------------------------------------------------------------------ data
def judgements(level: str, int_ids: bool, seed: int = 0, n_items: int = 70, missing: float = 0.08,
               duplicate: bool = False) -> pd.DataFrame:
    """Two pools over three questions: sparse crowd raters, a few trusted raters, missing labels, shuffled rows."""
    rng = np.random.default_rng(seed)
    scale: list[Any] = {"nominal": ["neg", "neu", "pos", "mixed"], "ordinal": ["a", "b", "c", "d", "e"],
                        "interval": [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.5]}[level]
    item_ids = rng.choice(10**6, n_items * 3, replace=False) if int_ids else [f"it-{i:04d}" for i in
                                                                               rng.permutation(n_items * 3)]
    rows = []
    for q, question in enumerate(("q1", "q2", "q3")):
        for i in range(n_items):
            item = item_ids[q * n_items + i]
            truth = rng.integers(len(scale))
            for pool, n_raters, k, p in (("crowd", 14, rng.integers(1, 7), 0.6), ("trusted", 5, 3, 0.85)):
                for r in rng.choice(n_raters, min(k, n_raters), replace=False):
                    code = truth if rng.random() < p else rng.integers(len(scale))
                    label = None if rng.random() < missing else scale[int(code)]
                    rater = int(r) + (100 if pool == "trusted" else 0) if int_ids else f"{pool}-{r}"
                    rows.append((item, rater, label, pool, question))
    df = pd.DataFrame(rows, columns=["item_id", "rater_id", "label", "pool", "question"])
    if duplicate:  # one rater judges one item twice
        df = pd.concat([df, df.iloc[[5]]], ignore_index=True)
    return df.sample(frac=1.0, random_state=seed).reset_index(drop=True)


DATASETS = {f"{level}_{'int' if int_ids else 'str'}": (level, int_ids)
            for level in ("nominal", "ordinal", "interval") for int_ids in (False, True)}


def excluded_rater(name: str) -> Any:
    """A row condition dropping one crowd rater (a GX condition: pandas and SQL engines apply it)."""
    return Column("rater_id") != (3 if name.endswith("_int") else "crowd-3")


def expectations(name: str) -> list[tuple[str, Any]]:
    level = DATASETS[name][0]
    cond = {"row_condition": excluded_rater(name)}
    common = {"level": level, **POOLS, **BOOT}
    out: list[tuple[str, Any]] = [
        ("cross_kappa", lge.ExpectCrossKappaToBeAtLeast(min_value=0.3, **common)),
        ("cross_kappa_rc", lge.ExpectCrossKappaToBeAtLeast(min_value=0.3, use_ci_bound=True, **common, **cond)),
        ("spa", lge.ExpectSpaToBeBetween(min_value=0.2, max_value=0.99, **common)),
        ("spa_inv_var_rc", lge.ExpectSpaToBeBetween(min_value=0.2, max_value=0.99, weighting="inv_var_class",
                                                    **common, **cond)),
    ]
    for irr in ("krippendorff_alpha", "fleiss_kappa", "gwet_ac"):
        out.append((f"nkx_{irr}", lge.ExpectNormalizedCrossKappaToBeAtLeast(min_value=0.8, irr=irr, **common,
                                                                            **(cond if irr != "gwet_ac" else {}))))
        out.append((f"irr_{irr}", lge.ExpectIrrAtOrAboveTrustedBaseline(tolerance=0.1, max_excess=0.3, irr=irr,
                                                                        **common, **(cond if irr == "gwet_ac"
                                                                                     else {}))))
    # the IRR's agreement weights (the same parameter on both engines; ordinal labels at their ranks)
    out.append(("irr_alpha_linear", lge.ExpectIrrAtOrAboveTrustedBaseline(tolerance=0.1, weights="linear", **common)))
    out.append(("nkx_gwet_quadratic", lge.ExpectNormalizedCrossKappaToBeAtLeast(
        min_value=0.8, irr="gwet_ac", weights="quadratic", **common)))
    return out


# ------------------------------------------------------------------ GX plumbing
@pytest.fixture(scope="module")
def context():
    ctx = gx.get_context(mode="ephemeral")
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    return ctx


@pytest.fixture(scope="module")
def pandas_batch(context):
    definition = context.data_sources.add_pandas("pandas").add_dataframe_asset("rows") \
        .add_batch_definition_whole_dataframe("all")

    def batch(df: pd.DataFrame) -> Any:
        # the SQL path orders items by id; the pandas path by first row: the same rows sorted by item id
        return definition.get_batch(batch_parameters={"dataframe": df.sort_values("item_id", kind="stable")})
    return batch


class SqlSource:
    """One GX SQL data source; each named table is written once and read as a whole-table batch."""

    def __init__(self, context: Any, kind: str, url: str) -> None:
        self.engine = sa.create_engine(url)
        self.kind = kind
        add = context.data_sources.add_sqlite if kind == "sqlite" else context.data_sources.add_postgres
        self.source = add(f"{kind}_{uuid.uuid4().hex[:6]}", connection_string=url)
        self.batches: dict[str, Any] = {}

    def batch(self, name: str, df: pd.DataFrame) -> Any:
        if name not in self.batches:
            df.to_sql(name, self.engine, index=False, if_exists="replace")
            asset = self.source.add_table_asset(name, table_name=name)
            self.batches[name] = asset.add_batch_definition_whole_table("all").get_batch()
        return self.batches[name]


@pytest.fixture(scope="module")
def sqlite_source(context, tmp_path_factory):
    path = tmp_path_factory.mktemp("gx-sql") / "judgements.db"
    source = SqlSource(context, "sqlite", f"sqlite:///{path}")
    yield source
    source.engine.dispose()


@pytest.fixture(scope="module")
def postgres_source(context):
    if not PG_URL:
        pytest.skip(NO_PG)
    pytest.importorskip("psycopg", reason="the PostgreSQL tests need the psycopg driver")
    from sqlalchemy.engine import make_url

    admin = sa.create_engine(PG_URL, isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 5})
    name = f"labelgate_gx_sql_{uuid.uuid4().hex[:10]}"
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # unreachable server, or a role that may not create databases
        admin.dispose()
        pytest.skip(f"no fresh database on LABELGATE_TEST_POSTGRES_URL: {type(exc).__name__}: "
                    f"{str(exc).splitlines()[0]}")
    source = SqlSource(context, "postgres",
                       make_url(PG_URL).set(database=name).render_as_string(hide_password=False))
    yield source
    source.engine.dispose()
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
def sql_source(request):
    return request.getfixturevalue(f"{request.param}_source")


def close(a: Any, b: Any, where: str) -> None:
    """Equal up to TOL, recursively; None and NaN are the same (JSON-friendly NaN)."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert set(a) == set(b), (where, set(a) ^ set(b))
        for key in a:
            close(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        if not (math.isnan(a) and math.isnan(b)):
            assert abs(a - b) <= TOL, (where, a, b)
    elif a is None or b is None:
        assert all(v is None or (isinstance(v, float) and math.isnan(v)) for v in (a, b)), (where, a, b)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), (where, a, b)
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            close(x, y, f"{where}[{k}]")
    else:
        assert a == b, (where, a, b)


def assert_same_result(sql: Any, pandas: Any, where: str) -> dict[str, Any]:
    assert lge.raised_exception(sql) is None, (where, lge.raised_exception(sql))
    assert lge.raised_exception(pandas) is None, (where, lge.raised_exception(pandas))
    assert sql.success == pandas.success, where
    close(sql.result["observed_value"], pandas.result["observed_value"], f"{where}: observed_value")
    ds, dp = dict(sql.result["details"]), dict(pandas.result["details"])
    report = ds.pop("sql")
    assert dp.pop("sql") is None
    # a standard error that reads each judgement's rater (Conger's analytic one) is not computed from the
    # database's sums, which say why (se_note); the rest of the details are equal
    close(without_standard_error(ds), without_standard_error(dp), f"{where}: details")
    return report


# ------------------------------------------------------------------ equality with the pandas path
@pytest.mark.parametrize("name", sorted(DATASETS))
def test_every_expectation_equals_the_pandas_path(name, sql_source, pandas_batch):
    level, int_ids = DATASETS[name]
    df = judgements(level, int_ids, seed=len(name))
    sql_batch, pd_batch = sql_source.batch(name, df), pandas_batch(df)
    undefined, aggregated = 0, {}
    for label, expectation in expectations(name):
        where = f"{sql_source.kind}/{name}/{label}"
        sql, pandas = sql_batch.validate(expectation), pd_batch.validate(expectation)
        report = assert_same_result(sql, pandas, where)
        assert report["dialect"] == ("sqlite" if sql_source.kind == "sqlite" else "postgresql"), where
        assert 0 < report["rows_fetched"] < report["rows_aggregated"], (where, report)
        undefined += sql.result["observed_value"] is None
        aggregated[label] = report["rows_aggregated"]
        if sql.result["observed_value"] is not None and expectation.ci is not None:
            assert sql.result["details"]["ci_low"] is not None, where  # the interval itself was compared
    assert undefined == 0  # the data exercise defined values, not NaN == NaN
    # the question and the row condition were applied in the database
    assert aggregated["cross_kappa_rc"] < aggregated["cross_kappa"] < len(df)


def test_items_are_in_python_order_whatever_the_collation(sqlite_source, pandas_batch):
    # a column collated case-insensitively: the database orders (and ranks) the ids A0001, a0002, A0003...;
    # Python (and the pandas path) A0001, A0003, ..., a0002: the codes are re-numbered, so the interval agrees
    df = judgements("nominal", False, seed=12)
    ids = {old: f"{'Aa'[k % 2]}{k:04d}" for k, old in enumerate(sorted(df["item_id"].unique()))}
    df["item_id"] = df["item_id"].map(ids)
    with sqlite_source.engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE IF EXISTS nocase"))
        conn.execute(sa.text("CREATE TABLE nocase (item_id TEXT COLLATE NOCASE, rater_id TEXT, label TEXT, "
                             "pool TEXT, question TEXT)"))
    df.to_sql("nocase", sqlite_source.engine, index=False, if_exists="append")
    with sqlite_source.engine.connect() as conn:
        db_order = [r[0] for r in conn.execute(sa.text("SELECT DISTINCT item_id FROM nocase ORDER BY item_id"))]
    assert db_order != sorted(db_order)  # the database's order is not Python's
    batch = sqlite_source.source.add_table_asset("nocase", table_name="nocase") \
        .add_batch_definition_whole_table("all").get_batch()
    for expectation in (lge.ExpectCrossKappaToBeAtLeast(min_value=0.3, **POOLS, **BOOT),
                        lge.ExpectSpaToBeBetween(min_value=0.2, max_value=0.99, **POOLS, **BOOT)):
        assert_same_result(batch.validate(expectation), pandas_batch(df).validate(expectation), "nocase")


def test_success_and_failure_both_occur(sqlite_source, pandas_batch):
    # the thresholds above are not all trivially passed or failed: pick one passing and one failing threshold
    df = judgements("nominal", False, seed=3)
    batch = sqlite_source.batch("pass_fail", df)
    value = batch.validate(lge.ExpectCrossKappaToBeAtLeast(min_value=0.0, **POOLS, ci=None)).result["observed_value"]
    for threshold, expected in ((value - 0.01, True), (value + 0.01, False)):
        exp = lge.ExpectCrossKappaToBeAtLeast(min_value=threshold, **POOLS, ci=None)
        sql, pandas = batch.validate(exp), pandas_batch(df).validate(exp)
        assert sql.success is expected and pandas.success is expected


# ------------------------------------------------------------------ the judgements stay in the database
def test_rows_fetched_are_the_aggregates_not_the_judgements(sqlite_source):
    rng = np.random.default_rng(4)
    n_items, k = 300, 25  # many ratings per item, 3 categories: few (item, label) groups per item
    rows = [(i, f"r{r}", int(rng.integers(3)), pool, "q1")
            for i in range(n_items) for pool in ("crowd", "trusted") for r in rng.choice(40, k, replace=False)]
    df = pd.DataFrame(rows, columns=["item_id", "rater_id", "label", "pool", "question"])
    res = sqlite_source.batch("many_ratings", df).validate(
        lge.ExpectNormalizedCrossKappaToBeAtLeast(min_value=0.0, question_column="question", question="q1",
                                                  n_boot=50))
    report = res.result["details"]["sql"]
    assert report["rows_aggregated"] == len(df) == 15_000
    # one row per item: its counts per (pool, label) in 2 x 3 columns, and its id; the tallies per pool and label
    # (which give the labels too); the duplicate check's one row (it found none)
    assert report["rows_fetched"] == n_items + 2 * 3 + 1 < len(df) / 40
    # the column names (no row), the tallies and labels, the table's keys (none: inspected, counted as one query),
    # the duplicate scan, the counts
    assert report["queries"] == 5 and report["duplicates"] == "scanned"


def test_the_expectations_of_a_suite_share_one_fetch(sql_source, pandas_batch):
    # GX resolves the aggregates once per batch and aggregate parameters: the three crowd-vs-trusted
    # expectations and SPA (which does not need the trusted pool, but the batch has it) share one fetch
    df = judgements("nominal", True, seed=13)
    common = {"level": "nominal", **POOLS, **BOOT}
    suite = gx.ExpectationSuite(name=f"shared_{sql_source.kind}", expectations=[
        lge.ExpectCrossKappaToBeAtLeast(min_value=0.3, **common),
        lge.ExpectNormalizedCrossKappaToBeAtLeast(min_value=0.8, **common),
        lge.ExpectIrrAtOrAboveTrustedBaseline(tolerance=0.1, **common),
        lge.ExpectSpaToBeBetween(min_value=0.2, max_value=0.99, **common)])
    sql = sql_source.batch("shared", df).validate(suite)
    pandas = pandas_batch(df).validate(suite)
    fetches = []
    for on_sql, on_pandas in zip(sql.results, pandas.results, strict=True):
        report = assert_same_result(on_sql, on_pandas, f"{sql_source.kind}/shared")
        fetches.append(report["fetch_id"])
    assert len(set(fetches)) == 1


# ------------------------------------------------------------------ the rater-specific metrics: from the raters' sums
def biased(level: str, int_ids: bool, seed: int) -> pd.DataFrame:
    """:func:`judgements` with a bias per crowd rater (so the labeler ICC is not truncated at 0) and six items of
    question q2 that only the crowd judged."""
    rng = np.random.default_rng(seed)
    df = judgements(level, int_ids, seed=seed)
    scale = sorted(df["label"].dropna().unique().tolist(), key=lambda v: (str(type(v)), v))
    shift = {r: int(rng.integers(-2, 3)) for r in df["rater_id"].unique()}
    crowd = (df["pool"] == "crowd") & df["label"].notna()
    df.loc[crowd, "label"] = [scale[min(max(scale.index(v) + shift[r], 0), len(scale) - 1)]
                              for v, r in zip(df.loc[crowd, "label"], df.loc[crowd, "rater_id"], strict=True)]
    items = df.loc[df["question"] == "q2", "item_id"].unique()[:6]
    return df[~(df["item_id"].isin(items) & (df["pool"] == "trusted"))].reset_index(drop=True)


def rater_expectations(level: str, **common: Any) -> list[tuple[str, Any]]:
    """The labeler ICC, and Conger's κ and ι in both expectations that take an IRR (ι has no ordinal distance)."""
    kw = {"level": level, **POOLS, **common}
    out: list[tuple[str, Any]] = [("labeler_icc", lge.ExpectLabelerIccBelowItemIcc(margin=0.0, **kw))]
    for irr in ("conger_kappa", "janson_olsson_iota"):
        if irr == "janson_olsson_iota" and level == "ordinal":
            continue
        out.append((f"nkx_{irr}", lge.ExpectNormalizedCrossKappaToBeAtLeast(min_value=0.5, irr=irr, **kw)))
        out.append((f"irr_{irr}", lge.ExpectIrrAtOrAboveTrustedBaseline(tolerance=0.1, irr=irr, **kw)))
    return out


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_the_rater_metrics_equal_the_pandas_path(name, sql_source, pandas_batch):
    # the labeler ICC, Conger's kappa and iota: one more query sums the judgements per rater; no interval
    level, int_ids = DATASETS[name]
    df = biased(level, int_ids, seed=len(name) + 20)
    sql_batch, pd_batch = sql_source.batch(f"raters_{name}", df), pandas_batch(df)
    defined = 0
    for label, expectation in rater_expectations(level, ci=None):
        where = f"{sql_source.kind}/{name}/{label}"
        sql, pandas = sql_batch.validate(expectation), pd_batch.validate(expectation)
        report = assert_same_result(sql, pandas, where)
        assert 0 < report["rows_fetched"] < report["rows_aggregated"], (where, report)
        defined += bool(sql.result["observed_value"])  # neither undefined nor truncated at 0
    # nominal and ordinal labels with four or five categories have no variance components (a reason on both
    # paths); the rest is defined
    assert defined == len(rater_expectations(level)) - (level != "interval")


def test_the_rater_metrics_of_a_suite_share_one_query_of_the_raters(sql_source, pandas_batch):
    df = judgements("interval", True, seed=31)
    suite = gx.ExpectationSuite(name=f"raters_{sql_source.kind}",
                                expectations=[e for _, e in rater_expectations("interval", ci=None)])
    sql = sql_source.batch("raters_suite", df).validate(suite)
    pandas = pandas_batch(df).validate(suite)
    reports = [assert_same_result(a, b, f"{sql_source.kind}/suite") for a, b in
               zip(sql.results, pandas.results, strict=True)]
    assert len({r["fetch_id"] for r in reports}) == 1
    # the plan's queries and one query of the raters' sums, run once for the five expectations
    assert len({r["queries"] for r in reports}) == 1


@pytest.mark.parametrize(("label", "expectation"), rater_expectations("interval", **BOOT))
def test_the_rater_metrics_have_no_interval_on_sql(label, expectation, sqlite_source, pandas_batch):
    df = judgements("interval", False, seed=5)
    sql = sqlite_source.batch("raters_interval", df).validate(expectation)
    pandas = pandas_batch(df).validate(expectation)
    assert lge.raised_exception(sql) is None, lge.raised_exception(sql)
    details = sql.result["details"]
    assert details["ci_low"] is None and pandas.result["details"]["ci_low"] is not None
    assert "no interval on a SQL batch" in details["components"]["interval_unavailable"]
    close(sql.result["observed_value"], pandas.result["observed_value"], label)
    assert sql.success == pandas.success  # judged on the point value on both paths
    # judging on an interval the SQL path cannot compute is an error, never a pass or a fail on the point
    bounded = type(expectation)(**{**expectation.configuration.kwargs, "use_ci_bound": True})
    res = sqlite_source.batch("raters_interval", df).validate(bounded)
    assert res.success is False and "use_ci_bound=True" in (lge.raised_exception(res) or "")


def test_iota_on_ordinal_labels_fails_as_on_pandas(sqlite_source, pandas_batch):
    df = judgements("ordinal", False, seed=9)
    exp = lge.ExpectIrrAtOrAboveTrustedBaseline(tolerance=0.1, irr="janson_olsson_iota", level="ordinal", ci=None,
                                                **POOLS)
    sql, pandas = sqlite_source.batch("raters_ordinal", df).validate(exp), pandas_batch(df).validate(exp)
    assert sql.success is False and lge.raised_exception(sql) == lge.raised_exception(pandas) is not None


# ------------------------------------------------------------------ errors: the pandas path's
@pytest.mark.parametrize(("kwargs", "parameter"), [
    ({"crowd_pool": "mturk"}, "crowd_pool"),
    ({"trusted_pool": "experts"}, "trusted_pool"),
    ({"pool_column": "replication"}, "pool_column"),
    ({"question": "q9"}, "question"),
    ({"question": "q1", "question_column": "topic"}, "question_column"),
])
def test_a_parameter_the_batch_does_not_hold_fails_as_on_pandas(kwargs, parameter, sqlite_source, pandas_batch):
    df = judgements("nominal", False, seed=6)
    exp = lge.ExpectCrossKappaToBeAtLeast(min_value=0.0, ci=None, **{"question_column": "question", **kwargs})
    sql, pandas = sqlite_source.batch("errors", df).validate(exp), pandas_batch(df).validate(exp)
    assert sql.success is False and pandas.success is False
    assert lge.raised_exception(sql) == lge.raised_exception(pandas)
    assert f"'{parameter}'" in lge.raised_exception(sql)


def test_duplicate_judgements_are_refused(sqlite_source):
    df = judgements("nominal", False, seed=8, duplicate=True)
    batch = sqlite_source.batch("duplicates", df)
    error = lge.raised_exception(batch.validate(lge.ExpectSpaToBeBetween(min_value=0.0, max_value=1.0)))
    assert "more than once (1 duplicate judgement(s) in all)" in error
    # 'first' / 'last' pick by row order, which a SQL table does not have
    first = lge.raised_exception(batch.validate(lge.ExpectSpaToBeBetween(min_value=0.0, max_value=1.0,
                                                                         duplicates="first")))
    assert "duplicates='first'" in first and "row order" in first
    # without duplicates 'first' is the same as 'error' and runs
    clean = sqlite_source.batch("no_duplicates", judgements("nominal", False, seed=8))
    res = clean.validate(lge.ExpectSpaToBeBetween(min_value=0.0, max_value=1.0, duplicates="first"))
    assert lge.raised_exception(res) is None and res.result["observed_value"] is not None


def test_labels_outside_the_given_categories_are_an_error(sqlite_source):
    df = judgements("nominal", False, seed=9)
    exp = lge.ExpectSpaToBeBetween(min_value=0.0, max_value=1.0, categories=["neg", "neu", "pos"])
    error = lge.raised_exception(sqlite_source.batch("categories", df).validate(exp))
    assert "'mixed', which is not one of the categories" in error


def test_label_sets_are_refused_before_anything_is_fetched_naming_the_route(sql_source, monkeypatch):
    """A set cell is one category to the database's counts: no silent number from a distance between texts."""
    df = judgements("nominal", False, seed=10).assign(label=lambda d: d["label"].map({"neg": "a|b", "neu": "a",
                                                                                    "pos": "b", "mixed": "a|c"}))
    batch = sql_source.batch("sets", df)

    def fetched(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the aggregates were fetched for a refused metric")

    monkeypatch.setattr("labelgate.gx._metrics.sql_pools", fetched)
    for exp in (lge.ExpectCrossKappaToBeAtLeast(min_value=0.1, level="set", distance="jaccard"),
                lge.ExpectSpaToBeBetween(min_value=0.0, max_value=1.0, level="set", distance="masi"),
                lge.ExpectNormalizedCrossKappaToBeAtLeast(min_value=0.1, level="set", distance="jaccard")):
        res = batch.validate(exp)
        error = lge.raised_exception(res)
        assert res.success is False and error is not None
        assert "cannot run on a SQL batch" in error and "level='set'" in error
        assert "pandas batch of the rows" in error and "without 'aggregate'" in error


def test_a_label_set_refusal_names_the_question_on_sql_and_on_spark():
    from labelgate.errors import DesignError
    from labelgate.gx._sql import refuse

    for engine, batch in (("sql", "a SQL batch"), ("spark", "a Spark batch")):
        with pytest.raises(DesignError) as refused:
            refuse("labelgate.table.spa", {"level": "set", "question": "topics"}, engine)
        assert f"cannot run on {batch} (question 'topics')" in refused.value.message
        assert refused.value.context["parameter"] == "level"
    refuse("labelgate.table.spa", {"level": "nominal"}, "sql")  # other levels run in the database
