r"""Dask backend: the sufficient statistics of a partitioned table, combined into a `Ratings`.

:func:`ratings_from_dask` and :func:`ratings_by_pool_dask` are the partitioned counterparts of
:meth:`Ratings.from_long <labelgate.Ratings.from_long>` and :func:`labelgate.ratings_by_pool`. They take a Dask
DataFrame (e.g. ``dask.dataframe.read_parquet`` of a partitioned dataset) and return
:class:`PartitionedRatings`: a :class:`~labelgate.Ratings` whose item x category counts, per-item and per-rater
moments and rater tallies were computed partition by partition and added up, so that every metric and its
bootstrap give the value of the in-memory path (tested to 1e-12 on random partitionings).

How the work is split (``n`` judgements, ``P`` partitions, ``I`` items, ``R`` raters, ``q`` categories):

1. **Factorise** each partition locally (its ids and labels become integer codes; the codes stay on the
   workers). Only the partition's *distinct* ids and labels travel to the driver.
2. **Global codes.** The driver concatenates the distinct values in partition order and keeps the first
   appearance of each, which is exactly the order in which pandas factorises the whole column. An item split
   across partitions therefore gets one code, and codes (hence the bootstrap's item axis) are those of the
   in-memory path. Each partition receives its small local-to-global map.
3. **Duplicates** (a rater judging an item twice, possibly in two partitions) are found by a hash exchange:
   every partition splits its (pool, item, rater) keys into buckets, one task per bucket finds the repeated
   keys. Only repeated keys reach the driver; ``duplicates="first"/"last"`` then drops the right rows where
   they live.
4. **Statistics.** Each partition returns, per pool, its item x category counts and moments (sparse: only the
   items it holds) and its rater tallies; the driver adds them into the dense arrays the core uses.

What lives where: the driver holds the ``I x q`` count matrix of each pool, the ``R x q`` rater tallies and
the id labels (measured for 10^7 judgements on 2 x 10^6 items: the driver's RSS grew by 0.6 GB, 0.9 GB at the
peak of the build);
this is also what the bootstrap needs, which runs on the driver (``counts @ block``) exactly as in memory. The
per-judgement codes stay on the workers (about 40 bytes per judgement). Metrics that need rater information
per judgement (Conger's kappa, Cohen's kappa, Janson-Olsson's iota and their bootstraps, the rater diagnostics)
read ``item_codes`` / ``rater_codes`` / ``value_codes``: those are fetched from the workers on first use (24
bytes per judgement on the driver) and cached. Krippendorff's alpha, Fleiss' kappa / Scott's pi, Gwet's AC,
Bennett's S, percent and specific agreement, SPA and the cross-replication kappas never touch them.

Moments: with integer category values (always for nominal and ordinal labels, whose values are the ranks),
per-item and per-rater moments are exact integer sums, so the driver derives them from the counts. Other
values are summed on the workers, centred as the core centres them (at the first judgement's value, which
keeps ``n S2 - S1^2`` exact on constant data); each pool's moments are kept centred at every pool's centre,
because the cross-replication kappa centres both replications at the first one's centre.

This module imports dask lazily: install it with the ``dask`` extra (``pip install labelgate[dask]``). The
computations use the current Dask scheduler; create a ``distributed.Client`` first to run them on a cluster.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from labelgate.core.ratings import (
    LEVELS,
    MAX_COUNT_CELLS,
    DuplicatePolicy,
    FloatArray,
    IntArray,
    Level,
    MissingPolicy,
    Ratings,
    _python_scalar,
    _resolve_categories,
)
from labelgate.errors import InputError, LabelGateError, ParameterError, Reason, check_option

__all__ = ["DistributedError", "PartitionedRatings", "ratings_by_pool_dask", "ratings_from_dask"]

# Keys of the duplicate exchange are (pool * n_items + item) * n_raters + rater; they must fit in int64.
_MAX_KEY = 2**62
# Number of buckets of the duplicate exchange (capped: each bucket is one task).
_MAX_BUCKETS = 64


class DistributedError(LabelGateError, RuntimeError):
    """The per-judgement codes of a :class:`PartitionedRatings` cannot be fetched (released, cluster gone)."""

    default_code = Reason.INVALID_PARAMETER


# ------------------------------------------------------------------------------------ partition kernels
# These run on the workers: numpy/pandas only, one partition at a time.


@dataclass
class _Factorized:
    """One partition, factorised locally: ``codes[role][j]`` indexes ``uniques[role]``; -1 is missing."""

    codes: dict[str, IntArray]
    uniques: dict[str, pd.Index]
    index: Any


@dataclass
class _Codes:
    """The kept judgements of one partition in global codes (rows in partition order)."""

    item: IntArray
    rater: IntArray
    value: IntArray
    pool: IntArray
    position: IntArray
    index: Any
    missing_per_pool: IntArray


def _factorize_partition(frame: pd.DataFrame, columns: dict[str, str]) -> _Factorized:
    codes, uniques = {}, {}
    for role, name in columns.items():
        local, distinct = frame[name].factorize()
        codes[role] = np.asarray(local, dtype=np.int64)
        uniques[role] = distinct  # an Index of the column's dtype (pyarrow strings stay compact)
    return _Factorized(codes, uniques, frame.index)


def _summarize(part: _Factorized) -> dict[str, Any]:
    """Distinct values, row count and the first missing entry of each column (for error messages)."""
    missing = {}
    for role, local in part.codes.items():
        bad = np.flatnonzero(local < 0)
        missing[role] = (int(bad.size), _label(part.index, bad[0]) if bad.size else None)
    n_rows = len(next(iter(part.codes.values())))
    return {"uniques": part.uniques, "n_rows": n_rows, "missing": missing}


def _first_row_with(part: _Factorized, role: str, local_codes: IntArray) -> Any:
    """Row label of the first row whose ``role`` column has one of ``local_codes``."""
    rows = np.flatnonzero(np.isin(part.codes[role], local_codes))
    return _label(part.index, rows[0]) if rows.size else None


def _encode(part: _Factorized, maps: dict[str, IntArray], n_pools: int) -> _Codes:
    value = part.codes["value"]
    keep = value >= 0
    rows = np.flatnonzero(keep)
    pool_all = maps["pool"][part.codes["pool"]] if "pool" in part.codes else np.zeros(value.size, np.int64)
    missing = np.bincount(pool_all[~keep], minlength=n_pools).astype(np.int64)
    return _Codes(item=maps["item"][part.codes["item"][rows]], rater=maps["rater"][part.codes["rater"][rows]],
                  value=maps["value"][value[rows]], pool=pool_all[rows], position=rows.astype(np.int64),
                  index=part.index, missing_per_pool=missing)


def _keys(codes: _Codes, n_items: int, n_raters: int) -> IntArray:
    return (codes.pool * n_items + codes.item) * n_raters + codes.rater


def _split_keys(codes: _Codes, n_items: int, n_raters: int, n_buckets: int) -> tuple[IntArray, ...]:
    keys = _keys(codes, n_items, n_raters)
    bucket = (keys % n_buckets).astype(np.uint8 if n_buckets <= 256 else np.int64)
    order = np.argsort(bucket, kind="stable")  # a radix sort for small integers
    bounds = np.cumsum(np.bincount(bucket, minlength=n_buckets))[:-1]
    return tuple(np.split(keys[order], bounds))


def _repeated_keys(*pieces: IntArray) -> tuple[IntArray, IntArray]:
    """Keys that occur more than once in a bucket, and how many times."""
    keys = np.sort(np.concatenate(pieces))
    same = keys[1:] == keys[:-1]
    if not same.any():
        return np.empty(0, np.int64), np.empty(0, np.int64)
    found = np.unique(keys[1:][same])
    counts = np.searchsorted(keys, found, side="right") - np.searchsorted(keys, found, side="left")
    return found, counts.astype(np.int64)


def _rows_with_keys(codes: _Codes, keys: IntArray, n_items: int, n_raters: int, with_labels: bool,
                    ) -> tuple[IntArray, IntArray, list[Any]]:
    """(key, row position, row label if asked) of the rows whose key is in ``keys``."""
    own = _keys(codes, n_items, n_raters)
    rows = np.flatnonzero(np.isin(own, keys))
    labels = [_label(codes.index, p) for p in codes.position[rows]] if with_labels else []
    return own[rows], codes.position[rows], labels


def _drop_positions(codes: _Codes, positions: IntArray) -> _Codes:
    keep = ~np.isin(codes.position, positions)
    return _Codes(codes.item[keep], codes.rater[keep], codes.value[keep], codes.pool[keep], codes.position[keep],
                  codes.index, codes.missing_per_pool)


def _first_values(codes: _Codes, n_pools: int) -> tuple[IntArray, IntArray]:
    """Category code of each pool's first kept judgement (-1: none) and the missing counts."""
    first = np.full(n_pools, -1, dtype=np.int64)
    for pool in range(n_pools):
        rows = np.flatnonzero(codes.pool == pool) if n_pools > 1 else np.arange(min(codes.pool.size, 1))
        if rows.size:
            first[pool] = codes.value[rows[0]]
    return first, codes.missing_per_pool


