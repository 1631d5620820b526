"""Table metric providers behind LabelGate's expectations, and the pure functions they call.

Each provider receives the whole batch (one long table holding both pools),
filters it (``question``), splits it into crowd / trusted :class:`~labelgate.Ratings`
sharing one item index (:func:`labelgate.ratings_by_pool`) and calls a core
metric. It returns a JSON-friendly dict: the core ``Estimate.to_dict()`` with
replication-neutral names (``irr_x`` → ``irr_crowd``), plus ``coverage``.

On pandas the split reads the DataFrame; on a SQL engine the database
aggregates the batch and the pools are rebuilt from the aggregates
(:mod:`labelgate.gx._sql`). The ``pools_*`` functions make the core call on
the pools, whatever built them, sharing the pools' bootstrap resamples (the
expectations of a suite validate the same pools: their bootstraps with the
same seed draw the resamples once, :mod:`labelgate.metrics._resamples`); the
``compute_*`` functions take a DataFrame
and the expectation's parameters, so the logic is testable without a GX
context.
"""

from __future__ import annotations

import math
import threading
import weakref
from typing import Any

from great_expectations.core.metric_domain_types import MetricDomainTypes
from great_expectations.execution_engine import PandasExecutionEngine, SparkDFExecutionEngine, SqlAlchemyExecutionEngine
from great_expectations.expectations.metrics.metric_provider import metric_value
from great_expectations.expectations.metrics.table_metric_provider import TableMetricProvider
from great_expectations.validator.metric_configuration import MetricConfiguration

from labelgate.core.estimate import DEFAULT_CI_METHOD, Estimate
from labelgate.core.ratings import Ratings, ratings_by_pool
from labelgate.errors import ParameterError, Reason
from labelgate.gx._spark import spark_pools  # pyspark: imported by the Spark backend
from labelgate.gx._sql import AGGREGATE_KEYS, refusal, refuse, sql_metric, sql_pools  # SQLAlchemy: imported by the plan
from labelgate.metrics._resamples import sharing
from labelgate.metrics.cross import IRR_BUILDERS, cross_kappa, irr_comparison, normalized_cross_kappa
from labelgate.metrics.spa import WEIGHTINGS, spa
from labelgate.sqlagg.pools import (
    Pools,
    missing_pool,
    missing_pool_column,
    missing_question,
    missing_question_column,
    pool_coverage,
)

#: Parameters every LabelGate metric reads (the expectation's success keys include them).
COMMON_VALUE_KEYS: tuple[str, ...] = (
    "item_column", "rater_column", "label_column", "pool_column", "question_column", "question",
    "crowd_pool", "trusted_pool", "level", "distance", "categories", "duplicates", "ci", "ci_method", "n_boot",
    "seed",
)

#: IRR metrics selectable in the IRR-baseline and normalized-kappa_x expectations.
IRR_METRICS: tuple[str, ...] = tuple(IRR_BUILDERS)

NUMERIC_LEVELS = ("interval", "ratio")

# Renaming of the core's replication-neutral keys (x = crowd, y = trusted).
_RENAME = (("irr_x", "irr_crowd"), ("irr_y", "irr_trusted"))
_DROP = ("coverage_x", "coverage_y", "n_common_items")


# ----------------------------------------------------------------- splitting
def _select_question(df: Any, kw: dict[str, Any]) -> Any:
    question = kw.get("question")
    if question is None:
        return df
    column = kw["question_column"]
    if column not in df.columns:
        raise missing_question_column(question, column, df.columns)
    mask = (df[column] == question).to_numpy(dtype=bool, na_value=False)
    if not mask.any():
        raise missing_question(question, column, df[column].dropna().unique())
    return df.loc[mask]


def _check_pool(df: Any, column: str, name: str, value: Any) -> Any:
    mask = (df[column] == value).to_numpy(dtype=bool, na_value=False)
    if not mask.any():
        raise missing_pool(column, name, value, df[column].dropna().unique())
    return mask


# The expectations of one suite validate the same batch: GX hands every metric provider the same DataFrame object,
# so the pools are built once per (batch content, parameters) and shared. The key holds a hash of the columns read
# (a DataFrame changed in place between validations is never served stale pools); the entry is dropped with the
# DataFrame. Hashing costs about a third of building the pools (0.018 s vs 0.061 s on 135,000 rows).
_SPLITS: dict[int, tuple[weakref.ref[Any], dict[Any, Pools]]] = {}
_SPLITS_LOCK = threading.RLock()  # re-entrant: the weakref callback may run inside the lock (GC)
_SPLIT_KEYS = ("question", "question_column", "pool_column", "item_column", "rater_column", "label_column", "level",
               "distance", "crowd_pool", "trusted_pool", "duplicates")


