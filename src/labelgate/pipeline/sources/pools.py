"""The gate's two replications: the crowd batch and the trusted table, from one source or two, and the judgements
of one question in canonical columns.

A gate run compares a *batch* (the crowd replication) with a *trusted* replication of the same items. Both are
long tables (one row per judgement: item, rater, label(s), pool). They come from

* two sources (``--batch`` and ``--trusted``, or ``batch`` / ``trusted`` in the config), each given the pool
  column with the configured value (``pools.crowd`` / ``pools.trusted``) when it has none; or
* one source holding both pools in the pool column (passed as ``--batch`` only, or as both).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from labelgate.errors import InputError, Reason
from labelgate.pipeline.sources.tables import as_str, load_table

if TYPE_CHECKING:
    from labelgate.pipeline.config import GateConfig, Question, Source

#: Canonical column names of :func:`question_frame` (the defaults of ``lg.Ratings.from_long`` and
#: ``lg.ratings_by_pool``).
ITEM, RATER, LABEL, POOL, TIMESTAMP = "item_id", "rater_id", "label", "pool", "timestamp"
#: ``DataFrame.attrs`` key listing the columns the loader added to a table (the pool column of a file without one):
#: validation never names them in its messages or its quarantine file, since the file does not have them.
ADDED_COLUMNS = "labelgate_added_columns"


def load_pools(config: GateConfig, batch_path: str | Path | None = None,
               trusted_path: str | Path | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Load the crowd (batch) and trusted tables, each restricted to its row selection (``where``).

    See :func:`load_selected`, which also says how many rows each selection left out.
    """
    crowd, trusted, _ = load_selected(config, batch_path, trusted_path)
    return crowd, trusted


def load_selected(config: GateConfig, batch_path: str | Path | None = None,
                  trusted_path: str | Path | None = None) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """Load the crowd (batch) and trusted tables.

    Parameters
    ----------
    config : labelgate.pipeline.config.GateConfig
        Sources (``batch``, ``trusted``), column names and pool values.
    batch_path, trusted_path : str or Path, optional
        Files given on the command line; they override the config's ``path``.

    Returns
    -------
    crowd, trusted : DataFrame
        Both with the pool column. Each keeps the index of the file it came from (row ``k`` is data row
        ``k``), so quarantined rows can be traced back to the file.
    selection : dict
        ``{"batch" | "trusted": {"where", "n_rows", "n_selected", "n_outside"}}`` for each table with a row
        selection (``batch.where`` / ``trusted.where``); empty without one.

    Notes
    -----
    *Two sources*: a table without the pool column gets it, filled with ``pools.crowd`` /
    ``pools.trusted``; a table that has it is kept as is (validation then quarantines rows whose pool is
    not the expected one).

    *One source* (no trusted source, or the same file twice): the pool column is required. Rows whose pool
    is ``pools.trusted`` form the trusted table; **every other row** (``pools.crowd``, an unknown value,
    or missing) goes to the crowd table, where validation quarantines the missing ones and counts those of
    pools that are not configured as left out (or quarantines them too, with ``pools.unknown: invalid``), so no
    row is dropped silently.

    *Row selection*: ``batch.where`` / ``trusted.where`` (column → value or list of values, compared as text)
    keep the rows of the crowd / trusted table that match every column; the others are counted in
    ``selection``, not quarantined. One export with several vendors is gated per vendor with
    ``pools: {crowd: vendor_b}`` and ``batch: {where: {pool: vendor_b}}``.

    Raises
    ------
    InputError
        No batch given; one source without the pool column; one source without any crowd or trusted row
        (the message lists the pool values found); a selection naming a column the table does not have.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from labelgate.pipeline.config import GateConfig
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "both.csv"
    >>> _ = p.write_text("item_id,rater_id,label,pool\\n1,a,x,crowd\\n1,b,x,trusted\\n1,c,y,other\\n")
    >>> crowd, trusted, selection = load_selected(GateConfig.model_validate({"batch": {"where": {"pool": "crowd"}}}),
    ...                                           batch_path=p)
    >>> len(crowd), len(trusted), trusted["rater_id"].tolist(), selection["batch"]["n_outside"]
    (1, 1, ['b'], 1)
    """
    cols, pools = config.columns, config.pools
    batch = _given(config.batch, batch_path)
    trusted = _given(config.trusted, trusted_path)
    if batch is None:
        raise InputError("No batch given: pass --batch or set 'batch.path' (or a SQL query) in the "
                         "configuration.", Reason.MISSING_SETTING)
    if trusted is None or batch == trusted:
        table = load_table(config.batch, batch_path, columns=cols, role="batch")
        crowd_df, trusted_df = _split_pools(table, config, _describe(batch))
    else:
        crowd_df = load_table(config.batch, batch_path, columns=cols, role="batch")
        trusted_df = load_table(config.trusted, trusted_path, columns=cols, role="trusted")
        for frame, value in ((crowd_df, pools.crowd), (trusted_df, pools.trusted)):
            if cols.pool not in frame.columns:
                frame[cols.pool] = pd.Series(value, index=frame.index, dtype="str")
                frame.attrs[ADDED_COLUMNS] = [*frame.attrs.get(ADDED_COLUMNS, []), cols.pool]
    selection: dict[str, Any] = {}
    crowd_df = select_rows(crowd_df, config.batch.where, "batch", selection)
    trusted_df = select_rows(trusted_df, config.trusted.where, "trusted", selection)
    return crowd_df, trusted_df, selection


