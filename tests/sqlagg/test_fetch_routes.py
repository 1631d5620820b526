"""How the SQLAlchemy backend fetches the item x label counts: every route gives the same rows.

Routes: one row per item with a column per (pool, label) (``WIDE_CELLS``), one row per (pool, item, label), labels
numbered on the client (more than ``_CASE_LABELS``); each read through a binary ``COPY`` (PostgreSQL with psycopg,
integer ids) or a streaming cursor, in chunks small enough that rows straddle them. The reference is a pandas
``groupby`` of the same rows. On SQLite and, with ``LABELGATE_TEST_POSTGRES_URL``, on PostgreSQL.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest

sa = pytest.importorskip("sqlalchemy")

from labelgate.errors import InputError  # noqa: E402
from labelgate.sqlagg import Scope, pgarrays, pgcopy, sql  # noqa: E402
from labelgate.sqlagg.sql import SqlAlchemyBackend  # noqa: E402

POOLS = ("crowd", "trusted")


def judgements(int_ids: bool, seed: int = 5) -> pd.DataFrame:
    """Two pools and a third, two questions, 12 label values (some missing), sparse raters, shuffled."""
    rng = np.random.default_rng(seed)
    ids = rng.choice(10**9, 90, replace=False) if int_ids else [f"i{k:03d}" for k in rng.permutation(90)]
    out = []
    for n, item in enumerate(ids):
        for pool, k in (("crowd", int(rng.integers(1, 6))), ("trusted", int(rng.integers(0, 3))), ("other", 1)):
            for rater in rng.choice(20, k, replace=False):
                label = None if rng.random() < 0.07 else float(rng.integers(12)) / 2
                out.append((item, int(rater), label, pool, "q1" if n % 3 else "q2"))
    df = pd.DataFrame(out, columns=["item_id", "rater_id", "label", "pool", "question"])
    return df.sample(frac=1.0, random_state=seed).reset_index(drop=True)


def expected(df: pd.DataFrame, scope: Scope, labels: list[Any]) -> tuple[list[Any], np.ndarray]:
    """The protocol's answer from pandas: sorted item ids, (pool, item rank, label rank, count) sorted rows."""
    df = df[(df.question == scope.question) & df.label.notna()]
    if scope.pool is not None:
        df = df[df.pool.isin(scope.pools)]
    items = sorted(df.item_id.unique().tolist())
    pool = df.pool.map({p: k for k, p in enumerate(scope.pools)}) if scope.pool is not None else 0
    coded = pd.DataFrame({"p": pool, "i": df.item_id.map({v: k for k, v in enumerate(items)}),
                          "l": df.label.map({v: k for k, v in enumerate(labels)})})
    return items, coded.groupby(["p", "i", "l"]).size().reset_index().to_numpy(dtype=np.int64)


@pytest.fixture
def tables(sql_url: str) -> Iterator[tuple[Any, dict[bool, tuple[str, pd.DataFrame]]]]:
    engine = sa.create_engine(sql_url)
    made = {}
    for int_ids in (True, False):
        name = f"lg_fetch_{uuid.uuid4().hex[:8]}"
        df = judgements(int_ids)
        df.to_sql(name, engine, index=False)
        made[int_ids] = (name, df)
    yield engine, made
    with engine.begin() as connection:
        for name, _ in made.values():
            connection.execute(sa.text(f"DROP TABLE {name}"))
    engine.dispose()


@pytest.mark.parametrize("route", ["wide", "long", "uncoded"])
def test_every_route_gives_the_counts_of_the_rows(tables, route, monkeypatch):
    engine, made = tables
    monkeypatch.setattr(sql, "WIDE_CELLS", {"wide": 10**6, "long": 0, "uncoded": 0}[route])
    if route == "uncoded":
        monkeypatch.setattr(sql, "_CASE_LABELS", 0)
    monkeypatch.setattr(sql, "CHUNK", 7)  # cursor chunks of 7 rows
    monkeypatch.setattr(pgcopy, "CHUNK_BYTES", 150)  # COPY parsed every ~150 bytes: rows straddle blocks
    copied: list[int] = []

    def counted(*args: Any) -> np.ndarray:
        copied.append(1)
        return pgarrays.copy_int64_arrays(*args)

    monkeypatch.setattr(sql, "copy_int64_arrays", counted)
    for int_ids, (name, df) in made.items():
        for pool in ("pool", None):
            scope = Scope("item_id", "rater_id", "label", pool, POOLS if pool else (), "question", "q1")
            with engine.connect() as connection:
                if engine.dialect.name == "postgresql":  # hash aggregates: groups in no particular order
                    connection.execute(sa.text("SET LOCAL enable_sort = off"))
                backend = SqlAlchemyBackend.on_connection(connection, sa.table(name))
                labels = backend.distinct(scope, "label", "labelled")
                before = len(copied)
                items, rows = backend.item_label_counts(scope, labels)
            want_items, want_rows = expected(df, scope, labels)
            where = (engine.dialect.name, route, int_ids, pool)
            assert items == want_items, where
            np.testing.assert_array_equal(rows, want_rows, err_msg=str(where))
            by_copy = engine.dialect.name == "postgresql" and int_ids and route != "uncoded"
            assert (len(copied) > before) is by_copy, where


