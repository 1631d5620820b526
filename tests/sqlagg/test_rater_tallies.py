"""The labeler ICC, Conger's κ and Janson–Olsson's ι from the database's sums equal the judgements' values (1e-9).

:func:`labelgate.sqlagg.tallies.tallied_pools` runs one query (the judgements grouped by pool, rater, label and item
class) beside the aggregate plan's item x category counts; the metrics of :mod:`labelgate.metrics` then read the
raters' counts from those sums (:class:`~labelgate.core.tallied.TalliedRatings`). Here every quantity they report is
compared with the same metric on the :class:`~labelgate.Ratings` of the same rows: on SQLite and, with
``LABELGATE_TEST_POSTGRES_URL``, on PostgreSQL; random sparse designs (single-rated items, unequal ratings per item,
unused categories, items in one pool only, raters in both pools); nominal, binary, ordinal and interval labels;
string and integer ids. What the sums cannot give (a resampling interval, a subset of items) is refused.
"""

from __future__ import annotations

import math
import os
import uuid
from typing import Any

import numpy as np
import pandas as pd
import pytest

sa = pytest.importorskip("sqlalchemy")

from labelgate.core.ratings import Ratings, ratings_by_pool  # noqa: E402
from labelgate.core.tallied import TalliedRatings  # noqa: E402
from labelgate.errors import DesignError, InputError  # noqa: E402
from labelgate.metrics.agreement import conger_kappa  # noqa: E402
from labelgate.metrics.alpha import janson_olsson_iota  # noqa: E402
from labelgate.metrics.cross import irr_comparison, normalized_cross_kappa  # noqa: E402
from labelgate.metrics.variance import item_icc, labeler_icc, variance_components  # noqa: E402
from labelgate.sqlagg import aggregate  # noqa: E402
from labelgate.sqlagg.sql import SqlAlchemyBackend  # noqa: E402
from tests.oracles import without_standard_error  # noqa: E402

TOL = 1e-9
SCALES: dict[str, list[Any]] = {"nominal": ["neg", "neu", "pos", "mixed", "unused"], "binary": ["no", "yes"],
                                "ordinal": [1, 2, 3, 4, 5, 6], "interval": [0.0, 0.5, 1.25, 2.0, 3.5, 7.0]}


def sparse(seed: int, scale: str, int_ids: bool) -> pd.DataFrame:
    """A crowd and a trusted pool on 60 items: 1-6 crowd judgements per item (some items single-rated), 0-3 trusted
    (some items in one pool only), raters with a bias, the last category never used (nominal) or rare."""
    rng = np.random.default_rng(seed)
    values = SCALES[scale]
    used = len(values) - 1 if scale == "nominal" else len(values)
    bias = rng.normal(0.0, 0.8, 30)
    rows = []
    for i in range(60):
        truth = rng.normal(used / 2, used / 3)
        item = 1000 + 7 * i if int_ids else f"it-{rng.integers(10**6):06d}-{i}"
        for pool, raters, k in (("crowd", 24, int(rng.integers(1, 7))), ("trusted", 6, int(rng.integers(0, 4)))):
            for r in rng.choice(raters, k, replace=False):
                rater = int(r) + (500 if pool == "trusted" else 0)
                code = int(np.clip(round(truth + bias[rater % 30] + rng.normal(0, 0.7)), 0, used - 1))
                rows.append((item, rater if int_ids else f"{pool}-{rater}", values[code], pool))
    # a rater of the crowd who also judges in the trusted pool, on items the crowd rated
    rows += [(rows[0][0], rows[0][1], values[0], "trusted"), (rows[1][0], rows[1][1], values[-1], "trusted")]
    df = pd.DataFrame(rows, columns=["item_id", "rater_id", "label", "pool"])
    return df.drop_duplicates(["item_id", "rater_id", "pool"]).sample(frac=1.0, random_state=seed)


def level_of(scale: str) -> str:
    return {"binary": "nominal"}.get(scale, scale)


def kw_of(scale: str) -> dict[str, Any]:
    return {"item_column": "item_id", "rater_column": "rater_id", "label_column": "label", "pool_column": "pool",
            "question_column": None, "question": None, "crowd_pool": "crowd", "trusted_pool": "trusted",
            "level": level_of(scale), "categories": SCALES[scale], "duplicates": "error"}