def split_pools(df: Any, kw: dict[str, Any], *, need_trusted: bool) -> Pools:
    """:func:`build_pools`, shared by the expectations that validate the same batch with the same parameters."""
    import pandas as pd

    columns = [c for c in (kw.get("item_column"), kw.get("rater_column"), kw.get("label_column"),
                           kw.get("pool_column"), kw.get("question_column")) if c is not None and c in df.columns]
    try:
        content = int(pd.util.hash_pandas_object(df[columns], index=True).sum()) if columns else 0
        key = (content, len(df), tuple(repr(kw.get(k)) for k in _SPLIT_KEYS),
               repr(kw.get("categories")))
    except TypeError:  # a column pandas cannot hash: build without sharing
        return build_pools(df, kw, need_trusted=need_trusted)
    frame_id = id(df)
    with _SPLITS_LOCK:
        ref, cached = _SPLITS.get(frame_id, (None, {}))
        if ref is None or ref() is not df:
            cached = {}
            _SPLITS[frame_id] = (weakref.ref(df, _forget(frame_id)), cached)
        hit = cached.get(key)
        # the same rows serve both kinds of expectation; one that needs the trusted pool still gets its error
        if hit is not None and (hit.trusted is not None or not need_trusted):
            return hit
    pools = build_pools(df, kw, need_trusted=need_trusted)
    with _SPLITS_LOCK:
        cached[key] = pools
    return pools


def _forget(frame_id: int) -> Any:
    """The weakref callback that drops a collected DataFrame's shared pools."""

    def forget(_: Any) -> None:
        with _SPLITS_LOCK:
            _SPLITS.pop(frame_id, None)

    return forget


def build_pools(df: Any, kw: dict[str, Any], *, need_trusted: bool) -> Pools:
    """Filter the batch to one question and split it into crowd / trusted Ratings.

    Raises
    ------
    ParameterError
        Naming ``question`` / ``question_column`` / ``pool_column`` /
        ``crowd_pool`` / ``trusted_pool`` when the batch does not hold what
        the parameter names.
    """
    df = _select_question(df, kw)
    pool_col = kw.get("pool_column")
    ratings_kw = {"item": kw["item_column"], "rater": kw["rater_column"], "value": kw["label_column"],
                  "level": kw["level"], "categories": kw.get("categories")}
    if kw["level"] == "set":  # multi-label: sets compared by a set distance (labelgate.core.sets)
        ratings_kw["distance"] = kw.get("distance") or "jaccard"
    if pool_col is None:
        if need_trusted:
            raise missing_pool_column(None, df.columns)
        crowd = Ratings.from_long(df, duplicates=kw["duplicates"], missing="drop", **ratings_kw)
        return Pools(crowd, None, pool_coverage(crowd, None))
    if pool_col not in df.columns:
        raise missing_pool_column(pool_col, df.columns)
    crowd_mask = _check_pool(df, pool_col, "crowd_pool", kw["crowd_pool"])
    trusted_value = kw.get("trusted_pool")
    if need_trusted:
        keep = crowd_mask | _check_pool(df, pool_col, "trusted_pool", trusted_value)
    else:  # the trusted pool is optional here; use it only for the coverage figure
        keep = crowd_mask | (df[pool_col] == trusted_value).to_numpy(dtype=bool, na_value=False)
    pools = ratings_by_pool(df.loc[keep], pool=pool_col, duplicates=kw["duplicates"], **ratings_kw)
    crowd = pools[_key(pools, kw["crowd_pool"])]
    trusted = pools.get(_key(pools, trusted_value)) if trusted_value is not None else None
    return Pools(crowd, trusted, pool_coverage(crowd, trusted))


def _trusted(pools: Pools) -> Ratings:
    if pools.trusted is None:  # unreachable: building the pools with need_trusted=True raises first
        raise ParameterError("The 'trusted_pool' parameter names no pool of the batch.", parameter="trusted_pool")
    return pools.trusted


def _key(pools: dict[Any, Ratings], value: Any) -> Any:
    """Pool keys are python scalars; match the parameter by value or by its string form."""
    if value in pools:
        return value
    matches = [k for k in pools if str(k) == str(value)]
    return matches[0] if matches else value