def test_one_row_per_item_becomes_the_sorted_rows_of_its_cells():
    # three items fetched in the server's order (codes 2, 0, 1), two pools x two labels; zero cells are dropped
    wide = np.array([[0, 3, 1, 0], [2, 0, 0, 0], [1, 1, 0, 4]])
    got = sql._long(wide, np.array([2, 0, 1]), 2, 2)
    np.testing.assert_array_equal(got, [[0, 0, 0, 2], [0, 1, 0, 1], [0, 1, 1, 1], [0, 2, 1, 3],
                                        [1, 1, 1, 4], [1, 2, 0, 1]])
    assert sql._long(wide[:0], np.zeros(0, dtype=np.int64), 2, 2).shape == (0, 4)


def test_the_tallies_find_the_labels_in_the_same_scan(tables):
    engine, made = tables
    name, df = made[False]
    scope = Scope("item_id", "rater_id", "label", "pool", POOLS, "question", "q2")
    with engine.connect() as connection:
        backend = SqlAlchemyBackend.on_connection(connection, sa.table(name))
        tallies = backend.tallies(scope)
        queries = backend.queries
        labels = backend.distinct(scope, "label", "labelled")
        assert backend.queries == queries  # no second scan
        fresh = SqlAlchemyBackend.on_connection(connection, sa.table(name))
        # one scan on a fresh backend (on PostgreSQL after the label column's type: a LIMIT 0 description)
        assert labels == fresh.distinct(scope, "label", "labelled")
        assert fresh.queries == 1 + (engine.dialect.name == "postgresql") and fresh.rows_fetched == len(labels)
        other = Scope("item_id", "rater_id", "label", "pool", POOLS, "question", "q1")
        assert backend.distinct(other, "label", "labelled") == fresh.distinct(other, "label", "labelled")
    rows = df[(df.question == "q2") & df.pool.isin(POOLS)]
    assert tallies == {p: (len(g), 0, 0, int(g.label.isna().sum())) for p, g in rows.groupby("pool")}
    assert labels == sorted(rows.label.dropna().unique().tolist())


@pytest.fixture
def pg_connection(sql_url: str) -> Iterator[Any]:
    if not sql_url.startswith("postgresql"):
        pytest.skip("binary COPY: PostgreSQL only")
    engine = sa.create_engine(sql_url)
    with engine.connect() as connection:
        yield connection
    engine.dispose()


def test_copy_reads_across_blocks_and_refuses_what_it_cannot_read(pg_connection, monkeypatch):
    assert pgcopy.copies(pg_connection)
    monkeypatch.setattr(pgcopy, "CHUNK_BYTES", 100)
    query = sa.text("SELECT g::int AS a, g * 3 - 2000 AS b FROM generate_series(1, 997) g").columns(
        sa.column("a"), sa.column("b"))
    got = pgcopy.copy_int64(pg_connection, query, 2)
    g = np.arange(1, 998)
    np.testing.assert_array_equal(got, np.column_stack([g, 3 * g - 2000]))
    backend = SqlAlchemyBackend.on_connection(pg_connection, sa.table("unused"))
    np.testing.assert_array_equal(backend.stream(query, 2), got)  # stream(): the same COPY
    monkeypatch.setattr(sql, "copies", lambda connection: False)
    np.testing.assert_array_equal(backend.stream(query, 2), got)  # the cursor route: the same rows
    assert backend.rows_fetched == 2 * 997 and backend.queries == 2
    empty = sa.text("SELECT 1 AS a WHERE false").columns(sa.column("a"))
    assert pgcopy.copy_int64(pg_connection, empty, 1).shape == (0, 1)
    for nulls in ("SELECT 1 AS a, NULL::int AS b",  # the only row: shorter than a row
                  "SELECT g AS a, CASE WHEN g = 500 THEN NULL ELSE g END AS b FROM generate_series(1, 997) g"):
        with pytest.raises(InputError, match="not 2 non-NULL bigint fields"):
            pgcopy.copy_int64(pg_connection, sa.text(nulls).columns(sa.column("a"), sa.column("b")), 2)


def _copy_stream(connection: Any, sql_text: str) -> bytes:
    """The raw binary COPY stream of a query, as the server sends it."""
    with connection.connection.driver_connection.cursor() as cursor, cursor.copy(
            f"COPY ({sql_text}) TO STDOUT (FORMAT binary)") as copy:
        return b"".join(bytes(block) for block in copy)


