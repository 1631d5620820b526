"""Reading one long table: a CSV or Parquet file, or a SQL query; ids as strings; a content hash.

Ids (item, rater, pool, question) are read as strings, so ``007`` stays ``"007"``; labels are left as read and
coerced per question level by :mod:`labelgate.pipeline.validation`. In CSV files only an empty cell is missing:
``NA``, ``null`` or ``None`` are kept as text, so a label is never turned into a missing value behind the user's
back. SQL sources go through :func:`labelgate.pipeline.sources.sql.read_sql` (the URL stays in the environment).

A file's header is read first (:func:`labelgate.pipeline.preflight.read_header`: a CSV's first line, a Parquet file's
schema) and a table of more than :data:`~labelgate.pipeline.limits.MAX_COLUMNS` columns is refused before pandas
parses it: parsing the header of a 200,000-column CSV alone takes pandas longer than a gate should wait.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from labelgate.errors import InputError, Reason
from labelgate.pipeline.limits import MAX_COLUMNS, decompressed_limit
from labelgate.pipeline.limits_reader import COMPRESSION_SUFFIXES, open_text_table
from labelgate.pipeline.preflight import read_header
from labelgate.pipeline.sources.sql import read_query

if TYPE_CHECKING:
    from labelgate.pipeline.config import Columns, Source

#: File extensions LabelGate reads as tables (optionally compressed).
_SUFFIXES = {".csv": "csv", ".tsv": "csv", ".txt": "csv", ".parquet": "parquet", ".pq": "parquet"}
_COMPRESSION = COMPRESSION_SUFFIXES
TABLE_SUFFIXES = (*_SUFFIXES, *_COMPRESSION)


def batch_id_of(path: str | Path | None) -> str:
    """The default batch id of a batch file: its name without its table extensions (``batch`` when there is none).

    Only the known extensions come off (a compression suffix, then a table suffix, in any letter case): the rest of
    the name is the batch's. Cutting at the first dot, as before, named ``wk1.bad.csv`` and ``wk1.good.csv`` both
    ``wk1``, so the later decision hid the earlier one as the batch's current decision. Every default batch id (the
    gate, the CLI, the served drop folder) comes from here.

    Parameters
    ----------
    path : str or Path, optional
        The batch file (only its name is used).

    Returns
    -------
    str
        The id; the whole name when stripping would leave nothing (``.csv``).

    Examples
    --------
    >>> batch_id_of("data/wk1.bad.csv"), batch_id_of("batch.csv.gz"), batch_id_of("b.v2.PARQUET")
    ('wk1.bad', 'batch', 'b.v2')
    >>> batch_id_of("notes.json"), batch_id_of(None)
    ('notes.json', 'batch')
    """
    if not path:
        return "batch"
    name = stem = Path(path).name
    lower = stem.lower()
    if lower.endswith(_COMPRESSION):
        stem = stem[:stem.rindex(".")]
        lower = stem.lower()
    if lower.endswith(tuple(_SUFFIXES)):
        stem = stem[:stem.rindex(".")]
    return stem or name

# pandas 3's "str" keeps a missing value missing (NaN); pandas < 3 reads "str" as numpy's str, which writes a
# missing value as the text 'None' or 'nan' (an id or label nobody gave). Detected once, not by version number.
_STR_KEEPS_MISSING = bool(pd.Series([None], dtype=object).astype("str").isna().all())


def load_table(source: Source, path: str | Path | None = None, *, columns: Columns | None = None,
               role: str = "input") -> pd.DataFrame:
    """Read one table from a CSV / Parquet file or a SQL query.

    Parameters
    ----------
    source : labelgate.pipeline.config.Source
        Where the table comes from. ``format="auto"`` picks CSV or Parquet from the file extension
        (``.csv``, ``.tsv``, ``.txt``, optionally compressed ``.gz``/``.bz2``/``.zip``/``.xz``/``.zst``;
        ``.parquet``, ``.pq``). ``format="sql"`` runs ``source.query`` on the database whose SQLAlchemy
        URL is in the environment variable ``source.url_env``. ``format="label_studio"`` reads one control of
        a Label Studio project or export (:mod:`labelgate.pipeline.sources.label_studio`).
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
        support (pyarrow) is not installed, the environment variable is unset, or the query fails; the table
        has more than :data:`~labelgate.pipeline.limits.MAX_COLUMNS` columns (checked on a file's header before
        it is parsed).

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
    if fmt == "label_studio":  # an export file or a project on a server (the module imports httpx lazily)
        from labelgate.pipeline.sources.label_studio import load_label_studio

        return load_label_studio(source, path, columns, role)
    if fmt == "sql" and path is None:
        table = read_query(source.url_env, source.query or "", f"the {role} query", params=source.params)
        if len(table.columns) > MAX_COLUMNS:
            raise InputError(f"The {role} query's result has {len(table.columns)} columns, more than the limit of "
                             f"{MAX_COLUMNS}.", Reason.UNREADABLE_INPUT, n_columns=len(table.columns))
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
    read_header(path, fmt, role)  # refuses a too wide table before pandas parses it
    try:
        if fmt == "parquet":
            _check_parquet_expansion(path, role)
            return pd.read_parquet(path)
        sep = "\t" if ".tsv" in [s.lower() for s in path.suffixes] else ","
        dtype = {name: str for name in _id_columns(columns)}
        # Read through LabelGate's own decompression: bounded in size, NUL bytes refused (pandas < 3 cut at them).
        # Only empty cells are missing: 'NA' / 'None' / 'null' may be real labels or ids.
        with open_text_table(path, role) as stream:
            return pd.read_csv(stream, sep=sep, dtype=dtype, keep_default_na=False, na_values=[""],
                               compression=None, encoding="utf-8")
    except InputError:
        raise
    except ImportError as exc:
        if fmt != "parquet":  # zstandard, for a .zst file
            raise InputError(f"Reading the {role} file {str(path)!r} needs {exc.name or 'a module'}, which is not "
                             "installed.", Reason.UNREADABLE_INPUT, file=str(path)) from None
        raise InputError(f"Reading the Parquet {role} file {str(path)!r} needs pyarrow, which is not "
                         "installed; install pyarrow or convert the file to CSV.", Reason.UNREADABLE_INPUT,
                         file=str(path)) from None
    except pd.errors.EmptyDataError:
        raise InputError(f"The {role} file {str(path)!r} is empty (no header row).", Reason.EMPTY_INPUT,
                         file=str(path)) from None
    except (OSError, ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise InputError(f"Cannot read the {role} file {str(path)!r} as {fmt.upper()}: {exc}",
                         Reason.UNREADABLE_INPUT, file=str(path)) from None


def _check_parquet_expansion(path: Path, role: str) -> None:
    """Refuse a Parquet file whose pages expand past the decompressed limit of its size (read from its footer)."""
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path).metadata
    expanded = sum(meta.row_group(k).total_byte_size for k in range(meta.num_row_groups))
    limit = decompressed_limit(path.stat().st_size)
    if expanded > limit:
        raise InputError(f"The {role} file {path.name!r} expands to {expanded} bytes, more than the limit of {limit} "
                         "for its size (see Limits in the documentation); is it a compression bomb?",
                         Reason.UNREADABLE_INPUT, file=str(path), limit=limit)


