"""The aggregate plan: the database aggregates, the core finishes — whatever the database.

A backend (:class:`~labelgate.sqlagg.backend.AggregateBackend`: SQLAlchemy in :mod:`labelgate.sqlagg.sql`, Spark
in the GX layer) runs the queries; this module decides, in the order the pandas path checks:

1. the batch's columns (the question column, the pool column, the item / rater / label columns);
2. the tallies: per pool, the rows and the rows without an item id, a rater id or a label (unknown pools,
   missing ids, pools without a label; the labels left out are reported as ``n_dropped_missing``);
3. the duplicate rule: a rater's repeated judgement of an item is refused, since a table has no row order to
   keep one by (``duplicates="error"``: an :class:`~labelgate.errors.InputError`; ``"first"`` / ``"last"``: a
   :class:`~labelgate.errors.ParameterError`);
4. the item ids and the labels, each once; the categories (given, or the sorted labels; a label outside the
   given list is an error naming it);
5. the (pool, item rank, label rank, count) rows — which must add up to the tallies' labelled judgements, each
   under a label found (else the batch changed between the queries: an error) — from which
   :meth:`labelgate.Ratings.from_aggregates` builds each pool on one item index shared by the pools.

**Item order.** Items are in sorted id order (sorted in Python, not by the database's collation, which differs
between servers). The item bootstrap draws items by position, so the same ``seed`` gives the same interval as the
pandas path on the same rows sorted by item id; point values do not depend on the order.

The entry points: :func:`aggregate` (the pools or the error, and what the queries fetched; its
:meth:`Aggregated.rater_pools` adds each rater's sums, for the rater-specific metrics) and :class:`AggregatePlan`
(the steps, for callers that need the scope or raise at once).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, cast

import numpy as np

from labelgate.core.categories import sorted_distinct
from labelgate.core.ratings import Ratings
from labelgate.errors import DesignError, InputError, LabelGateError, ParameterError, Reason
from labelgate.sqlagg.backend import AggregateBackend, Scope
from labelgate.sqlagg.pools import (
    Pools,
    counts_digest,
    missing_pool,
    missing_pool_column,
    missing_question,
    missing_question_column,
    pool_coverage,
)
from labelgate.sqlagg.tallies import RaterTallyBackend, tallied_pools

#: The parameters (``kw``) that decide what the database aggregates.
AGGREGATE_KEYS: tuple[str, ...] = ("item_column", "rater_column", "label_column", "pool_column", "question_column",
                                   "question", "crowd_pool", "trusted_pool", "level", "categories", "duplicates")

# How many distinct values (questions, pools) an error message may fetch (it lists 20 of them).
_VALUES_IN_MESSAGE = 1000


@dataclass
class Aggregated:
    """The pools a batch's aggregates built (or the error the batch raised), and what the queries fetched."""

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
    #: The pools' :func:`~labelgate.sqlagg.pools.counts_digest`, computed once (:meth:`digests`).
    _digests: dict[str, str | None] | None = field(default=None, repr=False)
    #: The backend and the rows the plan read: :meth:`rater_pools` queries them again for the raters' sums.
    backend: AggregateBackend | None = field(default=None, repr=False)
    scope: Scope | None = field(default=None, repr=False)
    _rater_pools: Pools | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def digests(self) -> dict[str, str | None]:
        """``{"crowd": …, "trusted": …}``: each pool's counts digest (None for no pool), computed on the first call
        and shared by every expectation that uses these aggregates."""
        if self._digests is None:
            crowd, trusted = (self.pools.crowd, self.pools.trusted) if self.pools is not None else (None, None)
            self._digests = {"crowd": counts_digest(crowd), "trusted": counts_digest(trusted)}
        return self._digests

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
            raise InputError("The batch's aggregates built no pools.", Reason.EMPTY_INPUT)
        return self.pools


    def rater_pools(self, need_trusted: bool) -> tuple[Pools, dict[str, Any]]:
        """The pools with their raters' sums (:func:`labelgate.sqlagg.tallies.tallied_pools`: one more query, run
        on the first call and shared by every metric that uses these aggregates), and the report with it.

        Raises
        ------
        ParameterError, InputError
            As :meth:`pools_for`; a batch that changed between the queries.
        DesignError
            A backend that does not sum judgements per rater.
        """
        pools = self.pools_for(need_trusted)
        backend, scope = self.backend, self.scope
        if backend is None or scope is None or not hasattr(backend, "rater_label_counts"):
            raise DesignError(f"The raters' sums are not computed on a {self.report.get('dialect') or 'this'} "
                              "batch; validate this expectation on a pandas or SQL batch.",
                              Reason.INCOMPATIBLE_RATINGS)
        with self._lock:
            if self._rater_pools is None:
                self._rater_pools = tallied_pools(cast(RaterTallyBackend, backend), scope, pools)
            report = {**self.report, "queries": backend.queries, "rows_fetched": backend.rows_fetched}
        return self._rater_pools, report


