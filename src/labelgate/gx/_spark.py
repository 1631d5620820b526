"""The aggregate plan on GX's ``SparkDFExecutionEngine``: Spark aggregates, the core finishes.

GX hands a table metric the batch as a Spark DataFrame, its row condition applied
(``execution_engine.get_compute_domain``). :class:`SparkBackend` implements the
plan's :class:`~labelgate.sqlagg.backend.AggregateBackend` with the DataFrame
API, and :func:`labelgate.sqlagg.aggregate` (the driver shared with the SQL
engines and the pipeline) makes the checks and builds the pools with
:meth:`labelgate.Ratings.from_aggregates`:

- the tallies: ``groupBy(pool).agg(count, sum(when(isNull)))``;
- the duplicates: per (pool, item), ``count(*) - countDistinct(rater)``,
  summed, and one example (pool, item, rater) only when it is positive;
- the item ids and the labels, each once: ``select(c).distinct().orderBy(c)`` (the SQL engines take the item
  ids from the count rows instead);
- the item x category counts: ``groupBy(pool, item, label).count()``, items and
  labels numbered with ``dense_rank()`` over windows ordered by the id and the
  label (Spark's order; the driver re-numbers items when Python's differs).

Results reach Python as Arrow record batches (``DataFrame.toArrow``): the small
aggregates and the (pool, item, label) counts, never one row per judgement.

**Missing values.** A Spark DataFrame made from pandas keeps a float column's
``NaN`` as ``NaN``, a value, where pandas means "missing". Here ``NaN`` in a
float / double column counts as missing, like ``null``, so a Spark batch and the
pandas path agree on the same rows.

**Refused.** What needs each rater's sums (the labeler ICC, Conger's κ,
Janson–Olsson ι) is refused (:func:`labelgate.gx._sql.refusal`): the Spark backend
does not sum the judgements per rater, which a SQL database does.

pyspark is imported lazily: ``import labelgate.gx`` does not need it.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from labelgate.errors import DesignError, InputError, Reason
from labelgate.sqlagg import Aggregated, Scope, Within, aggregate

#: The dialect named in ``details.sql`` of a Spark batch.
DIALECT = "spark"
_FLOATS = ("float", "double")
# The name of an aggregate column (not a name a batch is likely to hold).
_N = "__labelgate_n"


class SparkBackend:
    """Aggregate queries over one Spark DataFrame (the :class:`~labelgate.sqlagg.backend.AggregateBackend` protocol).

    Parameters
    ----------
    df : pyspark.sql.DataFrame
        The batch (GX: the compute domain, row condition applied).

    Attributes
    ----------
    queries : int
        Spark jobs whose result reached Python (the schema read is not one).
    rows_fetched : int
        Result rows brought to Python.
    """

    dialect = DIALECT

    def __init__(self, df: Any) -> None:
        if not hasattr(df, "toArrow"):  # pyspark < 4.0 (GX also runs on pyspark 3.x)
            raise InputError(f"LabelGate's Spark provider reads Spark's aggregates with DataFrame.toArrow, which "
                             f"pyspark {_pyspark_version()} does not have: install pyspark>=4.0,<4.2 (the 'spark' "
                             "extra pins 4.1.2), or validate on a pandas batch.", Reason.UNREADABLE_INPUT)
        self.df = df
        self.queries = self.rows_fetched = 0
        self.duplicate_check = "scanned"  # a DataFrame has no key: the rows are always counted
        self._types = {str(name): str(kind) for name, kind in df.dtypes}

    # ------------------------------------------------------------ helpers
    def fetch(self, df: Any) -> list[tuple[Any, ...]]:
        """The rows of an aggregate DataFrame as tuples, through Arrow (counted)."""
        table = df.toArrow()
        self.queries += 1
        self.rows_fetched += table.num_rows
        columns = [table.column(k).to_pylist() for k in range(table.num_columns)]
        return list(zip(*columns, strict=True)) if columns else []

    def col(self, name: str) -> Any:
        """The column ``name`` of the batch, quoted (a dot or a backtick in a name is not a nested field)."""
        from pyspark.sql import functions as sf

        return sf.col("`" + name.replace("`", "``") + "`")

    def missing(self, name: str) -> Any:
        """Whether the column ``name`` is missing: ``null``, or ``NaN`` in a float column (pandas' missing)."""
        from pyspark.sql import functions as sf

        column = self.col(name).isNull()
        return column | sf.isnan(self.col(name)) if self._types.get(name) in _FLOATS else column

    def where(self, scope: Scope, within: Within) -> Any:
        """The condition selecting the rows ``within`` (``None``: every row)."""
        from pyspark.sql import functions as sf

        out: list[Any] = []
        if within != "all":
            if scope.question is not None:
                out.append(self.col(str(scope.question_column)) == sf.lit(scope.question))
            if within != "question":
                if scope.pool is not None:
                    out.append(self.col(scope.pool).isin(list(scope.pools)))
                if within == "labelled":
                    out += [~self.missing(scope.item), ~self.missing(scope.label)]
        return functools.reduce(operator.and_, out) if out else None

    def rows(self, scope: Scope, within: Within, *extra: Any) -> Any:
        """The batch's rows ``within`` that also meet the conditions ``extra``."""
        conditions = [c for c in (self.where(scope, within), *extra) if c is not None]
        return self.df.where(functools.reduce(operator.and_, conditions)) if conditions else self.df

    # ------------------------------------------------------------ the protocol
    def columns(self) -> list[str]:
        """The batch's column names (its schema; no Spark job)."""
        return [str(c) for c in self.df.columns]

    def tallies(self, scope: Scope) -> dict[Any, tuple[int, int, int, int]]:
        """Per pool: (rows, rows without an item id, without a rater id, without a label)."""
        from pyspark.sql import functions as sf

        def nulls(name: str) -> Any:
            return sf.coalesce(sf.sum(sf.when(self.missing(name), 1).otherwise(0)), sf.lit(0))

        keys = [self.col(scope.pool)] if scope.pool is not None else []
        counts = (sf.count(sf.lit(1)), nulls(scope.item), nulls(scope.rater), nulls(scope.label))
        rows = self.rows(scope, "pools")
        grouped = rows.groupBy(*keys).agg(*counts) if keys else rows.agg(*counts)
        tallies = {(row[0] if keys else None): tuple(int(v) for v in row[len(keys):])
                   for row in self.fetch(grouped)}
        return {pool: t for pool, t in tallies.items() if t[0] > 0}  # type: ignore[misc]

    def count(self, scope: Scope, within: Within) -> int:
        """The number of rows ``within``."""
        from pyspark.sql import functions as sf

        return int(self.fetch(self.rows(scope, within).agg(sf.count(sf.lit(1))))[0][0])

    def distinct(self, scope: Scope, column: str, within: Within, limit: int | None = None) -> list[Any]:
        """The distinct non-missing values of ``column``, ascending in Spark's order."""
        c = self.col(column)
        values = self.rows(scope, within, ~self.missing(column)).select(c).distinct().orderBy(c)
        return [row[0] for row in self.fetch(values if limit is None else values.limit(limit))]

    def duplicates(self, scope: Scope) -> tuple[int, tuple[Any, Any, Any] | None]:
        """Judgements beyond one per (pool, item, rater), and one example.

        Per (pool, item), ``count(*) - countDistinct(rater)`` (the rater ids of an item, not every (pool, item,
        rater) group); only when the sum is positive does a second job find one example.
        """
        from pyspark.sql import functions as sf

        pool = [self.col(scope.pool)] if scope.pool is not None else []
        labelled = self.rows(scope, "pools", ~self.missing(scope.label))
        extra = (sf.count(sf.lit(1)) - sf.countDistinct(self.col(scope.rater))).alias(_N)
        per_item = labelled.groupBy(*pool, self.col(scope.item)).agg(extra).where(sf.col(_N) > 0)
        total = self.fetch(per_item.agg(sf.sum(_N)))[0][0]
        if not total:
            return 0, None
        keys = [*pool, self.col(scope.item), self.col(scope.rater)]
        hit = self.fetch(labelled.groupBy(*keys).agg(sf.count(sf.lit(1)).alias(_N)).where(sf.col(_N) > 1)
                         .select(*keys).limit(1))[0]
        return int(total), ((hit[0] if pool else None), hit[-2], hit[-1])

    def item_label_counts(self, scope: Scope, labels: Sequence[Any]) -> tuple[list[Any], np.ndarray]:
        """The item ids (:meth:`distinct`) and (pool code, item rank, label rank, count) per (pool, item, label),
        ranks by ``dense_rank()`` (Spark's order, the one of :meth:`distinct`: ``labels`` are its labels).

        The ranks' windows have no partition: Spark sorts the (pool, item, label) groups, not the judgements, in
        one partition. The rows come as Arrow batches of four int64 columns, and are returned in (pool, item,
        label) order: the core centres the per-item moments at the first row's value, so a fixed order gives the
        same rounding on every run.
        """
        from pyspark.sql import Window
        from pyspark.sql import functions as sf

        item, label = self.col(scope.item), self.col(scope.label)
        code: Any = sf.lit(0)
        if scope.pool is not None:
            code = sf.lit(-1)
            for k, value in reversed(list(enumerate(scope.pools))):
                code = sf.when(self.col(scope.pool) == sf.lit(value), k).otherwise(code)
        keys = [*([self.col(scope.pool)] if scope.pool is not None else []), item, label]
        groups = self.rows(scope, "labelled").groupBy(*keys).agg(sf.count(sf.lit(1)).alias(_N))
        ranked = groups.select(code.cast("long"), (sf.dense_rank().over(Window.orderBy(item)) - 1).cast("long"),
                               (sf.dense_rank().over(Window.orderBy(label)) - 1).cast("long"),
                               sf.col(_N).cast("long"))
        table = ranked.toArrow()
        self.queries += 1
        self.rows_fetched += table.num_rows
        out = np.empty((table.num_rows, 4), dtype=np.int64)
        for k in range(4):
            out[:, k] = table.column(k).to_numpy()
        # a deterministic order, whatever Spark's partitioning: (pool, item, label), as the SQL engines group
        return self.distinct(scope, scope.item, "labelled"), out[np.lexsort((out[:, 2], out[:, 1], out[:, 0]))]

    def rater_contexts(self, scope: Scope, labels: Sequence[Any]) -> tuple[list[Any], np.ndarray]:
        """Refused: no Spark path computes rater diagnostics (the gate reads SQL sources, GX has no rater metric)."""
        raise _no_rater_sums()

    def rater_pairs(self, scope: Scope, labels: Sequence[Any]) -> tuple[list[Any], list[Any], np.ndarray]:
        """Refused, as :meth:`rater_contexts`."""
        raise _no_rater_sums()


def _no_rater_sums() -> DesignError:
    return DesignError("The per-rater sums of the rater diagnostics are not computed on a Spark batch: no LabelGate "
                       "path diagnoses raters on Spark (the gate's database path reads SQL sources). Diagnose the "
                       "raters on the rows, or on a SQL copy of the table.", Reason.INCOMPATIBLE_RATINGS,
                       engine="spark")


def _pyspark_version() -> str:
    """The installed pyspark's version, or ``"(none)"``: one word either way, read as "pyspark <version>"."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pyspark")
    except PackageNotFoundError:  # a DataFrame that is not pyspark's (no pyspark installed at all)
        return "(none)"


# ------------------------------------------------------------------ GX provider glue
def spark_pools(df: Any, kw: dict[str, Any]) -> Aggregated:
    """The aggregate plan over a Spark batch (the value of ``labelgate.table.sql_pools`` on Spark)."""
    return aggregate(SparkBackend(df), kw)
