r"""The raters' sums of a batch, aggregated in the database: the labeler ICC, Conger's κ and ι without judgements.

The variance components behind the labeler ICC need, besides the per-item count, sum and sum of squares (from the
item x category counts the plan already fetched), the same three sums per rater over the pairable items; Conger's
κ and the nominal ι each rater's category counts over the items of their chance term; the interval ι each rater's
moments over the pairable items. All are sums over a rater's judgements of a function of the label, restricted to
a set of items: one ``GROUP BY pool, rater, label, item class`` (:meth:`RaterTallyBackend.rater_label_counts`)
gives them for every such set at once, O(pools x raters x labels) rows, and
:class:`~labelgate.core.tallied.TalliedRatings` carries them beside the pool's item x category counts. The metric
code is the pandas path's (:mod:`labelgate.metrics`); it reads the raters' counts from these sums instead of from
judgements.

A resampling interval draws judgements by item and rater, which only the judgements give: such ratings refuse it
(:class:`~labelgate.errors.DesignError`), and the GX providers compute these metrics without an interval on a SQL
batch (:mod:`labelgate.gx._sql`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from labelgate.core.categories import sorted_distinct
from labelgate.core.ratings import AggregatedRatings, Ratings
from labelgate.core.tallied import N_CLASSES, TalliedRatings, item_classes
from labelgate.errors import InputError, Reason
from labelgate.sqlagg.backend import AggregateBackend, Scope
from labelgate.sqlagg.pools import Pools


class RaterTallyBackend(AggregateBackend, Protocol):
    """An :class:`~labelgate.sqlagg.backend.AggregateBackend` that also sums judgements per rater."""

    def rater_label_counts(self, scope: Scope) -> tuple[list[Any], list[Any], np.ndarray]:
        """Per (pool, rater, label, item class) the judgements of the ``"labelled"`` rows: the rater ids, the
        labels, and an (n, 3) int64 array ``[pool code, item class, judgements]`` (pool code: position in
        ``scope.pools``, 0 without a pool column; item class: :func:`~labelgate.core.tallied.item_classes`)."""
        ...


def tallied_pools(backend: RaterTallyBackend, scope: Scope, pools: Pools) -> Pools:
    """The pools with their raters' sums (:class:`~labelgate.core.tallied.TalliedRatings`), from one query.

    Raises
    ------
    InputError
        A label or a total the item counts do not have: the batch changed between the queries.
    """
    raters, labels, table = backend.rater_label_counts(scope)
    built: list[Ratings | None] = [pools.crowd, pools.trusted]
    present = [r for r in built if r is not None]
    tallied: list[Ratings | None] = []
    for code, r in enumerate(built):
        if r is None:
            tallied.append(None)
            continue
        other = present[1 - code].ratings_per_item if len(present) > 1 else None
        mine = np.flatnonzero(table[:, 0] == code)
        tallied.append(_tallied(r, [raters[k] for k in mine], [labels[k] for k in mine], table[mine], other))
    crowd = tallied[0]
    if crowd is None:  # unreachable: a plan's pools always have the crowd
        raise InputError("The batch's aggregates built no crowd pool.", Reason.EMPTY_INPUT)
    return Pools(crowd, tallied[1], pools.coverage)


def _tallied(r: Ratings, raters: Sequence[Any], labels: Sequence[Any], rows: np.ndarray,
             other: np.ndarray | None) -> TalliedRatings:
    """One pool's :class:`TalliedRatings` from its (rater, label, class, count) rows."""
    if not isinstance(r, AggregatedRatings):  # unreachable: the plan builds every pool from aggregates
        raise InputError("The pool was not built from aggregates.", Reason.UNREADABLE_INPUT)
    position = {c: k for k, c in enumerate(r.categories)}
    label_codes = np.asarray([position.get(v, -1) for v in labels], dtype=np.int64)
    if (label_codes < 0).any():
        unknown = labels[int(np.flatnonzero(label_codes < 0)[0])]
        raise InputError(f"The raters' counts hold the label {unknown!r}, which the item counts did not: the batch "
                         "changed between the queries; validate a batch that is not being written to.",
                         Reason.UNREADABLE_INPUT, value=unknown)
    rater_ids = sorted_distinct(raters)
    where = {v: k for k, v in enumerate(rater_ids)}
    codes = np.asarray([where[v] for v in raters], dtype=np.int64)
    tallies = np.zeros((N_CLASSES, len(rater_ids), r.n_categories), dtype=np.int64)
    np.add.at(tallies, (rows[:, 1], codes, label_codes), rows[:, 2])
    return TalliedRatings(r, rater_ids, tallies, item_classes(r.ratings_per_item, other))
