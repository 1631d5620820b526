"""Loading the gate's input tables: CSV, Parquet or a SQL query, one file or two.

A gate run compares a *batch* (the crowd replication) with a *trusted* replication of the same items.
Both are long tables (one row per judgement: item, rater, label(s), pool). They come from

* two sources (``--batch`` and ``--trusted``, or ``batch`` / ``trusted`` in the config), each given the
  pool column with the configured value (``pools.crowd`` / ``pools.trusted``) when it has none; or
* one source holding both pools in the pool column (passed as ``--batch`` only, or as both).

Ids (item, rater, pool, question) are read as strings, so ``007`` stays ``"007"``; labels are left as
read and coerced per question level by :mod:`labelgate.pipeline.validation`. In CSV files only an empty cell is
missing: ``NA``, ``null`` or ``None`` are kept as text, so a label is never turned into a missing value
behind the user's back. SQL sources read the database URL from the environment variable named in
``url_env``; the URL is never logged or put in an error message.

This module sits above the numpy core and below the Prefect flow: it imports pandas and SQLAlchemy, not
Prefect or Great Expectations.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from labelgate.errors import InputError, Reason

if TYPE_CHECKING:
    from labelgate.pipeline.config import Columns, GateConfig, Question, Source

#: Canonical column names of :func:`question_frame` (the defaults of ``lg.Ratings.from_long`` and
#: ``lg.ratings_by_pool``).
ITEM, RATER, LABEL, POOL, TIMESTAMP = "item_id", "rater_id", "label", "pool", "timestamp"

_SUFFIXES = {".csv": "csv", ".tsv": "csv", ".txt": "csv", ".parquet": "parquet", ".pq": "parquet"}
_COMPRESSION = (".gz", ".bz2", ".zip", ".xz", ".zst")


# ---------------------------------------------------------------------------------------------- tables
def load_table(source: Source, path: str | Path | None = None, *, columns: Columns | None = None,
               role: str = "input") -> pd.DataFrame:
    """Read one table from a CSV / Parquet file or a SQL query.

    Parameters
    ----------
    source : labelgate.pipeline.config.Source
        Where the table comes from. ``format="auto"`` picks CSV or Parquet from the file extension
        (``.csv``, ``.tsv``, ``.txt``, optionally compressed ``.gz``/``.bz2``/``.zip``/``.xz``/``.zst``;
        ``.parquet``, ``.pq``). ``format="sql"`` runs ``source.query`` on the database whose SQLAlchemy
        URL is in the environment variable ``source.url_env``.
    path : str or Path, optional
        File to read; overrides ``source.path`` (the command line wins over the config).
    columns : labelgate.pipeline.config.Columns, optional
        Column names; the id columns (item, rater, pool, question) are then read as strings, missing
        ids stay missing (NaN). Default: no column is treated specially.
    role : str, default "input"
        Name of the table in error messages ("batch", "trusted").

    Returns
    -------
    DataFrame
        The table, index ``0..n-1`` (row ``k`` is data row ``k`` of the file, header excluded).

    Raises
    ------
    InputError
        The file is missing or unreadable (message names the path), the extension is unknown, Parquet
        support (pyarrow) is not installed, the environment variable is unset, or the query fails.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from labelgate.pipeline.config import Columns, Source
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "batch.csv"
    >>> _ = p.write_text("item_id,rater_id,label\\n007,r1,NA\\n007,r2,pos\\n")
    >>> df = load_table(Source(), p, columns=Columns())
    >>> df["item_id"].tolist(), df["label"].tolist()
    (['007', '007'], ['NA', 'pos'])
    """
    fmt: str = source.format
    if fmt == "sql" and path is None:
        table = _read_sql(source, role)
    else:
        file = path if path is not None else source.path
        if file is None:
            raise InputError(f"No {role} table given: pass a file or set '{role}.path' (or a SQL query) in "
                             "the configuration.", Reason.MISSING_SETTING, role=role)
        file = Path(file)
        fmt = _format_of(file, fmt if fmt != "sql" else "auto", role)
        table = _read_file(file, fmt, columns, role)
    return _ids_as_strings(table, columns)


def _format_of(path: Path, fmt: str, role: str) -> str:
    if fmt != "auto":
        return fmt
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in _COMPRESSION:
        suffixes = suffixes[:-1]
    kind = _SUFFIXES.get(suffixes[-1]) if suffixes else None
    if kind is None:
        raise InputError(f"Cannot tell the format of the {role} file {str(path)!r} from its extension; use "
                         ".csv, .tsv or .parquet, or set 'format' in the configuration.", Reason.UNREADABLE_INPUT,
                         file=str(path))
    return kind


def _read_file(path: Path, fmt: str, columns: Columns | None, role: str) -> pd.DataFrame:
    if not path.is_file():
        problem = "is a directory, not a file" if path.is_dir() else "does not exist"
        raise InputError(f"The {role} file {str(path)!r} {problem}.", Reason.UNREADABLE_INPUT, file=str(path))
    try:
        if fmt == "parquet":
            return pd.read_parquet(path)
        sep = "\t" if ".tsv" in [s.lower() for s in path.suffixes] else ","
        dtype = {name: str for name in _id_columns(columns)}
        # Only empty cells are missing: 'NA' / 'None' / 'null' may be real labels or ids.
        return pd.read_csv(path, sep=sep, dtype=dtype, keep_default_na=False, na_values=[""])
    except ImportError:
        raise InputError(f"Reading the Parquet {role} file {str(path)!r} needs pyarrow, which is not "
                         "installed; install pyarrow or convert the file to CSV.", Reason.UNREADABLE_INPUT,
                         file=str(path)) from None
    except pd.errors.EmptyDataError:
        raise InputError(f"The {role} file {str(path)!r} is empty (no header row).", Reason.EMPTY_INPUT,
                         file=str(path)) from None
    except (OSError, ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise InputError(f"Cannot read the {role} file {str(path)!r} as {fmt.upper()}: {exc}",
                         Reason.UNREADABLE_INPUT, file=str(path)) from None


def _read_sql(source: Source, role: str) -> pd.DataFrame:
    # The URL may hold credentials: it never enters a message, and exceptions are raised `from None` so
    # that the SQLAlchemy error (which can quote the URL) is not chained into tracebacks or logs.
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import DBAPIError, SQLAlchemyError

    name = source.url_env or ""
    url = os.environ.get(name, "")
    if not url:
        raise InputError(f"The environment variable {name!r} (the database URL of the {role} query) is not "
                         "set.", Reason.MISSING_SETTING, env=name)
    try:
        engine = create_engine(url)
    except Exception as exc:  # malformed URL: ArgumentError; missing driver: ImportError/NoSuchModuleError
        raise InputError(f"The environment variable {name!r} does not hold a usable SQLAlchemy URL "
                         f"({type(exc).__name__}).", Reason.UNREADABLE_INPUT, env=name) from None
    try:
        with engine.connect() as connection:
            try:
                return pd.read_sql_query(text(source.query or ""), connection)
            except (DBAPIError, pd.errors.DatabaseError) as exc:
                # pandas wraps the DBAPI error; its `orig` is the driver's message (no URL)
                cause = exc if isinstance(exc, DBAPIError) else exc.__cause__
                detail = cause.orig if isinstance(cause, DBAPIError) else type(exc).__name__
                raise InputError(f"The {role} query failed: {detail}", Reason.UNREADABLE_INPUT,
                                 env=name) from None
    except InputError:
        raise
    except (SQLAlchemyError, OSError) as exc:
        raise InputError(f"Cannot connect to the database named by {name!r} ({type(exc).__name__}).",
                         Reason.UNREADABLE_INPUT, env=name) from None
    finally:
        engine.dispose()


def _id_columns(columns: Columns | None) -> list[str]:
    if columns is None:
        return []
    return [c for c in (columns.item, columns.rater, columns.pool, columns.question) if c is not None]


def _ids_as_strings(table: pd.DataFrame, columns: Columns | None) -> pd.DataFrame:
    """Id columns as strings, missing kept missing; integral floats (ids read with a gap) lose their '.0'."""
    for name in _id_columns(columns):
        if name in table.columns and not pd.api.types.is_string_dtype(table[name]):
            table[name] = _as_str(table[name])
    return table


def _as_str(column: pd.Series) -> pd.Series:
    if pd.api.types.is_string_dtype(column) and column.dtype != object:
        return column
    values = column
    if pd.api.types.is_float_dtype(values):
        finite = values.dropna()
        if len(finite) and np.all(np.isfinite(finite)) and np.all(finite == np.floor(finite)):
            values = values.astype("Int64")
    out = values.astype(object).where(values.notna(), None)
    return out.map(lambda v: v if v is None else str(v)).astype("str")


# ---------------------------------------------------------------------------------------------- pools
def load_pools(config: GateConfig, batch_path: str | Path | None = None,
               trusted_path: str | Path | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
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

    Notes
    -----
    *Two sources*: a table without the pool column gets it, filled with ``pools.crowd`` /
    ``pools.trusted``; a table that has it is kept as is (validation then quarantines rows whose pool is
    not the expected one).

    *One source* (no trusted source, or the same file twice): the pool column is required. Rows whose pool
    is ``pools.trusted`` form the trusted table; **every other row** (``pools.crowd``, an unknown value,
    or missing) goes to the crowd table, where validation quarantines the unknown ones, so no row is
    dropped silently.

    Raises
    ------
    InputError
        No batch given; one source without the pool column; one source without any crowd or trusted row
        (the message lists the pool values found).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from labelgate.pipeline.config import GateConfig
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "both.csv"
    >>> _ = p.write_text("item_id,rater_id,label,pool\\n1,a,x,crowd\\n1,b,x,trusted\\n")
    >>> crowd, trusted = load_pools(GateConfig(), batch_path=p)
    >>> len(crowd), len(trusted), trusted["rater_id"].tolist()
    (1, 1, ['b'])
    """
    cols, pools = config.columns, config.pools
    batch = _given(config.batch, batch_path)
    trusted = _given(config.trusted, trusted_path)
    if batch is None:
        raise InputError("No batch given: pass --batch or set 'batch.path' (or a SQL query) in the "
                         "configuration.", Reason.MISSING_SETTING)
    if trusted is None or batch == trusted:
        table = load_table(config.batch, batch_path, columns=cols, role="batch")
        return _split_pools(table, config, _describe(batch))
    crowd_df = load_table(config.batch, batch_path, columns=cols, role="batch")
    trusted_df = load_table(config.trusted, trusted_path, columns=cols, role="trusted")
    for frame, value in ((crowd_df, pools.crowd), (trusted_df, pools.trusted)):
        if cols.pool not in frame.columns:
            frame[cols.pool] = pd.Series(value, index=frame.index, dtype="str")
    return crowd_df, trusted_df


