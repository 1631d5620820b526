"""The metric providers' plan on a SQL engine: the database aggregates, the core finishes.

GX's ``SqlAlchemyExecutionEngine`` hands a table metric the batch as a
selectable, its row condition applied. Aggregate queries run over it,
restricted to the question and to the crowd / trusted pools:

1. the tallies: per pool, the rows and the rows without an item id, a rater id or
   a label (what the pandas path checks: unknown pools, missing ids, pools without
   a label; the labels left out are reported as ``n_dropped_missing``);
2. the duplicate judgements: per (pool, item), ``count(*)`` minus the distinct
   raters, summed (one row); only when it is positive, one example
   (pool, item, rater) group;
3. the item ids and the labels, each once, in the database's order;
4. the item x category counts: one row (pool code, item rank, label rank,
   count) per (pool, item, label), the ranks numbered by the database with
   ``dense_rank()``, streamed through a server-side cursor into one int64 array.

The expectations of one validation that agree on the parameters deciding the
aggregates (:data:`AGGREGATE_KEYS`) share one run of these queries: GX resolves
the metric ``labelgate.table.sql_pools`` once and hands it to each of them.

The counts are the sufficient statistic of every metric that needs no rater
identity. :meth:`labelgate.Ratings.from_aggregates` builds each pool from them,
on one item index shared by the pools, without one entry per judgement, and the
same ``pools_*`` function as on pandas computes the metric, interval included.
The judgements never leave the database; the result carries ``sql``: queries
run, rows fetched, batch rows aggregated.

**Item order.** The item bootstrap draws items by position. The pandas path
orders items by their first row in the DataFrame; a SQL table has no row order,
so here items are in sorted id order (sorted in Python, not by the database's
collation, which differs between servers). The same ``seed`` therefore gives
the same interval as the pandas path on the same rows sorted by item id
(``df.sort_values(item_column, kind="stable")``); point values do not depend on
the order.

**Not from aggregates.** The labeler ICC (variance components of the crossed
item x rater design, bootstrapped over items and raters) and the IRRs with
rater-specific chance agreement (Conger's κ, Janson–Olsson ι) need to know which
rater gave each label: their providers refuse a SQL batch with a
:class:`~labelgate.errors.DesignError` saying so.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np

from labelgate.core.ratings import Ratings
from labelgate.errors import DesignError, InputError, LabelGateError, ParameterError, Reason
from labelgate.gx._pools import (
    Pools,
    missing_pool,
    missing_pool_column,
    missing_question,
    missing_question_column,
    pool_coverage,
)

#: Metrics that need every judgement's rater, and why (their SQL providers refuse the batch).
NEEDS_RATERS: dict[str, str] = {
    "labelgate.table.icc_gap": "the labeler ICC and the item ICC are variance components of the crossed "
                               "item x rater design, bootstrapped over items and raters",
}
#: IRRs whose chance agreement uses each rater's own label distribution.
IRR_NEEDS_RATERS: tuple[str, ...] = ("conger_kappa", "janson_olsson_iota")

# How many distinct values (questions, pools) an error message may fetch (it lists 20 of them).
_VALUES_IN_MESSAGE = 1000
# Rows per chunk of the streamed count rows.
_CHUNK = 50_000


def refusal(metric_name: str, kw: dict[str, Any]) -> str | None:
    """Why the metric cannot be computed from aggregates (None when it can)."""
    if metric_name in NEEDS_RATERS:
        return NEEDS_RATERS[metric_name]
    irr = kw.get("irr")
    if irr in IRR_NEEDS_RATERS:
        return f"irr={irr!r} computes chance agreement from each rater's own label distribution"
    return None


#: Parameters that decide what the database aggregates: expectations of one batch that agree on them share one fetch.
AGGREGATE_KEYS: tuple[str, ...] = ("item_column", "rater_column", "label_column", "pool_column", "question_column",
                                   "question", "crowd_pool", "trusted_pool", "level", "categories", "duplicates")


@dataclass
class Aggregated:
    """The pools a batch's aggregates built (or the error the batch raised), and what the queries fetched.

    The value of the shared metric ``labelgate.table.sql_pools``: GX resolves it once per batch and parameters
    (:data:`AGGREGATE_KEYS`) and hands it to every LabelGate metric of the validation that needs it.
    """

    pools: Pools | None
    error: LabelGateError | None
    report: dict[str, Any]
    #: Whether ``error`` was raised by the checks the pandas path makes before the pool checks (question, columns,
    #: crowd pool) or after them (ids, labels, duplicates, categories).
    early: bool = False
    #: The batch's columns, and the error of a missing trusted pool (raised by the metrics that compare two pools).
    columns: list[str] | None = None
    trusted_error: LabelGateError | None = None
    pool_column: str | None = None

    def pools_for(self, need_trusted: bool) -> Pools:
        """The pools, or the error the pandas path raises for a metric that does (not) need the trusted pool.

        Raises
        ------
        ParameterError, InputError
            In the pandas path's order: the question and the columns, the pool column and the pools, then the
            rows.
        """
        if self.error is not None and (self.early or not need_trusted):
            raise self.error
        if need_trusted and self.columns is not None and self.pool_column is None:
            raise missing_pool_column(None, self.columns)
        if need_trusted and self.trusted_error is not None:
            raise self.trusted_error
        if self.error is not None:
            raise self.error
        if self.pools is None:  # unreachable: the plan returns pools or keeps its error
            raise InputError("The SQL batch's aggregates built no pools.", Reason.EMPTY_INPUT)
        return self.pools


def sql_pools(engine: Any, selectable: Any, kw: dict[str, Any]) -> Aggregated:
    """Run the aggregate plan over a SQL batch; a LabelGate error is kept (each dependent metric raises it).

    The plan runs once for every metric of the batch, the single-pool ones (SPA) and those comparing two pools: it
    builds the trusted pool when the batch has it, and keeps the error of a missing one for the latter.
    """
    plan = _Plan(engine, selectable, kw)
    pools, error = None, None
    try:
        pools = plan.pools(need_trusted=False)
    except LabelGateError as exc:
        error = exc
    report = {"dialect": str(getattr(engine, "dialect_name", "")), "queries": plan.queries,
              "rows_fetched": plan.rows_fetched, "rows_aggregated": plan.rows_aggregated,
              "fetch_id": uuid.uuid4().hex[:12]}
    return Aggregated(pools, error, report, early=plan.early, columns=plan.batch_columns,
                      trusted_error=plan.trusted_error, pool_column=plan.pool_name)


def refuse(metric_name: str, kw: dict[str, Any]) -> None:
    """Raise the :class:`~labelgate.errors.DesignError` of a metric that needs rater identity."""
    why = refusal(metric_name, kw)
    if why is not None:
        raise DesignError(f"{metric_name} cannot run on a SQL batch: {why}, which needs to know which rater gave "
                          "each label, and the database returns item x category counts, not judgements. Validate "
                          "this expectation on a pandas batch (e.g. the rows read with read_sql)"
                          + (", or use irr='krippendorff_alpha', 'fleiss_kappa' or 'gwet_ac'."
                             if kw.get("irr") in IRR_NEEDS_RATERS else "."),
                          Reason.INCOMPATIBLE_RATINGS, engine="sql")


def sql_metric(metric_name: str, finish: Callable[[Pools, dict[str, Any]], dict[str, Any]],
               aggregated: Aggregated, kw: dict[str, Any], *, need_trusted: bool) -> dict[str, Any]:
    """The metric of a SQL batch: ``finish`` (a ``pools_*``) on the pools built from the database's aggregates.

    ``details.sql`` reports the shared fetch: ``fetch_id`` is the same for every expectation that used it.

    Raises
    ------
    DesignError
        For a metric that needs rater identity (:data:`NEEDS_RATERS`, :data:`IRR_NEEDS_RATERS`).
    ParameterError, InputError
        As the pandas path: a parameter naming what the batch does not hold, missing ids, duplicate
        judgements, labels outside ``categories``.
    """
    refuse(metric_name, kw)
    out = finish(aggregated.pools_for(need_trusted), kw)
    out["sql"] = dict(aggregated.report)
    return out


class _Plan:
    """The aggregate queries over one batch selectable, counting what they fetch."""

    def __init__(self, engine: Any, selectable: Any, kw: dict[str, Any]) -> None:
        import sqlalchemy as sa

        self.engine, self.kw = engine, kw
        # A SELECT (a row condition, a query asset) becomes a subquery; a table is used as it is.
        self.source = selectable.subquery() if hasattr(selectable, "subquery") else selectable
        self.queries = self.rows_fetched = self.rows_aggregated = 0
        self.early = True  # until the crowd pool is found: errors the pandas path raises before the pool checks
        self.batch_columns: list[str] | None = None
        self.trusted_error: LabelGateError | None = None
        self.item: Any = sa.column(kw["item_column"])
        self.rater: Any = sa.column(kw["rater_column"])
        self.label: Any = sa.column(kw["label_column"])
        self.pool_name: str | None = kw.get("pool_column")
        self.pool: Any = sa.column(self.pool_name) if self.pool_name is not None else None
        self.where: list[Any] = []  # the question
        self.pool_values = [v for v in (kw.get("crowd_pool"), kw.get("trusted_pool")) if v is not None]

    def fetch(self, query: Any) -> list[tuple[Any, ...]]:
        # plain tuples: pandas reads them ten times faster than SQLAlchemy's Row objects
        rows = [tuple(r) for r in self.engine.execute_query(query).fetchall()]
        self.queries += 1
        self.rows_fetched += len(rows)
        return rows

    def columns(self) -> list[str]:
        """The batch's column names (a query that returns no row)."""
        import sqlalchemy as sa

        result = self.engine.execute_query(sa.select(sa.text("*")).select_from(self.source).limit(0))
        self.queries += 1
        return [str(c) for c in result.keys()]

    def stream(self, query: Any, width: int) -> np.ndarray:
        """The integer rows of ``query`` as an (n, width) int64 array, read in chunks through a streaming cursor.

        A server-side cursor where the driver has one (``stream_results``: PostgreSQL's named cursors), so the
        client holds one chunk of Python rows at a time and the numpy array of all rows, never a DataFrame.
        """
        chunks: list[np.ndarray] = []
        with self.engine.get_connection() as connection:
            result = connection.execution_options(stream_results=True, max_row_buffer=_CHUNK).execute(query)
            for part in result.partitions(_CHUNK):
                chunks.append(np.fromiter(chain.from_iterable(part), dtype=np.int64, count=len(part) * width)
                              .reshape(len(part), width))
        self.queries += 1
        rows = np.concatenate(chunks) if chunks else np.empty((0, width), dtype=np.int64)
        self.rows_fetched += len(rows)
        return rows

    # ------------------------------------------------------------ the plan
    def pools(self, *, need_trusted: bool) -> Pools:
        """Crowd and trusted :class:`~labelgate.Ratings` on one shared item index, from the aggregates."""
        import sqlalchemy as sa

        kw = self.kw
        columns = self.batch_columns = self.columns()
        question, name = kw.get("question"), kw.get("question_column")
        if question is not None:
            if name not in columns:
                raise missing_question_column(question, name, columns)
            self.where = [sa.column(name) == question]
        if self.pool_name is None and need_trusted:
            raise missing_pool_column(None, columns)
        if self.pool_name is not None and self.pool_name not in columns:
            raise missing_pool_column(self.pool_name, columns)
        for role, column in (("item", kw["item_column"]), ("rater", kw["rater_column"]),
                             ("value", kw["label_column"])):
            if column not in columns:
                raise InputError(f"Column {column!r} (the {role} column) is missing; the data has columns "
                                 f"{sorted(map(str, columns))}.", Reason.MISSING_COLUMN, column=column)
        tallies = self._tallies()
        selected = self._check_pools(tallies, need_trusted)
        self._check_duplicates()
        return self._build(tallies, selected)

    def _in_pools(self) -> list[Any]:
        """The question and, with a pool column, the crowd and trusted pools."""
        return self.where + ([self.pool.in_(self.pool_values)] if self.pool is not None else [])

    def _tallies(self) -> dict[Any, tuple[int, int, int, int]]:
        """Per pool present: (rows, rows without an item id, without a rater id, without a label)."""
        import sqlalchemy as sa

        def nulls(column: Any) -> Any:
            return sa.func.coalesce(sa.func.sum(sa.case((column.is_(None), 1), else_=0)), 0)

        keys = [self.pool] if self.pool is not None else []
        rows = self.fetch(sa.select(*keys, sa.func.count(), nulls(self.item), nulls(self.rater), nulls(self.label))
                          .select_from(self.source).where(*self._in_pools()).group_by(*keys))
        tallies = {(row[0] if keys else None): tuple(int(v) for v in row[len(keys):]) for row in rows}
        tallies = {pool: t for pool, t in tallies.items() if t[0] > 0}  # no pool column: one row, maybe 0
        self.rows_aggregated = sum(t[0] for t in tallies.values())
        return tallies  # type: ignore[return-value]

    def _check_pools(self, tallies: dict[Any, tuple[int, int, int, int]], need_trusted: bool) -> list[Any]:
        """The pools to build (crowd first, then trusted when in the batch), after the pandas path's checks."""
        kw = self.kw
        if self.pool is None:
            if not tallies:
                raise self._no_rows()
            selected = [None]
        else:
            selected = [v for v in self.pool_values if v in tallies]
            for name in ("crowd_pool", "trusted_pool") if need_trusted else ("crowd_pool",):
                if kw.get(name) not in tallies:
                    raise self._no_rows(name)
            if kw.get("trusted_pool") not in tallies:  # kept for the metrics that compare two pools
                self.trusted_error = self._no_rows("trusted_pool")
        self.early = False
        for column, k in ((kw["item_column"], 1), (kw["rater_column"], 2)):
            n = sum(t[k] for t in tallies.values())
            if n:
                raise InputError(f"Column {column!r} has a missing id in {n} row(s) of the batch.",
                                 Reason.MISSING_ID, column=column)
        for pool in selected:
            if tallies[pool][0] == tallies[pool][3]:
                raise InputError(f"Column {kw['label_column']!r} has no non-missing value"
                                 + (f" in pool {pool!r}." if pool is not None else "."), Reason.EMPTY_INPUT)
        return selected

    def _no_rows(self, name: str | None = None) -> LabelGateError:
        """The error when the question or the pool ``name`` matches no row (queries run on this path only)."""
        import sqlalchemy as sa

        kw = self.kw
        if kw.get("question") is not None:
            column: Any = sa.column(kw["question_column"])
            if not self.fetch(sa.select(sa.func.count()).select_from(self.source).where(*self.where))[0][0]:
                values = self.fetch(sa.select(column).select_from(self.source).where(column.is_not(None))
                                    .distinct().limit(_VALUES_IN_MESSAGE))
                return missing_question(kw["question"], kw["question_column"], [v[0] for v in values])
        if name is None:
            return InputError("The ratings table is empty (0 rows).", Reason.EMPTY_INPUT)
        pools = self.fetch(sa.select(self.pool).select_from(self.source).where(*self.where, self.pool.is_not(None))
                           .distinct().limit(_VALUES_IN_MESSAGE))
        return missing_pool(str(self.pool_name), name, kw.get(name), [v[0] for v in pools])

    def _check_duplicates(self) -> None:
        """Refuse a rater's repeated judgements of an item: a SQL table has no row order to pick one by.

        Per (pool, item), ``count(*) - count(DISTINCT rater)`` is the number of repeated judgements (a sort within
        each item, cheaper than grouping every (pool, item, rater) pair); only when it finds some does a second
        query fetch one example.
        """
        import sqlalchemy as sa

        items = ([self.pool] if self.pool is not None else []) + [self.item]
        repeated = sa.func.count() - sa.func.count(sa.distinct(self.rater))
        per_item = (sa.select(repeated.label("extra")).select_from(self.source)
                    .where(*self._in_pools(), self.label.is_not(None)).group_by(*items).having(repeated > 0).subquery())
        total = self.fetch(sa.select(sa.func.sum(per_item.c.extra)).select_from(per_item))[0][0]
        if not total:
            return
        keys = ([self.pool.label("pool")] if self.pool is not None else []) + [self.item.label("item"),
                                                                                 self.rater.label("rater")]
        hit = self.fetch(sa.select(*keys).select_from(self.source).where(*self._in_pools(), self.label.is_not(None))
                         .group_by(*keys).having(sa.func.count() > 1).limit(1))
        item, rater, extra = hit[0][-2], hit[0][-1], int(total)
        policy = self.kw.get("duplicates")
        if policy == "error":
            raise InputError(f"Rater {rater!r} judged item {item!r} more than once ({int(extra)} duplicate "
                             "judgement(s) in all). On a SQL batch remove the duplicates (e.g. a view keeping one "
                             "judgement per item and rater); duplicates='first' / 'last' need a row order.",
                             Reason.DUPLICATE_JUDGEMENT, item=item, rater=rater)
        raise ParameterError(f"duplicates={policy!r} keeps one of a rater's judgements of an item by row order, "
                             f"which a SQL table does not have (rater {rater!r} judged item {item!r} more than "
                             f"once; {int(extra)} duplicate judgement(s) in all). Remove the duplicates in the "
                             "database (e.g. a view), or validate on a pandas batch.",
                             parameter="duplicates", value=policy)

    def _labelled(self) -> list[Any]:
        """The judgements that enter the statistics: in the question and pools, with an item id and a label."""
        return [*self._in_pools(), self.item.is_not(None), self.label.is_not(None)]

    def _distinct(self, column: Any) -> list[Any]:
        """The distinct values of ``column`` over the labelled judgements, in the database's order."""
        import sqlalchemy as sa

        query = sa.select(column).select_from(self.source).where(*self._labelled()).group_by(column).order_by(column)
        return [row[0] for row in self.fetch(query)]

    def _build(self, tallies: dict[Any, tuple[int, int, int, int]], selected: list[Any]) -> Pools:
        """The pools from the database's (pool, item rank, label rank, count) rows.

        The database numbers items and labels with ``dense_rank()`` in its own order; their ids come once each
        (:meth:`_distinct`, same order) and Python re-orders the codes when its sort differs from the database's
        collation, so items are in sorted id order whatever the server.
        """
        import sqlalchemy as sa

        item_ids, db_labels = self._distinct(self.item), self._distinct(self.label)
        categories = self._categories(db_labels)
        pool_code: Any = (sa.case((self.pool == self.pool_values[0], 0), else_=1) if self.pool is not None
                          else sa.literal(0))
        keys = ([self.pool] if self.pool is not None else []) + [self.item, self.label]
        rows = self.stream(sa.select(pool_code, sa.func.dense_rank().over(order_by=self.item) - 1,
                                     sa.func.dense_rank().over(order_by=self.label) - 1, sa.func.count())
                           .select_from(self.source).where(*self._labelled()).group_by(*keys), 4)
        position = {c: k for k, c in enumerate(categories)}
        category_of_rank = np.asarray([position[v] for v in db_labels], dtype=np.int64)
        items = _sorted(item_ids)
        item_codes = rows[:, 1]
        if items != item_ids:  # Python's order differs from the database's collation: re-number
            where = {v: k for k, v in enumerate(items)}
            item_codes = np.asarray([where[v] for v in item_ids], dtype=np.int64)[item_codes]
        item_labels = np.empty(len(items), dtype=object)  # one object for every pool: items align by code
        item_labels[:] = items
        pools: list[Ratings] = []
        for pool in selected:
            mine = rows[:, 0] == (self.pool_values.index(pool) if pool is not None else 0)
            pools.append(Ratings.from_aggregates(item_codes[mine], category_of_rank[rows[mine, 2]], rows[mine, 3],
                                                 item_labels=item_labels, categories=categories,
                                                 level=self.kw["level"], n_dropped_missing=tallies[pool][3]))
        crowd, trusted = pools[0], (pools[1] if len(pools) > 1 else None)
        return Pools(crowd, trusted, pool_coverage(crowd, trusted))

    def _categories(self, labels: list[Any]) -> list[Any]:
        """The given ``categories``, or the sorted labels of the batch; a label outside the list is an error."""
        name, level = self.kw["label_column"], self.kw["level"]
        observed = list(labels)
        if level in ("interval", "ratio"):
            bad = next((v for v in observed if isinstance(v, (str, bytes))), None)
            if bad is not None:
                raise InputError(f"Column {name!r} has the non-numeric value {bad!r}, but level={level!r} needs "
                                 "numbers.", Reason.NON_NUMERIC_VALUE, column=name, value=bad)
        given = self.kw.get("categories")
        if given is None:
            return _sorted(observed, ordinal=level == "ordinal", column=name)
        allowed = set(given)
        unknown = _sorted(v for v in observed if v not in allowed)
        if unknown:
            raise InputError(f"Column {name!r} has value {unknown[0]!r}, which is not one of the categories "
                             f"{list(given)}.", Reason.UNKNOWN_CATEGORY, column=name, value=unknown[0])
        return list(given)


def _sorted(values: Iterable[Any], *, ordinal: bool = False, column: str = "") -> list[Any]:
    """Sorted distinct values; mixed types (a SQLite column may hold them) by type name, then text."""
    unique = list(dict.fromkeys(values))
    try:
        return sorted(unique)
    except TypeError:
        if ordinal:
            raise InputError(f"Column {column!r} mixes value types that cannot be ordered; pass an explicit "
                             "ordered 'categories' list for an ordinal level.", Reason.UNSORTABLE_CATEGORIES,
                             column=column) from None
        return sorted(unique, key=lambda v: (type(v).__name__, str(v)))
