"""What a database does for the aggregate plan: the :class:`AggregateBackend` protocol and the rows it reads.

The plan (:mod:`labelgate.sqlagg.plan`) decides; a backend only runs a handful of aggregate queries over one
batch (a SQL table or selectable, a Spark DataFrame, ...) and returns small results. Every method reads the rows
of the batch selected by a :class:`Scope` and a :data:`Within` level; none returns one row per judgement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np

#: Which rows of the batch a query reads, each level narrowing the one before:
#: ``"all"``: every row; ``"question"``: the rows of the question (every row without one);
#: ``"pools"``: those of them in the crowd or trusted pool (every row without a pool column);
#: ``"labelled"``: those of them with an item id and a label (the judgements that enter the statistics).
Within = Literal["all", "question", "pools", "labelled"]


@dataclass(frozen=True)
class Scope:
    """The batch's columns and the rows the plan reads.

    Attributes
    ----------
    item, rater, label : str
        The item id, rater id and label columns.
    pool : str or None
        The pool column; None: the batch is one pool.
    pools : tuple
        The pool values read, crowd first then trusted (only those given); their index is the pool code.
    question_column : str or None
        The question column.
    question : object or None
        The question's value in ``question_column``; None: no question filter.
    """

    item: str
    rater: str
    label: str
    pool: str | None = None
    pools: tuple[Any, ...] = ()
    question_column: str | None = None
    question: Any = None


class AggregateBackend(Protocol):
    """The operations a database performs for the aggregate plan.

    Attributes
    ----------
    dialect : str
        The engine's name, reported with the counts (``"postgresql"``, ``"sqlite"``, ``"spark"``).
    queries, rows_fetched : int
        Counters the backend increments: queries run, result rows brought to the client.
    duplicate_check : str
        How :meth:`duplicates` decided: ``"scanned"`` (the rows were counted), or ``"unique key ..."`` (a key of
        the table rules duplicates out); empty before.
    """

    dialect: str
    queries: int
    rows_fetched: int
    duplicate_check: str

    def columns(self) -> list[str]:
        """The batch's column names (no row fetched)."""
        ...

    def tallies(self, scope: Scope) -> dict[Any, tuple[int, int, int, int]]:
        """Per pool value of the ``"pools"`` rows: (rows, rows without an item id, without a rater id, without a
        label). Keyed by the pool value, or ``None`` without a pool column; pools without a row are absent."""
        ...

    def count(self, scope: Scope, within: Within) -> int:
        """The number of rows ``within``."""
        ...

    def distinct(self, scope: Scope, column: str, within: Within, limit: int | None = None) -> list[Any]:
        """The distinct non-missing values of ``column`` over the rows ``within``, each once, in the backend's
        ascending order (at most ``limit``)."""
        ...

    def duplicates(self, scope: Scope) -> tuple[int, tuple[Any, Any, Any] | None]:
        """Repeated judgements among the ``"pools"`` rows with a label: the number of judgements beyond one per
        (pool, item, rater), summed, and when positive one example ``(pool, item, rater)`` (pool None without a
        pool column)."""
        ...

    def item_label_counts(self, scope: Scope, labels: Sequence[Any]) -> tuple[list[Any], np.ndarray]:
        """The distinct item ids of the ``"labelled"`` rows, each once, and one row per (pool, item, label) as an
        (n, 4) int64 array: the pool code (position in ``scope.pools``; 0 without a pool column), the item's rank
        (position in the item ids returned), the label's rank (position in ``labels``: what :meth:`distinct`
        returned for the label column over ``"labelled"``) and the number of judgements. The item ids may be in
        the backend's order or in Python's (the plan re-numbers when Python's sort differs). Streamed: the client
        holds the array, never one row per judgement."""
        ...

    def rater_contexts(self, scope: Scope, labels: Sequence[Any]) -> tuple[list[Any], np.ndarray]:
        """The first pool's (``scope.pools[0]``; every row without a pool column) ``"labelled"`` judgements grouped
        by (rater, label, the item's label counts in the first pool, in the second pool): one rater id per row, and
        an (n, 2 + 2q) int64 array ``[label code, judgements, first-pool counts (q), second-pool counts (q)]``,
        label codes and count columns by position in ``labels`` (q of them; second-pool counts are zero without a
        second pool or where it has no judgement of the item). One row per distinct context, never per judgement:
        what :func:`labelgate.metrics.diagnostics.context_sums` turns into every rater's sums."""
        ...

    def rater_pairs(self, scope: Scope, labels: Sequence[Any]) -> tuple[list[Any], list[Any], np.ndarray]:
        """The pairs of raters of the first pool that judged a common item (each unordered pair once): rater a,
        rater b, and an (n, 2) int64 array ``[items both judged, items on which their labels are equal]``."""
        ...
