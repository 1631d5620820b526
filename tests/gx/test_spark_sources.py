"""LabelGate's expectations on GX Spark data sources: Spark aggregates, the results equal the pandas path's.

The same differential test as on the SQL engines (tests/gx/test_sql_sources.py: its data, expectations and comparison),
on a GX Spark data source (``SparkDFExecutionEngine``, one local Spark session for the test session: the
``spark_session`` fixture; skipped without pyspark or Java) against a GX pandas data source over the same rows
sorted by item id (the aggregate plan's item order: the bootstrap draws items by position). ``success``,
``observed_value``, the interval and every component agree: point values to 1e-12, intervals to 1e-12 with the same
seed. The data: random, with missing labels, several questions, a row condition, string and integer ids, nominal /
ordinal / interval labels, rows in random order. Each dataset is validated as one suite (one Spark fetch per row
condition), which keeps the Spark jobs few.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

gx = pytest.importorskip("great_expectations")
pytest.importorskip("sqlalchemy")

import labelgate.gx as lge  # noqa: E402
from tests.gx.test_sql_sources import (  # noqa: E402
    BOOT,
    DATASETS,
    POOLS,
    assert_same_result,
    context,  # noqa: F401  (the module's GX context fixture)
    expectations,
    judgements,
)


def spark_rows(spark: Any, df: pd.DataFrame) -> Any:
    """A Spark DataFrame of ``df``'s rows with real nulls (``None``) and a schema from the values' types."""
    from pyspark.sql import types as st

    kinds = {str: st.StringType(), int: st.LongType(), float: st.DoubleType()}
    records = [tuple(None if pd.isna(v) else (v.item() if isinstance(v, np.generic) else v) for v in row)
               for row in df.itertuples(index=False)]
    fields = []
    for k, name in enumerate(df.columns):
        present = {type(r[k]) for r in records if r[k] is not None}
        kind = float if float in present else present.pop()
        fields.append(st.StructField(str(name), kinds[kind], nullable=True))
    return spark.createDataFrame(records, st.StructType(fields))


@pytest.fixture(scope="module")
def spark_batch(context, spark_session):  # noqa: F811
    """``batch(df, from_pandas=False)``: a GX Spark batch of ``df`` (``from_pandas``: ``createDataFrame(df)``
    itself, whose float columns keep pandas' NaN)."""
    definition = context.data_sources.add_spark("spark").add_dataframe_asset("rows") \
        .add_batch_definition_whole_dataframe("all")

    def batch(df: pd.DataFrame, *, from_pandas: bool = False) -> Any:
        rows = spark_session.createDataFrame(df) if from_pandas else spark_rows(spark_session, df)
        return definition.get_batch(batch_parameters={"dataframe": rows})
    return batch


@pytest.fixture(scope="module")
def pandas_batch(context):  # noqa: F811
    """A GX pandas batch of the same rows in the aggregate plan's order: by item id, then label.

    Items in sorted id order: the bootstrap draws items by position. Within an item by label: the core centres the
    per-item moments of interval labels at a pool's first value (the first judgement on pandas, the first
    (item, label) row from aggregates), and the same centre gives the same rounding.
    """
    definition = context.data_sources.add_pandas("pandas_by_item_label").add_dataframe_asset("rows") \
        .add_batch_definition_whole_dataframe("all")

    def batch(df: pd.DataFrame) -> Any:
        return definition.get_batch(batch_parameters={"dataframe": df.sort_values(["item_id", "label"],
                                                                                  kind="stable")})
    return batch


def suite(name: str, items: list[tuple[str, Any]]) -> Any:
    return gx.ExpectationSuite(name=name, expectations=[expectation for _, expectation in items])


# ------------------------------------------------------------------ equality with the pandas path
# Each level and each id type (a Spark job costs a fraction of a second even on small data: not the full product);
# interval labels, whose moments are the sums most sensitive to rounding, with both id types.
SPARK_DATASETS = ("nominal_str", "ordinal_int", "interval_str", "interval_int")


@pytest.mark.parametrize("name", SPARK_DATASETS)
def test_every_expectation_equals_the_pandas_path(name, spark_batch, pandas_batch):
    level, int_ids = DATASETS[name]
    df = judgements(level, int_ids, seed=len(name))
    items = expectations(name)
    on_spark = spark_batch(df).validate(suite(f"spark_{name}", items))
    on_pandas = pandas_batch(df).validate(suite(f"pandas_{name}", expectations(name)))
    undefined, aggregated, fetches = 0, {}, {}
    for (label, expectation), spark, pandas in zip(items, on_spark.results, on_pandas.results, strict=True):
        where = f"spark/{name}/{label}"
        report = assert_same_result(spark, pandas, where)
        assert report["dialect"] == "spark", where
        assert 0 < report["rows_fetched"] < report["rows_aggregated"], (where, report)
        undefined += spark.result["observed_value"] is None
        aggregated[label] = report["rows_aggregated"]
        fetches.setdefault(expectation.row_condition is not None, set()).add(report["fetch_id"])
        if spark.result["observed_value"] is not None and expectation.ci is not None:
            assert spark.result["details"]["ci_low"] is not None, where  # the interval itself was compared
    assert undefined == 0  # the data exercise defined values, not NaN == NaN
    # the question and the row condition were applied in Spark
    assert aggregated["cross_kappa_rc"] < aggregated["cross_kappa"] < len(df)
    # one fetch per domain (with / without the row condition), shared by the suite's expectations
    assert {k: len(v) for k, v in fetches.items()} == {False: 1, True: 1}


def test_nan_in_a_float_column_is_missing_as_on_pandas(spark_batch, pandas_batch):
    # createDataFrame(pandas) keeps a float column's NaN as a value; the plan counts it as missing, like pandas
    df = judgements("interval", False, seed=11, missing=0.2)
    assert df["label"].isna().any() and df["label"].dtype == np.float64
    exp = lge.ExpectSpaToBeBetween(min_value=0.2, max_value=0.99, level="interval", **POOLS, **BOOT)
    spark = spark_batch(df, from_pandas=True).validate(exp)
    report = assert_same_result(spark, pandas_batch(df).validate(exp), "spark/nan")
    q2 = df[df["question"] == "q2"]
    assert report["rows_aggregated"] == len(q2)
    # the NaN labels are not judgements (as a value they would be a ninth category with ratings of its own)
    labelled = int(((q2["pool"] == "crowd") & q2["label"].notna()).sum())
    assert spark.result["details"]["coverage"]["n_crowd_ratings"] == labelled < int((q2["pool"] == "crowd").sum())


# ------------------------------------------------------------------ the judgements stay in Spark
def test_rows_fetched_are_the_aggregates_not_the_judgements(spark_batch):
    rng = np.random.default_rng(4)
    n_items, k = 300, 25  # many ratings per item, 3 categories: few (item, label) groups per item
    rows = [(i, f"r{r}", int(rng.integers(3)), pool, "q1")
            for i in range(n_items) for pool in ("crowd", "trusted") for r in rng.choice(40, k, replace=False)]
    df = pd.DataFrame(rows, columns=["item_id", "rater_id", "label", "pool", "question"])
    res = spark_batch(df).validate(lge.ExpectNormalizedCrossKappaToBeAtLeast(
        min_value=0.0, question_column="question", question="q1", n_boot=50))
    report = res.result["details"]["sql"]
    groups = df.groupby(["pool", "item_id", "label"]).ngroups
    assert report["rows_aggregated"] == len(df) == 15_000
    # one row per (pool, item, label); each item id and label once; one tally per pool; the duplicate sum
    assert report["rows_fetched"] == groups + n_items + 3 + 2 + 1 < len(df) / 6
    # the tallies, the duplicates, the item ids, the labels, the counts (the columns are the schema: no job)
    assert report["queries"] == 5


# ------------------------------------------------------------------ what needs rater identity is refused
@pytest.mark.parametrize("expectation", [
    lge.ExpectLabelerIccBelowItemIcc(margin=0.0, level="interval"),
    lge.ExpectNormalizedCrossKappaToBeAtLeast(min_value=0.5, irr="conger_kappa"),
    lge.ExpectIrrAtOrAboveTrustedBaseline(tolerance=0.1, irr="janson_olsson_iota", level="interval"),
], ids=["labeler_icc", "conger_kappa", "janson_olsson_iota"])
def test_metrics_that_need_rater_identity_fail_with_a_reason(expectation, spark_batch):
    res = spark_batch(judgements("interval", False, seed=5, n_items=20)).validate(expectation)
    assert res.success is False
    message = lge.raised_exception(res)
    assert "cannot run on a Spark batch" in message and "which rater gave each label" in message
    assert "pandas batch" in message


# ------------------------------------------------------------------ errors: the pandas path's
@pytest.mark.parametrize(("kwargs", "parameter"), [
    ({"crowd_pool": "mturk"}, "crowd_pool"),
    ({"question": "q9"}, "question"),
])
def test_a_parameter_the_batch_does_not_hold_fails_as_on_pandas(kwargs, parameter, spark_batch,
                                                                pandas_batch):
    df = judgements("nominal", False, seed=6, n_items=20)
    exp = lge.ExpectCrossKappaToBeAtLeast(min_value=0.0, ci=None, **{"question_column": "question", **kwargs})
    spark, pandas = spark_batch(df).validate(exp), pandas_batch(df).validate(exp)
    assert spark.success is False and pandas.success is False
    assert lge.raised_exception(spark) == lge.raised_exception(pandas)
    assert f"'{parameter}'" in lge.raised_exception(spark)


def test_duplicate_judgements_are_refused(spark_batch):
    df = judgements("nominal", False, seed=8, n_items=20, duplicate=True)
    labelled = df[df["label"].notna() & (df["question"] == "q1")]
    repeated = labelled[labelled.duplicated(["pool", "item_id", "rater_id"])]
    assert len(repeated) == 1  # the data holds one repeated judgement, in question q1
    res = spark_batch(df).validate(lge.ExpectSpaToBeBetween(min_value=0.0, max_value=1.0, question_column="question",
                                                            question="q1"))
    assert res.success is False
    error = lge.raised_exception(res)
    item, rater = repeated.iloc[0]["item_id"], repeated.iloc[0]["rater_id"]
    assert f"Rater {rater!r} judged item {item!r} more than once (1 duplicate judgement(s) in all)" in error


def test_column_names_with_a_dot_a_space_or_a_backtick(spark_batch, pandas_batch):
    # Spark reads "a.b" as field b of a struct a unless quoted: the backend quotes every column it names
    names = {"item_id": "item.id", "rater_id": "rater id", "label": "the `label`"}
    df = judgements("ordinal", False, seed=14, n_items=30).rename(columns=names)
    exp = lge.ExpectCrossKappaToBeAtLeast(min_value=0.3, item_column="item.id", rater_column="rater id",
                                          label_column="the `label`", level="ordinal", **POOLS, **BOOT)
    on_pandas = pandas_batch(df.rename(columns={v: k for k, v in names.items()})).validate(
        lge.ExpectCrossKappaToBeAtLeast(min_value=0.3, level="ordinal", **POOLS, **BOOT))
    report = assert_same_result(spark_batch(df).validate(exp), on_pandas, "spark/column names")
    assert report["rows_aggregated"] == int((df["question"] == "q2").sum())


def test_a_pyspark_without_to_arrow_is_an_error_naming_the_version():
    # GX runs on pyspark 3.x too; the provider reads aggregates with DataFrame.toArrow (pyspark 4.0)
    from types import SimpleNamespace

    from labelgate.errors import InputError
    from labelgate.gx._spark import SparkBackend

    with pytest.raises(InputError, match=r"DataFrame.toArrow, which pyspark \S+ does not have: install pyspark>=4.0"):
        SparkBackend(SimpleNamespace(dtypes=[("item_id", "string")], columns=["item_id"]))
