"""The :class:`~labelgate.sqlagg.backend.AggregateBackend` of a SQLAlchemy selectable (any SQL database).

The queries are SQLAlchemy Core over the batch selectable (a table, or a SELECT — a row condition, a query —
used as a subquery). The item x category counts are a plain ``GROUP BY pool, item, label`` (no window), numbered on
the client against the distinct item ids and labels the plan fetched once, and streamed through a server-side
cursor where the driver has one (``stream_results``: PostgreSQL's named cursors), so the client holds one chunk of
rows at a time and the int64 array of all of them. SQLAlchemy is imported lazily.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from itertools import chain
from typing import Any

import numpy as np

from labelgate.sqlagg.backend import Scope, Within
from labelgate.sqlagg.plan import sorted_values

#: Rows per chunk of the streamed count rows.
CHUNK = 50_000
#: Labels numbered by the database with a ``CASE`` (more: numbered on the client from their values).
_CASE_LABELS = 256


class SqlAlchemyBackend:
    """Aggregate queries over one SQLAlchemy selectable.

    Parameters
    ----------
    selectable : sqlalchemy Table, FromClause or Select
        The batch; a SELECT becomes a subquery.
    execute : callable
        Runs a statement and returns its result (GX: ``execution_engine.execute_query``).
    connect : callable
        A context manager yielding a connection (for the streamed counts; GX: ``execution_engine.get_connection``).
    dialect : str
        The database's dialect name, for the report.
    """

    def __init__(self, selectable: Any, *, execute: Callable[[Any], Any],
                 connect: Callable[[], AbstractContextManager[Any]], dialect: str) -> None:
        self.source = selectable.subquery() if hasattr(selectable, "subquery") else selectable
        self.execute, self.connect, self.dialect = execute, connect, dialect
        self.queries = self.rows_fetched = 0
        self.duplicate_check = ""

    @classmethod
    def on_connection(cls, connection: Any, selectable: Any) -> SqlAlchemyBackend:
        """A backend running every query on one open SQLAlchemy connection."""
        from contextlib import nullcontext

        return cls(selectable, execute=connection.execute, connect=lambda: nullcontext(connection),
                   dialect=connection.dialect.name)

    # ------------------------------------------------------------ helpers
    def fetch(self, query: Any) -> list[tuple[Any, ...]]:
        """All rows of ``query`` as plain tuples (counted)."""
        rows = [tuple(r) for r in self.execute(query).fetchall()]
        self.queries += 1
        self.rows_fetched += len(rows)
        return rows

    def col(self, name: str) -> Any:
        """The column ``name`` of the batch."""
        import sqlalchemy as sa

        return sa.column(name)

    def where(self, scope: Scope, within: Within) -> list[Any]:
        """The conditions selecting the rows ``within``."""
        out: list[Any] = []
        if within == "all":
            return out
        if scope.question is not None:
            out.append(self.col(str(scope.question_column)) == scope.question)
        if within == "question":
            return out
        if scope.pool is not None:
            out.append(self.col(scope.pool).in_(scope.pools))
        if within == "labelled":
            out += [self.col(scope.item).is_not(None), self.col(scope.label).is_not(None)]
        return out

    def stream(self, query: Any, width: int) -> np.ndarray:
        """The integer rows of ``query`` as an (n, width) int64 array, read in chunks of :data:`CHUNK`."""
        chunks: list[np.ndarray] = []
        with self.connect() as connection:
            # options on the statement, not the connection (which keeps them in SQLAlchemy 2 and may be shared)
            result = connection.execute(query.execution_options(stream_results=True, max_row_buffer=CHUNK))
            for part in result.partitions(CHUNK):
                chunks.append(np.fromiter(chain.from_iterable(part), dtype=np.int64, count=len(part) * width)
                              .reshape(len(part), width))
        self.queries += 1
        rows = np.concatenate(chunks) if chunks else np.empty((0, width), dtype=np.int64)
        self.rows_fetched += len(rows)
        return rows

    # ------------------------------------------------------------ the protocol
    def columns(self) -> list[str]:
        """The batch's column names (a query that returns no row)."""
        import sqlalchemy as sa

        result = self.execute(sa.select(sa.text("*")).select_from(self.source).limit(0))
        self.queries += 1
        return [str(c) for c in result.keys()]

    def tallies(self, scope: Scope) -> dict[Any, tuple[int, int, int, int]]:
        """Per pool: (rows, rows without an item id, without a rater id, without a label)."""
        import sqlalchemy as sa

        def nulls(name: str) -> Any:
            return sa.func.coalesce(sa.func.sum(sa.case((self.col(name).is_(None), 1), else_=0)), 0)

        keys = [self.col(scope.pool)] if scope.pool is not None else []
        rows = self.fetch(sa.select(*keys, sa.func.count(), nulls(scope.item), nulls(scope.rater), nulls(scope.label))
                          .select_from(self.source).where(*self.where(scope, "pools")).group_by(*keys))
        tallies = {(row[0] if keys else None): tuple(int(v) for v in row[len(keys):]) for row in rows}
        return {pool: t for pool, t in tallies.items() if t[0] > 0}  # type: ignore[misc]

    def count(self, scope: Scope, within: Within) -> int:
        """The number of rows ``within``."""
        import sqlalchemy as sa

        return int(self.fetch(sa.select(sa.func.count()).select_from(self.source)
                              .where(*self.where(scope, within)))[0][0])

    def distinct(self, scope: Scope, column: str, within: Within, limit: int | None = None) -> list[Any]:
        """The distinct non-missing values of ``column``, ascending in the database's order."""
        import sqlalchemy as sa

        c = self.col(column)
        query = (sa.select(c).select_from(self.source).where(*self.where(scope, within), c.is_not(None))
                 .group_by(c).order_by(c))
        return [row[0] for row in self.fetch(query if limit is None else query.limit(limit))]

    def duplicates(self, scope: Scope) -> tuple[int, tuple[Any, Any, Any] | None]:
        """Judgements beyond one per (pool, item, rater), and one example.

        Per (pool, item), ``count(*) - count(DISTINCT rater)`` (a sort within each item, cheaper than grouping
        every (pool, item, rater) pair); only when it is positive does a second query fetch one example.
        """
        import sqlalchemy as sa

        key = self.unique_key(scope)
        if key is not None:
            self.duplicate_check = f"unique key {key}"
            return 0, None
        self.duplicate_check = "scanned"
        pool = [self.col(scope.pool)] if scope.pool is not None else []
        labelled = [*self.where(scope, "pools"), self.col(scope.label).is_not(None)]
        repeated = sa.func.count() - sa.func.count(sa.distinct(self.col(scope.rater)))
        per_item = (sa.select(repeated.label("extra")).select_from(self.source).where(*labelled)
                    .group_by(*pool, self.col(scope.item)).having(repeated > 0).subquery())
        total = self.fetch(sa.select(sa.func.sum(per_item.c.extra)).select_from(per_item))[0][0]
        if not total:
            return 0, None
        keys = [*pool, self.col(scope.item), self.col(scope.rater)]
        hit = self.fetch(sa.select(*keys).select_from(self.source).where(*labelled).group_by(*keys)
                         .having(sa.func.count() > 1).limit(1))[0]
        return int(total), ((hit[0] if pool else None), hit[-2], hit[-1])

    def base_table(self) -> Any:
        """The table whose rows the batch is, unchanged or filtered (a ``WHERE``: GX's row condition), else None.

        Only a plain table, or a ``SELECT *`` / its own columns from one table with no join, grouping, ``DISTINCT``
        or limit: a view, a query asset or anything computed keeps the duplicate scan.
        """
        import sqlalchemy as sa

        source = self.source
        if isinstance(source, sa.TableClause):
            return source
        select = getattr(source, "element", None)
        if not isinstance(source, sa.Subquery) or not isinstance(select, sa.Select):
            return None
        froms = select.get_final_froms()
        if len(froms) != 1 or not isinstance(froms[0], sa.TableClause):
            return None
        if any(getattr(select, name, True) for name in ("_group_by_clauses", "_having_criteria", "_distinct",
                                                         "_limit_clause", "_offset_clause")):
            return None
        table = froms[0]
        for column in select.selected_columns:
            plain = isinstance(column, sa.ColumnClause) and (
                column.name == "*" or (column.table is table and not isinstance(column, sa.Label)))
            if not plain:
                return None
        return table

    def unique_key(self, scope: Scope) -> str | None:
        """A primary key, unique constraint or unique index of the batch's table on columns among (item, rater,
        pool, question when one is selected): then no rater judged an item twice in a pool, and the duplicate scan
        is skipped. Rows with a NULL in the key are not constrained, but are refused or not read (missing ids,
        pools and questions filtered by equality). None when there is no such key or no table to inspect."""
        import sqlalchemy as sa

        table = self.base_table()
        if table is None:
            return None
        allowed = {scope.item, scope.rater} | ({scope.pool} if scope.pool is not None else set()) | (
            {str(scope.question_column)} if scope.question is not None else set())
        try:
            with self.connect() as connection:
                inspector = sa.inspect(connection)
                name, schema = table.name, getattr(table, "schema", None)
                keys = [("primary key", inspector.get_pk_constraint(name, schema=schema).get("constrained_columns"))]
                keys += [(f"{c.get('name') or 'unique'}", c.get("column_names"))
                         for c in inspector.get_unique_constraints(name, schema=schema)]
                keys += [(f"{i.get('name') or 'unique index'}", i.get("column_names"))
                         for i in inspector.get_indexes(name, schema=schema) if i.get("unique")]
        except sa.exc.SQLAlchemyError:  # no such table to inspect (a temporary name, no rights): scan
            return None
        finally:
            self.queries += 1
        for label, columns in keys:
            if columns and None not in columns and set(columns) <= allowed:
                return f"{label} ({', '.join(columns)})"
        return None

    def item_label_counts(self, scope: Scope, labels: Sequence[Any]) -> tuple[list[Any], np.ndarray]:
        """The item ids and the (pool code, item rank, label rank, count) rows per (pool, item, label).

        ``GROUP BY pool, item, label`` only, with the label's position in ``labels`` (a ``CASE`` over the few
        labels): no ``dense_rank()`` window sorting every group on the server, and no query of the distinct item
        ids — the rows carry them, and the client numbers them in Python's sorted order (integer ids with
        ``numpy.unique``, others with a dictionary). Streamed in chunks of :data:`CHUNK`; the client holds the
        int64 rows and one id per row of a chunk.
        """
        import sqlalchemy as sa

        item = self.col(scope.item)
        pool_code: Any = sa.literal(0)
        if scope.pool is not None:
            pool_code = sa.case(*((self.col(scope.pool) == v, k) for k, v in enumerate(scope.pools)), else_=-1)
        keys = ([self.col(scope.pool)] if scope.pool is not None else []) + [item, self.col(scope.label)]
        coded = len(labels) <= _CASE_LABELS  # else the client numbers the labels too
        label = self.label_code(scope, labels) if coded else self.col(scope.label)
        query = (sa.select(pool_code, item, label, sa.func.count())
                 .select_from(self.source).where(*self.where(scope, "labelled")).group_by(*keys))
        where_label = {v: k for k, v in enumerate(labels)}
        typed = self.dialect != "sqlite"  # SQLite's columns may mix value types: each id is looked at
        chunks: list[np.ndarray] = []
        ids: list[np.ndarray] = []
        with self.connect() as connection:
            result = connection.execute(query.execution_options(stream_results=True, max_row_buffer=CHUNK))
            for part in result.partitions(CHUNK):
                if coded and typed and type(part[0][1]) is int:  # one integer column type: every id is an int
                    block = np.fromiter(chain.from_iterable(part), dtype=np.int64, count=4 * len(part))
                    chunks.append(block.reshape(len(part), 4))
                    ids.append(chunks[-1][:, 1].copy())
                    continue
                pool, values, label_values, count = zip(*part, strict=True)
                ids.append(_ids(values))
                chunks.append(np.column_stack([
                    np.asarray(pool, dtype=np.int64), np.zeros(len(part), dtype=np.int64),
                    np.asarray(label_values, dtype=np.int64) if coded
                    else np.fromiter((where_label[v] for v in label_values), dtype=np.int64, count=len(part)),
                    np.asarray(count, dtype=np.int64)]))
        self.queries += 1
        rows = np.concatenate(chunks) if chunks else np.empty((0, 4), dtype=np.int64)
        self.rows_fetched += len(rows)
        items, rows[:, 1] = _number(ids)
        # a fixed (pool, item, label) order, whatever the server's grouping: the core centres the per-item moments
        # at the first row's value, so the rounding is the same on every run
        return items, rows[np.lexsort((rows[:, 2], rows[:, 1], rows[:, 0]))]

    def label_code(self, scope: Scope, labels: Sequence[Any]) -> Any:
        """The position of the row's label in ``labels`` (-1 for another label)."""
        import sqlalchemy as sa

        return sa.case(*((self.col(scope.label) == v, k) for k, v in enumerate(labels)), else_=-1)

    def first_pool(self, scope: Scope) -> list[Any]:
        """The conditions selecting the ``"labelled"`` rows of the first pool."""
        first = [self.col(str(scope.pool)) == scope.pools[0]] if scope.pool is not None else []
        return [*self.where(scope, "labelled"), *first]

    def rater_contexts(self, scope: Scope, labels: Sequence[Any]) -> tuple[list[Any], np.ndarray]:
        """Judgements of the first pool grouped by (rater, label, the item's counts in both pools): one query.

        Per (pool, item) the label counts (one ``sum(CASE ...)`` column per label), joined to the first pool's
        judgements on the item (the second pool outer-joined), grouped by the rater, the label code and the
        counts.
        """
        import sqlalchemy as sa

        item, q = self.col(scope.item), len(labels)
        code = self.label_code(scope, labels)
        keys = [self.col(scope.pool)] if scope.pool is not None else []
        counts = (sa.select(*keys, item.label("i"),
                            *[sa.func.sum(sa.case((code == k, 1), else_=0)).label(f"n{k}") for k in range(q)])
                  .select_from(self.source).where(*self.where(scope, "labelled")).group_by(*keys, item))
        mine = counts.where(*([self.col(str(scope.pool)) == scope.pools[0]] if keys else [])).subquery("lg_c1")
        judged = (sa.select(self.col(scope.rater).label("r"), code.label("l"), item.label("i"))
                  .select_from(self.source).where(*self.first_pool(scope)).subquery("lg_j"))
        first = [mine.c[f"n{k}"] for k in range(q)]
        join = judged.join(mine, mine.c.i == judged.c.i)
        if keys and len(scope.pools) > 1:
            other = counts.where(self.col(str(scope.pool)) == scope.pools[1]).subquery("lg_c2")
            join = join.outerjoin(other, other.c.i == judged.c.i)
            second: list[Any] = [sa.func.coalesce(other.c[f"n{k}"], 0) for k in range(q)]
        else:
            second = [sa.literal(0) for _ in range(q)]
        inner = (sa.select(judged.c.r, judged.c.l, *[c.label(f"a{k}") for k, c in enumerate(first)],
                           *[c.label(f"b{k}") for k, c in enumerate(second)]).select_from(join).subquery("lg_x"))
        names = [inner.c.l, *[inner.c[f"a{k}"] for k in range(q)], *[inner.c[f"b{k}"] for k in range(q)]]
        rows = self.fetch(sa.select(inner.c.r, inner.c.l, sa.func.count(), *names[1:])
                          .group_by(inner.c.r, *names))
        raters = [row[0] for row in rows]
        table = np.asarray([row[1:] for row in rows], dtype=np.int64).reshape(len(rows), 2 + 2 * q)
        return raters, table

    def rater_pairs(self, scope: Scope, labels: Sequence[Any]) -> tuple[list[Any], list[Any], np.ndarray]:
        """Co-rating pairs of the first pool's raters: a self-join of its judgements on the item (one query)."""
        import sqlalchemy as sa

        judged = (sa.select(self.col(scope.rater).label("r"), self.label_code(scope, labels).label("l"),
                            self.col(scope.item).label("i"))
                  .select_from(self.source).where(*self.first_pool(scope)))
        a, b = judged.subquery("lg_a"), judged.subquery("lg_b")
        rows = self.fetch(sa.select(a.c.r, b.c.r, sa.func.count(),
                                    sa.func.sum(sa.case((a.c.l == b.c.l, 1), else_=0)))
                          .select_from(a.join(b, sa.and_(a.c.i == b.c.i, a.c.r < b.c.r))).group_by(a.c.r, b.c.r))
        table = np.asarray([row[2:] for row in rows], dtype=np.int64).reshape(len(rows), 2)
        return [row[0] for row in rows], [row[1] for row in rows], table



def _ids(values: Sequence[Any]) -> np.ndarray:
    """One chunk's item ids: int64 when every one is an integer, else objects."""
    if all(type(v) is int for v in values):
        return np.asarray(values, dtype=np.int64)
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _number(chunks: list[np.ndarray]) -> tuple[list[Any], np.ndarray]:
    """The distinct ids in Python's sorted order and each row's position among them."""
    if not chunks:
        return [], np.zeros(0, dtype=np.int64)
    if all(c.dtype == np.int64 for c in chunks):
        unique, inverse = np.unique(np.concatenate(chunks), return_inverse=True)
        return unique.tolist(), inverse.astype(np.int64).ravel()
    values = np.concatenate([c.astype(object) for c in chunks])
    items = sorted_values(dict.fromkeys(values.tolist()))
    where = {v: k for k, v in enumerate(items)}
    return items, np.fromiter((where[v] for v in values.tolist()), dtype=np.int64, count=len(values))
