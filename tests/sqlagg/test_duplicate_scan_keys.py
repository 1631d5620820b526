"""The duplicate scan is skipped when a key of the table rules duplicates out, and kept otherwise.

A primary key, unique constraint or unique index of the batch's table on columns among (item, rater, pool) means no
rater judged an item twice in a pool: the plan reports ``duplicates: "unique key ..."`` and runs no scan. A key that
also holds the label, a view, a computed query or a table without a key keep the scan (``"scanned"``), and a
repeated judgement is still refused. On SQLite and, with ``LABELGATE_TEST_POSTGRES_URL``, on PostgreSQL.
"""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import pytest

sa = pytest.importorskip("sqlalchemy")

from labelgate.errors import InputError  # noqa: E402
from labelgate.sqlagg import aggregate  # noqa: E402
from labelgate.sqlagg.sql import SqlAlchemyBackend  # noqa: E402

KW = {"item_column": "item_id", "rater_column": "rater_id", "label_column": "label", "pool_column": "pool",
      "question_column": None, "question": None, "crowd_pool": "crowd", "trusted_pool": "gold", "level": "nominal",
      "categories": None, "duplicates": "error"}


@pytest.fixture
def engine(sql_url):
    made = sa.create_engine(sql_url)
    names: list[str] = []
    yield made, names
    with made.begin() as conn:
        for name in reversed(names):
            kind = "VIEW" if name.startswith("v_") else "TABLE"
            conn.execute(sa.text(f'DROP {kind} IF EXISTS "{name}"'))
    made.dispose()


def make(engine: Any, key: str, repeat: bool = False) -> str:
    """A table of judgements with ``key`` (SQL after the columns, e.g. a UNIQUE clause) and its name."""
    made, names = engine
    name = f"keys_{uuid.uuid4().hex[:10]}"
    names.append(name)
    rng = np.random.default_rng(1)
    rows = [(i, r, int(rng.integers(3)), pool) for i in range(30) for pool, raters in
            (("crowd", ["a", "b", "c"]), ("gold", ["t"])) for r in raters]
    if repeat:
        rows.append((0, "a", 2, "crowd"))
    with made.begin() as conn:
        conn.execute(sa.text(f'CREATE TABLE "{name}" (item_id INTEGER NOT NULL, rater_id VARCHAR(8) NOT NULL, '
                             f"label INTEGER, pool VARCHAR(8) NOT NULL{key})"))
        conn.execute(sa.text(f'INSERT INTO "{name}" VALUES (:i, :r, :l, :p)'),
                     [{"i": i, "r": r, "l": lab, "p": p} for i, r, lab, p in rows])
    return name


def run(engine: Any, selectable: Any) -> Any:
    with engine[0].connect() as conn:
        return aggregate(SqlAlchemyBackend.on_connection(conn, selectable), KW)


def as_gx(name: str) -> Any:
    """The batch as GX hands it to a metric: ``SELECT * FROM t WHERE <row condition>`` as a subquery."""
    return sa.select(sa.text("*")).select_from(sa.table(name)).where(sa.column("pool").in_(["crowd", "gold"]))


@pytest.mark.parametrize("key", [", PRIMARY KEY (item_id, rater_id, pool)", ", UNIQUE (item_id, rater_id)",
                                 "INDEX"])
def test_a_key_on_item_and_rater_skips_the_scan(engine, key):
    name = make(engine, "" if key == "INDEX" else key)
    if key == "INDEX":
        with engine[0].begin() as conn:
            conn.execute(sa.text(f'CREATE UNIQUE INDEX "ux_{name}" ON "{name}" (pool, rater_id, item_id)'))
    scanned = make(engine, "")
    for selectable in (sa.table(name), as_gx(name)):
        found = run(engine, selectable)
        assert found.error is None and found.report["duplicates"].startswith("unique key"), found.report
        reference = run(engine, sa.table(scanned))
        assert reference.report["duplicates"] == "scanned"
        assert found.pools is not None and reference.pools is not None
        assert (found.pools.crowd.item_counts == reference.pools.crowd.item_counts).all()
        # the catalog inspection (counted as one query) replaces the scan's query, and the check on every run
        assert found.report["queries"] == reference.report["queries"] - 1


def test_no_covering_key_keeps_the_scan_and_refuses_duplicates(engine):
    name = make(engine, ", UNIQUE (item_id, rater_id, label)", repeat=True)  # the label is no part of the rule
    found = run(engine, sa.table(name))
    assert found.report["duplicates"] == "scanned"
    assert isinstance(found.error, InputError) and "judged item 0 more than once" in str(found.error)
    view = f"v_{name}"
    keyed = make(engine, ", UNIQUE (item_id, rater_id, pool)")
    engine[1].append(view)  # dropped before its table
    with engine[0].begin() as conn:
        conn.execute(sa.text(f'CREATE VIEW "{view}" AS SELECT * FROM "{keyed}"'))
    for selectable in (sa.table(view), sa.select(sa.text("*")).select_from(sa.table(keyed)).distinct()):
        assert run(engine, selectable).report["duplicates"] == "scanned"
