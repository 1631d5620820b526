"""Labels the database reads differently from pandas, the item-id probe, and the resamples a suite shares.

* A NaN in a float label column is a missing label on pandas (``read_sql`` gives NaN, ``from_long`` drops it); the
  SQL path treats it alike: PostgreSQL stores NaN (and groups it as a value, equal to itself), SQLite stores it as
  NULL.
* A PostgreSQL ENUM label (and pool, question) column is compared with its values as the strings ``read_sql``
  returns; on SQLite the same table has VARCHAR columns.
* The integer-id probe reads the column's type from a ``LIMIT 0`` query: no row is fetched.
* The metrics of one batch share their bootstrap resamples: bit-identical results, drawn once.

Each SQL result is compared with the pandas path's on the rows ``read_sql`` returns, sorted by item id (the SQL
path's item order). On SQLite and, with ``LABELGATE_TEST_POSTGRES_URL``, on PostgreSQL (``sql_url``).
"""

from __future__ import annotations

import contextlib
import json
import math
import uuid
from typing import Any

import numpy as np
import pandas as pd
import pytest

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("great_expectations")

from labelgate.errors import InputError, Reason  # noqa: E402
from labelgate.gx._metrics import (  # noqa: E402
    build_pools,
    pools_cross_kappa,
    pools_irr_comparison,
    pools_normalized_cross_kappa,
    pools_spa,
)
from labelgate.gx._sql import sql_metric  # noqa: E402
from labelgate.metrics._resamples import SharedResamples  # noqa: E402
from labelgate.sqlagg import Scope, aggregate  # noqa: E402
from labelgate.sqlagg.pools import Pools  # noqa: E402
from labelgate.sqlagg.sql import SqlAlchemyBackend  # noqa: E402
from labelgate.sqlagg.values import holds_nan, missing_label  # noqa: E402

KW = {"item_column": "item_id", "rater_column": "rater_id", "label_column": "label", "pool_column": "pool",
      "question_column": "question", "question": "q2", "crowd_pool": "crowd", "trusted_pool": "gold",
      "categories": None, "duplicates": "error", "ci": 0.9, "n_boot": 60, "seed": 3, "ci_method": "auto",
      "irr": "krippendorff_alpha", "weighting": "annotations_m1"}
FINISHES = ((pools_cross_kappa, True), (pools_normalized_cross_kappa, True), (pools_irr_comparison, True),
            (pools_spa, False))
TOL = 1e-12


@pytest.fixture
def engine(sql_url):
    made = sa.create_engine(sql_url)
    metadata = sa.MetaData()
    yield made, metadata
    metadata.drop_all(made)
    made.dispose()


def rows(values: list[Any], seed: int, n_items: int = 40, missing: float = 0.15) -> list[dict[str, Any]]:
    """Judgements of two pools over two questions; a share of the labels is ``None`` or NaN (the missing)."""
    rng = np.random.default_rng(seed)
    out = []
    for question in ("q1", "q2"):
        for i in range(n_items):
            truth = int(rng.integers(len(values)))
            for pool, raters, p in (("crowd", "abcdef", 0.65), ("gold", "tu", 0.9)):
                for r in rng.choice(list(raters), min(len(raters), int(rng.integers(2, 5))), replace=False):
                    label = values[truth if rng.random() < p else int(rng.integers(len(values)))]
                    if rng.random() < missing:
                        label = None if rng.random() < 0.5 else "missing"
                    out.append({"item_id": i + (1000 if question == "q2" else 0), "rater_id": str(r),
                                "label": label, "pool": pool, "question": question})
    return out


def table(engine: Any, label_type: Any, data: list[dict[str, Any]], text_ids: bool = False,
          enum: bool = False) -> str:
    """A table of ``data`` whose label column has ``label_type``; with ``enum`` the pool and question columns are
    ENUMs too (native on PostgreSQL)."""
    made, metadata = engine
    name = f"labels_{uuid.uuid4().hex[:10]}"
    suffix = name[-6:]

    def kind(values: tuple[str, ...], what: str) -> Any:
        return sa.Enum(*values, name=f"{what}_{suffix}") if enum else sa.String(16)

    sa.Table(name, metadata, sa.Column("item_id", sa.String(16) if text_ids else sa.BigInteger),
             sa.Column("rater_id", sa.String(8)), sa.Column("label", label_type),
             sa.Column("pool", kind(("crowd", "gold"), "pool")),
             sa.Column("question", kind(("q1", "q2"), "question")))
    metadata.create_all(made)
    with made.begin() as conn:
        conn.execute(metadata.tables[name].insert(),
                     [{**r, "item_id": f"i{r['item_id']:05d}" if text_ids else r["item_id"]} for r in data])
    return name


