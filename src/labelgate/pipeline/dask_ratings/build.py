"""The public entry points: a Dask DataFrame in, one :class:`PartitionedRatings` per pool out.

:func:`_build` is the only place that sequences the round trips between driver and workers: it sends the
:mod:`.kernels` to the partitions, hands their results to the :class:`~.plan.Plan` and to the duplicate exchange
(:mod:`.duplicates`), and wraps the plan's :class:`~.ratings.PoolStatistics` into ratings whose codes stay on
the cluster (:class:`~.cluster.ClusterCodes`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from labelgate.core.ratings import LEVELS, DuplicatePolicy, IntArray, Level, MissingPolicy
from labelgate.errors import InputError, ParameterError, Reason, check_option
from labelgate.pipeline.dask_ratings.cluster import ClusterCodes, import_dask
from labelgate.pipeline.dask_ratings.duplicates import (
    duplicate_tasks,
    gather_duplicates,
    resolve_duplicates,
)
from labelgate.pipeline.dask_ratings.kernels import (
    encode,
    factorize_partition,
    first_row_with,
    first_values,
    partition_statistics,
    summarize,
)
from labelgate.pipeline.dask_ratings.plan import Plan, check_missing_ids
from labelgate.pipeline.dask_ratings.ratings import PartitionedRatings


def ratings_from_dask(frame: Any, item: str = "item_id", rater: str = "rater_id", value: str = "label", *,
                      level: Level = "nominal", categories: Sequence[Any] | None = None,
                      duplicates: DuplicatePolicy = "error", missing: MissingPolicy = "drop") -> PartitionedRatings:
    """Build a :class:`PartitionedRatings` from a Dask DataFrame with one row per judgement.

    The partitioned counterpart of :meth:`Ratings.from_long <labelgate.Ratings.from_long>`: same parameters,
    same errors, and every metric gives the same value (and, with the same seed, the same bootstrap
    interval) as on ``Ratings.from_long(frame.compute(), ...)``.

    Parameters
    ----------
    frame : dask.dataframe.DataFrame
        The judgements, in any number of partitions; one item's judgements may span several partitions.
    item, rater, value : str
        Column names of the item id, rater id and label.
    level : {"nominal", "ordinal", "interval", "ratio"}, default "nominal"
        Measurement level of the label.
    categories : sequence, optional
        Explicit ordered category list; default the sorted observed labels.
    duplicates : {"error", "first", "last"}, default "error"
        A rater who judged an item more than once (in any partitions): error, or keep the first / last row
        in the table's order.
    missing : {"drop", "error"}, default "drop"
        Rows with a missing label are dropped (counted in ``n_dropped_missing``) or rejected.

    Returns
    -------
    PartitionedRatings

    Raises
    ------
    InputError
        As :meth:`Ratings.from_long`; error messages name the row label in its partition.
    ParameterError
        ``frame`` is not a Dask DataFrame, or an option is invalid.

    Examples
    --------
    >>> import pytest; dd = pytest.importorskip("dask.dataframe")
    >>> import dask, pandas as pd, labelgate as lg
    >>> df = pd.DataFrame({"item_id": [1, 1, 2, 2, 3, 3], "rater_id": list("ababab"),
    ...                    "label": ["x", "x", "y", "x", "y", "y"]})
    >>> with dask.config.set(scheduler="sync"):
    ...     r = ratings_from_dask(dd.from_pandas(df, npartitions=4))
    >>> r.n_partitions, r.n_items, r.item_counts.tolist()
    (4, 3, [[2, 0], [1, 1], [0, 2]])
    >>> float(lg.fleiss_kappa(r)) == float(lg.fleiss_kappa(lg.Ratings.from_long(df)))
    True
    """
    _check_options(level, duplicates, missing, "ratings_from_dask")
    return _build(frame, {"item": item, "rater": rater, "value": value}, level=level, categories=categories,
                  duplicates=duplicates, missing=missing)[None]


def ratings_by_pool_dask(frame: Any, pool: str = "pool", item: str = "item_id", rater: str = "rater_id",
                         value: str = "label", *, level: Level = "nominal", categories: Sequence[Any] | None = None,
                         duplicates: DuplicatePolicy = "error", missing: MissingPolicy = "drop",
                         ) -> dict[Any, PartitionedRatings]:
    """Split a partitioned table with a pool column into one :class:`PartitionedRatings` per pool.

    The partitioned counterpart of :func:`labelgate.ratings_by_pool`: all pools share one category list and
    one item index (every item of the table), so cross-replication metrics align items by code; each pool's
    statistics equal those of the in-memory split.

    Examples
    --------
    >>> import pytest; dd = pytest.importorskip("dask.dataframe")
    >>> import dask, pandas as pd, labelgate as lg
    >>> df = pd.DataFrame({"item_id": [1, 1, 2, 2, 1, 2], "rater_id": list("ababcc"),
    ...                    "label": [0, 0, 1, 0, 0, 1], "pool": ["crowd"] * 4 + ["trusted"] * 2})
    >>> with dask.config.set(scheduler="sync"):
    ...     pools = ratings_by_pool_dask(dd.from_pandas(df, npartitions=3))
    >>> sorted(pools), pools["trusted"].n_ratings
    (['crowd', 'trusted'], 2)
    """
    _check_options(level, duplicates, missing, "ratings_by_pool_dask")
    return _build(frame, {"item": item, "rater": rater, "value": value, "pool": pool}, level=level,
                  categories=categories, duplicates=duplicates, missing=missing)


def _check_options(level: str, duplicates: str, missing: str, function: str) -> None:
    if level == "set":  # the partitions' statistics are item x category counts: no distance between two sets
        raise ParameterError(f"The 'level' parameter of {function} must be one of {', '.join(map(repr, LEVELS))}; "
                             "got 'set': the Dask backend adds up one category per judgement, and label sets are "
                             "compared by a distance between sets. Build them in memory: Ratings.from_long("
                             "frame.compute(), level='set', distance='jaccard' or 'masi'), as for spans "
                             "(Ratings.from_spans) and boxes (Ratings.from_boxes).", parameter="level", value=level)
    check_option(level, LEVELS, "level", function)
    check_option(duplicates, ("error", "first", "last"), "duplicates", function)
    check_option(missing, ("drop", "error"), "missing", function)


def _check_frame(frame: Any, columns: dict[str, str]) -> None:
    if not (hasattr(frame, "to_delayed") and hasattr(frame, "npartitions") and hasattr(frame, "columns")):
        raise ParameterError(f"The Dask backend takes a dask DataFrame; got {type(frame).__name__} (use "
                             "Ratings.from_long for an in-memory table).", parameter="frame")
    present = list(frame.columns)
    for role in ("pool", "item", "rater", "value"):  # the in-memory builder's order
        if role in columns and columns[role] not in present:
            raise InputError(f"Column {columns[role]!r} (the {role} column) is missing; the data has columns "
                             f"{sorted(map(str, present))}.", Reason.MISSING_COLUMN, column=columns[role])


def _build(frame: Any, columns: dict[str, str], *, level: Level, categories: Sequence[Any] | None,
           duplicates: DuplicatePolicy, missing: MissingPolicy) -> dict[Any, PartitionedRatings]:
    """Ratings per pool name (``None`` when ``columns`` has no pool column), checked as the in-memory path."""
    dask = import_dask()
    _check_frame(frame, columns)
    delayed = dask.delayed
    plan, codes = _encode(dask, frame, columns, level=level, categories=categories, missing=missing)
    space = plan.key_space
    # One round trip for the first values, the duplicate exchange and (when the statistics do not depend on
    # the first values) the statistics; duplicates are rare, and only then is anything computed again.
    tasks = [[delayed(first_values)(c, plan.n_pools) for c in codes], duplicate_tasks(codes, space)]
    if not plan.with_moments:
        request = plan.statistics_request(None)
        tasks.append([delayed(partition_statistics)(c, request) for c in codes])
    results = dask.compute(*tasks)
    first, missing_counts = plan.first_and_missing(results[0])
    plan.check_not_empty(first)
    dup_keys, dup_counts = gather_duplicates(results[1])
    parts = results[2] if len(results) > 2 else None
    if dup_keys.size:
        codes = resolve_duplicates(codes, space, dup_keys, dup_counts, duplicates, plan.labels["item"],
                                   plan.labels["rater"])
        first, _ = plan.first_and_missing(dask.compute([delayed(first_values)(c, plan.n_pools) for c in codes])[0])
        parts = None
    if parts is None:
        request = plan.statistics_request(first)
        parts = dask.compute([delayed(partition_statistics)(c, request) for c in codes])[0]
    source = ClusterCodes(codes, plan.n_pools)
    return {name: PartitionedRatings(stats, source=source, n_partitions=len(codes))
            for name, stats in plan.combine(first, missing_counts, parts).items()}


def _encode(dask: Any, frame: Any, columns: dict[str, str], *, level: Level, categories: Sequence[Any] | None,
            missing: MissingPolicy) -> tuple[Plan, list[Any]]:
    """The plan and every partition's persisted :class:`~.kernels.Codes` (steps 1 and 2: factorise, recode).

    The local factorisation lives on the workers only while this runs.
    """
    delayed = dask.delayed
    factorized = list(dask.persist(*[delayed(factorize_partition)(part, columns) for part in frame.to_delayed()]))
    summaries = dask.compute(*[delayed(summarize)(p) for p in factorized])
    if sum(s.n_rows for s in summaries) == 0:
        raise InputError("The ratings table is empty (0 rows).", Reason.EMPTY_INPUT)
    check_missing_ids(summaries, columns)
    plan = Plan(summaries, columns, level, categories, pooled="pool" in columns)
    if plan.pooled:  # ratings_by_pool resolves the shared category list before checking each pool
        plan.resolve_categories()
        plan.check_missing_values(missing)
    else:
        plan.check_missing_values(missing)
        plan.resolve_categories()

    def first_row(part: int, local_codes: IntArray) -> Any:
        return dask.compute(delayed(first_row_with)(factorized[part], "value", local_codes))[0]

    plan.check_unknown_values(first_row)
    codes = dask.persist(*[delayed(encode)(p, plan.local_maps(k), plan.n_pools) for k, p in enumerate(factorized)])
    return plan, list(codes)