def _given(source: Source, path: str | Path | None) -> Path | tuple[str | None, str | None] | None:
    """What a source points at: a resolved path, a (query, env var) pair, or None when nothing is given."""
    if path is not None:
        return Path(path).resolve()
    if source.format == "sql":
        return (source.query, source.url_env)
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


# ---------------------------------------------------------------------------------------------- hashing
def content_hash(df: pd.DataFrame) -> str:
    """Stable SHA-256 of a table's content, independent of row and column order.

    Every cell except timestamps is hashed through its text form (so ``1`` read from Parquet and ``"1"``
    read from CSV agree); datetime columns are hashed as datetimes. The per-row 64-bit hashes
    (``pandas.util.hash_pandas_object``) are sorted, so the row order does not matter, and hashed with
    the sorted column names. Duplicate rows count (two copies hash differently from one).

    Returns
    -------
    str
        64 hex digits.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"item_id": ["1", "2"], "label": ["x", "y"]})
    >>> content_hash(df) == content_hash(df.iloc[::-1]) == content_hash(df[["label", "item_id"]])
    True
    >>> content_hash(df) == content_hash(df.assign(label=["x", "z"]))
    False
    """
    names = sorted(map(str, df.columns))
    frame = df.set_axis([str(c) for c in df.columns], axis=1)[names]
    text = pd.DataFrame({name: _hashable_column(frame[name]) for name in names})
    rows = np.sort(pd.util.hash_pandas_object(text, index=False).to_numpy(dtype=np.uint64))
    digest = hashlib.sha256()
    digest.update("\x1f".join(names).encode())
    digest.update(len(rows).to_bytes(8, "little"))
    digest.update(rows.tobytes())
    return digest.hexdigest()


def _hashable_column(column: pd.Series) -> pd.Series:
    # Timestamps are hashed natively: formatting them as text costs ~10 us per cell.
    if pd.api.types.is_datetime64_any_dtype(column):
        return column
    return column.astype("str").fillna("\x00")


# ---------------------------------------------------------------------------------------------- questions
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
    out = pd.DataFrame({ITEM: _as_str(rows[cols.item]), RATER: _as_str(rows[cols.rater]),
                        LABEL: rows[label], POOL: _as_str(rows[cols.pool])}, index=rows.index)
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
