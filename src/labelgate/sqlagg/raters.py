r"""Every rater's diagnostics from two aggregate queries: the database does the per-rater work.

The sums behind a rater's diagnostics (:class:`~labelgate.metrics.diagnostics.RaterSums`: its kappa blocks against
the trusted pool and against its co-raters, their second moments, its volume) are sums over the rater's judgements
of a function of (its label, its item's label counts in its pool and in the trusted pool). So the judgements
joined to their items' counts and grouped by (rater, label, counts) — :meth:`AggregateBackend.rater_contexts`,
one row per distinct context, each with its number of judgements — give the same sums as the judgements
themselves (:func:`~labelgate.metrics.diagnostics.context_sums`). The collusion test needs, per pair of raters
that judged a common item, the items and the agreements: :meth:`AggregateBackend.rater_pairs`, a self-join of the
judgements on the item grouped by the pair. Neither query returns one row per judgement.

Rater codes are the positions of the rater ids in Python's sorted order (as :class:`~labelgate.Ratings` numbers
them), whatever the server's collation, so the rows come out in the row path's order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from labelgate.core.categories import sorted_distinct
from labelgate.errors import InputError, Reason
from labelgate.metrics.diagnostics import (
    PairTable,
    RaterSums,
    context_sums,
    diagnostics_from_sums,
)
from labelgate.sqlagg.backend import AggregateBackend, Scope

#: Labels a question may have for its raters to be diagnosed in the database (two count columns per label).
MAX_CONTEXT_LABELS = 64


@dataclass(frozen=True)
class RaterEvidence:
    """The per-rater sums and co-rating pairs of one pool, and what the digest covers.

    Attributes
    ----------
    rater_ids : list
        The pool's raters, sorted (rater code = position).
    sums : RaterSums
    pairs : PairTable
    level : str
    q : int
        The number of categories.
    parts : tuple of ndarray
        The context rows and the pairs in rater / category codes, sorted (for a content digest).
    """

    rater_ids: list[Any]
    sums: RaterSums
    pairs: PairTable
    level: str
    q: int
    parts: tuple[np.ndarray, np.ndarray]

    def rows(self, **judging: Any) -> list[dict[str, Any]]:
        """The rows of :func:`labelgate.metrics.diagnostics.rater_diagnostics` (``judging``: its keyword
        parameters ``pool_name, ci, min_agreement, min_shared_items, effect, fdr, power``)."""
        return diagnostics_from_sums(self.rater_ids, self.sums, self.pairs, level=self.level, q=self.q, **judging)


def rater_evidence(backend: AggregateBackend, scope: Scope, labels: Sequence[Any], categories: Sequence[Any],
                   level: str, *, center: float) -> RaterEvidence:
    """The :class:`RaterEvidence` of the first pool of ``scope`` (two queries).

    Parameters
    ----------
    backend : AggregateBackend
    scope : Scope
        The rows; the first of ``scope.pools`` is diagnosed, the second is the trusted pool (if given).
    labels : sequence
        The distinct labels of the ``"labelled"`` rows, as the backend returned them.
    categories : sequence
        The categories (each label is one of them); codes are positions in it.
    level : str
    center : float
        Subtracted from interval / ratio values before the moment sums (any observed value).

    Raises
    ------
    InputError
        More than :data:`MAX_CONTEXT_LABELS` labels (the context rows have two columns per label).
    """
    if len(labels) > MAX_CONTEXT_LABELS:
        raise InputError(f"Column {scope.label!r} has {len(labels)} distinct labels; the rater diagnostics run in "
                         f"the database for at most {MAX_CONTEXT_LABELS}. Gate the rows without 'aggregate'.",
                         Reason.TOO_MANY_CATEGORIES, column=scope.label)
    position = {c: k for k, c in enumerate(categories)}
    category_of = np.asarray([position[v] for v in labels], dtype=np.int64)
    q, width = len(categories), len(labels)
    raters, table = backend.rater_contexts(scope, labels)
    first, second, pair_table = backend.rater_pairs(scope, labels)
    rater_ids = sorted_distinct(raters)
    where = {v: k for k, v in enumerate(rater_ids)}
    codes = np.asarray([where[v] for v in raters], dtype=np.int64)
    crowd, trusted = np.zeros((len(codes), q)), np.zeros((len(codes), q))
    crowd[:, category_of] = table[:, 2:2 + width]
    trusted[:, category_of] = table[:, 2 + width:]
    label_codes = category_of[table[:, 0]] if len(table) else np.zeros(0, dtype=np.int64)
    a = np.asarray([where[v] for v in first], dtype=np.int64)
    b = np.asarray([where[v] for v in second], dtype=np.int64)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    order = np.lexsort((hi, lo))  # the row path's order: by (a, b) codes
    pairs = PairTable(lo[order], hi[order], pair_table[order, 0].astype(np.float64),
                      pair_table[order, 1].astype(np.float64))
    values = np.asarray(categories, dtype=np.float64) if level in ("interval", "ratio") else np.zeros(q)
    has_trusted = scope.pool is not None and len(scope.pools) > 1
    sums = context_sums(level, values, len(rater_ids), codes, label_codes, crowd,
                        trusted if has_trusted else None, table[:, 1].astype(np.float64), pairs, center=center)
    context = np.column_stack([codes, label_codes, table[:, 1], crowd, trusted]).astype(np.int64)
    context = context[np.lexsort(context.T[::-1])] if len(context) else context
    pair_part = np.column_stack([pairs.a, pairs.b, pair_table[order]]).astype(np.int64)
    return RaterEvidence(rater_ids, sums, pairs, level, q, (context, pair_part))

