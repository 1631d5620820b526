"""The metric providers on a SQL engine: GX glue around the aggregate plan (:mod:`labelgate.sqlagg`).

GX's ``SqlAlchemyExecutionEngine`` hands a table metric the batch as a selectable, its row condition applied.
:func:`sql_pools` runs the plan over it (:func:`labelgate.sqlagg.aggregate` with the SQLAlchemy backend): the
database aggregates — per pool tallies, the duplicate check, the item ids and labels, the (pool, item rank, label
rank, count) rows, through a binary ``COPY`` on PostgreSQL or a streaming cursor elsewhere — and
:meth:`labelgate.Ratings.from_aggregates` builds the pools, on which the same ``pools_*`` function as on pandas
computes the metric, interval included. The judgements never leave the database; the result carries ``sql``:
queries run, rows fetched, batch rows aggregated.

The expectations of one validation that agree on the parameters deciding the aggregates
(:data:`~labelgate.sqlagg.AGGREGATE_KEYS`) share one run of these queries: GX resolves the metric
``labelgate.table.sql_pools`` once and hands it to each of them.

**Item order.** The item bootstrap draws items by position. The pandas path orders items by their first row in the
DataFrame; a SQL table has no row order, so here items are in sorted id order. The same ``seed`` therefore gives
the same interval as the pandas path on the same rows sorted by item id (``df.sort_values(item_column,
kind="stable")``); point values do not depend on the order.

**Not from aggregates.** The labeler ICC (variance components of the crossed item x rater design, bootstrapped
over items and raters) and the IRRs with rater-specific chance agreement (Conger's κ, Janson–Olsson ι) need to
know which rater gave each label: their providers refuse a SQL batch with a
:class:`~labelgate.errors.DesignError` saying so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from labelgate.errors import DesignError, Reason
from labelgate.sqlagg import AGGREGATE_KEYS, Aggregated, Pools, aggregate
from labelgate.sqlagg.sql import SqlAlchemyBackend

#: Metrics that need every judgement's rater, and why (their SQL providers refuse the batch).
NEEDS_RATERS: dict[str, str] = {
    "labelgate.table.icc_gap": "the labeler ICC and the item ICC are variance components of the crossed "
                               "item x rater design, bootstrapped over items and raters",
}
#: IRRs whose chance agreement uses each rater's own label distribution.
IRR_NEEDS_RATERS: tuple[str, ...] = ("conger_kappa", "janson_olsson_iota")

__all__ = ["AGGREGATE_KEYS", "IRR_NEEDS_RATERS", "NEEDS_RATERS", "refusal", "refuse", "sql_metric", "sql_pools"]


def refusal(metric_name: str, kw: dict[str, Any]) -> str | None:
    """Why the metric cannot be computed from aggregates (None when it can)."""
    if metric_name in NEEDS_RATERS:
        return NEEDS_RATERS[metric_name]
    irr = kw.get("irr")
    if irr in IRR_NEEDS_RATERS:
        return f"irr={irr!r} computes chance agreement from each rater's own label distribution"
    return None


def sql_pools(engine: Any, selectable: Any, kw: dict[str, Any]) -> Aggregated:
    """The value of ``labelgate.table.sql_pools``: the aggregate plan over a GX SQL batch (errors kept)."""
    backend = SqlAlchemyBackend(selectable, execute=engine.execute_query, connect=engine.get_connection,
                                dialect=str(getattr(engine, "dialect_name", "")))
    return aggregate(backend, kw)


#: How each engine words a refusal: the batch, what the engine returns, and where the rows could be validated.
_ENGINES = {"sql": ("a SQL batch", "the database returns", "the rows read with read_sql"),
            "spark": ("a Spark batch", "Spark returns", "the rows of a sample, df.toPandas()")}


def refuse(metric_name: str, kw: dict[str, Any], engine: str = "sql") -> None:
    """Raise the :class:`~labelgate.errors.DesignError` of a metric that needs rater identity, on a SQL or Spark
    (``engine``) batch: both return item x category counts, not judgements."""
    why = refusal(metric_name, kw)
    if why is not None:
        batch, returns, rows = _ENGINES[engine]
        raise DesignError(f"{metric_name} cannot run on {batch}: {why}, which needs to know which rater gave "
                          f"each label, and {returns} item x category counts, not judgements. Validate "
                          f"this expectation on a pandas batch (e.g. {rows})"
                          + (", or use irr='krippendorff_alpha', 'fleiss_kappa' or 'gwet_ac'."
                             if kw.get("irr") in IRR_NEEDS_RATERS else "."),
                          Reason.INCOMPATIBLE_RATINGS, engine=engine)


def sql_metric(finish: Callable[[Pools, dict[str, Any]], dict[str, Any]], aggregated: Aggregated,
               kw: dict[str, Any], *, need_trusted: bool) -> dict[str, Any]:
    """The metric of a SQL or Spark batch: ``finish`` (a ``pools_*``) on the pools built from the engine's
    aggregates. The provider has refused a metric that needs rater identity (:func:`refuse`) before: such a
    metric does not depend on the aggregates.

    ``details.sql`` reports the shared fetch: ``fetch_id`` is the same for every expectation that used it.

    Raises
    ------
    ParameterError, InputError
        As the pandas path: a parameter naming what the batch does not hold, missing ids, duplicate
        judgements, labels outside ``categories``.
    """
    pools = aggregated.pools_for(need_trusted)
    out = finish(pools, kw)
    # what the statistic read: a reader that aggregated the same table before can check it did not change since
    out["sql"] = {**aggregated.report, "counts": dict(aggregated.digests())}
    return out
