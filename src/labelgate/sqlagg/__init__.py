"""The aggregate plan shared by the GX metric providers and the pipeline: statistics from a database's aggregates.

``backend``: the :class:`AggregateBackend` protocol (the few queries a database runs) and the :class:`Scope` of
rows they read. ``sql``: its SQLAlchemy implementation. ``plan``: the backend-neutral driver (checks, duplicate
rule, categories, the pools built by :meth:`labelgate.Ratings.from_aggregates`). ``pools``: the :class:`Pools`
of a batch and the errors of a batch that lacks what a parameter names. ``raters``: every rater's diagnostics from
two aggregate queries (:func:`~labelgate.sqlagg.raters.rater_evidence`). ``tallies``: each rater's category counts
per item class (one query), from which the labeler ICC, Conger's κ and ι are computed
(:func:`~labelgate.sqlagg.tallies.tallied_pools`, :meth:`Aggregated.rater_pools`).

A layer between ``metrics`` and ``gx | pipeline`` (both import it); numpy only at import, SQLAlchemy lazily.
"""

from labelgate.sqlagg.backend import AggregateBackend, Scope, Within
from labelgate.sqlagg.plan import AGGREGATE_KEYS, Aggregated, AggregatePlan, aggregate
from labelgate.sqlagg.pools import Pools, pool_coverage

__all__ = ["AGGREGATE_KEYS", "AggregateBackend", "AggregatePlan", "Aggregated", "Pools", "Scope", "Within",
           "aggregate", "pool_coverage"]