def same(a: Any, b: Any, where: str) -> None:
    """Equal, floats to TOL, None and NaN alike (the providers' JSON-friendly NaN)."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert set(a) == set(b), (where, set(a) ^ set(b))
        for key in a:
            same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        assert len(a) == len(b), (where, a, b)
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{where}[{k}]")
    elif isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            assert all(v is None or math.isnan(v) for v in (a, b)), (where, a, b)
        elif not (math.isnan(a) and math.isnan(b)):
            assert abs(a - b) <= TOL, (where, a, b)
    else:
        assert a == b, (where, a, b)


def compare(engine: Any, name: str, level: str) -> list[dict[str, Any]]:
    """Every finish on the SQL path equals the pandas path's on the rows ``read_sql`` returns; the SQL results."""
    made, _ = engine
    kw = {**KW, "level": level}
    df = pd.read_sql(sa.text(f'SELECT * FROM "{name}"'), made).sort_values("item_id", kind="stable")
    with made.connect() as conn:
        aggregated = aggregate(SqlAlchemyBackend.on_connection(conn, sa.table(name)), kw)
    out = []
    for finish, need_trusted in FINISHES:
        sql = sql_metric(finish, aggregated, kw, need_trusted=need_trusted)
        sql.pop("sql")
        same(sql, finish(build_pools(df, kw, need_trusted=need_trusted), kw), f"{name}/{finish.__name__}")
        out.append(sql)
    return out


# ------------------------------------------------------------------ NaN labels are missing
@pytest.mark.parametrize("level", ["nominal", "interval"])
def test_nan_labels_are_missing_as_on_pandas(engine, level):
    made, _ = engine
    data = rows([0.0, 1.0, 2.5], seed=1)
    for r in data:
        r["label"] = float("nan") if r["label"] == "missing" else r["label"]
    # an item judged by the crowd with NaN labels only: on pandas it has no crowd judgement at all
    data += [{"item_id": 1999, "rater_id": r, "label": float("nan"), "pool": "crowd", "question": "q2"}
             for r in "abc"] + [{"item_id": 1999, "rater_id": "t", "label": 1.0, "pool": "gold", "question": "q2"}]
    name = table(engine, sa.Float(precision=53), data)
    with made.connect() as conn:
        nan = conn.execute(sa.text(f"SELECT count(*) FROM \"{name}\" WHERE label IS NOT NULL AND label <> label "
                                   "OR CAST(label AS TEXT) IN ('NaN', 'nan')")).scalar()
    # PostgreSQL keeps the NaN (the defect: it became a category); SQLite stores it as NULL
    assert (nan > 0) == (made.dialect.name == "postgresql")
    results = compare(engine, name, level)
    assert results[0]["n_items"] > 0 and all(r["value"] is not None for r in results)


@pytest.mark.parametrize("label_type", ["float", "numeric", "text"])
def test_nan_labels_are_missing_by_the_columns_type_whatever_ran_first(engine, label_type):
    # a fresh backend's first query needs the labelled rows: no earlier query has looked at the labels, the
    # column's type decides (on PostgreSQL a float or numeric column holds NaN; a text 'NaN' is a label)
    made, _ = engine
    kinds = {"float": sa.Float(precision=53), "numeric": sa.Numeric(10, 2), "text": sa.String(8)}
    nan: Any = "NaN" if label_type == "text" else float("nan")
    data = [{"item_id": i, "rater_id": r, "label": nan if (i + k) % 4 == 0 else (i + k) % 3, "pool": "crowd",
             "question": "q2"} for i in range(12) for k, r in enumerate("abc")]
    if label_type == "text":
        data = [{**r, "label": str(r["label"])} for r in data]
    name = table(engine, kinds[label_type], data)
    scope = Scope("item_id", "rater_id", "label", "pool", ("crowd",), "question", "q2")
    labels = pd.read_sql(sa.text(f'SELECT label FROM "{name}"'), made)["label"]
    with made.connect() as conn:
        backend = SqlAlchemyBackend.on_connection(conn, sa.table(name))
        assert backend.count(scope, "labelled") == int(labels.notna().sum())
        assert backend.holds_nan(scope) is (made.dialect.name == "postgresql" and label_type != "text")
        tallies = backend.tallies(scope)
    assert tallies["crowd"][3] == int(labels.isna().sum()) == (0 if label_type == "text" else 9)