# --------------------------------------------------------------- core calls
def _boot(kw: dict[str, Any]) -> dict[str, Any]:
    return {"ci": kw.get("ci"), "ci_method": kw.get("ci_method") or DEFAULT_CI_METHOD,
            "n_boot": int(kw.get("n_boot") or 2000), "seed": kw.get("seed")}


def _weights(kw: dict[str, Any]) -> Any:
    """The ``weights`` parameter for the core: a name as given, a matrix (GX keeps it as lists) as an array."""
    import numpy as np

    weights = kw.get("weights")
    return weights if weights is None or isinstance(weights, str) else np.asarray(weights, dtype=float)


def _package(est: Estimate, pools: Pools, **extra: Any) -> dict[str, Any]:
    """``Estimate.to_dict()`` with crowd/trusted names, coverage and extra fields."""
    out: dict[str, Any] = {}
    for key, value in est.to_dict().items():
        if key in _DROP:
            continue
        for old, new in _RENAME:
            if key.startswith(old):
                key = new + key[len(old):]
        out[key] = value
    out["coverage"] = pools.coverage
    out.update(extra)
    return out


def _shared(pools: Pools, metric: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """``metric(*args, **kwargs)`` packaged, its bootstrap drawing the suite's shared resamples."""
    with sharing(pools.resamples):
        est = metric(*args, **kwargs)
    return _package(est, pools)


def pools_cross_kappa(pools: Pools, kw: dict[str, Any]) -> dict[str, Any]:
    """kappa_x(crowd, trusted) of the batch (:func:`labelgate.cross_kappa`)."""
    return _shared(pools, cross_kappa, pools.crowd, _trusted(pools), **_boot(kw))


def pools_normalized_cross_kappa(pools: Pools, kw: dict[str, Any]) -> dict[str, Any]:
    """Normalized kappa_x(crowd, trusted) (:func:`labelgate.normalized_cross_kappa`)."""
    return _shared(pools, normalized_cross_kappa, pools.crowd, _trusted(pools), irr=kw["irr"],
                   weights=_weights(kw), **_boot(kw))


def pools_irr_comparison(pools: Pools, kw: dict[str, Any]) -> dict[str, Any]:
    """IRR of the crowd and of the trusted pool on their common items, jointly bootstrapped."""
    return _shared(pools, irr_comparison, pools.crowd, _trusted(pools), irr=kw["irr"], weights=_weights(kw),
                   **_boot(kw))


def pools_spa(pools: Pools, kw: dict[str, Any]) -> dict[str, Any]:
    """SPA of the crowd pool (:func:`labelgate.spa`)."""
    return _shared(pools, spa, pools.crowd, weighting=kw["weighting"], **_boot(kw))


def pools_icc_gap(pools: Pools, kw: dict[str, Any]) -> dict[str, Any]:
    """Labeler ICC and item ICC of the crowd pool, their gap and the variance components.

    One call to :func:`labelgate.metrics.variance.item_icc` gives both ICCs
    and the interval of their difference from the same bootstrap replicates.
    Only numeric labels have variance components: interval/ratio levels, or
    binary labels (two categories; the shares do not depend on which one is
    coded 1). Other labels give a NaN result with a reason instead of a
    number computed on category ranks.
    """
    crowd = pools.crowd
    if crowd.level not in NUMERIC_LEVELS and crowd.n_categories > 2:
        return _undefined_icc(pools, crowd)
    # Imported lazily: the variance-components module is optional for the rest of the package.
    from labelgate.metrics.variance import item_icc, labeler_icc, variance_components

    # the variance components' bootstrap (items and raters) has its percentile interval only
    item = item_icc(crowd, **{k: v for k, v in _boot(kw).items() if k != "ci_method"})
    d = item.details
    labeler = _num(d.get("labeler_icc"))
    reason = item.reason
    if reason is None and labeler is None:
        reason = labeler_icc(crowd).reason or "the labeler ICC is undefined"
    gap = None if labeler is None or item.is_nan else item.value - labeler
    low, high = item.ci if item.ci is not None else (None, None)
    return {
        "metric": "labeler_icc", "value": labeler, "ci_low": _num(d.get("labeler_icc_ci_low")),
        "ci_high": _num(d.get("labeler_icc_ci_high")), "ci_level": item.ci_level, "n_boot": item.n_boot,
        "n_items": item.n_items, "n_ratings": item.n_ratings, "n_items_excluded": item.n_items_excluded,
        "reason": reason, "reason_code": item.reason_code.value if item.reason_code else None,
        "labeler_icc": labeler, "item_icc": _num(item.value), "item_icc_ci_low": _num(low),
        "item_icc_ci_high": _num(high), "gap": gap,
        "gap_ci_low": _num(d.get("icc_minus_labeler_icc_ci_low")),
        "gap_ci_high": _num(d.get("icc_minus_labeler_icc_ci_high")),
        "variance_components": variance_components(crowd).to_dict(), "resample": d.get("resample"),
        "coverage": pools.coverage,
    }


def compute_cross_kappa(df: Any, kw: dict[str, Any]) -> dict[str, Any]:
    """:func:`pools_cross_kappa` of a DataFrame batch."""
    return pools_cross_kappa(split_pools(df, kw, need_trusted=True), kw)


def compute_spa(df: Any, kw: dict[str, Any]) -> dict[str, Any]:
    """:func:`pools_spa` of a DataFrame batch."""
    return pools_spa(split_pools(df, kw, need_trusted=False), kw)


def _num(value: Any) -> float | None:
    """A finite float, or None (JSON-friendly NaN)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _undefined_icc(pools: Pools, crowd: Ratings) -> dict[str, Any]:
    reason = (f"labeler ICC and item ICC need numeric labels (level 'interval' or 'ratio') or a binary label; "
              f"the labels are {crowd.level} with {crowd.n_categories} categories "
              f"{list(crowd.categories)[:10]} (use level='interval' if the scale is equally spaced)")
    est = Estimate("labeler_icc", math.nan, n_items=crowd.n_items, n_ratings=crowd.n_ratings,
                   reason=reason, reason_code=Reason.INCOMPATIBLE_RATINGS)
    out = _package(est, pools)
    out.update({"item_icc": None, "labeler_icc": None, "gap": None, "variance_components": None})
    return out


# ------------------------------------------------------------- GX providers
class LabelGateTableMetric(TableMetricProvider):
    """Shared GX plumbing: build the batch's pools on the engine, then finish with the core (``finish``).

    On pandas the pools come from the DataFrame (:func:`split_pools`); on a SQL
    engine from aggregate queries run in the database (:mod:`labelgate.gx._sql`).
    Either way the same ``pools_*`` function computes the metric.
    """

    metric_name: str = ""  # set by subclasses (GX registers a provider by it)
    value_keys: tuple[str, ...] = COMMON_VALUE_KEYS
    finish: Any = None  # set by subclasses: staticmethod(pools_*)
    #: Whether the metric compares the crowd with the trusted pool (both must then be in the batch).
    need_trusted: bool = True

    @metric_value(engine=PandasExecutionEngine)
    def _pandas(cls, execution_engine: PandasExecutionEngine, metric_domain_kwargs: dict,  # noqa: N805
                metric_value_kwargs: dict, metrics: dict, runtime_configuration: dict) -> dict[str, Any]:
        df, _, _ = execution_engine.get_compute_domain(metric_domain_kwargs, domain_type=MetricDomainTypes.TABLE)
        kw = dict(metric_value_kwargs)
        return cls.finish(split_pools(df, kw, need_trusted=cls.need_trusted), kw)

    @metric_value(engine=SqlAlchemyExecutionEngine)
    def _sql(cls, execution_engine: SqlAlchemyExecutionEngine, metric_domain_kwargs: dict,  # noqa: N805
             metric_value_kwargs: dict, metrics: dict, runtime_configuration: dict) -> dict[str, Any]:
        kw = dict(metric_value_kwargs)
        refuse(cls.metric_name, kw, "sql")  # label sets: before the aggregates, which it does not depend on
        return sql_metric(cls.finish, metrics[_SQL_POOLS], kw, need_trusted=cls.need_trusted,
                          metric_name=cls.metric_name)

    @metric_value(engine=SparkDFExecutionEngine)
    def _spark(cls, execution_engine: SparkDFExecutionEngine, metric_domain_kwargs: dict,  # noqa: N805
               metric_value_kwargs: dict, metrics: dict, runtime_configuration: dict) -> dict[str, Any]:
        kw = dict(metric_value_kwargs)
        refuse(cls.metric_name, kw, "spark")  # before the aggregates: a refused metric does not depend on them
        return sql_metric(cls.finish, metrics[_SQL_POOLS], kw, need_trusted=cls.need_trusted,
                          metric_name=cls.metric_name)

    @classmethod
    def _get_evaluation_dependencies(cls, metric: MetricConfiguration, configuration: Any = None,
                                     execution_engine: Any = None, runtime_configuration: dict | None = None,
                                     ) -> dict[str, MetricConfiguration]:
        """On a SQL engine: the batch's aggregates (``labelgate.table.sql_pools``), resolved once per validation
        for every metric with the same domain and aggregate parameters."""
        dependencies = super()._get_evaluation_dependencies(metric, configuration, execution_engine,
                                                            runtime_configuration)
        if isinstance(execution_engine, (SqlAlchemyExecutionEngine, SparkDFExecutionEngine)):
            kw = dict(metric.metric_value_kwargs or {})
            engine = "spark" if isinstance(execution_engine, SparkDFExecutionEngine) else "sql"
            if refusal(cls.metric_name, kw, engine) is None:  # a refused metric fetches nothing
                dependencies[_SQL_POOLS] = MetricConfiguration(
                    metric_name=_SQL_POOLS, metric_domain_kwargs=metric.metric_domain_kwargs,
                    metric_value_kwargs={k: kw.get(k) for k in AGGREGATE_KEYS})
        return dependencies


_SQL_POOLS = "labelgate.table.sql_pools"


class TableSqlPools(TableMetricProvider):
    """``labelgate.table.sql_pools``: a SQL or Spark batch's aggregates and the pools built from them.

    The other LabelGate metrics depend on it on a SQL engine, so GX runs the aggregate queries once per batch and
    parameters, whatever the number of expectations of the suite.
    """

    metric_name = _SQL_POOLS
    value_keys = AGGREGATE_KEYS

    @metric_value(engine=SqlAlchemyExecutionEngine)
    def _sql(cls, execution_engine: SqlAlchemyExecutionEngine, metric_domain_kwargs: dict,  # noqa: N805
             metric_value_kwargs: dict, metrics: dict, runtime_configuration: dict) -> Any:
        selectable, _, _ = execution_engine.get_compute_domain(metric_domain_kwargs,
                                                               domain_type=MetricDomainTypes.TABLE)
        return sql_pools(execution_engine, selectable, dict(metric_value_kwargs))

    @metric_value(engine=SparkDFExecutionEngine)
    def _spark(cls, execution_engine: SparkDFExecutionEngine, metric_domain_kwargs: dict,  # noqa: N805
               metric_value_kwargs: dict, metrics: dict, runtime_configuration: dict) -> Any:
        df, _, _ = execution_engine.get_compute_domain(metric_domain_kwargs, domain_type=MetricDomainTypes.TABLE)
        return spark_pools(df, dict(metric_value_kwargs))


class TableCrossKappa(LabelGateTableMetric):
    """``labelgate.table.cross_kappa``: kappa_x of crowd vs trusted."""

    metric_name = "labelgate.table.cross_kappa"
    finish = staticmethod(pools_cross_kappa)


class TableNormalizedCrossKappa(LabelGateTableMetric):
    """``labelgate.table.normalized_cross_kappa``."""

    metric_name = "labelgate.table.normalized_cross_kappa"
    value_keys = (*COMMON_VALUE_KEYS, "irr", "weights")
    finish = staticmethod(pools_normalized_cross_kappa)


class TableIrrComparison(LabelGateTableMetric):
    """``labelgate.table.irr_comparison``: crowd and trusted IRR on common items."""

    metric_name = "labelgate.table.irr_comparison"
    value_keys = (*COMMON_VALUE_KEYS, "irr", "weights")
    finish = staticmethod(pools_irr_comparison)


class TableSpa(LabelGateTableMetric):
    """``labelgate.table.spa``: SPA of the crowd pool."""

    metric_name = "labelgate.table.spa"
    value_keys = (*COMMON_VALUE_KEYS, "weighting")
    finish = staticmethod(pools_spa)
    need_trusted = False


class TableIccGap(LabelGateTableMetric):
    """``labelgate.table.icc_gap``: labeler ICC and item ICC of the crowd pool."""

    metric_name = "labelgate.table.icc_gap"
    finish = staticmethod(pools_icc_gap)
    need_trusted = False


__all__ = ["COMMON_VALUE_KEYS", "IRR_METRICS", "NUMERIC_LEVELS", "WEIGHTINGS", "irr_comparison", "split_pools"]
