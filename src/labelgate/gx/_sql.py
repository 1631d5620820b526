"""The metric providers' plan on a SQL engine: the database aggregates, the core finishes.

GX's ``SqlAlchemyExecutionEngine`` hands a table metric the batch as a
selectable, its row condition applied. Two aggregate queries run over it,
restricted to the question and to the crowd / trusted pools:

1. the item x category counts: judgements per (pool, item, label), missing items
   and labels included, with the number of rows without a rater (what the pandas
   path checks: unknown pools, missing ids, pools without a label);
2. the duplicate judgements: (pool, item, rater) groups holding two or more
   labels (one example row and the total come back).

The counts are the sufficient statistic of every metric that needs no rater
identity. :meth:`labelgate.Ratings.from_counts` rebuilds each pool from them, on
one item index shared by the pools, and the same ``pools_*`` function as on
pandas computes the metric, interval included. The judgements never leave the
database; the result carries ``sql``: queries run, rows fetched, batch rows
aggregated.

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

from collections.abc import Callable, Iterable
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


def refusal(metric_name: str, kw: dict[str, Any]) -> str | None:
    """Why the metric cannot be computed from aggregates (None when it can)."""
    if metric_name in NEEDS_RATERS:
        return NEEDS_RATERS[metric_name]
    irr = kw.get("irr")
    if irr in IRR_NEEDS_RATERS:
        return f"irr={irr!r} computes chance agreement from each rater's own label distribution"
    return None


def sql_metric(metric_name: str, finish: Callable[[Pools, dict[str, Any]], dict[str, Any]], engine: Any,
               selectable: Any, kw: dict[str, Any], *, need_trusted: bool) -> dict[str, Any]:
    """The metric of a SQL batch: pools from the database's aggregates, finished by ``finish`` (a ``pools_*``).

    Raises
    ------
    DesignError
        For a metric that needs rater identity (:data:`NEEDS_RATERS`, :data:`IRR_NEEDS_RATERS`).
    ParameterError, InputError
        As the pandas path: a parameter naming what the batch does not hold, missing ids, duplicate
        judgements, labels outside ``categories``.
    """
    why = refusal(metric_name, kw)
    if why is not None:
        raise DesignError(f"{metric_name} cannot run on a SQL batch: {why}, which needs to know which rater gave "
                          "each label, and the database returns item x category counts, not judgements. Validate "
                          "this expectation on a pandas batch (e.g. the rows read with read_sql)"
                          + (", or use irr='krippendorff_alpha', 'fleiss_kappa' or 'gwet_ac'."
                             if kw.get("irr") in IRR_NEEDS_RATERS else "."),
                          Reason.INCOMPATIBLE_RATINGS, engine="sql")
    plan = _Plan(engine, selectable, kw)
    pools = plan.pools(need_trusted=need_trusted)
    out = finish(pools, kw)
    out["sql"] = {"dialect": str(getattr(engine, "dialect_name", "")), "queries": plan.queries,
                  "rows_fetched": plan.rows_fetched, "rows_aggregated": plan.rows_aggregated}
    return out


class _Plan:
    """The aggregate queries over one batch selectable, counting what they fetch."""

    def __init__(self, engine: Any, selectable: Any, kw: dict[str, Any]) -> None:
        import sqlalchemy as sa

        self.engine, self.kw = engine, kw
        # A SELECT (a row condition, a query asset) becomes a subquery; a table is used as it is.
        self.source = selectable.subquery() if hasattr(selectable, "subquery") else selectable
        self.queries = self.rows_fetched = self.rows_aggregated = 0
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

    # ------------------------------------------------------------ the plan
    def pools(self, *, need_trusted: bool) -> Pools:
        """Crowd and trusted :class:`~labelgate.Ratings` on one shared item index, from the aggregates."""
        import sqlalchemy as sa

        kw = self.kw
        columns = self.columns()
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
        counts = self._counts()
        selected = self._check_pools(counts, need_trusted)
        self._check_duplicates()
        return self._build(counts, selected)

    def _in_pools(self) -> list[Any]:
        """The question and, with a pool column, the crowd and trusted pools."""
        return self.where + ([self.pool.in_(self.pool_values)] if self.pool is not None else [])

    def _counts(self) -> Any:
        """Judgements per (pool, item, label) — NULL items and labels included — and rows without a rater."""
        import pandas as pd
        import sqlalchemy as sa

        keys = ([self.pool] if self.pool is not None else []) + [self.item, self.label]
        no_rater = sa.func.sum(sa.case((self.rater.is_(None), 1), else_=0))
        rows = self.fetch(sa.select(*keys, sa.func.count(), no_rater).select_from(self.source)
                          .where(*self._in_pools()).group_by(*keys))
        counts = pd.DataFrame.from_records(rows, columns=["pool", "item", "label", "n", "no_rater"][-len(keys) - 2:])
        if self.pool is None:
            counts.insert(0, "pool", None)
        self.rows_aggregated = int(counts["n"].sum())
        return counts

    def _check_pools(self, counts: Any, need_trusted: bool) -> list[Any]:
        """The pools to build (crowd first, then trusted when in the batch), after the pandas path's checks."""
        kw = self.kw
        if self.pool is None:
            if counts.empty:
                raise self._no_rows()
            selected = [None]
        else:
            present = set(counts["pool"])
            selected = [v for v in self.pool_values if v in present]
            for name in ("crowd_pool", "trusted_pool") if need_trusted else ("crowd_pool",):
                if kw.get(name) not in present:
                    raise self._no_rows(name)
        item, label = counts["item"].isna(), counts["label"].isna()
        for column, n in ((kw["item_column"], counts["n"][item].sum()),
                          (kw["rater_column"], counts["no_rater"].sum())):
            if n:
                raise InputError(f"Column {column!r} has a missing id in {int(n)} row(s) of the batch.",
                                 Reason.MISSING_ID, column=column)
        for pool in selected:
            if not (~label & _of_pool(counts, pool)).any():
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
        """Refuse a rater's repeated judgements of an item: a SQL table has no row order to pick one by."""
        import sqlalchemy as sa

        keys = ([self.pool.label("pool")] if self.pool is not None else []) + [self.item.label("item"),
                                                                                 self.rater.label("rater")]
        groups = (sa.select(*keys, sa.func.count().label("n")).select_from(self.source)
                  .where(*self._in_pools(), self.label.is_not(None)).group_by(*keys).having(sa.func.count() > 1)
                  .subquery())
        # the window total is computed over every duplicate group before LIMIT keeps one example
        hit = self.fetch(sa.select(groups.c.item, groups.c.rater, sa.func.sum(groups.c.n - 1).over())
                         .select_from(groups).limit(1))
        if not hit:
            return
        item, rater, extra = hit[0]
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

    def _build(self, counts: Any, selected: list[Any]) -> Pools:
        import pandas as pd

        missing = counts["label"].isna()
        dropped = {pool: int(counts["n"][missing & _of_pool(counts, pool)].sum()) for pool in selected}
        counts = counts[~missing]
        items = _sorted(counts["item"].unique())
        categories = self._categories(counts["label"].unique())
        item_labels = np.empty(len(items), dtype=object)  # one object for every pool: items align by code
        item_labels[:] = items
        q = len(categories)
        # hash lookups, vectorised: the fetched rows can be as many as the batch's (item, label) pairs
        cell = (pd.Index(items, dtype=object).get_indexer(counts["item"]) * q
                + pd.Index(categories, dtype=object).get_indexer(counts["label"]))
        weight = counts["n"].to_numpy(dtype=np.float64)
        pools: list[Ratings] = []
        for pool in selected:
            mine = _of_pool(counts, pool).to_numpy()
            table = np.bincount(cell[mine], weights=weight[mine], minlength=len(items) * q)
            pools.append(_on_index(table.astype(np.int64).reshape(len(items), q), item_labels, categories,
                                   self.kw["level"], dropped[pool]))
        crowd, trusted = pools[0], (pools[1] if len(pools) > 1 else None)
        return Pools(crowd, trusted, pool_coverage(crowd, trusted))

    def _categories(self, labels: Iterable[Any]) -> list[Any]:
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


def _of_pool(counts: Any, pool: Any) -> Any:
    """The rows of ``pool`` (every row when there is no pool column: ``pool`` None)."""
    return counts["pool"] == pool if pool is not None else counts["pool"].isna()


def _on_index(table: np.ndarray, item_labels: np.ndarray, categories: list[Any], level: Any,
              n_dropped_missing: int) -> Ratings:
    """:meth:`Ratings.from_counts` of one pool, its items re-coded on the index shared by the pools.

    ``from_counts`` keeps the rated rows only; the shared index (every pool's items, as
    :func:`labelgate.ratings_by_pool` builds it) lets cross-replication metrics align items by code.
    """
    rated = np.flatnonzero(table.sum(axis=1) > 0)
    r = Ratings.from_counts(table[rated], categories=categories, level=level)
    return Ratings(rated[r.item_codes], r.rater_codes, r.value_codes, item_labels=item_labels,
                   rater_labels=r.rater_labels, categories=r.categories, level=r.level,
                   n_dropped_missing=n_dropped_missing)


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