def test_copy_rows_do_not_depend_on_where_the_stream_is_cut(pg_connection, monkeypatch):
    # the server sends the header with the first row and then a row a message: here the same stream is cut
    # anywhere, so that a row, the header and the trailer straddle blocks
    stream = _copy_stream(pg_connection, "SELECT g::bigint, (g * 7 - 50)::bigint, (-g)::bigint "
                                         "FROM generate_series(1, 300) g")
    g = np.arange(1, 301)
    expected_rows = np.column_stack([g, 7 * g - 50, -g])
    for chunk_bytes in (40, pgcopy.CHUNK_BYTES):
        monkeypatch.setattr(pgcopy, "CHUNK_BYTES", chunk_bytes)
        for size in (1, 7, 13, 19, 20, 38, 4096, len(stream)):
            blocks = [stream[k:k + size] for k in range(0, len(stream), size)]
            np.testing.assert_array_equal(pgcopy.rows_of(iter(blocks), 3), expected_rows, err_msg=str(size))
    with pytest.raises(InputError, match="ended before its header"):
        pgcopy.rows_of(iter([stream[:15]]), 3)
    with pytest.raises(InputError, match="trailer"):
        pgcopy.rows_of(iter([stream[:-5]]), 3)  # a stream cut inside its last row


def test_copy_binds_parameters_of_columns_with_any_name_and_names_a_failing_query(pg_connection):
    from labelgate.sqlagg.plan import aggregate

    name = f"lg_names_{uuid.uuid4().hex[:8]}"
    table = sa.Table(name, sa.MetaData(), sa.Column("item_id", sa.BigInteger), sa.Column("rater_id", sa.BigInteger),
                     sa.Column("label", sa.Text), sa.Column("meta.pool", sa.Text))
    table.create(pg_connection)
    try:
        pg_connection.execute(table.insert(), [
            {"item_id": item, "rater_id": rater, "label": label, "meta.pool": pool}
            for item, rater, label, pool in ((3, 1, "a", "crowd"), (3, 2, "b", "crowd"), (1, 1, "a", "crowd"),
                                             (1, 2, "a", "crowd"), (1, 9, "a", "trusted"), (3, 9, "b", "trusted"))])
        kw = dict(item_column="item_id", rater_column="rater_id", label_column="label", pool_column="meta.pool",
                  question_column=None, question=None, crowd_pool="crowd", trusted_pool="trusted", level="nominal",
                  categories=None, duplicates="error")
        # integer ids on PostgreSQL: the counts come through COPY, with the pool column's parameters renamed by
        # SQLAlchemy in the SQL (``meta_pool_1``)
        result = aggregate(SqlAlchemyBackend.on_connection(pg_connection, sa.table(name)), kw)
        assert result.error is None, result.error
        assert result.pools is not None and result.pools.crowd.item_counts.tolist() == [[2, 0], [1, 1]]
        failing = sa.select(sa.cast(sa.literal_column("item_id") / 0, sa.BigInteger)).select_from(table)
        with pytest.raises(InputError, match="The batch query failed: DivisionByZero"):
            pgcopy.copy_int64(pg_connection, failing, 1)
    finally:
        pg_connection.rollback()


def test_a_real_label_column_is_refused_not_counted_under_the_wrong_label(pg_connection):
    # float4 labels come back from the driver as floats that do not compare equal to the stored values: the counts
    # then miss judgements the tallies found, and the batch is refused with both possible causes named
    from labelgate.sqlagg.plan import aggregate

    name = f"lg_real_{uuid.uuid4().hex[:8]}"
    table = sa.Table(name, sa.MetaData(), sa.Column("item_id", sa.BigInteger), sa.Column("rater_id", sa.BigInteger),
                     sa.Column("label", sa.REAL), sa.Column("pool", sa.Text))
    table.create(pg_connection)
    try:
        pg_connection.execute(table.insert(), [
            {"item_id": item, "rater_id": rater, "label": label, "pool": pool}
            for item, rater, label, pool in ((1, 1, 0.1, "crowd"), (1, 2, 0.7, "crowd"), (2, 1, 0.7, "crowd"),
                                             (2, 2, 0.7, "crowd"), (1, 9, 0.1, "trusted"), (2, 9, 0.7, "trusted"))])
        kw = dict(item_column="item_id", rater_column="rater_id", label_column="label", pool_column="pool",
                  question_column=None, question=None, crowd_pool="crowd", trusted_pool="trusted", level="nominal",
                  categories=None, duplicates="error")
        result = aggregate(SqlAlchemyBackend.on_connection(pg_connection, sa.table(name)), kw)
        assert isinstance(result.error, InputError)
        assert "counts do not add up" in str(result.error) and "`real` column" in str(result.error)
    finally:
        pg_connection.rollback()