def _partition_statistics(codes: _Codes, n_pools: int, q: int, category_values: FloatArray,
                          centers: Sequence[float], with_counts: bool, with_moments: bool,
                          ) -> list[dict[str, np.ndarray] | None]:
    """Per pool: sparse item statistics (the items this partition holds) and rater tallies."""
    out: list[dict[str, np.ndarray] | None] = []
    single = n_pools == 1
    for pool in range(n_pools):
        sel = slice(None) if single else codes.pool == pool
        item, rater, value = codes.item[sel], codes.rater[sel], codes.value[sel]
        if item.size == 0:
            out.append(None)
            continue
        local, items = _local_codes(item)
        rlocal, raters = _local_codes(rater)
        stats: dict[str, np.ndarray] = {"items": items, "raters": raters}
        stats["rater_keys"], stats["rater_counts"] = _sparse_counts(raters, rlocal, value, q)
        if with_counts:
            stats["item_keys"], stats["item_counts"] = _sparse_counts(items, local, value, q)
        if with_moments:
            x = category_values[value]
            stats["item_moments"] = _moment_columns(local, x, items.size)
            stats["rater_moments"] = _moment_columns(rlocal, x, raters.size)
            for k, center in enumerate(centers):
                stats[f"centered_{k}"] = _moment_columns(local, x - center, items.size)[:, 1:]
        out.append(stats)
    return out


