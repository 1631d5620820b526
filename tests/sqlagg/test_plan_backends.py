"""The aggregate plan is backend-neutral: any :class:`~labelgate.sqlagg.backend.AggregateBackend` builds the same pools.

A backend written here over a pandas DataFrame (the protocol's reference semantics, in a few lines each) and the
SQLAlchemy backend over the same rows in SQLite must give the plan identical pools, errors and checks; the plan
itself never sees SQL.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

sa = pytest.importorskip("sqlalchemy")

from labelgate.errors import InputError, ParameterError  # noqa: E402
from labelgate.sqlagg import AGGREGATE_KEYS, Scope, Within, aggregate  # noqa: E402
from labelgate.sqlagg.sql import SqlAlchemyBackend  # noqa: E402


class FrameBackend:
    """The protocol over a DataFrame (``None`` cells are missing)."""

    dialect = "pandas"
    duplicate_check = "scanned"

    def __init__(self, df: pd.DataFrame) -> None:
        self.df, self.queries, self.rows_fetched = df, 0, 0

    def _rows(self, scope: Scope, within: Within) -> pd.DataFrame:
        self.queries += 1
        df = self.df
        if within == "all":
            return df
        if scope.question is not None:
            df = df[df[scope.question_column] == scope.question]
        if within == "question":
            return df
        if scope.pool is not None:
            df = df[df[scope.pool].isin(scope.pools)]
        if within == "labelled":
            df = df[df[scope.item].notna() & df[scope.label].notna()]
        return df

    def columns(self) -> list[str]:
        return list(self.df.columns)

    def tallies(self, scope: Scope) -> dict[Any, tuple[int, int, int, int]]:
        df = self._rows(scope, "pools")
        groups = df.groupby(scope.pool) if scope.pool is not None else [(None, df)]
        return {k: (len(g), int(g[scope.item].isna().sum()), int(g[scope.rater].isna().sum()),
                    int(g[scope.label].isna().sum())) for k, g in groups if len(g)}

    def count(self, scope: Scope, within: Within) -> int:
        return len(self._rows(scope, within))

    def distinct(self, scope: Scope, column: str, within: Within, limit: int | None = None) -> list[Any]:
        values = sorted(self._rows(scope, within)[column].dropna().unique().tolist())
        self.rows_fetched += len(values[:limit])
        return values[:limit]

    def duplicates(self, scope: Scope) -> tuple[int, tuple[Any, Any, Any] | None]:
        df = self._rows(scope, "pools")
        df = df[df[scope.label].notna()]
        keys = ([scope.pool] if scope.pool else []) + [scope.item, scope.rater]
        sizes = df.groupby(keys).size()
        extra = int((sizes - 1).sum())
        if not extra:
            return 0, None
        hit = sizes[sizes > 1].index[0]
        return extra, ((hit[0] if scope.pool else None), hit[-2], hit[-1])

    def item_label_counts(self, scope: Scope, label_values: Any) -> tuple[list[Any], np.ndarray]:
        df = self._rows(scope, "labelled")
        ids = sorted(df[scope.item].unique())
        items = {v: k for k, v in enumerate(ids)}
        labels = {v: k for k, v in enumerate(label_values)}
        pool = df[scope.pool].map({v: k for k, v in enumerate(scope.pools)}) if scope.pool else 0
        coded = pd.DataFrame({"p": pool, "i": df[scope.item].map(items), "l": df[scope.label].map(labels)})
        out = coded.groupby(["p", "i", "l"]).size().reset_index().to_numpy(dtype=np.int64)
        self.rows_fetched += len(out) + len(ids)
        return ids, out


def rows(seed: int = 4, duplicate: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    out = []
    for item in rng.permutation(40):
        for pool, k in (("crowd", 5), ("trusted", 3)):
            for rater in rng.choice(9, k, replace=False):
                label = None if rng.random() < 0.05 else ["a", "b", "c"][int(rng.integers(3))]
                out.append((f"x{item:02d}", f"{pool}{rater}", label, pool, "q1" if item % 2 else "q2"))
    df = pd.DataFrame(out, columns=["item_id", "rater_id", "label", "pool", "question"])
    return pd.concat([df, df.iloc[[3]]], ignore_index=True) if duplicate else df


def kw(**extra: Any) -> dict[str, Any]:
    base = {"item_column": "item_id", "rater_column": "rater_id", "label_column": "label", "pool_column": "pool",
            "question_column": "question", "question": "q1", "crowd_pool": "crowd", "trusted_pool": "trusted",
            "level": "nominal", "categories": None, "duplicates": "error"}
    assert set(base) == set(AGGREGATE_KEYS)
    return {**base, **extra}


def both(df: pd.DataFrame, tmp_path, **extra: Any) -> tuple[Any, Any]:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'plan.db'}")
    df.to_sql("j", engine, index=False, if_exists="replace")
    with engine.connect() as connection:
        on_sql = aggregate(SqlAlchemyBackend.on_connection(connection, sa.table("j")), kw(**extra))
    engine.dispose()
    return aggregate(FrameBackend(df), kw(**extra)), on_sql


def test_two_backends_build_the_same_pools(tmp_path):
    on_frame, on_sql = both(rows(), tmp_path)
    assert on_frame.error is None and on_sql.error is None
    for a, b in ((on_frame.pools.crowd, on_sql.pools.crowd), (on_frame.pools.trusted, on_sql.pools.trusted)):
        assert list(a.item_labels) == list(b.item_labels) and a.categories == b.categories
        np.testing.assert_array_equal(a.item_counts, b.item_counts)
        assert a.n_dropped_missing == b.n_dropped_missing > 0
    assert on_frame.pools.coverage == on_sql.pools.coverage
    assert on_sql.report["rows_fetched"] > 0 and on_frame.report["dialect"] == "pandas"


def test_two_backends_raise_the_same_errors(tmp_path):
    for extra, error in (({"duplicates": "error"}, InputError), ({"duplicates": "first"}, ParameterError)):
        on_frame, on_sql = both(rows(duplicate=True), tmp_path, **extra)
        assert type(on_frame.error) is type(on_sql.error) is error
        assert str(on_frame.error) == str(on_sql.error)
    on_frame, on_sql = both(rows(), tmp_path, categories=["a", "b"])
    assert str(on_frame.error) == str(on_sql.error) and "'c'" in str(on_sql.error)
    on_frame, on_sql = both(rows(), tmp_path, question="q9")
    assert on_frame.early and on_sql.early and str(on_frame.error) == str(on_sql.error)
    assert "'q1'" in str(on_sql.error)


def test_counts_that_do_not_add_up_to_the_tallies_are_refused():
    # a table written to between the tallies and the counts: a judgement missing, or one under an unknown label
    class Changed(FrameBackend):
        def __init__(self, df: pd.DataFrame, change: str) -> None:
            super().__init__(df)
            self.change = change

        def item_label_counts(self, scope: Scope, label_values: Any) -> tuple[list[Any], np.ndarray]:
            ids, out = super().item_label_counts(scope, label_values)
            if self.change == "lost":
                out[-1, 3] -= 1
            else:  # one judgement moved to a label the plan did not find
                out[0, 3] -= 1
                out = np.vstack([out, [[out[0, 0], out[0, 1], len(label_values), 1]]])
            return ids, out

    assert aggregate(FrameBackend(rows()), kw()).error is None
    for change in ("lost", "unknown label"):
        result = aggregate(Changed(rows(), change), kw())
        assert isinstance(result.error, InputError), change
        assert "changed while it was aggregated" in str(result.error), change
