"""The rater diagnostics from the database's per-rater sums equal the row path's (to 1e-12).

:func:`labelgate.sqlagg.raters.rater_evidence` runs two aggregate queries (the judgements grouped by rater, label and
their item's counts; the co-rating pairs) and :func:`labelgate.metrics.diagnostics.diagnostics_from_sums` finishes;
:func:`labelgate.metrics.diagnostics.rater_diagnostics` computes the same rows from the judgements. On SQLite and,
with ``LABELGATE_TEST_POSTGRES_URL``, on PostgreSQL; nominal, ordinal and interval labels; colluders and a spammer
so that both flags occur; string and integer rater ids; with and without a trusted pool.
"""

from __future__ import annotations

import math
import uuid
from typing import Any

import numpy as np
import pandas as pd
import pytest

sa = pytest.importorskip("sqlalchemy")

from labelgate.core.ratings import Ratings, ratings_by_pool  # noqa: E402
from labelgate.errors import DesignError, InputError  # noqa: E402
from labelgate.metrics.diagnostics import rater_diagnostics  # noqa: E402
from labelgate.sqlagg import Scope  # noqa: E402
from labelgate.sqlagg.raters import MAX_CONTEXT_LABELS, rater_evidence  # noqa: E402
from labelgate.sqlagg.sql import SqlAlchemyBackend  # noqa: E402

JUDGING = {"pool_name": "crowd", "ci": 0.9, "min_agreement": 0.3, "min_shared_items": 5, "fdr": 0.2,
           "min_pair_items": 8}