def _local_codes(codes: IntArray) -> tuple[IntArray, IntArray]:
    """Dense local codes and the global code of each (hash-based: the order does not matter)."""
    local, distinct = pd.factorize(codes)
    return local.astype(np.int64), np.asarray(distinct, dtype=np.int64)


def _moment_columns(local: IntArray, x: FloatArray, n: int) -> FloatArray:
    # the core's _moments: count, sum, sum of squares, each a bincount in row order
    out = np.empty((n, 3), dtype=np.float64)
    out[:, 0] = np.bincount(local, minlength=n)
    out[:, 1] = np.bincount(local, weights=x, minlength=n)
    out[:, 2] = np.bincount(local, weights=x * x, minlength=n)
    return out


def _sparse_counts(global_codes: IntArray, local: IntArray, value: IntArray, q: int) -> tuple[IntArray, IntArray]:
    """Non-zero (global code * q + category, count) cells of a local code x category table."""
    cells = global_codes.size * q
    if cells <= 4 * local.size + 65_536:
        flat = np.bincount(local * q + value, minlength=cells)
        nz = np.flatnonzero(flat)
        return global_codes[nz // q] * q + nz % q, flat[nz].astype(np.int64)
    keys, counts = np.unique(local * q + value, return_counts=True)
    return global_codes[keys // q] * q + keys % q, counts.astype(np.int64)


def _pool_codes(codes: _Codes, pool: int, n_pools: int) -> tuple[IntArray, IntArray, IntArray]:
    if n_pools == 1:
        return codes.item, codes.rater, codes.value
    sel = codes.pool == pool
    return codes.item[sel], codes.rater[sel], codes.value[sel]


def _moments_from_counts(counts: IntArray, x: FloatArray) -> FloatArray:
    """(count, sum, sum of squares) rows from a code x category table; exact for integer ``x``."""
    c = counts.astype(np.float64)
    return np.column_stack([c.sum(axis=1), c @ x, c @ (x * x)])


def _label(index: Any, position: int) -> Any:
    return _python_scalar(index[int(position)]) if index is not None else int(position)


# ----------------------------------------------------------------------------------------- driver side


class _Source:
    """The persisted per-partition codes on the cluster, shared by the pools built from one table."""

    def __init__(self, parts: list[Any], n_pools: int) -> None:
        self.parts: list[Any] | None = parts
        self.n_pools = n_pools

    def fetch(self, pool: int) -> tuple[IntArray, IntArray, IntArray]:
        if self.parts is None:
            raise DistributedError("The per-judgement codes of these PartitionedRatings were released; call "
                                   "fetch_codes() before release() when a metric needs them.")
        dask = _dask()
        try:
            pieces = dask.compute(*[dask.delayed(_pool_codes)(p, pool, self.n_pools) for p in self.parts])
        except Exception as exc:  # the cluster that holds them is gone
            raise DistributedError("Could not fetch the per-judgement codes from the Dask cluster "
                                   f"({type(exc).__name__}: {exc}); keep the client open, or call fetch_codes() "
                                   "while it is.") from exc
        item, rater, value = (np.concatenate([p[k] for p in pieces]) if pieces else np.empty(0, np.int64)
                              for k in range(3))
        return item, rater, value

    def release(self) -> None:
        self.parts = None


class PartitionedRatings(Ratings):
    """A :class:`~labelgate.Ratings` built from partitions; per-judgement codes stay on the cluster.

    Built by :func:`ratings_from_dask` or :func:`ratings_by_pool_dask`. The sufficient statistics
    (``ratings_per_item``, ``item_counts``, ``item_moments``, ``rater_counts``, ``rater_moments``, the centred
    moments) are precomputed; ``item_codes``, ``rater_codes``, ``value_codes`` and ``values`` are fetched from the
    workers the first time a metric reads them, and cached (24 bytes per judgement).

    Attributes
    ----------
    n_partitions : int
        Partitions of the source table.
    """

    def __init__(self, *, source: _Source, pool_code: int, item_labels: np.ndarray, rater_labels: np.ndarray,
                 categories: Sequence[Any], level: Level, n_ratings: int, n_dropped_missing: int,
                 statistics: dict[str, Any], centered: dict[float, FloatArray], moments_from_counts: bool,
                 item_renumber: IntArray | None, rater_renumber: IntArray | None, n_partitions: int) -> None:
        # Ratings.__init__ is not called: it needs the per-judgement codes, which are fetched only on demand.
        check_option(level, LEVELS, "level", "PartitionedRatings")
        self.item_labels = item_labels
        self.rater_labels = rater_labels
        self.categories = tuple(categories)
        self.level: Level = level
        self.n_dropped_missing = n_dropped_missing
        self.n_partitions = n_partitions
        self._source = source
        self._pool_code = pool_code
        self._n_ratings = n_ratings
        self._centered = centered
        self._moments_from_counts = moments_from_counts
        self._item_renumber = item_renumber
        self._rater_renumber = rater_renumber
        self._codes: tuple[IntArray, IntArray, IntArray] | None = None
        if n_ratings == 0:
            raise InputError("The ratings are empty: no judgement with a value.", Reason.EMPTY_INPUT)
        # seeds the cached properties of Ratings (functools.cached_property stores in the instance dict)
        self.__dict__.update(statistics)

    # ---------------------------------------------------------------- per-judgement codes (lazy)
    def fetch_codes(self) -> PartitionedRatings:
        """Fetch the per-judgement codes from the workers now (they are cached); returns ``self``."""
        if self._codes is None:
            item, rater, value = self._source.fetch(self._pool_code)
            if self._item_renumber is not None:
                item = self._item_renumber[item]
            if self._rater_renumber is not None:
                rater = self._rater_renumber[rater]
            self._codes = (item.astype(np.int64), rater.astype(np.int64), value.astype(np.int64))
        return self

    def release(self) -> None:
        """Free the codes held on the workers (for every pool built from the same table)."""
        self._source.release()

    @property
    def item_codes(self) -> IntArray:  # type: ignore[override]
        """Item code of each judgement (fetched from the workers on first use)."""
        return self.fetch_codes()._codes[0]  # type: ignore[index]

    @property
    def rater_codes(self) -> IntArray:  # type: ignore[override]
        """Rater code of each judgement (fetched from the workers on first use)."""
        return self.fetch_codes()._codes[1]  # type: ignore[index]

    @property
    def value_codes(self) -> IntArray:  # type: ignore[override]
        """Category code of each judgement (fetched from the workers on first use)."""
        return self.fetch_codes()._codes[2]  # type: ignore[index]

    @property
    def n_ratings(self) -> int:
        """Number of judgements."""
        return self._n_ratings

    def centered_item_moments(self, center: float | None = None) -> FloatArray:
        """Per-item (count, sum, sum of squares) of ``values - center``, combined from the partitions.

        Precomputed for the centres of the pools built together; any other centre is computed from the
        fetched per-judgement codes, exactly as :meth:`Ratings.centered_item_moments`.
        """
        shift = self.moment_center if center is None else float(center)
        if shift in self._centered:
            return self._centered[shift].copy()
        if self._moments_from_counts:
            return _moments_from_counts(self.item_counts, self.category_values - shift)
        return super().centered_item_moments(shift)

    @cached_property
    def item_moments(self) -> FloatArray:
        """Per-item (count, sum, sum of squares) of the values, shape (n_items, 3)."""
        if self._moments_from_counts:
            return _moments_from_counts(self.item_counts, self.category_values)
        return super().item_moments

    @cached_property
    def rater_moments(self) -> FloatArray:
        """Per-rater (count, sum, sum of squares) of the values, shape (n_raters, 3)."""
        if self._moments_from_counts:
            return _moments_from_counts(self.rater_counts, self.category_values)
        return super().rater_moments

    def __repr__(self) -> str:
        return (f"PartitionedRatings(level={self.level!r}, n_items={self.n_items}, n_raters={self.n_raters}, "
                f"n_ratings={self.n_ratings}, categories={list(self.categories)[:10]}, "
                f"n_partitions={self.n_partitions})")


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
    return _build(frame, {"item": item, "rater": rater, "value": value}, None, level=level,
                  categories=categories, duplicates=duplicates, missing=missing)[None]


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
    return _build(frame, {"item": item, "rater": rater, "value": value, "pool": pool}, pool, level=level,
                  categories=categories, duplicates=duplicates, missing=missing)


def _check_options(level: str, duplicates: str, missing: str, function: str) -> None:
    check_option(level, LEVELS, "level", function)
    check_option(duplicates, ("error", "first", "last"), "duplicates", function)
    check_option(missing, ("drop", "error"), "missing", function)


def _dask() -> Any:
    try:
        import dask
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ParameterError("The Dask backend needs dask: pip install 'labelgate[dask]'.",
                             parameter="frame") from exc
    return dask


def _build(frame: Any, columns: dict[str, str], pool_column: str | None, *, level: Level,
           categories: Sequence[Any] | None, duplicates: DuplicatePolicy, missing: MissingPolicy,
           ) -> dict[Any, PartitionedRatings]:
    dask = _dask()
    if not (hasattr(frame, "to_delayed") and hasattr(frame, "npartitions") and hasattr(frame, "columns")):
        raise ParameterError(f"The Dask backend takes a dask DataFrame; got {type(frame).__name__} (use "
                             "Ratings.from_long for an in-memory table).", parameter="frame")
    order = ("pool", "item", "rater", "value") if pool_column else ("item", "rater", "value")
    present = list(frame.columns)
    for role in order:
        if columns[role] not in present:
            raise InputError(f"Column {columns[role]!r} (the {role} column) is missing; the data has columns "
                             f"{sorted(map(str, present))}.", Reason.MISSING_COLUMN, column=columns[role])
    delayed = dask.delayed
    factorized = [delayed(_factorize_partition)(part, columns) for part in frame.to_delayed()]
    factorized = list(dask.persist(*factorized))
    summaries = dask.compute(*[delayed(_summarize)(p) for p in factorized])
    if sum(s["n_rows"] for s in summaries) == 0:
        raise InputError("The ratings table is empty (0 rows).", Reason.EMPTY_INPUT)
    for role in ("item", "rater", "pool"):
        if role in columns:
            _check_missing_ids(summaries, role, columns[role])
    plan = _Plan(summaries, columns, level, categories, pool_column is not None)
    if plan.pooled:  # ratings_by_pool resolves the shared category list before checking each pool
        plan.resolve_categories()
        plan.check_missing_values(missing)
    else:
        plan.check_missing_values(missing)
        plan.resolve_categories()
    plan.check_unknown_values(factorized)
    maps = [plan.local_maps(k) for k in range(len(summaries))]
    codes = list(dask.persist(*[delayed(_encode)(p, m, plan.n_pools) for p, m in zip(factorized, maps,
                                                                                      strict=True)]))
    del factorized  # the local factorisation is no longer needed on the workers
    # One round trip for the first values, the duplicate exchange and (when the statistics do not depend on
    # the first values) the statistics; duplicates are rare, and only then is anything computed again.
    tasks = [plan.first_tasks(codes), _duplicate_tasks(codes, plan)]
    if not plan.with_moments:
        tasks.append(plan.statistics_tasks(codes, None))
    results = dask.compute(*tasks)
    first, missing_counts = plan.first_and_missing(results[0])
    plan.check_not_empty(first)
    dup_keys, dup_counts = _gather_duplicates(results[1])
    parts = results[2] if len(results) > 2 else None
    if dup_keys.size:
        codes = _resolve_duplicates(codes, plan, dup_keys, dup_counts, duplicates)
        first, _ = plan.first_and_missing(dask.compute(plan.first_tasks(codes))[0])
        parts = None
    if parts is None:
        parts = dask.compute(plan.statistics_tasks(codes, first))[0]
    return plan.combine(codes, first, missing_counts, parts)


def _check_missing_ids(summaries: Sequence[dict[str, Any]], role: str, column: str) -> None:
    total = sum(s["missing"][role][0] for s in summaries)
    if total:
        row = next(s["missing"][role][1] for s in summaries if s["missing"][role][0])
        raise InputError(f"Column {column!r} has a missing id in {total} row(s), first at row {row!r}.",
                         Reason.MISSING_ID, column=column, row=row)


def _global_codes(uniques: Sequence[pd.Index]) -> tuple[np.ndarray, list[IntArray]]:
    """Labels in order of first appearance over the partitions, and each partition's local-to-global map.

    One factorisation of the concatenated distinct values: its order is the order in which pandas
    factorises the whole column.
    """
    if not uniques:
        return np.empty(0, dtype=object), []
    joined = uniques[0].append(list(uniques[1:])) if len(uniques) > 1 else uniques[0]
    codes, labels = pd.factorize(joined)
    bounds = np.cumsum([0, *[len(u) for u in uniques]])
    maps = [np.asarray(codes[a:b], dtype=np.int64) for a, b in itertools.pairwise(bounds)]
    return np.asarray(labels, dtype=object), maps


class _Plan:
    """Global factorisation and the driver-side combination of the partition statistics."""

    def __init__(self, summaries: Sequence[dict[str, Any]], columns: dict[str, str], level: Level,
                 categories: Sequence[Any] | None, pooled: bool) -> None:
        self.columns, self.level, self.pooled = columns, level, pooled
        self.n_parts = len(summaries)
        self.labels: dict[str, np.ndarray] = {}
        self.part_maps: dict[str, list[IntArray]] = {}
        for role in columns:
            self.labels[role], self.part_maps[role] = _global_codes([s["uniques"][role] for s in summaries])
        self.n_items, self.n_raters = len(self.labels["item"]), len(self.labels["rater"])
        self.n_pools = len(self.labels["pool"]) if pooled else 1
        if self.n_pools * max(self.n_items, 1) * max(self.n_raters, 1) >= _MAX_KEY:
            raise InputError(f"{self.n_pools} pools x {self.n_items} items x {self.n_raters} raters is too many "
                             "for the duplicate check's 64-bit keys.", Reason.TOO_MANY_CATEGORIES)
        self.requested_categories = categories
        self.categories: tuple[Any, ...] = ()
        self.value_map = np.empty(0, dtype=np.int64)
        self.q = 0
        self.summaries = summaries

    def resolve_categories(self) -> None:
        """The category list and the code of every distinct label (-1: not a category)."""
        categories, column = self.requested_categories, self.columns["value"]
        if self.pooled and categories is None:  # one list for all pools: the union of the observed labels
            categories, _ = _resolve_categories(self.labels["value"], None, self.level, column)
        self.categories, value_map = _resolve_categories(self.labels["value"], categories, self.level, column)
        self.value_map = np.asarray(value_map, dtype=np.int64)
        self.q = len(self.categories)

    @property
    def category_values(self) -> FloatArray:
        if self.level in ("interval", "ratio"):
            return np.asarray([float(c) for c in self.categories], dtype=np.float64)
        return np.arange(self.q, dtype=np.float64)

    def local_maps(self, part: int) -> dict[str, IntArray]:
        maps = {role: self.part_maps[role][part] for role in self.columns if role != "value"}
        maps["value"] = self.value_map[self.part_maps["value"][part]]
        return maps

    def check_missing_values(self, missing: MissingPolicy) -> None:
        column = self.columns["value"]
        n_missing = sum(s["missing"]["value"][0] for s in self.summaries)
        if n_missing and missing == "error":
            row = next(s["missing"]["value"][1] for s in self.summaries if s["missing"]["value"][0])
            raise InputError(f"Column {column!r} has a missing value in {n_missing} row(s), first at row {row!r}.",
                             Reason.MISSING_VALUE, column=column, row=row)

    def check_unknown_values(self, factorized: list[Any]) -> None:
        """Raise on the first row (in table order) whose label is not a category."""
        if not (self.value_map < 0).any():
            return
        column = self.columns["value"]
        for k, (summary, part) in enumerate(zip(self.summaries, factorized, strict=True)):
            uniques = summary["uniques"]["value"]
            bad = np.flatnonzero(self.value_map[self.part_maps["value"][k]] < 0)
            if bad.size:
                dask = _dask()
                row = dask.compute(dask.delayed(_first_row_with)(part, "value", bad))[0]
                # local codes number the values by first appearance: the smallest bad one is on that row
                value = _python_scalar(uniques[int(bad.min())])
                raise InputError(f"Column {column!r} has value {value!r} at row {row!r}, which is not one of the "
                                 f"categories {list(self.categories)}.", Reason.UNKNOWN_CATEGORY, column=column,
                                 row=row, value=value)

    def first_tasks(self, codes: list[Any]) -> list[Any]:
        dask = _dask()
        return [dask.delayed(_first_values)(c, self.n_pools) for c in codes]

    def first_and_missing(self, parts: Sequence[tuple[IntArray, IntArray]]) -> tuple[IntArray, IntArray]:
        first = np.full(self.n_pools, -1, dtype=np.int64)
        for values, _ in parts:  # the first partition holding a pool's judgement gives its first value
            first = np.where(first < 0, values, first)
        missing = np.sum([m for _, m in parts], axis=0) if parts else np.zeros(self.n_pools, np.int64)
        return first, np.asarray(missing, dtype=np.int64)

    def check_not_empty(self, first: IntArray) -> None:
        for pool in range(self.n_pools):
            if first[pool] < 0:
                raise InputError(f"Column {self.columns['value']!r} has no non-missing value.", Reason.EMPTY_INPUT)

    @property
    def with_counts(self) -> bool:
        return self.n_items * self.q <= MAX_COUNT_CELLS

    @property
    def with_moments(self) -> bool:
        # Integer category values (ranks for nominal/ordinal): every moment is an exact integer sum, so the
        # driver derives them from the counts, in any order, without a copy per centre.
        n_rows = sum(s["n_rows"] for s in self.summaries)
        return not (self.with_counts and _integer_values(self.category_values, n_rows))

    def centers(self, first: IntArray | None) -> list[float]:
        if not self.with_moments or first is None:
            return []
        return sorted({float(self.category_values[f]) for f in first})

    def statistics_tasks(self, codes: list[Any], first: IntArray | None) -> list[Any]:
        dask = _dask()
        values, centers = self.category_values, self.centers(first)
        return [dask.delayed(_partition_statistics)(c, self.n_pools, self.q, values, centers, self.with_counts,
                                                    self.with_moments) for c in codes]

    def combine(self, codes: list[Any], first: IntArray, missing_counts: IntArray,
                parts: Sequence[list[dict[str, np.ndarray] | None]]) -> dict[Any, PartitionedRatings]:
        values, centers = self.category_values, self.centers(first)
        source = _Source(codes, self.n_pools)
        out: dict[Any, PartitionedRatings] = {}
        pool_names = self.labels["pool"] if self.pooled else [None]
        for pool, name in enumerate(pool_names):
            pieces = [piece for p in parts if (piece := p[pool]) is not None]
            out[_python_scalar(name) if self.pooled else None] = self._pool_ratings(
                pieces, pool, source, float(values[first[pool]]), centers, self.with_counts, self.with_moments,
                int(missing_counts[pool]))
        return out

    def _pool_ratings(self, pieces: list[dict[str, np.ndarray]], pool: int, source: _Source, center: float,
                      centers: list[float], with_counts: bool, with_moments: bool, n_missing: int,
                      ) -> PartitionedRatings:
        n_items, n_raters, q = self.n_items, self.n_raters, self.q
        items = np.concatenate([p["items"] for p in pieces])
        raters = np.concatenate([p["raters"] for p in pieces])
        rater_counts = _add_cells(pieces, "rater", n_raters * q).reshape(n_raters, q)
        stats: dict[str, Any] = {"moment_center": center}
        centered: dict[float, FloatArray] = {}
        if with_moments:
            item_moments = _add_rows(items, [p["item_moments"] for p in pieces], n_items)
            rater_moments = _add_rows(raters, [p["rater_moments"] for p in pieces], n_raters)
            per_item = item_moments[:, 0].astype(np.int64)
            used_raters = rater_moments[:, 0] > 0
            for k, c in enumerate(centers):
                sums = _add_rows(items, [p[f"centered_{k}"] for p in pieces], n_items)
                centered[c] = np.column_stack([item_moments[:, 0], sums])
        if with_counts:
            item_counts = _add_cells(pieces, "item", n_items * q).reshape(n_items, q)
            per_item = item_counts.sum(axis=1)
            used_raters = rater_counts.sum(axis=1) > 0
        item_labels, item_renumber, item_keep = self.labels["item"], None, None
        if not self.pooled:  # from_long drops items left without a judgement (all their labels missing)
            item_keep = per_item > 0
            if not item_keep.all():
                item_renumber = np.cumsum(item_keep) - 1
                item_labels = item_labels[item_keep]
        stats["ratings_per_item"] = _keep_rows(per_item, item_keep)
        stats["rater_counts"] = rater_counts[used_raters]
        if with_counts:
            stats["item_counts"] = _keep_rows(item_counts, item_keep)
        if with_moments:
            stats["item_moments"] = _keep_rows(item_moments, item_keep)
            stats["rater_moments"] = rater_moments[used_raters]
            centered = {c: _keep_rows(m, item_keep) for c, m in centered.items()}
        rater_renumber = None if used_raters.all() else np.cumsum(used_raters) - 1
        return PartitionedRatings(
            source=source, pool_code=pool, item_labels=np.asarray(item_labels, dtype=object),
            rater_labels=np.asarray(self.labels["rater"][used_raters], dtype=object), categories=self.categories,
            level=self.level, n_ratings=int(per_item.sum()), n_dropped_missing=n_missing, statistics=stats,
            centered=centered, moments_from_counts=not with_moments, item_renumber=item_renumber,
            rater_renumber=rater_renumber, n_partitions=self.n_parts)


def _integer_values(values: FloatArray, n_rows: int) -> bool:
    """Integer category values whose sums of squares over all rows stay exact in float64."""
    if values.size == 0 or not np.all(np.mod(values, 1.0) == 0.0):
        return False
    span = float(np.abs(values).max()) * 2.0 + 1.0  # centred values are differences of two category values
    return span * span * max(n_rows, 1) < 2.0**52


def _keep_rows(array: np.ndarray, keep: np.ndarray | None) -> np.ndarray:
    return array if keep is None or keep.all() else array[keep]


def _add_rows(codes: IntArray, blocks: list[np.ndarray], n: int) -> FloatArray:
    """Dense (n, k) sums of per-partition row blocks, added in partition order."""
    stacked = np.concatenate(blocks, axis=0)
    return np.column_stack([np.bincount(codes, weights=stacked[:, j], minlength=n)
                            for j in range(stacked.shape[1])])


def _add_cells(pieces: list[dict[str, np.ndarray]], name: str, cells: int) -> IntArray:
    keys = np.concatenate([p[f"{name}_keys"] for p in pieces])
    counts = np.concatenate([p[f"{name}_counts"] for p in pieces])
    return np.bincount(keys, weights=counts, minlength=cells).astype(np.int64)


def _duplicate_tasks(codes: list[Any], plan: _Plan) -> list[Any]:
    """Keys judged more than once, by a hash exchange over ``n_buckets`` tasks (one per bucket)."""
    dask = _dask()
    n_buckets = max(1, min(len(codes), _MAX_BUCKETS))
    split = [dask.delayed(_split_keys, nout=n_buckets)(c, plan.n_items, plan.n_raters, n_buckets) for c in codes]
    return [dask.delayed(_repeated_keys)(*[s[b] for s in split]) for b in range(n_buckets)]


def _gather_duplicates(found: Sequence[tuple[IntArray, IntArray]]) -> tuple[IntArray, IntArray]:
    keys = np.concatenate([k for k, _ in found]) if found else np.empty(0, np.int64)
    counts = np.concatenate([c for _, c in found]) if found else np.empty(0, np.int64)
    order = np.argsort(keys)
    return keys[order], counts[order]


def _resolve_duplicates(codes: list[Any], plan: _Plan, keys: IntArray, counts: IntArray,
                        policy: DuplicatePolicy) -> list[Any]:
    dask = _dask()
    located = dask.compute(*[dask.delayed(_rows_with_keys)(c, keys, plan.n_items, plan.n_raters, policy == "error")
                             for c in codes])
    part_of = np.concatenate([np.full(k.size, i, dtype=np.int64) for i, (k, _, _) in enumerate(located)])
    key_of = np.concatenate([k for k, _, _ in located])
    position = np.concatenate([p for _, p, _ in located])
    labels = [lab for _, _, labs in located for lab in labs]
    # rows in table order within each key: (key, partition, position)
    order = np.lexsort((position, part_of, key_of))
    key_of, part_of, position = key_of[order], part_of[order], position[order]
    if policy == "error":
        labels = [labels[i] for i in order]
        _raise_duplicate(plan, keys, counts, key_of, labels)
    starts = np.concatenate(([True], key_of[1:] != key_of[:-1]))
    ends = np.concatenate((key_of[1:] != key_of[:-1], [True]))
    drop = ~starts if policy == "first" else ~ends
    new = []
    for i, c in enumerate(codes):
        positions = position[drop & (part_of == i)]
        new.append(dask.delayed(_drop_positions)(c, positions) if positions.size else c)
    return list(dask.persist(*new))


def _raise_duplicate(plan: _Plan, keys: IntArray, counts: IntArray, key_of: IntArray, labels: list) -> None:
    pool_of = keys // (plan.n_items * plan.n_raters)
    # the in-memory builder checks pool by pool (in pool order) and reports the smallest key of the first one
    pool = int(pool_of.min())
    in_pool = pool_of == pool
    key = int(keys[in_pool][0])
    n_extra = int((counts[in_pool] - 1).sum())
    rows = [labels[i] for i in np.flatnonzero(key_of == key)[:2]]
    item = _python_scalar(plan.labels["item"][(key // plan.n_raters) % plan.n_items])
    rater = _python_scalar(plan.labels["rater"][key % plan.n_raters])
    raise InputError(f"Rater {rater!r} judged item {item!r} more than once (rows {rows[0]!r} and {rows[1]!r}; "
                     f"{n_extra} duplicate judgement(s) in all). Pass duplicates='first' or 'last' to keep one.",
                     Reason.DUPLICATE_JUDGEMENT, item=item, rater=rater, row=rows[0])
