"""The gate's batch validated and aggregated where it lives: a SQL source with ``aggregate: true``.

The rows never come to the client as a table. Over the source query (its ``:name`` values bound, never spliced)
the database runs:

1. the column check (a query returning no row), the rows of each pool's table (both must have some) and, per
   question without listed categories, the distinct labels of the trusted pool (the categories, as the row path
   takes them from the trusted table);
2. per question, the distinct labels (bounded by :data:`MAX_DISTINCT_LABELS`), judged in Python by the row path's
   own label rules (:func:`labelgate.pipeline.validation.label_checks`);
3. one counting query: per table (crowd: every row whose pool is not the trusted one, but for the rows of pools that
   are not configured, which ``pools.unknown: leave_out`` counts by pool value apart; trusted), the rows and the
   rows failing each check — missing or empty ids, a pool that is not the table's, a missing question, a missing
   label, a label failing a rule, and duplicate judgements (``count(*) OVER (PARTITION BY item, rater, pool
   [, question])``: every copy fails, as in the row path);
4. the failing rows only, at most :data:`MAX_QUARANTINE_ROWS` per table, for the quarantine file and its reasons;
5. the coverage (distinct items of each table's valid rows, and those in both: three numbers);
6. per question, the pools' item x category counts (:meth:`labelgate.sqlagg.AggregatePlan.build`) and the crowd
   raters' per-rater sums and co-rating pairs (:func:`labelgate.sqlagg.raters.rater_evidence`, two aggregate
   queries), which give the rater diagnostics and the content digest; no judgement is fetched. Only the
   disattenuated correlation (numeric or binary labels with a trusted pool) needs each judgement's rater: the
   gate fetches that question's coded judgements then (:meth:`SqlBatch.judgements`).

A source's ``session`` settings (PostgreSQL: ``work_mem`` ...) hold for the validating transaction only.

The statistics themselves are computed by the GX suite on a GX SQL data source over the valid rows
(:meth:`SqlBatch.gx_batches`): its metric providers aggregate in the database (:mod:`labelgate.sqlagg`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from labelgate.errors import InputError, Reason
from labelgate.pipeline import validation, validation_drops
from labelgate.pipeline.config import ConfigError, GateConfig, Question
from labelgate.pipeline.limits import MAX_COLUMNS
from labelgate.pipeline.sources.pools import question_value
from labelgate.pipeline.sources.sql import connected, subquery_text
from labelgate.pipeline.sources.sql_judgements import apply_session, as_text, coded_judgements, digest
from labelgate.sqlagg.plan import AggregatePlan
from labelgate.sqlagg.raters import RaterEvidence, rater_evidence
from labelgate.sqlagg.sql import SqlAlchemyBackend

if TYPE_CHECKING:
    from labelgate.core.ratings import Ratings

#: Distinct labels of one question the database may return for checking (more: the source is refused).
MAX_DISTINCT_LABELS = 100_000
#: Failing rows written to a table's quarantine file (all are counted).
MAX_QUARANTINE_ROWS = 10_000
#: The tables of a gate, by the pool config key that names their pool.
TABLES = ("crowd", "trusted")
_WHAT = "the batch query"


@dataclass(frozen=True)
class _Check:
    """One rule over the rows: the rows where ``condition`` holds fail ``key`` (``"<column>:<check>"``)."""

    column: str
    check: str
    question: str | None
    condition: Any
    table: str | None = None  # the rule applies to this table only

    @property
    def key(self) -> str:
        return f"{self.column}:{self.check}"


@dataclass
class SqlBatch:
    """What the database said about a gate's SQL batch (see the module's steps).

    Attributes
    ----------
    url_env : str
        The environment variable holding the database URL (the GX data source reads it from there).
    queries : dict
        Question name → the SQL of its valid judgements in the canonical columns (``item_id, rater_id, label,
        pool, question``), values inlined as literals of the dialect (a GX query asset takes SQL text).
    categories : dict
        Question name → categories (as :func:`labelgate.pipeline.validation.all_categories`).
    summary : dict
        Table → the validation summary (:meth:`labelgate.pipeline.validation.ValidationResult.to_dict`).
    quarantine : dict
        Table → the failing rows fetched (``_row`` empty: a query result has no row number), with ``_reasons``.
    pools : dict
        Question name → ``(crowd, trusted)`` :class:`~labelgate.Ratings` of the valid judgements (None if absent).
    coverage : dict
        ``batch_items, trusted_items, common_items, coverage`` of the valid rows.
    hashes : tuple of str
        The content digests of the crowd and trusted tables (:func:`~labelgate.pipeline.sources.sql_judgements.digest`).
    report : dict
        ``dialect``, ``queries``, ``rows_fetched`` (every row brought to the client, coded judgements included),
        ``judgements`` (valid judgements, all questions).
    """

    url_env: str
    queries: dict[str, str]
    categories: dict[str, tuple[Any, ...] | None]
    summary: dict[str, dict[str, Any]]
    quarantine: dict[str, pd.DataFrame]
    pools: dict[str, tuple[Ratings | None, Ratings | None]]
    coverage: dict[str, Any]
    hashes: tuple[str, str] = ("", "")
    report: dict[str, Any] = field(default_factory=dict)
    raters: dict[str, RaterEvidence | None] = field(default_factory=dict)

    def judgements(self, config: GateConfig, question: Question) -> tuple[Ratings | None, Ratings | None]:
        """The question's valid judgements with rater identity, fetched (coded, streamed) on a new connection:
        for what needs more than per-rater sums (the disattenuated correlation's variance components and its
        bootstrap over items and raters). Counted in :attr:`report`."""
        with connected(self.url_env, _WHAT) as connection:
            apply_session(connection, config.batch.session)
            backend, pools = coded_judgements(connection, self.queries[question.name], question.level,
                                              self.categories.get(question.name), str(config.pools.trusted))
        self.report["queries"] = self.report.get("queries", 0) + backend.queries
        self.report["rows_fetched"] = self.report.get("rows_fetched", 0) + backend.rows_fetched
        self.report["judgements_fetched"] = self.report.get("judgements_fetched", 0) + sum(
            r.n_ratings for r in pools if r is not None)
        for fetched, counted in zip(pools, self.pools.get(question.name, (None, None)), strict=True):
            same = (fetched is None) == (counted is None) and (fetched is None or counted is None or (
                list(fetched.item_labels) == list(counted.item_labels)
                and np.array_equal(fetched.item_counts, counted.item_counts)))
            if not same:  # a write between the load and this fetch: the digest would not cover these rows
                raise InputError(f"The judgements of question {question.name!r} changed while the batch was gated "
                                 "(the rows fetched for the disattenuated correlation differ from the counts "
                                 "aggregated before); gate it again.", Reason.UNREADABLE_INPUT,
                                 question=question.name)
        return pools

    def gx_batches(self, context: Any) -> dict[str, Any]:
        """Question name → a GX batch definition over its valid judgements on a GX SQL data source.

        The data source's connection string is ``${url_env}``: GX reads the URL from the environment, and the
        project files never hold it.
        """
        source = context.data_sources.add_or_update_sql("labelgate-sql", connection_string=f"${{{self.url_env}}}")
        out = {}
        for k, (name, query) in enumerate(self.queries.items()):
            asset = source.add_query_asset(f"judgements-{k}", query=query)
            out[name] = asset.add_batch_definition_whole_table("whole")
        return out


#: Rater-specific IRRs: computed from each rater's sums in the database, without an interval.
POINT_ONLY_IRRS = ("conger_kappa", "janson_olsson_iota")


def point_only_gates(config: GateConfig) -> list[str]:
    """The gates of ``config`` the database computes on the point value only: the labeler ICC and the IRRs with
    rater-specific chance agreement read each rater's sums (:mod:`labelgate.sqlagg.tallies`), and their bootstrap
    resamples judgements, which stay in the database (:mod:`labelgate.gx._sql`)."""
    gates = [g.type for g in config.gates if g.type == "labeler_icc"]
    return gates + [f"{g.type} with irr={g.irr!r}" for g in config.gates
                    if g.type in ("normalized_cross_kappa", "irr_baseline") and g.irr in POINT_ONLY_IRRS]


def refusal(config: GateConfig) -> str | None:
    """Why ``config`` cannot be gated in the database (None when it can).

    A gate judged on an interval bound that the database path cannot compute is refused (an ERROR at load, never a
    decision without the bound): the labeler ICC, Conger's κ and ι have their point values from the database's
    sums but no interval (:func:`point_only_gates`), so they run there only with ``interval.use_ci_bound: false``
    (or ``interval.ci: null``).
    """
    batch, trusted = config.batch, config.trusted
    if trusted.format != "auto" or trusted.path or trusted.query:
        if trusted != batch:
            return ("the trusted replication must come from the batch query (one query holding both pools in the "
                    "pool column)")
    if batch.where or trusted.where:
        return "'batch.where' / 'trusted.where' select rows in the client; put the selection into the query's WHERE"
    point_only = point_only_gates(config)
    if point_only and config.interval.use_ci_bound and config.interval.ci is not None:
        return (f"interval.use_ci_bound judges every gate on its interval bound, and the gate(s) {point_only} have "
                "no interval from the database's sums (their resamples draw each rater's judgements, which stay in "
                "the database); set interval.use_ci_bound: false to judge them on the point value, or gate the rows "
                "from a file")
    if "exclude" in config.raters.actions().values():
        return "the rater action 'exclude' decides again without rows, which needs the rows in the client"
    return None


def load_sql_batch(config: GateConfig) -> SqlBatch:
    """Validate and aggregate the batch query of ``config`` in its database.

    Raises
    ------
    ConfigError
        The configuration asks for something the database path does not do (:func:`refusal`).
    InputError
        The database is unreachable or a query fails, a needed column is missing, a table or a question has no
        row, a question has more than :data:`MAX_DISTINCT_LABELS` distinct labels; the message names them.
    """
    why = refusal(config)
    if why is not None:
        raise ConfigError(f"batch.aggregate: the gate cannot run in the database: {why}.", key="batch.aggregate")
    source = config.batch
    with connected(source.url_env, _WHAT) as connection:
        apply_session(connection, source.session)
        return _Loader(config, connection).load(str(source.url_env))


class _Loader:
    """The queries of :func:`load_sql_batch` on one open connection."""

    def __init__(self, config: GateConfig, connection: Any) -> None:
        import sqlalchemy as sa

        self.config, self.connection = config, connection
        source = config.batch
        params = dict(source.params or {})
        # the query as the monitor's SQL source runs it (what trails it stripped; the newline ends a comment the
        # scan keeps, so that it cannot swallow the closing parenthesis of the subqueries wrapping it)
        text = sa.text(subquery_text(str(source.query))).bindparams(
            *[sa.bindparam(k, v) for k, v in params.items()])
        names = connection.execute(sa.select(sa.text("*")).select_from(text.columns().subquery("lg_probe"))
                                   .where(sa.false())).keys()
        self.columns = [str(n) for n in names]
        if len(self.columns) > MAX_COLUMNS:
            raise InputError(f"The batch query's result has {len(self.columns)} columns, more than the limit of "
                             f"{MAX_COLUMNS}.", Reason.UNREADABLE_INPUT, n_columns=len(self.columns))
        self._require()
        src = text.columns(*[sa.column(n) for n in self.columns]).subquery("lg_src")
        cols = config.columns
        keys = [src.c[cols.item], src.c[cols.rater], src.c[cols.pool]] + (
            [src.c[cols.question]] if cols.question else [])
        self.rows = sa.select(*src.c, sa.func.count().over(partition_by=keys).label("_lg_copies")).subquery("lg_rows")
        self.backend = SqlAlchemyBackend.on_connection(connection, self.rows)
        self.others: list[SqlAlchemyBackend] = []  # the backends of the questions' judgements

    @property
    def queries(self) -> int:
        """Queries run on the connection."""
        return self.backend.queries + sum(b.queries for b in self.others)

    @property
    def rows_fetched(self) -> int:
        """Result rows brought to the client."""
        return self.backend.rows_fetched + sum(b.rows_fetched for b in self.others)

    def c(self, name: str) -> Any:
        """A column of the rows; the pool and question columns as text (compared with the configured values, as the
        row path reads ids)."""
        import sqlalchemy as sa

        column = self.rows.c[name]
        return sa.cast(column, sa.String) if name in (self.config.columns.pool, self.config.columns.question) \
            else column

    def _require(self) -> None:
        cols, config = self.config.columns, self.config
        needed = [(cols.item, "item column"), (cols.rater, "rater column"), (cols.pool, "pool column")]
        if cols.question:
            needed.append((cols.question, "question column"))
        needed += [(config.label_column(q), f"label column of question {q.name!r}") for q in config.questions]
        for name, role in needed:
            if name not in self.columns:
                raise InputError(f"Column {name!r} (the {role}) is missing from the batch query's result; it has "
                                 f"columns {sorted(self.columns)}.", Reason.MISSING_COLUMN, column=name,
                                 table="batch")

    # ------------------------------------------------------------------ conditions
    def table_condition(self, table: str) -> Any:
        """The rows of ``table``: the trusted pool's, or every other row (missing pools included; unknown pools too
        with ``pools.unknown: invalid``, else they are outside both tables: :meth:`outside_condition`)."""
        import sqlalchemy as sa

        pool = self.c(self.config.columns.pool)
        if table == "trusted":
            return pool == self.config.pools.trusted
        return sa.and_(pool.is_(None) | (pool != self.config.pools.trusted), sa.not_(self.outside_condition()))

    def outside_condition(self) -> Any:
        """The rows whose pool value is set, not empty and none of the configured pools, with ``pools.unknown:
        leave_out`` (:func:`labelgate.pipeline.validation_drops.outside_pools`); no row with ``invalid``."""
        import sqlalchemy as sa

        pools = self.config.pools
        if pools.unknown != "leave_out":
            return sa.false()
        pool = self.c(self.config.columns.pool)
        return pool.is_not(None) & pool.not_in([pools.crowd, pools.trusted, ""])

    def outside_causes(self) -> dict[str, int]:
        """The rows outside the configured pools by pool value (one ``GROUP BY``), worded as the row path words them
        (:func:`labelgate.pipeline.validation_drops.pool_causes`)."""
        import sqlalchemy as sa

        if self.config.pools.unknown != "leave_out":
            return {}
        pool = self.c(self.config.columns.pool)
        n = sa.func.count()
        grouped = sa.select(pool.label("value"), n.label("n")).where(self.outside_condition()).group_by(pool) \
            .subquery("lg_outside")
        top = self.backend.fetch(sa.select(grouped.c.value, grouped.c.n)
                                 .order_by(grouped.c.n.desc(), grouped.c.value).limit(validation_drops.NAMED))
        if not top:
            return {}
        totals = self.backend.fetch(sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(grouped.c.n), 0)))[0]
        return validation_drops.pool_causes([(str(v), int(k)) for v, k in top], int(totals[0]), int(totals[1]))

    def question_condition(self, question: Question) -> Any:
        """The rows of ``question`` (every row without a question column)."""
        import sqlalchemy as sa

        name = self.config.columns.question
        return self.c(name) == question_value(self.config, question) if name else sa.true()

    def checks(self, labels: dict[str, tuple[list[Any], list[Any], list[list[str]]]]) -> list[_Check]:
        """Every rule, as SQL conditions over the rows."""
        import sqlalchemy as sa

        cfg, cols = self.config, self.config.columns
        out: list[_Check] = []
        for name in [cols.item, cols.rater] + ([cols.question] if cols.question else []):
            column = self.c(name)
            out += [_Check(name, "not_null", None, column.is_(None)),
                    _Check(name, "non_empty", None, sa.cast(column, sa.String) == "")]
        pool = self.c(cols.pool)
        out += [_Check(cols.pool, "not_null", None, pool.is_(None)),
                _Check(cols.pool, "pool", None, self.table_condition("crowd") & pool.is_not(None)
                       & (pool != cfg.pools.crowd), "crowd")]
        keys = validation._unique_keys(cfg)
        out.append(_Check("+".join(keys), "unique", None, self.c("_lg_copies") > 1))
        nullable = cols.question is None and len(cfg.questions) > 1
        for q in cfg.questions:
            label, mine = self.c(cfg.label_column(q)), self.question_condition(q)
            if not nullable:
                out.append(_Check(cfg.label_column(q), "not_null", q.name, mine & label.is_(None)))
            raw, _, failed = labels[q.name]
            for check in sorted({c for checks in failed for c in checks}):
                bad = [v for v, checks in zip(raw, failed, strict=True) if check in checks]
                out.append(_Check(cfg.label_column(q), check, q.name, mine & label.in_(bad)))
        return out

    # ------------------------------------------------------------------ the load
    def load(self, url_env: str) -> SqlBatch:
        import sqlalchemy as sa

        cfg = self.config
        self.require_pools()
        categories = {q.name: self.categories(q) for q in cfg.questions}
        labels = {q.name: self.label_rules(q, categories[q.name]) for q in cfg.questions}
        checks = self.checks(labels)
        bad = sa.or_(*[c.condition for c in checks])
        summary, counts = self.validate(checks, bad, categories)
        quarantine = {t: self.quarantine(t, checks, categories) for t in TABLES if summary[t]["n_invalid"]}
        valid = {t: sa.and_(self.table_condition(t), sa.not_(bad)) for t in TABLES}
        coverage = self.coverage(valid)
        queries, pools, raters, parts = {}, {}, {}, {}
        for q in cfg.questions:
            select = self.canonical(q, valid, labels[q.name])
            queries[q.name] = as_text(select, self.connection.dialect)
            pools[q.name], raters[q.name], parts[q.name] = self.aggregated(q, select, categories[q.name])
        hashes = (digest("crowd", summary["crowd"], parts, 0, coverage),
                  digest("trusted", summary["trusted"], parts, 1, coverage))
        report = {"dialect": self.connection.dialect.name, "queries": self.queries,
                  "rows_fetched": self.rows_fetched,
                  "judgements": int(sum(r.n_ratings for ps in pools.values() for r in ps if r is not None)),
                  "rater_diagnostics": "database", "error_counts": counts}
        return SqlBatch(url_env, queries, categories, summary, quarantine, pools, coverage, hashes, report,
                        raters)

    def require_pools(self) -> None:
        """Both tables have rows (else the error of the row path's pool split, naming the missing pool)."""
        import sqlalchemy as sa

        pools = self.config.pools
        # as the row path splits one source: a row of the crowd pool and one of the trusted pool, exactly
        table = sa.case((self.table_condition("trusted"), 1), (self.c(self.config.columns.pool) == pools.crowd, 0),
                        else_=2)
        found = {int(r[0]) for r in self.backend.fetch(sa.select(table).group_by(table))}
        for code, name in enumerate(TABLES):
            if code not in found:
                raise InputError(f"The {self.config.columns.pool!r} column of the batch query has no row with the "
                                 f"value {getattr(pools, name)!r} (config 'pools').", Reason.EMPTY_INPUT,
                                 column=self.config.columns.pool)

    def categories(self, question: Question) -> tuple[Any, ...] | None:
        """The question's categories: listed, or the trusted pool's distinct labels (as the row path)."""
        import sqlalchemy as sa

        label = self.config.label_column(question)
        if question.categories is not None or question.level in validation.NUMERIC_LEVELS:
            return validation.categories_for(self.config, question, pd.DataFrame({label: []}))
        rows = self.backend.fetch(sa.select(self.c(label)).where(self.table_condition("trusted"),
                                                                  self.question_condition(question),
                                                                  self.c(label).is_not(None))
                                  .group_by(self.c(label)).limit(MAX_DISTINCT_LABELS + 1))
        self._bounded(rows, question)
        trusted = pd.DataFrame({label: pd.Series([r[0] for r in rows], dtype=object)})
        if self.config.columns.question:
            trusted[self.config.columns.question] = question_value(self.config, question)
        return validation.categories_for(self.config, question, trusted)

    def label_rules(self, question: Question, categories: tuple[Any, ...] | None,
                    ) -> tuple[list[Any], list[Any], list[list[str]]]:
        """The question's distinct labels, their canonical values and the checks each fails."""
        import sqlalchemy as sa

        label = self.c(self.config.label_column(question))
        rows = self.backend.fetch(sa.select(label).where(self.question_condition(question), label.is_not(None))
                                  .group_by(label).limit(MAX_DISTINCT_LABELS + 1))
        self._bounded(rows, question)
        raw = [r[0] for r in rows]
        canonical, failed = validation.label_checks(question, categories, raw)
        return raw, canonical, failed

    def _bounded(self, rows: list[Any], question: Question) -> None:
        if len(rows) > MAX_DISTINCT_LABELS:
            raise InputError(f"Question {question.name!r} has more than {MAX_DISTINCT_LABELS} distinct labels in "
                             "the batch query; the database path checks each distinct label once. List the "
                             "categories, or gate the rows without 'aggregate'.", Reason.TOO_MANY_CATEGORIES,
                             question=question.name)

    def validate(self, checks: list[_Check], bad: Any, categories: dict[str, Any],
                 ) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, int]]]:
        """Per table: rows, rows failing each check, failing rows; the policy's verdict (one query)."""
        import sqlalchemy as sa

        cfg = self.config

        def total(condition: Any) -> Any:
            return sa.func.coalesce(sa.func.sum(sa.case((condition, 1), else_=0)), 0)

        table = sa.case((self.table_condition("trusted"), 1), else_=0)
        presence = [total(self.question_condition(q)) for q in cfg.questions] if cfg.columns.question else []
        rows = self.backend.fetch(sa.select(table, sa.func.count(), total(bad), *presence,
                                            *[total(c.condition) for c in checks])
                                  .where(sa.not_(self.outside_condition())).group_by(table))
        outside = {"crowd": self.outside_causes(), "trusted": {}}  # one source: the row path's crowd table holds them
        found = {int(r[0]): [int(v) for v in r[1:]] for r in rows}
        summary, counts = {}, {}
        for code, name in enumerate(TABLES):
            values, pool = found[code], getattr(cfg.pools, name)  # both present (require_pools)
            n_rows, n_invalid, present = values[0], values[1], values[2:2 + len(presence)]
            for q, n in zip(cfg.questions, present, strict=False):
                if not n:
                    raise InputError(f"The {pool} table has no row for question {q.name!r} (value "
                                     f"{question_value(cfg, q)!r} in column {cfg.columns.question!r}).",
                                     Reason.EMPTY_INPUT, question=q.name)
            by_check: dict[str, int] = {}
            for check, n in zip(checks, values[2 + len(presence):], strict=True):
                if n and (check.table is None or check.table == name):
                    by_check[check.key] = by_check.get(check.key, 0) + n
            counts[name] = dict(sorted(by_check.items()))
            passed, reason = validation.policy(n_rows, n_invalid, counts[name], cfg, pool)
            summary[name] = {"table": pool, "n_rows": n_rows, "n_valid": n_rows - n_invalid, "n_invalid": n_invalid,
                             "invalid_share": n_invalid / n_rows, "error_counts": counts[name],
                             "passed_policy": passed,
                             "reason": validation_drops.with_left_out(reason, outside[name]),
                             "left_out": outside[name]}
        return summary, counts

    def quarantine(self, table: str, checks: list[_Check], categories: dict[str, Any]) -> pd.DataFrame:
        """The table's failing rows (at most :data:`MAX_QUARANTINE_ROWS`), each with its reasons."""
        import sqlalchemy as sa

        cfg = self.config
        mine = [c for c in checks if c.table in (None, table)]
        flags = [sa.case((c.condition, 1), else_=0) for c in mine]
        originals = [self.rows.c[n] for n in self.columns]
        rows = self.backend.fetch(sa.select(*originals, self.c("_lg_copies"), *flags)
                                  .where(self.table_condition(table), sa.or_(*[c.condition for c in mine]))
                                  .limit(MAX_QUARANTINE_ROWS))
        pool = getattr(cfg.pools, table)
        keys = validation._unique_keys(cfg)
        reasons = []
        for row in rows:
            values = dict(zip(self.columns, row, strict=False))
            texts = []
            for check, hit in zip(mine, row[len(self.columns) + 1:], strict=True):
                if not hit:
                    continue
                if check.check == "unique":
                    ident = ", ".join(f"{k}={values[k]!r}" for k in keys)
                    texts.append(f"{check.key}: unique: ({ident}) occurs {int(row[len(self.columns)])} times; "
                                 "every copy is quarantined")
                else:
                    texts.append(validation.explain_failure(check.column, check.check, values.get(check.column),
                                                            check.question, cfg, categories, pool))
            reasons.append("; ".join(sorted(texts)))
        frame = pd.DataFrame([r[:len(self.columns)] for r in rows], columns=self.columns, dtype=object)
        frame.insert(0, "_row", "")
        frame["_reasons"] = reasons
        return frame

    def coverage(self, valid: dict[str, Any]) -> dict[str, Any]:
        """Distinct items of the valid crowd and trusted rows, and those in both."""
        import sqlalchemy as sa

        item = sa.cast(self.c(self.config.columns.item), sa.String)
        crowd, trusted = (self.backend.fetch(sa.select(sa.func.count(sa.distinct(item))).where(valid[t]))[0][0]
                          for t in TABLES)
        common = self.backend.fetch(sa.select(sa.func.count(sa.distinct(item))).where(
            valid["crowd"], item.in_(sa.select(item).where(valid["trusted"]).scalar_subquery())))[0][0]
        return {"batch_items": int(crowd), "trusted_items": int(trusted), "common_items": int(common),
                "coverage": int(common) / int(crowd) if crowd else 0.0}

    def canonical(self, question: Question, valid: dict[str, Any],
                  labels: tuple[list[Any], list[Any], list[list[str]]]) -> Any:
        """The question's valid judgements in the canonical columns (ids as text, labels canonical)."""
        import sqlalchemy as sa

        cfg, cols = self.config, self.config.columns
        label = self.c(cfg.label_column(question))
        raw, canonical, _ = labels
        value: Any = label
        if question.level in validation.NUMERIC_LEVELS:
            value = sa.cast(label, sa.Float)
        elif any(type(a) is not type(b) or a != b for a, b in zip(raw, canonical, strict=True)):
            value = sa.case(*[(label == a, sa.literal(b)) for a, b in zip(raw, canonical, strict=True)], else_=None)
        return (sa.select(sa.cast(self.c(cols.item), sa.String).label("item_id"),
                          sa.cast(self.c(cols.rater), sa.String).label("rater_id"), value.label("label"),
                          self.c(cols.pool).label("pool"),
                          sa.literal(question.name, sa.String).label("question"))
                .where(sa.or_(valid["crowd"], valid["trusted"]), self.question_condition(question),
                       label.is_not(None)))

    def aggregated(self, question: Question, select: Any, categories: tuple[Any, ...] | None,
                   ) -> tuple[tuple[Ratings | None, Ratings | None], RaterEvidence | None, list[Any]]:
        """The question's pools from their item x category counts, the crowd raters' evidence from two aggregate
        queries (:func:`labelgate.sqlagg.raters.rater_evidence`), and the parts of the digest."""
        backend = SqlAlchemyBackend.on_connection(self.connection, select)
        self.others.append(backend)
        cfg = self.config
        kw = {"item_column": "item_id", "rater_column": "rater_id", "label_column": "label", "pool_column": "pool",
              "crowd_pool": cfg.pools.crowd, "trusted_pool": cfg.pools.trusted, "level": question.level,
              "categories": list(categories) if categories is not None else None, "duplicates": "error"}
        plan = AggregatePlan(backend, kw)
        tallies = plan.tallies()
        present = [p for p in (cfg.pools.crowd, cfg.pools.trusted) if p in tallies]
        built = plan.build(tallies, present)
        crowd = built.crowd if cfg.pools.crowd in tallies else None
        trusted = built.trusted if crowd is not None else built.crowd
        evidence = None
        if crowd is not None:
            labels = backend.distinct(plan.scope, "label", "labelled")
            evidence = rater_evidence(backend, plan.scope, labels, list(crowd.categories), question.level,
                                      center=crowd.moment_center)
        parts: list[Any] = [list(built.crowd.categories), list(built.crowd.item_labels),
                            evidence.rater_ids if evidence is not None else []]
        for pool in (crowd, trusted):
            counts = pool.item_counts if pool is not None else np.zeros((0, 0), dtype=np.int64)
            items, cats = np.nonzero(counts)  # (item, category, count) rows, sorted
            parts.append(np.column_stack([items, cats, counts[items, cats]]).astype(np.int64))
        parts += list(evidence.parts) if evidence is not None else []
        return (crowd, trusted), evidence, parts
