"""The :class:`~labelgate.sqlagg.backend.AggregateBackend` of a SQLAlchemy selectable (any SQL database).

The queries are SQLAlchemy Core over the batch selectable (a table, or a SELECT — a row condition, a query —
used as a subquery). Two of them read every row of the batch: the tallies, grouped by pool and label (which give
the labels too), and the item x category counts — one row per item with a column per (pool, label) when those are
few (:data:`WIDE_CELLS`), else one row per (pool, item, label); no window, no query of the distinct item ids (the
client numbers the ids the rows carry). On PostgreSQL through psycopg 3 the integer rows come through a binary
``COPY`` (:mod:`labelgate.sqlagg.pgcopy`: planned with parallel workers, parsed by numpy; the counts with integer
item ids as at most 256 rows of arrays, :mod:`labelgate.sqlagg.pgarrays`); elsewhere through a
streaming cursor (``stream_results``) in chunks of :data:`CHUNK`. The client holds one chunk at a time and the
int64 array of the rows. SQLAlchemy is imported lazily.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from itertools import chain
from typing import Any

import numpy as np

from labelgate.core.categories import sorted_distinct
from labelgate.sqlagg.backend import Scope, Within
from labelgate.sqlagg.pgarrays import copy_int64_arrays
from labelgate.sqlagg.pgcopy import copies, copy_int64
from labelgate.sqlagg.sql_raters import RaterQueries
from labelgate.sqlagg.values import INTEGER_OIDS, OTHER_OIDS, bound, holds_nan, missing_label

#: Rows per chunk of the streamed count rows.
CHUNK = 50_000
#: At most this many pools x labels: the counts come as one row per item, a column per (pool, label).
WIDE_CELLS = 16
#: Labels numbered by the database with a ``CASE`` (more: numbered on the client from their values).
_CASE_LABELS = 256


class SqlAlchemyBackend(RaterQueries):
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
        #: The scope of the last :meth:`tallies` and the labels of its ``"labelled"`` rows.
        self.labelled: tuple[Scope, list[Any]] | None = None
        #: PostgreSQL type OIDs of the batch's columns described so far (:meth:`type_codes`), by name.
        self.types: dict[str, Any] = {}

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


    def equals(self, name: str, value: Any) -> Any:
        """``column = value``, the value bound without a type cast (:func:`~labelgate.sqlagg.values.bound`): a
        PostgreSQL ENUM column compares with it."""
        return self.col(name) == bound(value)
    def where(self, scope: Scope, within: Within) -> list[Any]:
        """The conditions selecting the rows ``within``."""
        out: list[Any] = []
        if within == "all":
            return out
        if scope.question is not None:
            out.append(self.equals(str(scope.question_column), scope.question))
        if within == "question":
            return out
        if scope.pool is not None:
            out.append(self.col(scope.pool).in_([bound(v) for v in scope.pools]))
        if within == "labelled":
            out += [self.col(scope.item).is_not(None), *self.has_label(scope)]
        return out

    def has_label(self, scope: Scope) -> list[Any]:
        """The conditions of a row with a label: not NULL, and not NaN in a column whose type holds NaN.

        pandas reads a NaN label as missing; a database does not (PostgreSQL groups NaN as a value, equal to
        itself), so the rows that enter the statistics and the duplicate check also exclude ``label = 'NaN'`` when
        the label column's type can hold a NaN (:meth:`holds_nan`; the literal is read as the column's NaN).
        """
        import sqlalchemy as sa

        label = self.col(scope.label)
        return [label.is_not(None), *([label != sa.literal_column("'NaN'")] if self.holds_nan(scope) else [])]

    def holds_nan(self, scope: Scope) -> bool:
        """Whether the label column's type can hold a NaN (:func:`~labelgate.sqlagg.values.holds_nan`; PostgreSQL:
        the type read with the item column's, :meth:`type_codes`)."""
        return holds_nan(self.dialect, lambda: self.type_codes(scope.item, scope.label)[1])

    def type_codes(self, *names: str) -> list[Any]:
        """PostgreSQL: the type OIDs of columns of the batch, from one ``LIMIT 0`` query for those not described
        yet (the executor stops at the limit before reading a row: a batch that is a sorted or grouped query is not
        evaluated for it); None for a column the driver does not describe."""
        import sqlalchemy as sa

        missing = [name for name in dict.fromkeys(names) if name not in self.types]
        if missing:
            result = self.execute(sa.select(*map(self.col, missing)).select_from(self.source).limit(0))
            self.queries += 1
            description = list(getattr(getattr(result, "cursor", None), "description", None) or [])
            result.close()
            for k, name in enumerate(missing):
                self.types[name] = getattr(description[k], "type_code", None) if k < len(description) else None
        return [self.types[name] for name in names]

    def stream(self, query: Any, width: int) -> np.ndarray:
        """The integer rows of ``query`` (none NULL) as an (n, width) int64 array: through a binary ``COPY`` on
        PostgreSQL with psycopg (:func:`~labelgate.sqlagg.pgcopy.copy_int64`), else a streaming cursor read in
        chunks of :data:`CHUNK`."""
        chunks: list[np.ndarray] = []
        with self.connect() as connection:
            if copies(connection):
                rows = copy_int64(connection, query, width)
                self.queries += 1
                self.rows_fetched += len(rows)
                return rows
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
        """Per pool: (rows, rows without an item id, without a rater id, without a label).

        One scan grouped by pool and label (``count(*)``, ``count(item)``, ``count(rater)`` per group) gives the
        tallies and, in the same pass, the labels of the ``"labelled"`` rows (a label whose group has an item id),
        which :meth:`distinct` then returns without a second scan of the batch.
        """
        import sqlalchemy as sa

        label = self.col(scope.label)
        keys = ([self.col(scope.pool)] if scope.pool is not None else []) + [label]
        rows = self.fetch(sa.select(*keys, sa.func.count(), sa.func.count(self.col(scope.item)),
                                    sa.func.count(self.col(scope.rater)))
                          .select_from(self.source).where(*self.where(scope, "pools")).group_by(*keys)
                          .order_by(label))
        tallies: dict[Any, list[int]] = {}
        labelled: dict[Any, None] = {}
        for row in rows:
            pool, value, (n, items, raters) = (row[0] if scope.pool is not None else None), row[-4], row[-3:]
            t = tallies.setdefault(pool, [0, 0, 0, 0])
            t[0] += n
            t[1] += n - items
            t[2] += n - raters
            if missing_label(value, self.dialect):
                t[3] += n
            elif items:
                labelled[value] = None
        self.labelled = (scope, list(labelled))
        return {pool: (t[0], t[1], t[2], t[3]) for pool, t in tallies.items() if t[0] > 0}

    def count(self, scope: Scope, within: Within) -> int:
        """The number of rows ``within``."""
        import sqlalchemy as sa

        return int(self.fetch(sa.select(sa.func.count()).select_from(self.source)
                              .where(*self.where(scope, within)))[0][0])

    def distinct(self, scope: Scope, column: str, within: Within, limit: int | None = None) -> list[Any]:
        """The distinct non-missing values of ``column``, ascending in the database's order (the labels of the
        ``"labelled"`` rows as :meth:`tallies` found them, when it ran on ``scope``)."""
        import sqlalchemy as sa

        if (column == scope.label and within == "labelled" and limit is None and self.labelled is not None
                and self.labelled[0] == scope):
            return list(self.labelled[1])
        c = self.col(column)
        query = (sa.select(c).select_from(self.source).where(*self.where(scope, within), c.is_not(None))
                 .group_by(c).order_by(c))
        values = [row[0] for row in self.fetch(query if limit is None else query.limit(limit))]
        if column == scope.label:  # a NaN is a missing label, as on pandas
            values = [v for v in values if not missing_label(v, self.dialect)]
        return values

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
        labelled = [*self.where(scope, "pools"), *self.has_label(scope)]
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

        One row per item when the pools x labels are few (at most :data:`WIDE_CELLS`): ``GROUP BY item`` with one
        ``count(CASE WHEN pool = p AND label = v THEN 1 END)`` column per pool and label; else one row per (pool,
        item, label): ``GROUP BY pool, item, label`` with the label's position (a ``CASE`` over the labels). No
        window sorts the groups on the server and no query of the distinct item ids runs: the rows carry them,
        and the client numbers them in Python's sorted order (integer ids with ``numpy.unique``, others with a
        dictionary). On PostgreSQL through psycopg, with integer item ids and coded labels, the rows come through
        a binary ``COPY`` as at most 256 rows of arrays (:func:`~labelgate.sqlagg.pgarrays.copy_int64_arrays`:
        grouped by the item id modulo 256 over the query's own plan, parallel workers allowed, parsed by numpy);
        elsewhere through a streaming cursor in chunks of :data:`CHUNK`. The client holds the int64 rows
        and one id per row of a chunk.
        """
        import sqlalchemy as sa

        item, label = self.col(scope.item), self.col(scope.label)
        pools: tuple[Any, ...] = scope.pools if scope.pool is not None else (None,)
        coded = len(labels) <= _CASE_LABELS  # else the client numbers the labels too
        wide = coded and len(pools) * len(labels) <= WIDE_CELLS
        if wide:
            def cell(pool: Any, v: Any) -> Any:
                match = [self.equals(str(scope.pool), pool)] if pool is not None else []
                return sa.func.count(sa.case((sa.and_(*match, self.equals(scope.label, v)), 1)))

            query = (sa.select(item, *[cell(p, v) for p in pools for v in labels]).select_from(self.source)
                     .where(*self.where(scope, "labelled")).group_by(item))
        else:
            pool_code: Any = sa.literal(0)
            if scope.pool is not None:
                pool_code = sa.case(*((self.equals(scope.pool, v), k) for k, v in enumerate(scope.pools)),
                                    else_=-1)
            keys = ([self.col(scope.pool)] if scope.pool is not None else []) + [item, label]
            query = (sa.select(pool_code, item, self.label_code(scope, labels) if coded else label, sa.func.count())
                     .select_from(self.source).where(*self.where(scope, "labelled")).group_by(*keys))
        ids, rows = self.id_rows(scope, query, coded, labels)
        items, codes = _number(ids)
        if wide:
            return items, _long(rows, codes, len(pools), len(labels))
        rows = np.column_stack([rows[:, 0], codes, rows[:, 1:]])
        # a fixed (pool, item, label) order, whatever the server's grouping: the core centres the per-item moments
        # at the first row's value, so the rounding is the same on every run
        return items, rows[np.lexsort((rows[:, 2], rows[:, 1], rows[:, 0]))]

    def id_rows(self, scope: Scope, query: Any, coded: bool, labels: Sequence[Any]) -> tuple[list[np.ndarray],
                                                                                             np.ndarray]:
        """The item ids (the column ``scope.item`` of ``query``'s rows, in chunks) and the other columns as int64
        (labels numbered by their position in ``labels`` when not ``coded``)."""
        width = len(query.selected_columns)
        at = next(k for k, c in enumerate(query.selected_columns) if getattr(c, "name", None) == scope.item)
        with self.connect() as connection:
            if coded and copies(connection) and self.integer_ids(scope):
                rows = copy_int64_arrays(connection, query, width, at)  # a few messages, not one per item
                self.queries += 1
                self.rows_fetched += len(rows)
                return [rows[:, at].copy()], np.delete(rows, at, axis=1)
            where_label = {v: k for k, v in enumerate(labels)}
            chunks: list[np.ndarray] = []
            ids: list[np.ndarray] = []
            result = connection.execute(query.execution_options(stream_results=True, max_row_buffer=CHUNK))
            for part in result.partitions(CHUNK):
                columns = list(zip(*part, strict=True))
                ids.append(_ids(columns.pop(at)))
                if not coded:  # the long rows' label: numbered here (-1: not found by the tallies, refused later)
                    columns[1] = tuple(where_label.get(v, -1) for v in columns[1])
                chunks.append(np.asarray(columns, dtype=np.int64).T.reshape(len(part), width - 1))
        self.queries += 1
        rows = np.concatenate(chunks) if chunks else np.empty((0, width - 1), dtype=np.int64)
        self.rows_fetched += len(rows)
        return ids, rows

    def integer_ids(self, scope: Scope) -> bool:
        """Whether the item column holds integers (a PostgreSQL column has one type).

        The type comes from the columns a ``LIMIT 0`` query describes (:meth:`type_codes`, one query for the item
        and label columns): the integer types (and ``oid``), which psycopg returns as Python ints, or a text,
        numeric or float type. Any other type (an extension's type) is decided by one id looked at, as psycopg
        returns it (``LIMIT 1``).
        """
        import sqlalchemy as sa

        type_code = self.type_codes(scope.item, scope.label)[0]
        if type_code in INTEGER_OIDS:
            return True
        if type_code in OTHER_OIDS:
            return False
        item = self.col(scope.item)
        first = self.fetch(sa.select(item).select_from(self.source).where(*self.where(scope, "labelled")).limit(1))
        return bool(first) and type(first[0][0]) is int

    def label_code(self, scope: Scope, labels: Sequence[Any]) -> Any:
        """The position of the row's label in ``labels`` (-1 for another label)."""
        import sqlalchemy as sa

        return sa.case(*((self.equals(scope.label, v), k) for k, v in enumerate(labels)), else_=-1)



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
    items = sorted_distinct(dict.fromkeys(values.tolist()))
    where = {v: k for k, v in enumerate(items)}
    return items, np.fromiter((where[v] for v in values.tolist()), dtype=np.int64, count=len(values))


def _long(wide: np.ndarray, codes: np.ndarray, n_pools: int, n_labels: int) -> np.ndarray:
    """The (pool code, item code, label rank, count) rows of the non-zero cells of one row per item (``codes``:
    each row's item code; the columns pool-major, then label), in (pool, item, label) order."""
    order = np.argsort(codes, kind="stable")
    cells, item_code = wide[order], codes[order]
    parts = [np.empty((0, 4), dtype=np.int64)]
    for p in range(n_pools):
        block = cells[:, p * n_labels:(p + 1) * n_labels]
        i, k = np.nonzero(block)  # row-major: by item, then label
        parts.append(np.column_stack([np.full(len(i), p, dtype=np.int64), item_code[i], k, block[i, k]]))
    return np.concatenate(parts)