def select_rows(table: pd.DataFrame, where: Mapping[str, Any] | None, role: str,
                counts: dict[str, Any] | None = None) -> pd.DataFrame:
    """The rows of ``table`` whose every column named in ``where`` holds one of its values (compared as text).

    A missing cell matches nothing. The index is kept (row ``k`` stays data row ``k`` of the file). When
    ``counts`` is given, ``counts[role]`` receives ``{"where", "n_rows", "n_selected", "n_outside"}``.

    Raises
    ------
    InputError
        A column of ``where`` is not in the table (the message names it, the table and its columns).

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"pool": ["a", "b", None], "week": [1, 2, 2]})
    >>> select_rows(df, {"pool": ["a", "b"], "week": 2}, "batch").index.tolist()
    [1]
    """
    if not where:
        return table
    keep = np.ones(len(table), dtype=bool)
    for column, wanted in where.items():
        if column not in table.columns:
            raise InputError(f"Column {column!r} of the row selection '{role}.where' is not in the {role} table; "
                             f"it has columns {sorted(map(str, table.columns))}.", Reason.MISSING_COLUMN,
                             column=column, table=role)
        values = [str(v) for v in (wanted if isinstance(wanted, list) else [wanted])]
        cells = table[column]
        keep &= (cells.notna() & as_str(cells).isin(values)).to_numpy(dtype=bool)
    if counts is not None:
        counts[role] = {"where": dict(where), "n_rows": len(table), "n_selected": int(keep.sum()),
                        "n_outside": int((~keep).sum())}
    return table.loc[keep]


def _given(source: Source, path: str | Path | None) -> Path | tuple[str | None, str | None] | None:
    """What a source points at: a resolved path, a (query, env var) pair, or None when nothing is given."""
    if path is not None:
        return Path(path).resolve()
    if source.format == "sql":
        return (source.query, source.url_env)
    if source.format == "label_studio" and not source.path:  # a project on a server named by url_env
        return (f"label_studio:{source.project}", source.url_env)
    return Path(source.path).resolve() if source.path else None


def _describe(source: object) -> str:
    return f"file {str(source)!r}" if isinstance(source, Path) else "query"