def _id_columns(columns: Columns | None) -> list[str]:
    if columns is None:
        return []
    return [c for c in (columns.item, columns.rater, columns.pool, columns.question) if c is not None]


def _ids_as_strings(table: pd.DataFrame, columns: Columns | None) -> pd.DataFrame:
    """Id columns as strings, missing kept missing; integral floats (ids read with a gap) lose their '.0'."""
    for name in _id_columns(columns):
        if name in table.columns and not pd.api.types.is_string_dtype(table[name]):
            table[name] = as_str(table[name])
    return table


def as_str(column: pd.Series) -> pd.Series:
    """Ids as strings (missing kept missing; integral floats lose their '.0')."""
    if pd.api.types.is_string_dtype(column) and column.dtype != object:
        return column
    values = column
    if pd.api.types.is_float_dtype(values):
        finite = values.dropna()
        if len(finite) and np.all(np.isfinite(finite)) and np.all(finite == np.floor(finite)):
            values = values.astype("Int64")
    out = values.astype(object).where(values.notna(), None)
    return text_column(out.map(lambda v: v if v is None else str(v)))


def text_column(column: pd.Series) -> pd.Series:
    """``column`` as pandas' strings, missing values kept missing (NaN).

    pandas' ``"str"`` type from pandas 3 on; on pandas < 3 (whose ``"str"`` writes a missing value as text) an
    object column of Python strings with NaN where a value is missing.
    """
    if _STR_KEEPS_MISSING:
        return column.astype("str")
    return column.astype(str).where(column.notna(), np.nan)


#: Version of :func:`content_hash`'s encoding, hashed first. Version 1 wrote a missing cell as the text "\x00" and
#: hashed every non-timestamp cell through its text alone, so a missing item id and the id "\x00" (or the int ``1``
#: and the text ``"1"``) shared one hash, and a request could be served the decision of another table. Every hash of
#: version 2 differs from every hash of version 1, so no decision keyed under the old encoding is served again (the
#: inputs digest is built from these hashes; the LabelGate version in the configuration digest need not change).
CONTENT_HASH_FORMAT = b"labelgate-table:v2"