def panel(seed: int, level: str, integer_raters: bool = False) -> pd.DataFrame:
    """150 items, 3-6 crowd raters of 20 and 0-2 trusted per item; raters 0 and 1 copy each other's label (colluders),
    rater 2 guesses (a spammer)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(150):
        truth = int(rng.integers(4))
        crowd = rng.choice(20, size=int(rng.integers(3, 7)), replace=False).tolist()
        if rng.random() < 0.5:
            crowd = sorted(set(crowd) | {0, 1})
        shared = int(rng.integers(4))
        for r in crowd:
            label = truth if rng.random() < 0.75 else int(rng.integers(4))
            label = shared if r in (0, 1) else int(rng.integers(4)) if r == 2 else label
            rows.append((f"item-{i:03d}", r if integer_raters else f"r{r:02d}", label, "crowd"))
        for t in range(int(rng.integers(0, 3))):
            rows.append((f"item-{i:03d}", 100 + t if integer_raters else f"t{t}",
                         truth if rng.random() < 0.9 else int(rng.integers(4)), "gold"))
    frame = pd.DataFrame(rows, columns=["item_id", "rater_id", "label", "pool"])
    if level == "interval":
        frame["label"] = frame["label"] * 1.5 + 0.25
    return frame


@pytest.fixture
def engine(sql_url):
    made = sa.create_engine(sql_url)
    yield made
    made.dispose()


def table_of(engine: Any, frame: pd.DataFrame) -> Any:
    name = f"raters_{uuid.uuid4().hex[:10]}"
    frame.to_sql(name, engine, index=False)
    return sa.table(name, *[sa.column(c) for c in frame.columns])


def drop(engine: Any, table: Any) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text(f'DROP TABLE IF EXISTS "{table.name}"'))


def same(a: Any, b: Any, where: str, bound_tol: float = 1e-12) -> None:
    """Equal values; floats to 1e-12, interval bounds (``*_ci_low`` / ``*_ci_high``) to ``bound_tol``."""
    if isinstance(a, dict):
        assert set(a) == set(b), where
        for k in a:
            same(a[k], b[k], f"{where}.{k}", bound_tol)
    elif isinstance(a, list):
        assert len(a) == len(b), where
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{where}[{k}]", bound_tol)
    elif isinstance(a, float) and isinstance(b, float):
        tol = bound_tol if where.endswith(("_ci_low", "_ci_high")) else 1e-12
        assert (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=tol, abs_tol=tol), \
            f"{where}: {a} != {b}"
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def evidence_rows(engine: Any, table: Any, scope: Scope, level: str, center: float) -> tuple[list[dict], int]:
    with engine.connect() as conn:
        backend = SqlAlchemyBackend.on_connection(conn, table)
        labels = backend.distinct(scope, scope.label, "labelled")
        found = rater_evidence(backend, scope, labels, sorted(labels), level, center=center)
        return found.rows(**JUDGING), backend.queries


@pytest.mark.parametrize(("level", "integer_raters"), [("nominal", False), ("ordinal", True), ("interval", False)])
def test_rater_rows_from_the_database_equal_the_row_path(engine, level, integer_raters):
    frame = panel(7, level, integer_raters)
    pools = ratings_by_pool(frame, level=level, categories=sorted(frame["label"].unique()))
    expected = rater_diagnostics(pools["crowd"], pools["gold"], **JUDGING)
    table = table_of(engine, frame)
    try:
        got, queries = evidence_rows(engine, table, Scope("item_id", "rater_id", "label", "pool", ("crowd", "gold")),
                                     level, pools["crowd"].moment_center)
    finally:
        drop(engine, table)
    # the labels, the contexts, the pairs; on PostgreSQL also the label column's type (a LIMIT 0 description: whether
    # it holds NaN, a missing label), read before the contexts' conditions
    assert queries == 3 + (engine.dialect.name == "postgresql")
    flags = {f for r in expected for f in r["flags"]}
    assert {"collusion", "low_agreement"} <= flags, flags  # both flags are exercised
    assert [r["rater_id"] for r in got] == sorted(r["rater_id"] for r in expected)
    by_id = {r["rater_id"]: r for r in expected}
    # interval labels: a context row adds w x its block once where the row path adds the block w times, so the
    # second moments round differently; the score bounds (a root of a quadratic in them) amplify that to ~1e-12
    bound_tol = 1e-10 if level == "interval" else 1e-12
    for row in got:
        same(row, by_id[row["rater_id"]], str(row["rater_id"]), bound_tol)


def test_without_a_trusted_pool_the_peers_decide(engine):
    frame = panel(3, "nominal").query("pool == 'crowd'").drop(columns="pool")
    crowd = Ratings.from_long(frame, level="nominal", categories=sorted(frame["label"].unique()))
    expected = {r["rater_id"]: r for r in rater_diagnostics(crowd, None, **JUDGING)}
    table = table_of(engine, frame)
    try:
        got, _ = evidence_rows(engine, table, Scope("item_id", "rater_id", "label"), "nominal", crowd.moment_center)
    finally:
        drop(engine, table)
    assert all(r["kappa_vs_trusted"] is None and r["loo_agreement"] is not None for r in got)
    for row in got:
        same(row, expected[row["rater_id"]], str(row["rater_id"]))


def test_the_contexts_are_fewer_than_the_judgements(tmp_path):
    """Items with a few ratings over a few labels repeat their contexts: what comes back is far below one row per
    judgement (the bound that keeps the client's memory small)."""
    rng = np.random.default_rng(2)
    n_items, k = 4000, 5
    frame = pd.DataFrame({"item_id": np.repeat(np.arange(n_items), k),
                          "rater_id": np.concatenate([rng.choice(40, k, replace=False) for _ in range(n_items)]),
                          "label": rng.integers(0, 3, n_items * k)})
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'many.db'}")
    table = table_of(engine, frame)
    with engine.connect() as conn:
        backend = SqlAlchemyBackend.on_connection(conn, table)
        raters, contexts = backend.rater_contexts(Scope("item_id", "rater_id", "label"), [0, 1, 2])
    assert int(contexts[:, 1].sum()) == len(frame) and set(raters) == set(frame["rater_id"])
    assert len(contexts) < len(frame) / 4, len(contexts)


def test_too_many_labels_and_spark_are_refused():
    scope = Scope("item_id", "rater_id", "label")
    labels = list(range(MAX_CONTEXT_LABELS + 1))
    with pytest.raises(InputError, match="at most 64"):
        rater_evidence(None, scope, labels, labels, "nominal", center=0.0)  # type: ignore[arg-type]
    from labelgate.gx._spark import SparkBackend

    with pytest.raises(DesignError, match="not computed on a Spark batch"):
        SparkBackend.rater_contexts(None, scope, [0])  # type: ignore[arg-type]
    with pytest.raises(DesignError, match="not computed on a Spark batch"):
        SparkBackend.rater_pairs(None, scope, [0])  # type: ignore[arg-type]