def row_pools(df: pd.DataFrame, scale: str) -> tuple[Ratings, Ratings]:
    pools = ratings_by_pool(df, pool="pool", level=level_of(scale), categories=SCALES[scale])  # type: ignore[arg-type]
    return pools["crowd"], pools["trusted"]


@pytest.fixture(params=["sqlite", "postgres"])
def engine(request, tmp_path):
    if request.param == "sqlite":
        made = sa.create_engine(f"sqlite:///{tmp_path / 'tallies.db'}")
    else:
        url = os.environ.get("LABELGATE_TEST_POSTGRES_URL")
        if not url:
            pytest.skip("LABELGATE_TEST_POSTGRES_URL is not set")
        pytest.importorskip("psycopg", reason="the PostgreSQL tests need the psycopg driver")
        made = sa.create_engine(url, connect_args={"connect_timeout": 5})
        try:
            with made.connect():
                pass
        except sa.exc.OperationalError as exc:
            made.dispose()
            pytest.skip(f"PostgreSQL unreachable: {str(exc).splitlines()[0]}")
    yield made
    made.dispose()


def db_pools(engine: Any, df: pd.DataFrame, scale: str) -> tuple[Ratings, Ratings, dict[str, Any]]:
    name = f"tallies_{uuid.uuid4().hex[:10]}"
    df.to_sql(name, engine, index=False)
    try:
        with engine.connect() as conn:
            backend = SqlAlchemyBackend.on_connection(conn, sa.table(name, *[sa.column(c) for c in df.columns]))
            aggregated = aggregate(backend, kw_of(scale))
            pools, report = aggregated.rater_pools(True)
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f'DROP TABLE "{name}"'))
    assert pools.trusted is not None
    return pools.crowd, pools.trusted, report


def close(a: Any, b: Any, where: str) -> None:
    """Equal; floats to TOL relative to their size (variance components carry the labels' units)."""
    if isinstance(a, dict):
        assert set(a) == set(b), (where, set(a) ^ set(b))
        for key in a:
            close(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, float) or isinstance(b, float):
        if a is None or b is None or math.isnan(a) or math.isnan(b):
            assert (a is None or math.isnan(a)) and (b is None or math.isnan(b)), (where, a, b)
        else:
            assert abs(a - b) <= TOL * max(1.0, abs(a)), (where, a, b)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), (where, a, b)
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            close(x, y, f"{where}[{k}]")
    else:
        assert a == b, (where, a, b)


def metrics_of(crowd: Ratings, trusted: Ratings, scale: str) -> dict[str, Any]:
    """Every reported quantity of the three rater-specific metrics, as plain values."""
    out: dict[str, Any] = {}
    if scale != "nominal":  # variance components need numeric labels, ordinal ranks or a binary label
        out["item_icc"] = item_icc(crowd).to_dict()
        out["labeler_icc"] = labeler_icc(crowd).to_dict()
        out["components"] = variance_components(crowd).to_dict()
    for irr in ("conger_kappa", "janson_olsson_iota"):
        if irr == "janson_olsson_iota" and scale == "ordinal":
            continue  # iota has no ordinal distance (refused alike)
        out[f"compare_{irr}"] = irr_comparison(crowd, trusted, irr=irr).to_dict()
        out[f"normalized_{irr}"] = normalized_cross_kappa(crowd, trusted, irr=irr).to_dict()
    out["conger_crowd"] = conger_kappa(crowd).to_dict()
    out["conger_crowd_pairable"] = conger_kappa(crowd, marginals="pairable_items").to_dict()
    if scale != "ordinal":
        out["iota_crowd"] = janson_olsson_iota(crowd).to_dict()
    return without_standard_error(out)