# hash_pandas_object(categorize=True) factorizes a text column before hashing it. pandas < 3 factorizes text in a
# hash table keyed by C strings, which end at the first NUL: '', '\x00' and 'a\x00b' then get one code, and which of
# them is hashed for that code depends on the row order (a table and its reverse hashed differently, and '\x00' and
# '' alike). Hashing every value (categorize=False) reads each string whole, at about twice the cost; pandas 3's
# factorize keeps NULs and is kept for its speed. Detected once, by behaviour, not by version number; both ways give
# one hash per value, so a table hashes alike under either.
_CATEGORIZE_KEEPS_NUL = len(set(pd.util.hash_pandas_object(pd.Series(["", "\x00", "\x00"], dtype=object),
                                                           index=False, categorize=True))) == 2


def content_hash(df: pd.DataFrame) -> str:
    r"""Stable SHA-256 of a table's content, independent of row and column order.

    The encoding is injective up to 64-bit hash collisions: two tables hash alike only if they have the same column
    names and, per column, the same kind of values and the same multiset of rows. Per column the name and its
    value kind (``text``, a numeric, boolean or datetime dtype, or ``mixed`` for an object column holding more than
    strings) are hashed length-prefixed; per cell its value, a missing flag (a missing cell is distinct from every
    value, the empty text and ``"\x00"`` included) and, in a ``mixed`` column, the Python type of the value (the int
    ``1`` is not the text ``"1"``). Text-like values are hashed through their text form, datetime columns natively.
    The per-row 64-bit hashes (``pandas.util.hash_pandas_object``) are sorted, so the row order does not matter.
    Duplicate rows count (two copies hash differently from one).

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
    >>> content_hash(df.assign(item_id=[None, "2"])) == content_hash(df.assign(item_id=["\x00", "2"]))
    False
    """
    names = sorted(map(str, df.columns))
    frame = df.set_axis([str(c) for c in df.columns], axis=1)[names]
    parts: dict[str, pd.Series] = {}
    digest = hashlib.sha256(CONTENT_HASH_FORMAT)
    digest.update(len(names).to_bytes(8, "little"))
    for number, name in enumerate(names):
        kind, columns = _hashable_column(frame.iloc[:, number])
        for encoded in (name, kind):  # length-prefixed: no separator a column name could contain
            raw = encoded.encode("utf-8", "surrogatepass")
            digest.update(len(raw).to_bytes(8, "little") + raw)
        parts.update({f"{number}.{k}": column for k, column in enumerate(columns)})
    rows = (np.sort(pd.util.hash_pandas_object(pd.DataFrame(parts), index=False, categorize=_CATEGORIZE_KEEPS_NUL)
                    .to_numpy(dtype=np.uint64)) if parts else np.zeros(0, dtype=np.uint64))
    digest.update(len(frame).to_bytes(8, "little"))
    digest.update(rows.tobytes())
    return digest.hexdigest()


def _hashable_column(column: pd.Series) -> tuple[str, list[pd.Series]]:
    """``(kind, columns)``: the value kind of ``column`` and the columns whose per-row hashes encode its cells.

    The columns are the values (missing cells filled with a placeholder), the missing mask that tells a missing cell
    from the placeholder and, for a ``mixed`` object column, each value's Python type. All are vectorised: the
    per-cell type is only computed for the rare object column that holds more than strings.
    """
    missing = column.isna().reset_index(drop=True)
    if pd.api.types.is_datetime64_any_dtype(column):
        # Timestamps are hashed natively (formatting them as text costs ~10 us per cell); the dtype carries the
        # unit and the time zone. NaT is hashed as its integer value, told apart by the mask anyway.
        return f"datetime:{column.dtype}", [column.reset_index(drop=True), missing]
    values = column.reset_index(drop=True)
    if pd.api.types.is_string_dtype(values.dtype) and values.dtype != object:
        kind, types = "text", None
    elif values.dtype == object:
        inferred = pd.api.types.infer_dtype(values, skipna=True)
        kind = "text" if inferred in ("string", "empty") else "mixed"
        types = None if kind == "text" else values.map(lambda v: f"{type(v).__module__}.{type(v).__qualname__}")
    else:  # numeric, boolean, categorical...: the dtype tells 1 (int64) from 1.0 (float64) from "1" (text)
        kind, types = str(values.dtype), None
    # A missing cell's placeholder is irrelevant: the mask tells it apart from the same text in a present cell.
    text = text_column(values).fillna("")
    columns = [text, missing]
    if types is not None:
        columns.append(types.where(~missing, ""))
    return kind, columns