def aggregate(backend: AggregateBackend, kw: Mapping[str, Any]) -> Aggregated:
    """Run the aggregate plan on ``backend``; a LabelGate error is kept (each dependent metric raises it).

    The plan builds the trusted pool when the batch has it, and keeps the error of a missing one for the metrics
    comparing two pools. ``report``: dialect, queries run, rows fetched, batch rows aggregated, a fetch id.
    """
    plan = AggregatePlan(backend, kw)
    pools, error = None, None
    try:
        pools = plan.pools(need_trusted=False)
    except LabelGateError as exc:
        error = exc
    return Aggregated(pools, error, plan.report(), early=plan.early, columns=plan.batch_columns,
                      trusted_error=plan.trusted_error, pool_column=kw.get("pool_column"), backend=backend,
                      scope=plan.scope)


class AggregatePlan:
    """The plan's steps over one backend and the parameters ``kw`` (:data:`AGGREGATE_KEYS`)."""

    def __init__(self, backend: AggregateBackend, kw: Mapping[str, Any]) -> None:
        self.backend, self.kw = backend, kw
        self.rows_aggregated = 0
        self.early = True  # until the crowd pool is found: errors the pandas path raises before the pool checks
        self.batch_columns: list[str] | None = None
        self.trusted_error: LabelGateError | None = None
        self.pool_values = tuple(v for v in (kw.get("crowd_pool"), kw.get("trusted_pool")) if v is not None)
        self.scope = Scope(kw["item_column"], kw["rater_column"], kw["label_column"], kw.get("pool_column"),
                           self.pool_values, kw.get("question_column"), None)

    def report(self) -> dict[str, Any]:
        """What the queries did: ``dialect``, ``queries``, ``rows_fetched``, ``rows_aggregated``, ``duplicates``
        (how the duplicate rule was checked: ``"scanned"``, or ``"unique key NAME (columns)"`` when a key of the
        table rules duplicates out; empty before the check), ``fetch_id``."""
        return {"dialect": str(self.backend.dialect), "queries": self.backend.queries,
                "rows_fetched": self.backend.rows_fetched, "rows_aggregated": self.rows_aggregated,
                "duplicates": self.backend.duplicate_check, "fetch_id": uuid.uuid4().hex[:12]}

    def pools(self, *, need_trusted: bool) -> Pools:
        """Crowd and trusted :class:`~labelgate.Ratings` on one shared item index, from the aggregates."""
        self.check_columns(need_trusted)
        tallies = self.tallies()
        selected = self.check_pools(tallies, need_trusted)
        self.check_duplicates()
        return self.build(tallies, selected)

    def check_columns(self, need_trusted: bool) -> None:
        """The question, pool, item, rater and label columns are columns of the batch."""
        kw = self.kw
        columns = self.batch_columns = self.backend.columns()
        question, name = kw.get("question"), kw.get("question_column")
        if question is not None:
            if name not in columns:
                raise missing_question_column(question, name, columns)
            self.scope = replace(self.scope, question=question)
        pool = self.scope.pool
        if pool is None and need_trusted:
            raise missing_pool_column(None, columns)
        if pool is not None and pool not in columns:
            raise missing_pool_column(pool, columns)
        for role, column in (("item", kw["item_column"]), ("rater", kw["rater_column"]),
                             ("value", kw["label_column"])):
            if column not in columns:
                raise InputError(f"Column {column!r} (the {role} column) is missing; the data has columns "
                                 f"{sorted(map(str, columns))}.", Reason.MISSING_COLUMN, column=column)

    def tallies(self) -> dict[Any, tuple[int, int, int, int]]:
        """Per pool present: (rows, rows without an item id, without a rater id, without a label)."""
        tallies = self.backend.tallies(self.scope)
        self.rows_aggregated = sum(t[0] for t in tallies.values())
        return tallies

    def check_pools(self, tallies: Mapping[Any, tuple[int, int, int, int]], need_trusted: bool) -> list[Any]:
        """The pools to build (crowd first, then trusted when in the batch), after the pandas path's checks."""
        kw = self.kw
        if self.scope.pool is None:
            if not tallies:
                raise self.no_rows()
            selected: list[Any] = [None]
        else:
            selected = [v for v in self.pool_values if v in tallies]
            for name in ("crowd_pool", "trusted_pool") if need_trusted else ("crowd_pool",):
                if kw.get(name) not in tallies:
                    raise self.no_rows(name)
            if kw.get("trusted_pool") not in tallies:  # kept for the metrics that compare two pools
                self.trusted_error = self.no_rows("trusted_pool")
        self.early = False
        self.check_ids(tallies)
        for pool in selected:
            if tallies[pool][0] == tallies[pool][3]:
                raise InputError(f"Column {kw['label_column']!r} has no non-missing value"
                                 + (f" in pool {pool!r}." if pool is not None else "."), Reason.EMPTY_INPUT)
        return selected

    def check_ids(self, tallies: Mapping[Any, tuple[int, int, int, int]]) -> None:
        """No row without an item id or a rater id."""
        for column, k in ((self.kw["item_column"], 1), (self.kw["rater_column"], 2)):
            n = sum(t[k] for t in tallies.values())
            if n:
                raise InputError(f"Column {column!r} has a missing id in {n} row(s) of the batch.",
                                 Reason.MISSING_ID, column=column)

    def no_rows(self, name: str | None = None) -> LabelGateError:
        """The error when the question or the pool ``name`` matches no row (queries run on this path only)."""
        kw, backend, scope = self.kw, self.backend, self.scope
        if scope.question is not None and not backend.count(scope, "question"):
            values = backend.distinct(scope, kw["question_column"], "all", _VALUES_IN_MESSAGE)
            return missing_question(kw["question"], kw["question_column"], values)
        if name is None or scope.pool is None:
            return InputError("The ratings table is empty (0 rows).", Reason.EMPTY_INPUT)
        pools = backend.distinct(scope, scope.pool, "question", _VALUES_IN_MESSAGE)
        return missing_pool(scope.pool, name, kw.get(name), pools)

    def check_duplicates(self) -> None:
        """Refuse a rater's repeated judgements of an item: a table has no row order to pick one by."""
        total, hit = self.backend.duplicates(self.scope)
        if not total or hit is None:
            return
        _, item, rater = hit
        policy = self.kw.get("duplicates")
        if policy == "error":
            raise InputError(f"Rater {rater!r} judged item {item!r} more than once ({total} duplicate "
                             "judgement(s) in all). On a SQL batch remove the duplicates (e.g. a view keeping one "
                             "judgement per item and rater); duplicates='first' / 'last' need a row order.",
                             Reason.DUPLICATE_JUDGEMENT, item=item, rater=rater)
        raise ParameterError(f"duplicates={policy!r} keeps one of a rater's judgements of an item by row order, "
                             f"which a SQL table does not have (rater {rater!r} judged item {item!r} more than "
                             f"once; {total} duplicate judgement(s) in all). Remove the duplicates in the "
                             "database (e.g. a view), or validate on a pandas batch.",
                             parameter="duplicates", value=policy)

    def build(self, tallies: Mapping[Any, tuple[int, int, int, int]], selected: list[Any]) -> Pools:
        """The pools from the backend's (pool, item rank, label rank, count) rows.

        The backend ranks items and labels in its own order; their ids come once each (same order) and Python
        re-orders the codes when its sort differs from the database's collation, so items are in sorted id order
        whatever the server.
        """
        backend, scope = self.backend, self.scope
        db_labels = backend.distinct(scope, scope.label, "labelled")
        categories = self.categories(db_labels)
        item_ids, rows = backend.item_label_counts(scope, db_labels)
        self.check_counts(tallies, selected, rows, len(db_labels))
        position = {c: k for k, c in enumerate(categories)}
        category_of_rank = np.asarray([position[v] for v in db_labels], dtype=np.int64)
        items = sorted_distinct(item_ids)
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

    def check_counts(self, tallies: Mapping[Any, tuple[int, int, int, int]], selected: list[Any],
                     rows: np.ndarray, n_labels: int) -> None:
        """The counts hold every labelled judgement the tallies found, each under a known label.

        Two scans read the batch (the tallies, then the counts). Their totals disagree when rows were added or
        deleted between them, or when a label found by the first does not compare equal to itself in the second
        (a ``real`` / float4 column compared with the float the driver returned); either way the batch is refused
        rather than counted under the wrong labels. A write between the scans that leaves every pool's number of
        labelled judgements unchanged is not seen: validate a table that is not being written to."""
        for code, pool in enumerate(selected):
            mine = rows[:, 0] == (self.pool_values.index(pool) if pool is not None else code)
            labelled = tallies[pool][0] - tallies[pool][3]
            bad = rows[mine, 2]
            if int(rows[mine, 3].sum()) != labelled or (bad.size and (bad.min() < 0 or bad.max() >= n_labels)):
                where = f" in pool {pool!r}" if pool is not None else ""
                raise InputError(f"The batch's counts do not add up: {labelled} labelled judgement(s){where} "
                                 f"were counted, but the item x label counts hold {int(rows[mine, 3].sum())} under "
                                 "the labels found. Either the batch changed while it was aggregated (validate a "
                                 "batch that is not being written to: a snapshot, or a row condition on a load "
                                 "time), or a label does not compare equal to itself in the database (a `real` "
                                 "column: cast it to double precision in a view).", Reason.UNREADABLE_INPUT)

    def categories(self, labels: list[Any]) -> list[Any]:
        """The given ``categories``, or the sorted labels of the batch; a label outside the list is an error."""
        name, level = self.kw["label_column"], self.kw["level"]
        if level in ("interval", "ratio"):
            bad = next((v for v in labels if isinstance(v, (str, bytes))), None)
            if bad is not None:
                raise InputError(f"Column {name!r} has the non-numeric value {bad!r}, but level={level!r} needs "
                                 "numbers.", Reason.NON_NUMERIC_VALUE, column=name, value=bad)
        given = self.kw.get("categories")
        if given is None:
            return sorted_distinct(labels, ordinal=level == "ordinal", column=name)
        allowed = set(given)
        unknown = sorted_distinct(v for v in labels if v not in allowed)
        if unknown:
            raise InputError(f"Column {name!r} has value {unknown[0]!r}, which is not one of the categories "
                             f"{list(given)}.", Reason.UNKNOWN_CATEGORY, column=name, value=unknown[0])
        return list(given)
