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

**Rater-specific metrics.** The labeler ICC (variance components of the crossed item x rater design) and the IRRs
with rater-specific chance agreement (Conger's κ, Janson–Olsson ι) need each rater's sums besides the item counts:
one more query (:func:`labelgate.sqlagg.tallies.tallied_pools`, run once per batch and parameters, shared by the
expectations) groups the judgements by pool, rater, label and item class, and the same metric code computes them
from those sums. Their intervals resample items and raters (the labeler ICC) or items with each rater's judgements
(Conger, ι), which needs the judgements: on a SQL batch they are computed without an interval
(``interval_unavailable`` says why; ``use_ci_bound`` is refused). On Spark they are refused
(:class:`~labelgate.errors.DesignError`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from labelgate.errors import DesignError, Reason
from labelgate.sqlagg import AGGREGATE_KEYS, Aggregated, Pools, aggregate
from labelgate.sqlagg.sql import SqlAlchemyBackend

#: Metrics that need each rater's sums, and why: computed from them on SQL, refused on Spark.
NEEDS_RATERS: dict[str, str] = {
    "labelgate.table.icc_gap": "the labeler ICC and the item ICC are variance components of the crossed "
                               "item x rater design, bootstrapped over items and raters",
}
#: IRRs whose chance agreement uses each rater's own label distribution.
IRR_NEEDS_RATERS: tuple[str, ...] = ("conger_kappa", "janson_olsson_iota")

__all__ = ["AGGREGATE_KEYS", "IRR_NEEDS_RATERS", "NEEDS_RATERS", "needs_raters", "refusal", "refuse", "sql_metric",
           "sql_pools"]


def needs_raters(metric_name: str, kw: dict[str, Any]) -> str | None:
    """Why the metric needs each rater's sums (None when the item x category counts suffice)."""
    if metric_name in NEEDS_RATERS:
        return NEEDS_RATERS[metric_name]
    irr = kw.get("irr")
    if irr in IRR_NEEDS_RATERS:
        return f"irr={irr!r} computes chance agreement from each rater's own label distribution"
    return None


#: Why label sets are not measured from an engine's aggregates.
SETS_REFUSAL = "label sets (level='set') are compared by a distance between sets (Jaccard, MASI), not as categories"


def refusal(metric_name: str, kw: dict[str, Any], engine: str = "sql") -> str | None:
    """Why the metric cannot be computed from the ``engine``'s aggregates (None when it can): label sets on any
    engine (:data:`SETS_REFUSAL`); on Spark, a metric that needs each rater's sums (a SQL database sums the
    judgements per rater too; Spark does not here)."""
    if kw.get("level") == "set":
        return SETS_REFUSAL
    return needs_raters(metric_name, kw) if engine == "spark" else None


def sql_pools(engine: Any, selectable: Any, kw: dict[str, Any]) -> Aggregated:
    """The value of ``labelgate.table.sql_pools``: the aggregate plan over a GX SQL batch (errors kept)."""
    backend = SqlAlchemyBackend(selectable, execute=engine.execute_query, connect=engine.get_connection,
                                dialect=str(getattr(engine, "dialect_name", "")))
    return aggregate(backend, kw)


#: How each engine words a refusal: the batch, what the engine returns, and where the rows could be validated.
_ENGINES = {"sql": ("a SQL batch", "the database returns", "the rows read with read_sql"),
            "spark": ("a Spark batch", "Spark returns", "the rows of a sample, df.toPandas()")}


def refuse(metric_name: str, kw: dict[str, Any], engine: str = "sql") -> None:
    """Raise the :class:`~labelgate.errors.DesignError` of a metric the ``engine``'s aggregates cannot give, before
    anything is fetched: label sets (``level='set'``), on a SQL or a Spark batch; a metric that needs rater identity
    on a Spark batch. Both engines return item x category counts, not judgements; the message names the route that
    measures them (a pandas batch of the rows)."""
    why = refusal(metric_name, kw, engine)
    if why is not None and kw.get("level") == "set":
        batch, returns, rows = _ENGINES[engine]
        question = f" (question {kw['question']!r})" if kw.get("question") is not None else ""
        raise DesignError(f"{metric_name} cannot run on {batch}{question}: {why}, and {returns} item x category "
                          f"counts, each distinct cell one category. Validate this expectation on a pandas batch of "
                          f"the rows (e.g. {rows}), each label a list, tuple or set of categories; or gate the table "
                          "with `labelgate gate` from a SQL source without 'aggregate', which reads its rows "
                          "(docs/expectations.md).",
                          Reason.INCOMPATIBLE_RATINGS, engine=engine, parameter="level", value="set")
    if why is not None:
        batch, returns, rows = _ENGINES[engine]
        raise DesignError(f"{metric_name} cannot run on {batch}: {why}, which needs to know which rater gave "
                          f"each label, and {returns} item x category counts, not judgements. Validate "
                          f"this expectation on a pandas batch (e.g. {rows})"
                          + (", or use irr='krippendorff_alpha', 'fleiss_kappa' or 'gwet_ac'."
                             if kw.get("irr") in IRR_NEEDS_RATERS else "."),
                          Reason.INCOMPATIBLE_RATINGS, engine=engine)


def sql_metric(finish: Callable[[Pools, dict[str, Any]], dict[str, Any]], aggregated: Aggregated,
               kw: dict[str, Any], *, need_trusted: bool, metric_name: str = "") -> dict[str, Any]:
    """The metric of a SQL or Spark batch: ``finish`` (a ``pools_*``) on the pools built from the engine's
    aggregates. A metric that needs each rater's sums (:func:`needs_raters`) reads pools that carry them
    (:meth:`~labelgate.sqlagg.Aggregated.rater_pools`) and is computed without an interval (its resamples need the
    judgements): ``interval_unavailable`` then says why. The provider has refused such a metric on an engine
    without the raters' sums (:func:`refuse`) before.

    ``details.sql`` reports the shared fetch: ``fetch_id`` is the same for every expectation that used it.

    Raises
    ------
    ParameterError, InputError
        As the pandas path: a parameter naming what the batch does not hold, missing ids, duplicate
        judgements, labels outside ``categories``.
    """
    why = needs_raters(metric_name, kw)
    if why is None:
        pools, report = aggregated.pools_for(need_trusted), aggregated.report
        out = finish(pools, kw)
    else:
        pools, report = aggregated.rater_pools(need_trusted)
        out = finish(pools, {**kw, "ci": None})
        if kw.get("ci") is not None:
            out["interval_unavailable"] = (f"no interval on a SQL batch: {why}, and the resamples draw the "
                                           "judgements, which stay in the database (the point values are computed "
                                           "from its sums); validate on a pandas batch for an interval")
    # what the statistic read: a reader that aggregated the same table before can check it did not change since
    out["sql"] = {**report, "counts": dict(aggregated.digests())}
    return out
