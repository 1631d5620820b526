"""Row-level validation of the gate's input tables with pandera, quarantine and the invalid-row policy.

Each table (the crowd batch and the trusted replication, validated separately) is checked against a
pandera schema built from the configuration (:func:`build_schema`):

* item, rater and pool ids: present, non-empty, read as text; the pool is the expected one (a row of a pool that is
  none of the configured ones is left out and counted in ``left_out`` unless ``pools.unknown: invalid``);
* the label of every question: at most :data:`~labelgate.pipeline.limits.MAX_LABEL_CHARS` characters long, within
  its categories (nominal/ordinal), or a finite number within the listed categories, if any (interval/ratio;
  non-negative for ratio);
* one judgement per (item, rater) within each pool (and question).

Validation is lazy: every failure of every row is collected. Rows that fail go to the *quarantine*
table with a ``_reasons`` text naming the column, the check and the value; the others form the *valid*
table. Nothing is dropped silently: ``n_valid + n_invalid == n_rows``. Problems with the table as a
whole (no rows, a required column missing) raise :class:`~labelgate.errors.InputError`, which the gate
turns into an ERROR decision.

Policy (``validation`` in the config): with ``on_invalid: reject`` any invalid row fails the table; with
``on_invalid: continue`` the gate goes on without the invalid rows when their share is at most
``max_invalid_share``. See ``docs/validation.md``.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

if int(pd.__version__.split(".")[0]) >= 3:
    # pandera tries `import pyspark.pandas` whenever pyspark is installed (the spark extra); under pandas 3 that import
    # fails, but only after loading pyspark (~0.07 s of every gate's start, docs/benchmarks.md). Marking it absent
    # makes the failing import fail at once; nothing else changes, since it cannot be imported with pandas 3.
    sys.modules.setdefault("pyspark.pandas", None)  # type: ignore[arg-type]

import pandera.pandas as pa
from pandera.errors import SchemaErrors

from labelgate.core.labels import label_key, label_number, plain_label
from labelgate.errors import InputError, Reason
from labelgate.pipeline.config import ConfigError, GateConfig, Question
from labelgate.pipeline.limits import MAX_CATEGORIES, MAX_LABEL_CHARS, shown
from labelgate.pipeline.sources import as_str, question_value
from labelgate.pipeline.sources.pools import ADDED_COLUMNS
from labelgate.pipeline.units import set_elements, unit_label
from labelgate.pipeline.validation_drops import left_out, outside_pool_causes, outside_pools, with_left_out

NUMERIC_LEVELS = ("interval", "ratio")
_UNIQUE = "multiple_fields_uniqueness"
_LIST_MAX = 20  # categories shown in a message
_NON_EMPTY = pa.Check(lambda s: s.str.len() > 0, name="non_empty")


@dataclass(frozen=True)
class ValidationResult:
    """Outcome of validating one table.

    Attributes
    ----------
    valid : DataFrame
        Rows that passed every check, original index and columns; ids as text, labels canonical
        (the category values; floats for interval/ratio questions).
    quarantine : DataFrame
        Rows that failed: ``_row`` (the row's index in the validated table: data row ``k`` of the file),
        the original columns with their original values, and ``_reasons`` (``"; "``-separated texts
        ``"<column>: <check>: <explanation>"``).
    n_rows, n_invalid : int
        Rows checked and rows quarantined.
    invalid_share : float
        ``n_invalid / n_rows``.
    error_counts : dict of str to int
        Rows failing each ``"<column>:<check>"`` (one row can fail several).
    passed_policy : bool
        Whether the gate may go on with ``valid`` under the configured policy.
    reason : str
        One sentence explaining ``passed_policy``.
    table : str
        Name of the table in messages (the pool).
    left_out : dict of str to int
        Rows the measurement leaves out, by cause (:mod:`labelgate.pipeline.validation_drops`): valid rows that hold
        no judgement of a configured question, and rows of a pool that is not configured (``pools.unknown:
        leave_out``; these are not checked and count in neither ``n_rows`` nor ``n_invalid``).
    """

    valid: pd.DataFrame
    quarantine: pd.DataFrame
    n_rows: int
    n_invalid: int
    invalid_share: float
    error_counts: dict[str, int]
    passed_policy: bool
    reason: str
    table: str = "input"
    categories: dict[str, tuple[Any, ...] | None] = field(default_factory=dict)
    left_out: dict[str, int] = field(default_factory=dict)

    @property
    def n_valid(self) -> int:
        """Rows that passed (``n_rows - n_invalid``)."""
        return len(self.valid)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly summary for the report (no tables)."""
        return {"table": self.table, "n_rows": self.n_rows, "n_valid": self.n_valid,
                "n_invalid": self.n_invalid, "invalid_share": self.invalid_share,
                "error_counts": dict(self.error_counts), "passed_policy": self.passed_policy,
                "reason": self.reason, "left_out": dict(self.left_out)}


# ------------------------------------------------------------------------------------------- categories
def categories_for(config: GateConfig, question: Question,
                   trusted_df: pd.DataFrame) -> tuple[Any, ...] | None:
    """The categories a question's labels are checked against.

    Parameters
    ----------
    config : labelgate.pipeline.config.GateConfig
    question : labelgate.pipeline.config.Question
    trusted_df : DataFrame
        The trusted replication (as loaded).

    Returns
    -------
    tuple or None
        ``question.categories`` when listed (numbers for interval/ratio). Otherwise, for nominal/ordinal
        questions, the distinct labels the trusted replication uses: numbers when every label is a number
        or a numeric text (``"2"`` → ``2``), sorted numerically; texts sorted otherwise. ``None`` for
        interval/ratio questions without a list: any finite number is then valid, since a value the
        trusted raters happen not to use (a slider position) is not an error.

    Raises
    ------
    ConfigError
        An ordinal question whose trusted labels are not numbers (their order would be alphabetical: list
        the categories in order in the config), or an invalid explicit list.
    InputError
        The label column is missing, the trusted replication has no label for the question, or it uses more
        than :data:`~labelgate.pipeline.limits.MAX_CATEGORIES` distinct labels.

    Examples
    --------
    >>> import pandas as pd
    >>> from labelgate.pipeline.config import GateConfig
    >>> cfg = GateConfig.model_validate({"questions": [{"name": "grade", "level": "ordinal"}]})
    >>> trusted = pd.DataFrame({"label": ["10", "2", "1", "2", None]})
    >>> categories_for(cfg, cfg.questions[0], trusted)
    (1, 2, 10)
    """
    key = f"questions[{config.questions.index(question)}].categories"
    if question.categories is not None:
        return _explicit_categories(question, key)
    if question.level in NUMERIC_LEVELS:
        return None
    labels = _question_labels(trusted_df, config, question)
    if question.level == "set":  # the elements the trusted sets use (an empty set is a judgement, not a category)
        return _bounded(tuple(set_elements(labels)), question, key)
    if labels.empty:
        raise InputError(f"The trusted replication has no label for question {question.name!r}, so its "
                         f"categories are unknown; list them in '{key}'.", Reason.EMPTY_INPUT,
                         question=question.name)
    blank = unit_label(question)
    if blank is not None:  # spans / boxes: "outside" or "missed" is a label of every unit table
        labels = pd.Series([*dict.fromkeys([*labels, blank])], dtype=object)
        return _bounded(tuple(sorted(map(str, labels))), question, key)
    numbers = [_number(v) for v in labels]
    if all(n is not None for n in numbers):
        return _bounded(tuple(sorted({n for n in numbers if n is not None})), question, key)
    if question.level == "ordinal":
        listed = ", ".join(shown(v) for v in sorted(map(str, labels))[:_LIST_MAX])
        raise ConfigError(f"Question {question.name!r} is ordinal but its trusted labels [{listed}] are not "
                          f"numbers, so their order is unknown; list the categories in order in '{key}'.",
                          key=key)
    distinct = {label_key(v): plain_label(v) for v in labels}  # " pos" and "pos" are one category
    return _bounded(tuple(sorted(distinct.values(), key=lambda v: (type(v).__name__, str(v)))), question, key)


def _bounded(categories: tuple[Any, ...], question: Question, key: str) -> tuple[Any, ...]:
    """The categories found in the trusted replication, refused beyond :data:`MAX_CATEGORIES`."""
    if len(categories) > MAX_CATEGORIES:
        raise InputError(f"The trusted replication uses {len(categories)} distinct labels for question "
                         f"{question.name!r}, more than the limit of {MAX_CATEGORIES} categories; is the label column "
                         f"free text? List the categories in '{key}' to check the labels against them.",
                         Reason.TOO_MANY_CATEGORIES, question=question.name, n_categories=len(categories))
    return categories


def all_categories(config: GateConfig, trusted_df: pd.DataFrame) -> dict[str, tuple[Any, ...] | None]:
    """:func:`categories_for` every question, by question name."""
    return {q.name: categories_for(config, q, trusted_df) for q in config.questions}


def _explicit_categories(question: Question, key: str) -> tuple[Any, ...]:
    cats = tuple(question.categories or ())
    if not cats:
        raise ConfigError(f"'{key}' is empty; list the categories or remove the key.", key=key)
    if question.level in NUMERIC_LEVELS:
        numbers = [_number(c) for c in cats]
        if any(n is None for n in numbers):
            bad = cats[[n is None for n in numbers].index(True)]
            raise ConfigError(f"'{key}' holds {bad!r}, but question {question.name!r} is {question.level} "
                              "and needs numbers.", key=key)
        cats = tuple(numbers)
    if len({_key(c) for c in cats}) != len(cats):
        raise ConfigError(f"'{key}' has duplicates: {list(cats)}.", key=key)
    return cats


def _question_labels(df: pd.DataFrame, config: GateConfig, question: Question) -> pd.Series:
    label = config.label_column(question)
    _require(df, [label] + ([config.columns.question] if config.columns.question else []), "trusted")
    values = df[label]
    if config.columns.question:
        mine = df[config.columns.question].astype(object) == question_value(config, question)
        values = values[mine.to_numpy(bool)]
    return pd.Series(values.dropna().unique(), dtype=object).map(_plain)


def _number(value: Any) -> int | float | None:
    """The finite number a label stands for (the one rule: :func:`labelgate.core.labels.label_number`)."""
    return label_number(value)


def _key(value: Any) -> tuple[str, Any]:
    """Matching key of a label (the one rule: :func:`labelgate.core.labels.label_key`)."""
    key = label_key(value)
    return key if key is not None else ("missing", None)


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _canonical(values: pd.Series, categories: Sequence[Any]) -> pd.Series:
    """Replace each label matching a category (``"1"`` for ``1``) by the category; others stay as read."""
    by_key = {_key(c): c for c in categories}
    if len(by_key) != len(categories):  # e.g. "01" and "1": match exactly
        by_key = {("x", c): c for c in categories}
        lookup: Callable[[Any], Any] = lambda v: by_key.get(("x", _plain(v)), v)  # noqa: E731
    else:
        lookup = lambda v: by_key.get(_key(v), v)  # noqa: E731
    out = values.astype(object)
    present = out.notna().to_numpy(bool)
    uniques = pd.unique(out[present])
    mapping = {u: lookup(u) for u in uniques}
    out.loc[present] = [mapping[v] for v in out[present]]
    return out


# ------------------------------------------------------------------------------------------- schema
def build_schema(config: GateConfig, question: Question, categories: Sequence[Any] | None, *,
                 pool: str | None = None) -> pa.DataFrameSchema:
    """The pandera schema of a table holding one question's judgements.

    Parameters
    ----------
    config : labelgate.pipeline.config.GateConfig
        Column names, pool values.
    question : labelgate.pipeline.config.Question
        Level and label column.
    categories : sequence or None
        Allowed labels (see :func:`categories_for`); None: no membership check.
    pool : str, optional
        Expected pool value of every row; default either configured pool.

    Returns
    -------
    pandera.pandas.DataFrameSchema
        Columns: item and rater ids and the pool (text, not null, non-empty; pool within the expected
        values), the question column when configured (text, not null), the label column (not null;
        ``category`` check for nominal/ordinal; ``numeric``, ``finite``, optional ``category`` and, for
        ratio, ``non_negative`` for interval/ratio). ``unique`` = (item, rater, pool[, question]), every
        copy of a duplicate reported. Other columns are allowed.

    Examples
    --------
    >>> import pandas as pd
    >>> from labelgate.pipeline.config import GateConfig
    >>> cfg = GateConfig()
    >>> schema = build_schema(cfg, cfg.questions[0], ["neg", "pos"], pool="crowd")
    >>> sorted(schema.columns), schema.unique
    (['item_id', 'label', 'pool', 'rater_id'], ['item_id', 'rater_id', 'pool'])
    >>> ok = pd.DataFrame({"item_id": ["1"], "rater_id": ["a"], "label": ["pos"], "pool": ["crowd"]})
    >>> len(schema.validate(ok))
    1
    """
    columns = _id_columns(config, pool)
    columns[config.label_column(question)] = _label_column(question, categories, nullable=False)
    return pa.DataFrameSchema(columns, unique=_unique_keys(config), name=f"labelgate:{question.name}")


def _id_columns(config: GateConfig, pool: str | None) -> dict[str, pa.Column]:
    cols = config.columns
    allowed = [pool] if pool is not None else [config.pools.crowd, config.pools.trusted]

    def text(*checks: pa.Check) -> pa.Column:
        return pa.Column(str, coerce=True, nullable=False, checks=list(checks))

    out = {cols.item: text(_NON_EMPTY), cols.rater: text(_NON_EMPTY),
           cols.pool: text(pa.Check(lambda s: s.isin(allowed), name="pool"))}
    if cols.question:
        out[cols.question] = text(_NON_EMPTY)
    return out


def _unique_keys(config: GateConfig) -> list[str]:
    cols = config.columns
    return [cols.item, cols.rater, cols.pool] + ([cols.question] if cols.question else [])


def _label_column(question: Question, categories: Sequence[Any] | None, *, nullable: bool) -> pa.Column:
    if question.level == "set":  # a canonical set (a tuple of texts, pipeline.units.canonical_sets) of categories
        members = {str(c) for c in categories or ()}
        checks = [pa.Check(lambda s: s.map(lambda v: isinstance(v, tuple) or v is None), name="set")]
        if categories is not None:
            checks.append(pa.Check(lambda s: s.map(lambda v: not isinstance(v, tuple) or set(v) <= members),
                                   name="category"))
        return pa.Column(None, nullable=nullable, checks=checks)
    if question.level not in NUMERIC_LEVELS:
        allowed = list(categories or ())
        checks = [_SHORT] + ([] if categories is None else [pa.Check(lambda s: s.isin(allowed), name="category")])
        return pa.Column(None, nullable=nullable, checks=checks)
    checks = [_SHORT, pa.Check(lambda s: _to_float(s).notna(), name="numeric"),
              pa.Check(lambda s: ~np.isinf(_to_float(s)), name="finite")]
    if categories is not None:
        allowed = [float(c) for c in categories]
        checks.append(pa.Check(lambda s: _to_float(s).isin(allowed) | _to_float(s).isna(), name="category"))
    if question.level == "ratio":
        checks.append(pa.Check(lambda s: ~(_to_float(s) < 0), name="non_negative"))
    return pa.Column(None, nullable=nullable, checks=checks)


def label_checks(question: Question, categories: Sequence[Any] | None,
                 labels: Sequence[Any]) -> tuple[list[Any], list[list[str]]]:
    """The rules of the label column applied to distinct labels: each one's canonical value and failed checks.

    For sources validated where they live (:mod:`labelgate.pipeline.sources.sql_batch`): the database returns each
    distinct label once, and the rows holding a failing one are counted and quarantined there. The checks are
    those of :func:`build_schema`'s label column (``category``, ``too_long``, ``numeric``, ``finite``,
    ``non_negative``); the canonical value is the matching category (nominal / ordinal) or the number
    (interval / ratio).
    """
    values = pd.Series(list(labels), dtype=object)
    numeric = question.level in NUMERIC_LEVELS
    canonical = values if numeric or categories is None else _canonical(values, categories)
    schema = pa.DataFrameSchema({"label": _label_column(question, categories, nullable=True)})
    cases = _failures(schema, pd.DataFrame({"label": canonical}), {})
    failed: list[list[str]] = [[] for _ in range(len(values))]
    for row in cases.itertuples(index=False):
        failed[int(row.index)].append(str(row.check).split("(")[0])
    final = _to_float(values) if numeric else canonical
    return [_plain(v) for v in final], failed


def explain_failure(column: str, check: str, value: Any, question: str | None, config: GateConfig,
                    categories: Mapping[str, Sequence[Any] | None], pool: str | None) -> str:
    """The quarantine text of one failed check (``"<column>: <check>: <explanation>"``), as the row path words it."""
    levels = {q.name: q.level for q in config.questions}
    pools = [config.pools.crowd, config.pools.trusted]
    expected = f"the expected pool {pool!r}" if pool is not None else f"one of the configured pools {pools}"
    return _explain(column, check, _plain(value), question, levels, categories, expected, "")


def policy(n_rows: int, n_invalid: int, counts: Mapping[str, int], config: GateConfig,
           table: str) -> tuple[bool, str]:
    """Whether the gate may go on with a table's valid rows under ``validation``, and why (one sentence)."""
    return _policy(n_rows, n_invalid, counts, config, table)


def _short_enough(values: pd.Series) -> pd.Series:
    """False where a label is a text longer than :data:`~labelgate.pipeline.limits.MAX_LABEL_CHARS` characters."""
    if not (pd.api.types.is_object_dtype(values) or pd.api.types.is_string_dtype(values)):
        return pd.Series(True, index=values.index)
    # lengths of the distinct labels only: a batch repeats a handful of labels over millions of rows
    too_long = [v for v in pd.unique(values.astype(object)) if isinstance(v, str) and len(v) > MAX_LABEL_CHARS]
    return ~values.isin(too_long) if too_long else pd.Series(True, index=values.index)


_SHORT = pa.Check(_short_enough, name="too_long")


def _to_float(values: pd.Series) -> pd.Series:
    """Numbers and numeric texts as float; anything else (including booleans) NaN."""
    obj = values.astype(object)
    is_bool = obj.map(lambda v: isinstance(v, (bool, np.bool_))).to_numpy(bool)
    out = pd.to_numeric(obj.where(~is_bool, None), errors="coerce").astype("float64")
    return out


# ------------------------------------------------------------------------------------------- validate
def validate(df: pd.DataFrame, config: GateConfig,
             categories_by_question: Mapping[str, Sequence[Any] | None] | None = None, *,
             pool: str | None = None) -> ValidationResult:
    """Validate one table (lazily), split it into valid and quarantined rows, and apply the policy.

    Parameters
    ----------
    df : DataFrame
        The table (crowd or trusted), as loaded by :func:`labelgate.pipeline.sources.load_pools`.
    config : labelgate.pipeline.config.GateConfig
        Columns, questions, pools and the ``validation`` policy.
    categories_by_question : mapping of question name to categories, optional
        From :func:`all_categories` (computed on the *trusted* table, and used for both tables). A missing
        entry falls back to the question's listed categories; None means no membership check.
    pool : str, optional
        The pool every row must belong to (``config.pools.crowd`` for the batch); default either pool.

    Returns
    -------
    ValidationResult

    Raises
    ------
    InputError
        The table is empty, a required column is missing (the message names it), or a configured question
        has no row (question-column layout).
    ConfigError
        Two questions read the same label column without a question column, or ``question_value`` is set
        without ``columns.question``.

    Notes
    -----
    Duplicate judgements: when one rater judged one item more than once in a pool (and question), **every**
    copy is quarantined, since nothing tells which one is right (identical copies included: a double
    submission is a pipeline fault worth seeing).

    Layouts. Without ``columns.question``, each question reads its own label column (one row per item and
    rater); with several questions a missing label only means the question was not answered (not an
    error; :func:`labelgate.pipeline.sources.question_frame` leaves it out), but with one question it is an error. With
    ``columns.question``, each row belongs to the question named in that column, its label must be
    present, and rows of questions not in the config are checked for ids only and kept in ``valid``.

    Examples
    --------
    >>> import pandas as pd
    >>> from labelgate.pipeline.config import GateConfig
    >>> cfg = GateConfig()
    >>> df = pd.DataFrame({"item_id": ["1", "1", "2", None], "rater_id": ["a", "b", "a", "b"],
    ...                    "label": ["pos", "spam", "neg", "pos"], "pool": "crowd"})
    >>> res = validate(df, cfg, {"label": ("neg", "pos")}, pool="crowd")
    >>> res.n_rows, res.n_valid, res.n_invalid, res.passed_policy
    (4, 2, 2, False)
    >>> print(res.quarantine["_reasons"].tolist()[0])
    label: category: 'spam' is not one of the categories ['neg', 'pos'] of question 'label'
    """
    table = pool or "input"
    _check_layout(config)
    _check_table(df, config, table)
    outside = outside_pools(df[config.columns.pool], config)
    other_pools = outside_pool_causes(df[config.columns.pool][outside])
    if outside.any():  # another pool's rows (pools.unknown: leave_out): counted, neither checked nor measured
        if outside.all():
            raise InputError(f"Every row of the {table} table has a pool value outside the configured pools "
                             f"({', '.join(f'{c} {n} rows' for c, n in other_pools.items())}); check 'pools' "
                             f"(crowd {config.pools.crowd!r}, trusted {config.pools.trusted!r}).",
                             Reason.EMPTY_INPUT, table=table, column=config.columns.pool)
        attrs = dict(df.attrs)
        df = df.loc[~outside]
        df.attrs.update(attrs)
    cats = {q.name: (categories_by_question or {}).get(q.name, q.categories) for q in config.questions}
    work = df.reset_index(drop=True)
    cases = _validate_rows(work, config, cats, pool)
    bad = np.asarray(sorted(cases["index"].unique()), dtype=np.int64) if len(cases) else np.zeros(0, np.int64)
    added = [c for c in df.attrs.get(ADDED_COLUMNS, []) if c in df.columns]  # not the file's: never named
    reasons, counts = _reasons(cases, work, config, cats, pool, df.index, added)
    good = np.setdiff1d(np.arange(len(df)), bad)
    valid = _valid_rows(df, work, good, config)
    quarantine = df.iloc[bad].drop(columns=added).copy()
    quarantine.insert(0, "_row", df.index[bad])
    quarantine["_reasons"] = [reasons[i] for i in bad]
    quarantine = quarantine.reset_index(drop=True)
    passed, reason = _policy(len(df), len(bad), counts, config, table)
    dropped = {**other_pools, **left_out(valid, config)}
    return ValidationResult(valid=valid, quarantine=quarantine, n_rows=len(df), n_invalid=len(bad),
                            invalid_share=len(bad) / len(df), error_counts=counts, passed_policy=passed,
                            reason=with_left_out(reason, dropped), table=table,
                            categories={k: _tuple(v) for k, v in cats.items()}, left_out=dropped)


def validate_pools(crowd_df: pd.DataFrame, trusted_df: pd.DataFrame, config: GateConfig,
                   categories_by_question: Mapping[str, Sequence[Any] | None] | None = None,
                   ) -> tuple[ValidationResult, ValidationResult]:
    """Validate the crowd and trusted tables separately (same policy, separate reports).

    ``categories_by_question`` defaults to :func:`all_categories` of the trusted table.
    """
    cats = all_categories(config, trusted_df) if categories_by_question is None else categories_by_question
    return (validate(crowd_df, config, cats, pool=config.pools.crowd),
            validate(trusted_df, config, cats, pool=config.pools.trusted))


def _tuple(categories: Sequence[Any] | None) -> tuple[Any, ...] | None:
    return None if categories is None else tuple(categories)


def _check_layout(config: GateConfig) -> None:
    if config.columns.question is None:
        for i, q in enumerate(config.questions):
            if q.question_value is not None:
                raise ConfigError(f"questions[{i}].question_value is set but 'columns.question' (the column "
                                  "naming the question of each row) is not.",
                                  key=f"questions[{i}].question_value")
        labels = [config.label_column(q) for q in config.questions]
        repeated = sorted({c for c in labels if labels.count(c) > 1})
        if repeated:
            raise ConfigError(f"Several questions read the label column {repeated[0]!r}; give each its own "
                              "'label_column', or set 'columns.question'.", key="questions")
    else:
        values = [question_value(config, q) for q in config.questions]
        repeated = sorted({v for v in values if values.count(v) > 1})
        if repeated:
            raise ConfigError(f"Several questions use the question value {repeated[0]!r}.", key="questions")


def _check_table(df: pd.DataFrame, config: GateConfig, table: str) -> None:
    if len(df) == 0:
        raise InputError(f"The {table} table is empty (0 rows).", Reason.EMPTY_INPUT, table=table)
    cols = config.columns
    needed = [(cols.item, "item column"), (cols.rater, "rater column"), (cols.pool, "pool column")]
    if cols.question:
        needed.append((cols.question, "question column"))
    needed += [(config.label_column(q), f"label column of question {q.name!r}") for q in config.questions]
    for name, role in needed:
        _require(df, [name], table, role)
    if cols.question:
        present = set(df[cols.question].dropna().astype(str).unique())
        for q in config.questions:
            if question_value(config, q) not in present:
                raise InputError(f"The {table} table has no row for question {q.name!r} (value "
                                 f"{question_value(config, q)!r} in column {cols.question!r}); values found: "
                                 f"{sorted(present)[:_LIST_MAX]}.", Reason.EMPTY_INPUT, question=q.name)


def _require(df: pd.DataFrame, names: Sequence[str], table: str, role: str = "") -> None:
    for name in names:
        if name not in df.columns:
            what = f" (the {role})" if role else ""
            raise InputError(f"Column {name!r}{what} is missing from the {table} table; it has columns "
                             f"{sorted(map(str, df.columns))}.", Reason.MISSING_COLUMN, column=name,
                             table=table)


def _validate_rows(work: pd.DataFrame, config: GateConfig, cats: Mapping[str, Sequence[Any] | None],
                   pool: str | None) -> pd.DataFrame:
    """Canonicalise labels in ``work`` (in place); return every failure case (column, check, value, index)."""
    cols, questions = config.columns, config.questions
    if cols.question is None:
        labels: dict[str, pa.Column] = {}
        for q in questions:
            column = config.label_column(q)
            if q.level not in (*NUMERIC_LEVELS, "set") and cats[q.name] is not None:
                work[column] = _canonical(work[column], cats[q.name] or ())
            labels[column] = _label_column(q, cats[q.name], nullable=len(questions) > 1)
        schema = pa.DataFrameSchema({**_id_columns(config, pool), **labels}, unique=_unique_keys(config))
        return _failures(schema, work, {config.label_column(q): q.name for q in questions})
    parts = [_failures(pa.DataFrameSchema(_id_columns(config, pool), unique=_unique_keys(config)), work, {})]
    names = work[cols.question].astype(object)
    for q in questions:
        column = config.label_column(q)
        rows = np.flatnonzero((names == question_value(config, q)).to_numpy(bool))
        sub = work.iloc[rows]
        if q.level not in (*NUMERIC_LEVELS, "set") and cats[q.name] is not None:
            work[column] = work[column].astype(object)
            sub = sub.assign(**{column: _canonical(sub[column], cats[q.name] or ())})
            work.loc[sub.index, column] = sub[column]
        schema = pa.DataFrameSchema({column: _label_column(q, cats[q.name], nullable=False)})
        parts.append(_failures(schema, sub, {column: q.name}))
    return pd.concat(parts, ignore_index=True)


def _failures(schema: pa.DataFrameSchema, frame: pd.DataFrame,
              question_of: Mapping[str, str]) -> pd.DataFrame:
    try:
        schema.validate(frame, lazy=True)
    except SchemaErrors as exc:
        cases = exc.failure_cases[["column", "check", "failure_case", "index"]].copy()
        table_level = cases["index"].isna()
        if table_level.any():
            first = cases[table_level].iloc[0]
            raise InputError(f"Validation could not check column {first['column']!r} ({first['check']}): "
                             f"{first['failure_case']}.", Reason.EMPTY_INPUT,
                             column=first["column"]) from None
        cases["index"] = cases["index"].astype(np.int64)
        cases["question"] = [question_of.get(c) for c in cases["column"]]
        return cases
    return pd.DataFrame({"column": [], "check": [], "failure_case": [], "index": [], "question": []})


# ------------------------------------------------------------------------------------------- reasons
def _reasons(cases: pd.DataFrame, work: pd.DataFrame, config: GateConfig,
             cats: Mapping[str, Sequence[Any] | None], pool: str | None,
             rows: pd.Index, added: Sequence[str] = ()) -> tuple[dict[int, str], dict[str, int]]:
    """Reason text per failing row position, and the number of rows failing each column:check.

    ``rows`` is the validated table's index: a message names a row as the quarantine's ``_row`` does. ``added``:
    columns the loader added (a file's missing pool column), left out of the duplicate keys' names."""
    by_row: dict[int, set[str]] = {}
    hits: set[tuple[int, str]] = set()
    if not len(cases):
        return {}, {}
    levels = {q.name: q.level for q in config.questions}
    pools = [config.pools.crowd, config.pools.trusted]
    expected = f"the expected pool {pool!r}" if pool is not None else f"one of the configured pools {pools}"
    unique = cases["check"] == _UNIQUE
    for row in cases.loc[~unique].itertuples(index=False):
        check = str(row.check).split("(")[0]
        check = {"not_nullable": "not_null"}.get(check, check)
        value = _plain(row.failure_case)
        text = _explain(str(row.column), check, value, row.question, levels, cats, expected,
                        rows[int(row.index)])
        by_row.setdefault(int(row.index), set()).add(text)
        hits.add((int(row.index), f"{row.column}:{check}"))
    if unique.any():
        keys = [k for k in _unique_keys(config) if k not in added]
        name = "+".join(keys)
        for position, text in _duplicate_texts(work, sorted(set(cases.loc[unique, "index"])), keys).items():
            by_row.setdefault(position, set()).add(f"{name}: unique: {text}")
            hits.add((position, f"{name}:unique"))
    counts = Counter(key for _, key in hits)
    return {i: "; ".join(sorted(t)) for i, t in by_row.items()}, dict(sorted(counts.items()))


def _explain(column: str, check: str, value: Any, question: str | None, levels: Mapping[str, str],
             cats: Mapping[str, Sequence[Any] | None], expected_pool: str, row: Any) -> str:
    question = question if isinstance(question, str) else None
    of = f" (question {question!r})" if question else ""
    quoted = shown(value)  # a value is quoted cut short: a megabyte label must not become a megabyte message
    if check == "not_null":
        text = f"missing value{of}"
    elif check == "non_empty":
        text = f"{quoted} is empty"
    elif check == "pool":
        text = f"{quoted} is not {expected_pool}"
    elif check == "too_long":
        text = f"row {row}: {quoted} is longer than the limit of {MAX_LABEL_CHARS} characters{of}"
    elif check == "category" and isinstance(value, tuple):
        listed = list(cats.get(question or "") or ())
        outside = sorted(set(map(str, value)) - set(map(str, listed)))
        text = f"the set {quoted} holds {shown(outside)}, not among the categories of question {question!r}"
    elif check == "set":
        text = f"{quoted} is not a set of categories (question {question!r} is level 'set')"
    elif check == "category":
        listed = list(cats.get(question or "") or ())
        more = f" (+{len(listed) - _LIST_MAX} more)" if len(listed) > _LIST_MAX else ""
        text = f"{quoted} is not one of the categories {listed[:_LIST_MAX]}{more} of question {question!r}"
    elif check == "numeric":
        text = f"{quoted} is not a number, but question {question!r} is {levels.get(question or '')}"
    elif check == "finite":
        text = f"{quoted} is not finite{of}"
    elif check == "non_negative":
        text = f"{quoted} is negative, but question {question!r} is ratio"
    else:
        text = f"{quoted} failed{of}"
    return f"{column}: {check}: {text}"


def _duplicate_texts(work: pd.DataFrame, positions: Sequence[int], keys: list[str]) -> dict[int, str]:
    rows = work.iloc[list(positions)][keys].astype(object)
    filled = rows.where(rows.notna(), "<missing>").astype(str)
    size = filled.groupby(keys, dropna=False)[keys[0]].transform("size")
    out = {}
    for position, (_, values), n in zip(positions, filled.iterrows(), size, strict=True):
        ident = ", ".join(f"{k}={v!r}" for k, v in values.items())
        out[int(position)] = f"({ident}) occurs {int(n)} times; every copy is quarantined"
    return out


# ------------------------------------------------------------------------------------------- outputs
def _valid_rows(df: pd.DataFrame, work: pd.DataFrame, good: np.ndarray, config: GateConfig) -> pd.DataFrame:
    """Passing rows with the original index; ids as text, canonical labels, numbers for numeric questions."""
    valid = df.iloc[good].copy()
    rows = work.iloc[good]
    for name in _unique_keys(config):
        valid[name] = as_str(rows[name]).to_numpy()
    cols = config.columns
    if cols.question is None:
        for q in config.questions:
            column = config.label_column(q)
            values = rows[column]
            valid[column] = (_to_float(values) if q.level in NUMERIC_LEVELS else values).to_numpy()
        return valid
    names = rows[cols.question].astype(object)
    for column in dict.fromkeys(config.label_column(q) for q in config.questions):
        values = rows[column].astype(object).copy()
        for q in config.questions:
            if config.label_column(q) == column and q.level in NUMERIC_LEVELS:
                mine = (names == question_value(config, q)).to_numpy(bool)
                values[mine] = _to_float(values[mine]).to_numpy()
        valid[column] = values.to_numpy()
    return valid


def _policy(n_rows: int, n_invalid: int, counts: Mapping[str, int], config: GateConfig,
            table: str) -> tuple[bool, str]:
    rule = config.validation
    if n_invalid == 0:
        return True, f"All {n_rows} rows of the {table} table passed validation."
    top = ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])[:5])
    share = n_invalid / n_rows
    head = (f"{n_invalid} of {n_rows} rows ({share:.2%}) of the {table} table failed validation and were "
            f"quarantined ({top})")
    if n_invalid == n_rows:
        return False, f"{head}; no valid row remains."
    if rule.on_invalid == "reject":
        return False, f"{head}; the {table} table fails the policy (validation.on_invalid=reject)."
    if share > rule.max_invalid_share:
        return False, (f"{head}; that exceeds validation.max_invalid_share={rule.max_invalid_share:g}, so "
                       f"the {table} table fails the policy.")
    return True, (f"{head}; continuing without them (validation.on_invalid=continue, share within "
                  f"max_invalid_share={rule.max_invalid_share:g}).")


def write_quarantine(result: ValidationResult, directory: str | Path, stem: str) -> Path | None:
    """Write the quarantined rows to ``<directory>/<stem>.quarantine.csv``; None when no row failed.

    The CSV has the columns ``_row``, the table's original columns (original values), and ``_reasons``.

    Examples
    --------
    >>> import pandas as pd, tempfile
    >>> from labelgate.pipeline.config import GateConfig
    >>> df = pd.DataFrame({"item_id": ["1", "1"], "rater_id": ["a", "a"], "label": ["x", "y"],
    ...                    "pool": "crowd"})
    >>> res = validate(df, GateConfig(), {"label": ("x", "y")}, pool="crowd")
    >>> path = write_quarantine(res, tempfile.mkdtemp(), "run1-crowd")
    >>> path.name, len(pd.read_csv(path))
    ('run1-crowd.quarantine.csv', 2)
    """
    if result.n_invalid == 0:
        return None
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{stem}.quarantine.csv"
    frame = result.quarantine
    order = ["_row", *[c for c in frame.columns if c not in ("_row", "_reasons")], "_reasons"]
    frame[order].to_csv(path, index=False)
    return path