@pytest.mark.parametrize("int_ids", [False, True], ids=["str_ids", "int_ids"])
@pytest.mark.parametrize("scale", sorted(SCALES))
@pytest.mark.parametrize("seed", [1, 2])
def test_the_rater_metrics_from_sums_equal_the_judgements(engine, scale, int_ids, seed):
    df = sparse(seed + 10 * len(scale), scale, int_ids)
    crowd, trusted, report = db_pools(engine, df, scale)
    assert isinstance(crowd, TalliedRatings) and isinstance(trusted, TalliedRatings)
    row_crowd, row_trusted = row_pools(df, scale)
    # the design is sparse as intended: single-rated items, items in one pool only, an unused category
    assert (row_crowd.ratings_per_item == 1).any() and (row_crowd.ratings_per_item >= 4).any()
    assert ((row_crowd.ratings_per_item > 0) & (row_trusted.ratings_per_item == 0)).any()
    if scale == "nominal":
        assert row_crowd.category_counts[-1] == 0
    sums, rows = metrics_of(crowd, trusted, scale), metrics_of(row_crowd, row_trusted, scale)
    close(sums, rows, f"{engine.dialect.name}/{scale}")
    defined = [k for k, v in sums.items() if isinstance(v.get("value"), float) and math.isfinite(v["value"])]
    assert len(defined) >= len(sums) - 1, sums  # the data give defined values, not NaN == NaN
    # one more query than the plan's, whose rows are per (pool, rater, label, item class): never the judgements
    assert report["rows_fetched"] < len(df) and report["rows_aggregated"] == len(df)


def test_what_needs_the_judgements_is_refused(engine):
    df = sparse(5, "interval", False)
    crowd, trusted, _ = db_pools(engine, df, "interval")
    for compute in (lambda: item_icc(crowd, ci=0.9, n_boot=50, seed=1),
                    lambda: conger_kappa(crowd, ci=0.9, n_boot=50, seed=1),
                    lambda: irr_comparison(crowd, trusted, irr="janson_olsson_iota", ci=0.9, n_boot=50, seed=1)):
        with pytest.raises(DesignError, match="pandas batch"):
            compute()
    # the raters' counts of a subset of a class are not among the sums
    with pytest.raises(DesignError, match="not among the database's aggregates"):
        crowd.rater_category_table(np.flatnonzero(crowd.ratings_per_item >= 2)[:3])


def test_standard_errors_that_need_the_judgements_say_why(engine):
    # Conger's analytic standard error and iota's delta one read each item's chance term, a sum over the item's own
    # judgements of a per-(rater, category) term; the database's sums are per rater and item class, not per item,
    # so the se is NaN with the reason rather than a value computed from something else. The labeler ICC's only
    # standard error is its bootstrap's, which resamples judgements (refused above).
    df = sparse(7, "interval", False)
    crowd, _, _ = db_pools(engine, df, "interval")
    row_crowd, _ = row_pools(df, "interval")
    for metric, kw in ((conger_kappa, {}), (janson_olsson_iota, {}), (labeler_icc, {})):
        sums, rows = metric(crowd, **kw), metric(row_crowd, **kw)
        assert math.isfinite(sums.value) and math.isnan(sums.se) and sums.se_method is None, metric.__name__
        if metric is not labeler_icc:
            assert "aggregated in the database" in sums.details["se_note"]
            assert math.isfinite(rows.se) and rows.se_method in ("analytic", "delta")  # the judgements give one


def test_sums_that_do_not_add_up_are_refused(engine):
    df = sparse(6, "ordinal", True)
    crowd, _, _ = db_pools(engine, df, "ordinal")
    assert isinstance(crowd, TalliedRatings)
    tallies = crowd.tallies.copy()
    tallies[1, 0, 0] += 1  # one judgement more than the item counts hold: the batch changed between the queries
    with pytest.raises(InputError, match="do not add up"):
        TalliedRatings(crowd, list(crowd.rater_labels), tallies, crowd.classes)


def test_a_batch_without_a_pool_column(engine):
    # one pool: the item class is the pairable bit only, and the crowd's raters' sums cover its items
    df = sparse(7, "interval", True)
    df = df[df["pool"] == "crowd"].drop(columns="pool")
    name = f"tallies_{uuid.uuid4().hex[:10]}"
    df.to_sql(name, engine, index=False)
    try:
        with engine.connect() as conn:
            backend = SqlAlchemyBackend.on_connection(conn, sa.table(name, *[sa.column(c) for c in df.columns]))
            aggregated = aggregate(backend, {**kw_of("interval"), "pool_column": None, "trusted_pool": None})
            pools, _ = aggregated.rater_pools(False)
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f'DROP TABLE "{name}"'))
    rows = Ratings.from_long(df, level="interval", categories=SCALES["interval"])
    assert pools.trusted is None and isinstance(pools.crowd, TalliedRatings)
    for compute in (item_icc, labeler_icc, variance_components, conger_kappa, janson_olsson_iota):
        close(without_standard_error(compute(pools.crowd).to_dict()),
              without_standard_error(compute(rows).to_dict()), compute.__name__)
    assert 0 < labeler_icc(rows).value < 1