def test_a_nan_label_from_a_database_whose_types_are_not_read_is_refused(engine):
    made, _ = engine
    assert not missing_label(1.0, "sqlite") and missing_label(None, "mysql") and missing_label(math.nan, "postgresql")
    with pytest.raises(InputError, match="holds NaN on a duckdb database"):
        missing_label(math.nan, "duckdb")
    assert not holds_nan("sqlite", lambda: pytest.fail("SQLite: no type is read"))
    if made.dialect.name != "postgresql":
        pytest.skip("SQLite stores a NaN as NULL: no database here returns one")
    name = table(engine, sa.Float(precision=53), [{"item_id": 1, "rater_id": "a", "label": math.nan, "pool": "crowd",
                                                   "question": "q2"}])
    scope = Scope("item_id", "rater_id", "label", "pool", ("crowd",), "question", "q2")
    with made.connect() as conn:  # the same rows, as if from a database whose driver LabelGate does not know
        other = SqlAlchemyBackend(sa.table(name), execute=conn.execute, connect=lambda: contextlib.nullcontext(conn),
                                  dialect="duckdb")
        assert not other.holds_nan(scope) and other.queries == 0
        with pytest.raises(InputError, match="holds NaN") as caught:
            other.tallies(scope)
    assert caught.value.code == Reason.UNREADABLE_INPUT


# ------------------------------------------------------------------ ENUM columns
@pytest.mark.parametrize("text_ids", [False, True], ids=["int_ids", "text_ids"])
def test_enum_columns_compare_as_the_strings_read_sql_returns(engine, text_ids):
    made, _ = engine
    data = [r for r in rows(["neg", "neu", "pos"], seed=2) if r["label"] != "missing"]
    name = table(engine, sa.Enum("pos", "neu", "neg", name=f"mood_{uuid.uuid4().hex[:6]}"), data,
                 text_ids=text_ids, enum=True)
    if made.dialect.name == "postgresql":
        with made.connect() as conn:
            types = dict(conn.execute(sa.text("SELECT column_name, data_type FROM information_schema.columns "
                                              "WHERE table_name = :t"), {"t": name}).fetchall())
        assert types["label"] == types["pool"] == types["question"] == "USER-DEFINED"
    results = compare(engine, name, "nominal")
    assert all(r["value"] is not None for r in results)
    # categories in Python's order of the strings (the pandas path's), not the ENUM's declared order
    kw = {**KW, "level": "nominal"}
    with made.connect() as conn:
        pools = aggregate(SqlAlchemyBackend.on_connection(conn, sa.table(name)), kw).pools
    assert pools is not None and list(pools.crowd.categories) == ["neg", "neu", "pos"]


# ------------------------------------------------------------------ the integer-id probe reads no row
@pytest.mark.parametrize(("column", "expected"), [("item_id", True), ("rater_id", False)])
def test_the_integer_id_probe_fetches_no_row(engine, column, expected):
    made, _ = engine
    if made.dialect.name != "postgresql":
        pytest.skip("the probe runs on PostgreSQL only (it chooses the binary COPY route)")
    name = table(engine, sa.Integer, [r for r in rows([0, 1, 2], seed=4) if r["label"] != "missing"])
    # a batch that is a sorted query: LIMIT 1 would sort the whole batch, LIMIT 0 reads nothing
    source = sa.select(sa.text("*")).select_from(sa.table(name)).order_by(sa.text("label"))
    with made.connect() as conn:
        backend = SqlAlchemyBackend.on_connection(conn, source)
        found = backend.integer_ids(Scope(column, "rater_id", "label"))
    assert found is expected
    assert backend.rows_fetched == 0 and backend.queries == 1


# ------------------------------------------------------------------ the resamples a suite shares
def test_metrics_on_one_pools_share_identical_resamples(engine):
    name = table(engine, sa.Integer, rows([0, 1, 2], seed=5, n_items=120, missing=0.0))
    kw = {**KW, "level": "nominal", "n_boot": 300}
    with engine[0].connect() as conn:
        pools = aggregate(SqlAlchemyBackend.on_connection(conn, sa.table(name)), kw).pools
    assert pools is not None

    def run(shared: SharedResamples) -> str:
        fresh = Pools(pools.crowd, pools.trusted, pools.coverage, shared)
        return json.dumps([finish(fresh, kw) for finish, _ in FINISHES], sort_keys=True, default=str)

    alone, shared = SharedResamples(max_bytes=0), SharedResamples()
    assert run(shared) == run(alone)  # bit for bit: the same draws, the same replicates
    # κx, the IRR baseline and SPA bootstrap the same 120 items (every item has two or more labels in each pool)
    # with seed 3; normalized κx has a delta interval
    assert shared.served == 2 and alone.served == 0 and 0 < shared.used <= 300 * 120
    other = SharedResamples()
    for seed in (4, None):  # another seed draws again; seed=None asks for fresh draws: never shared
        pools_cross_kappa(Pools(pools.crowd, pools.trusted, pools.coverage, other), {**kw, "seed": seed})
    assert other.served == 0
    # the pools stay picklable and copyable (a result store or a deep copy): the copy's cache starts empty
    import copy
    import pickle

    again = pickle.loads(pickle.dumps(Pools(pools.crowd, pools.trusted, pools.coverage, shared)))
    assert again.resamples.used == 0 and again.resamples.max_bytes == shared.max_bytes
    assert copy.deepcopy(shared).served == 0 and shared.served == 2
