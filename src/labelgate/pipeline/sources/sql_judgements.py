"""The judgements of a SQL batch's question as coded integers, its SQL text, and its content digest.

Helpers of :mod:`labelgate.pipeline.sources.sql_batch`: :func:`coded_judgements` streams a question's valid
judgements with rater identity (for what needs more than sums), :func:`as_text` renders a query for a GX query
asset, :func:`digest` hashes what decides the batch, :func:`apply_session` gives the validating transaction the
source's ``session`` settings.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

import numpy as np

from labelgate.core.categories import sorted_distinct
from labelgate.pipeline.config import ConfigError
from labelgate.sqlagg.sql import SqlAlchemyBackend

if TYPE_CHECKING:
    from labelgate.core.ratings import Ratings


def apply_session(connection: Any, settings: dict[str, Any] | None) -> None:
    """The source's ``session`` settings for the connection's current transaction only (PostgreSQL's
    ``set_config(name, value, true)``: ``SET LOCAL``; the values are bound, the server's configuration unchanged).

    Raises
    ------
    ConfigError
        Settings given for a database other than PostgreSQL.
    """
    import sqlalchemy as sa

    if not settings:
        return
    if connection.dialect.name != "postgresql":
        raise ConfigError(f"batch.session: settings are PostgreSQL's; the database is {connection.dialect.name!r}.",
                          key="batch.session")
    for name, value in settings.items():
        connection.execute(sa.select(sa.func.set_config(name, str(value), True)))


def coded_judgements(connection: Any, query: str, level: str, categories: tuple[Any, ...] | None,
                     trusted_pool: str) -> tuple[SqlAlchemyBackend, tuple[Ratings | None, Ratings | None]]:
    """The judgements of a question's canonical ``query`` (:attr:`SqlBatch.queries`) as coded integers, streamed:
    ``(crowd, trusted)`` :class:`~labelgate.Ratings` with rater identity (None for a pool without judgements)."""
    import sqlalchemy as sa

    from labelgate.core.ratings import Ratings

    backend = SqlAlchemyBackend.on_connection(connection, sa.text(query).columns(
        *[sa.column(k) for k in ("item_id", "rater_id", "label", "pool", "question")]))
    judged = backend.source
    ids = {k: [r[0] for r in backend.fetch(sa.select(judged.c[k]).group_by(judged.c[k]).order_by(judged.c[k]))]
           for k in ("item_id", "rater_id", "label")}
    pool_code = sa.case((judged.c.pool == trusted_pool, 1), else_=0)
    rows = backend.stream(sa.select(pool_code, *[sa.func.dense_rank().over(order_by=judged.c[k]) - 1
                                                 for k in ("item_id", "rater_id", "label")]).select_from(judged), 4)
    cats = list(categories) if categories is not None else sorted_distinct(ids["label"])
    position = {c: k for k, c in enumerate(cats)}
    label_code = np.asarray([position[v] for v in ids["label"]], dtype=np.int64)
    codes = []
    for key in ("item_id", "rater_id"):  # re-numbered in Python's order, whatever the server's collation
        order = sorted_distinct(ids[key])
        where = {v: k for k, v in enumerate(order)}
        codes.append((np.asarray([where[v] for v in ids[key]], dtype=np.int64), order))
    (item_map, items), (rater_map, raters) = codes
    item_labels = np.empty(len(items), dtype=object)
    item_labels[:] = items
    out: list[Ratings | None] = []
    for code in (0, 1):
        mine = rows[rows[:, 0] == code]
        if not len(mine):
            out.append(None)
            continue
        triple = np.stack([item_map[mine[:, 1]], rater_map[mine[:, 2]], label_code[mine[:, 3]]], axis=1)
        triple = triple[np.lexsort(triple.T[::-1])]  # by item, then rater id: the order the halves split by
        present, rater_codes = np.unique(triple[:, 1], return_inverse=True)  # each pool has its own raters
        rater_labels = np.empty(len(present), dtype=object)
        rater_labels[:] = [raters[k] for k in present]
        out.append(Ratings(triple[:, 0], rater_codes, triple[:, 2], item_labels=item_labels,
                           rater_labels=rater_labels, categories=cats, level=level))  # type: ignore[arg-type]
    return backend, (out[0], out[1])


def as_text(select: Any, dialect: Any) -> str:
    """``select`` as SQL text of ``dialect`` with its values inlined (bound values rendered by SQLAlchemy's literal
    processors), colons escaped for :func:`sqlalchemy.text`, which GX wraps a query asset in."""
    sql = str(select.compile(dialect=dialect, compile_kwargs={"literal_binds": True}))
    return sql.replace(":", "\\:")


def digest(table: str, summary: dict[str, Any], parts: dict[str, list[Any]], code: int,
           coverage: dict[str, Any] | None = None) -> str:
    """SHA-256 of what decides the ``table`` part of the batch, independent of row order and server collation.

    It covers the table's validation counts (rows, failing rows per check), the batch's coverage (items per pool and
    in common, over every valid row, so rows of a question the gate does not judge count too) and, per question, the
    categories, the sorted item ids and the crowd's sorted rater ids (each by its ``repr``: ``1`` and ``"1"``
    differ), the table's (item, category, count) rows and, for the crowd, the rater context rows and co-rating pairs
    (:class:`~labelgate.sqlagg.raters.RaterEvidence`) in those codes, sorted, each array framed by its shape: every
    statistic, every coverage rule and every rater diagnostic of the decision is a function of them.
    """
    digest = hashlib.sha256(b"labelgate-sql-batch:v3\x1f" + table.encode())
    head = {**{k: summary[k] for k in ("n_rows", "n_invalid", "error_counts")}, "coverage": coverage}
    digest.update(json.dumps(head, sort_keys=True, default=str).encode())
    for name in sorted(parts):
        cats, items, raters, crowd, trusted, *evidence = parts[name]
        digest.update(json.dumps([name, [repr(c) for c in cats], [repr(i) for i in items],
                                  [repr(r) for r in raters]], default=str).encode())
        for array in [crowd, *evidence] if code == 0 else [trusted]:
            framed = np.ascontiguousarray(array, dtype=np.int64)
            digest.update(np.asarray(framed.shape, dtype=np.int64).tobytes() + framed.tobytes())
    return digest.hexdigest()