def _split_pools(table: pd.DataFrame, config: GateConfig, where: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    pool, pools = config.columns.pool, config.pools
    if pool not in table.columns:
        raise InputError(f"The batch {where} is used for both pools but has no {pool!r} column; add it "
                         f"(values {pools.crowd!r} / {pools.trusted!r}) or pass the trusted replication "
                         "separately.",
                         Reason.MISSING_COLUMN, column=pool)
    values = table[pool].astype(object)
    is_trusted = (values == pools.trusted).to_numpy(dtype=bool)
    is_crowd = (values == pools.crowd).to_numpy(dtype=bool)
    if not is_trusted.any() or not is_crowd.any():
        missing = pools.trusted if not is_trusted.any() else pools.crowd
        found = sorted(map(str, values.dropna().unique()))[:20]
        raise InputError(f"The {pool!r} column of the batch {where} has no row with the value {missing!r} "
                         f"(config 'pools'); values found: {found}.", Reason.EMPTY_INPUT, column=pool)
    return table.loc[~is_trusted], table.loc[is_trusted]


def combined(crowd_df: pd.DataFrame, trusted_df: pd.DataFrame, config: GateConfig) -> pd.DataFrame:
    """One long table holding both pools (what the GX suite validates).

    Tables without the pool column get it (``pools.crowd`` / ``pools.trusted``); the index is reset.

    Examples
    --------
    >>> import pandas as pd
    >>> from labelgate.pipeline.config import GateConfig
    >>> crowd = pd.DataFrame({"item_id": ["1"], "rater_id": ["a"], "label": ["x"]})
    >>> trusted = pd.DataFrame({"item_id": ["1"], "rater_id": ["b"], "label": ["x"]})
    >>> combined(crowd, trusted, GateConfig())["pool"].tolist()
    ['crowd', 'trusted']
    """
    pool = config.columns.pool
    parts = []
    for frame, value in ((crowd_df, config.pools.crowd), (trusted_df, config.pools.trusted)):
        if pool not in frame.columns:
            frame = frame.assign(**{pool: value})
        parts.append(frame)
    return pd.concat(parts, ignore_index=True)


def question_value(config: GateConfig, question: Question) -> str:
    """The value naming ``question`` in the question column (``question_value``, default its name)."""
    return question.question_value if question.question_value is not None else question.name


def question_frame(df: pd.DataFrame, config: GateConfig, question: Question) -> pd.DataFrame:
    """The judgements of one question, in the canonical columns ``item_id, rater_id, label, pool``.

    Labels come from ``question.label_column`` (default ``columns.label``); when ``columns.question`` is
    set, only rows whose question column equals ``question_value`` (default the question's name) are
    kept. Rows with a missing label are not judgements and are left out (validation only allows them when
    several questions have their own label columns). Labels of interval/ratio questions are converted to
    numbers. ``timestamp`` is added when ``columns.timestamp`` is set. The index is kept.

    Returns
    -------
    DataFrame
        Columns ``item_id``, ``rater_id`` (str), ``label``, ``pool`` (str) [, ``timestamp``]; pass it to
        ``lg.ratings_by_pool(frame, level=question.level, categories=...)``.

    Raises
    ------
    InputError
        A needed column is missing, or an interval/ratio label is not a number (validate first).

    Examples
    --------
    >>> import pandas as pd
    >>> from labelgate.pipeline.config import GateConfig
    >>> cfg = GateConfig.model_validate({"columns": {"question": "q"},
    ...                                  "questions": [{"name": "score", "level": "interval"}]})
    >>> df = pd.DataFrame({"item_id": ["1", "1"], "rater_id": ["a", "a"], "label": ["4", "pos"],
    ...                    "pool": ["crowd", "crowd"], "q": ["score", "sentiment"]})
    >>> question_frame(df, cfg, cfg.questions[0])
      item_id rater_id  label   pool
    0       1        a    4.0  crowd
    """
    cols = config.columns
    label = config.label_column(question)
    needed = [cols.item, cols.rater, label, cols.pool] + ([cols.question] if cols.question else [])
    for name in needed:
        if name not in df.columns:
            raise InputError(f"Column {name!r} is missing; the table has columns "
                             f"{sorted(map(str, df.columns))}.", Reason.MISSING_COLUMN, column=name)
    rows = df
    if cols.question:
        rows = df.loc[(df[cols.question].astype(object) == question_value(config, question)).to_numpy(bool)]
    rows = rows.loc[rows[label].notna()]
    out = pd.DataFrame({ITEM: as_str(rows[cols.item]), RATER: as_str(rows[cols.rater]),
                        LABEL: rows[label], POOL: as_str(rows[cols.pool])}, index=rows.index)
    if question.level in ("interval", "ratio"):
        out[LABEL] = _numeric_labels(out[LABEL], label, question)
    if cols.timestamp and cols.timestamp in df.columns:
        out[TIMESTAMP] = rows[cols.timestamp]
    return out


def _numeric_labels(values: pd.Series, column: str, question: Question) -> pd.Series:
    numbers = pd.to_numeric(values.astype(object), errors="coerce").astype("float64")
    bad = numbers.isna() & values.notna()
    if bad.any():
        value = values[bad].iloc[0]
        raise InputError(f"Column {column!r} has the non-numeric value {value!r} (row "
                         f"{values.index[bad][0]!r}), but question {question.name!r} is {question.level}; "
                         "validate the table first.",
                         Reason.NON_NUMERIC_VALUE, column=column, value=value)
    return numbers
