"""The per-rater queries of :class:`~labelgate.sqlagg.sql.SqlAlchemyBackend` (a mixin): judgements grouped by rater.

:meth:`RaterQueries.rater_contexts` and :meth:`RaterQueries.rater_pairs` feed the rater diagnostics
(:mod:`labelgate.sqlagg.raters`); :meth:`RaterQueries.rater_label_counts` the raters' sums of the labeler ICC,
Conger's κ and ι (:mod:`labelgate.sqlagg.tallies`). Each returns O(raters x labels) or O(rater pairs) rows, never one
per judgement. SQLAlchemy is imported lazily.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from labelgate.sqlagg.backend import Scope, Within


class RaterQueries:
    """The per-rater aggregate queries, over the helpers of the backend that mixes them in."""

    if TYPE_CHECKING:  # provided by SqlAlchemyBackend
        source: Any

        def fetch(self, query: Any) -> list[tuple[Any, ...]]: ...

        def col(self, name: str) -> Any: ...

        def equals(self, name: str, value: Any) -> Any: ...

        def where(self, scope: Scope, within: Within) -> list[Any]: ...

        def label_code(self, scope: Scope, labels: Sequence[Any]) -> Any: ...

    def first_pool(self, scope: Scope) -> list[Any]:
        """The conditions selecting the ``"labelled"`` rows of the first pool."""
        first = [self.equals(str(scope.pool), scope.pools[0])] if scope.pool is not None else []
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
        mine = counts.where(*([self.equals(str(scope.pool), scope.pools[0])] if keys else [])).subquery("lg_c1")
        judged = (sa.select(self.col(scope.rater).label("r"), code.label("l"), item.label("i"))
                  .select_from(self.source).where(*self.first_pool(scope)).subquery("lg_j"))
        first = [mine.c[f"n{k}"] for k in range(q)]
        join = judged.join(mine, mine.c.i == judged.c.i)
        if keys and len(scope.pools) > 1:
            other = counts.where(self.equals(str(scope.pool), scope.pools[1])).subquery("lg_c2")
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

    def rater_label_counts(self, scope: Scope) -> tuple[list[Any], list[Any], np.ndarray]:
        """Each pool's judgements per (rater, label, item class): one query, grouped in the database.

        The item class (:mod:`labelgate.core.tallied`): bit 0 when the item has two or more judgements in the
        pool, bit 1 when the other pool (of the two in ``scope.pools``) judged it too — from one ``GROUP BY item``
        with a ``count(CASE WHEN pool = p THEN 1 END)`` per pool, hash-joined to the judgements on the item (two
        scans of the batch). Returns the rater ids, the labels (as the database returns them) and an (n, 3) int64
        array ``[pool code, item class, judgements]``, one row per (pool, rater, label, class): at most four per
        rater and label, never one per judgement.
        """
        import sqlalchemy as sa

        item = self.col(scope.item)
        pools: tuple[Any, ...] = scope.pools if scope.pool is not None else (None,)
        pool_code: Any = sa.literal(0)
        if scope.pool is not None:
            pool_code = sa.case(*((self.equals(scope.pool, v), k) for k, v in enumerate(scope.pools)), else_=-1)
        labelled = self.where(scope, "labelled")
        sizes = [sa.func.count(sa.case((self.equals(str(scope.pool), v), 1))) if v is not None else sa.func.count()
                 for v in pools]
        per_item = (sa.select(item.label("i"), *[n.label(f"n{k}") for k, n in enumerate(sizes)])
                    .select_from(self.source).where(*labelled).group_by(item).subquery("lg_n"))
        judged = (sa.select(pool_code.label("p"), self.col(scope.rater).label("r"),
                            self.col(scope.label).label("l"), item.label("i"))
                  .select_from(self.source).where(*labelled).subquery("lg_j"))

        def item_class(own: Any, other: Any | None) -> Any:
            pairable = sa.case((own >= 2, 1), else_=0)
            return pairable if other is None else pairable + sa.case((other > 0, 2), else_=0)

        n = per_item.c
        item_class_of: Any = item_class(n.n0, None)
        if len(pools) > 1:
            item_class_of = sa.case((judged.c.p == 0, item_class(n.n0, n.n1)), else_=item_class(n.n1, n.n0))
        # the class computed inside, grouped by outside: a server matches a GROUP BY expression with bound
        # parameters to the selected one only by its text, which numbered parameters differ in
        inner = (sa.select(judged.c.p, judged.c.r, judged.c.l, item_class_of.label("c"))
                 .select_from(judged.join(per_item, per_item.c.i == judged.c.i)).subquery("lg_x"))
        rows = self.fetch(sa.select(inner.c.p, inner.c.r, inner.c.l, inner.c.c, sa.func.count())
                          .group_by(inner.c.p, inner.c.r, inner.c.l, inner.c.c))
        table = np.asarray([(row[0], row[3], row[4]) for row in rows], dtype=np.int64).reshape(len(rows), 3)
        return [row[1] for row in rows], [row[2] for row in rows], table

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
