"""Checks a gate can make before it starts anything heavy: the input files exist and their headers hold the columns.

Only the header is read (a CSV's first line, a Parquet file's schema), so a misnamed column, a missing file or a table
wider than :data:`~labelgate.pipeline.limits.MAX_COLUMNS` is reported in a fraction of a second, before the tables are
loaded and before Prefect or Great Expectations start; the table loader (:mod:`labelgate.pipeline.sources.tables`) reads
the header with the same function before it parses a file. The full validation (``labelgate.pipeline.validation``)
still runs on the loaded rows. This module stays free of pandas: the CLI runs it first.
"""

from __future__ import annotations

import contextlib
import csv
import io
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from labelgate.errors import InputError, Reason
from labelgate.extras import require
from labelgate.pipeline.limits import MAX_COLUMNS, MAX_HEADER_CHARS

if TYPE_CHECKING:  # annotations only: the table loader reads headers here without the config's pydantic and YAML
    from labelgate.pipeline.config import GateConfig, Source


def check_inputs(config: GateConfig, batch: str | Path | None, trusted: str | Path | None) -> None:
    """Raise :class:`InputError` when a file source is missing or its header lacks a required column.

    SQL sources are not contacted here (their columns are checked when the rows are loaded).

    Raises
    ------
    InputError
        No batch given, a file that does not exist, a header wider than the limit
        (:data:`~labelgate.pipeline.limits.MAX_COLUMNS`), or a required column missing from a header; the message
        names the file and the column.
    """
    check_extras(config)
    one_table = trusted is None and not config.trusted.path and config.trusted.format != "sql"
    checked = []
    for role, source, given in (("batch", config.batch, batch), ("trusted", config.trusted, trusted)):
        path = _path(source, given)
        if path is None:
            if role == "batch" and source.format not in ("sql", "label_studio"):
                raise InputError("No batch given: pass --batch or set 'batch.path' (or a SQL query) in the "
                                 "configuration.", Reason.MISSING_SETTING)
            continue
        if path in checked:
            continue
        checked.append(path)
        if not path.is_file():
            raise InputError(f"The {role} file {path} does not exist.", Reason.MISSING_SETTING, table=role)
        header = set(read_header(path, source.format, role))
        selections = [(role, source)] + ([("trusted", config.trusted)] if one_table else [])
        selected = [(column, f"column of {name}.where") for name, src in selections for column in (src.where or {})]
        for column, what in [*required_columns(config, with_pool=one_table), *selected]:
            if column not in header:
                raise InputError(f"Column {column!r} (the {what}) is missing from the {role} file {path.name}; it "
                                 f"has columns {sorted(header)}.", Reason.MISSING_COLUMN, column=column, table=role)


def check_extras(config: Any) -> None:
    """Raise :class:`~labelgate.extras.MissingExtraError` when the configuration (a gate's or a monitor's) asks
    for a feature whose extra is not installed, before anything is computed: alert channels are Prefect
    notification blocks (the ``prefect`` extra, not its server), ``runner: dask`` needs ``dask``, a Label Studio
    source needs ``label-studio``."""
    if getattr(getattr(config, "alerts", None), "channels", None):
        require("prefect", "alert channels (alerts.channels)")
    if getattr(config, "runner", "local") == "dask":
        require("dask", "runner: dask")
    for role in ("batch", "trusted"):
        if getattr(getattr(config, role, None), "format", None) == "label_studio":
            require("label-studio", f"a Label Studio source ({role}.format: label_studio)")


def required_columns(config: GateConfig, *, with_pool: bool) -> list[tuple[str, str]]:
    """``(column, role)`` of every column a long table must have."""
    cols = config.columns
    needed = [(cols.item, "item column"), (cols.rater, "rater column")]
    if with_pool:
        needed.append((cols.pool, "pool column: one file holds both pools"))
    if cols.question:
        needed.append((cols.question, "question column"))
    needed += [(config.label_column(q), f"label column of question {q.name!r}") for q in config.questions]
    return needed


def read_header(path: Path, fmt: str = "auto", role: str = "input") -> list[str]:
    """The column names of a CSV or Parquet file, read from its header only, within the limits.

    A CSV's first line is read (at most :data:`~labelgate.pipeline.limits.MAX_HEADER_CHARS` characters, through
    the file's compression: ``.gz``, ``.bz2``, ``.xz``, ``.zip``, ``.zst``); a Parquet file's schema is read from
    its footer.

    Raises
    ------
    InputError
        The header has more than :data:`~labelgate.pipeline.limits.MAX_COLUMNS` columns, a CSV header line is
        longer than the limit, or the file cannot be read; the message names the file, the count and the limit.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "batch.csv"
    >>> _ = p.write_text("item_id,rater_id,label\\n1,a,pos\\n")
    >>> read_header(p)
    ['item_id', 'rater_id', 'label']
    """
    suffixes = [s.lower() for s in path.suffixes]
    # a file given on the command line for a SQL source is read by its extension, like any other
    if fmt == "parquet" or (fmt in ("auto", "sql") and suffixes and suffixes[-1] in (".parquet", ".pq")):
        try:
            import pyarrow.parquet as pq

            names = list(pq.read_schema(path).names)
        except ImportError:
            raise InputError(f"Reading the Parquet {role} file {str(path)!r} needs pyarrow, which is not "
                             "installed; install pyarrow or convert the file to CSV.", Reason.UNREADABLE_INPUT,
                             file=str(path)) from None
        except Exception as exc:  # not a Parquet file, or unreadable: say which
            raise InputError(f"The {role} file {path.name} is not a readable Parquet file ({exc}).",
                             Reason.UNREADABLE_INPUT, file=str(path)) from None
        _check_width(len(names), f"the {role} file {str(path)!r}", str(path))
        return names
    try:
        line = _first_line(path, MAX_HEADER_CHARS)
    except (OSError, EOFError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"Cannot read the header of the {role} file {str(path)!r}: {exc}",
                         Reason.UNREADABLE_INPUT, file=str(path)) from None
    line = line.rstrip("\r\n")
    try:
        names = next(csv.reader([line], delimiter=_separator(path)), [])
    except csv.Error as exc:  # e.g. a name longer than the csv module's field limit
        names, problem = [], f"cannot be read as CSV ({exc})"
    else:
        problem = ""
    _check_width(len(names), f"the {role} file {str(path)!r}", str(path), at_least=len(line) > MAX_HEADER_CHARS)
    if len(line) > MAX_HEADER_CHARS:
        problem = f"is longer than the limit of {MAX_HEADER_CHARS} characters; is it a CSV file with a header row?"
    if problem:
        raise InputError(f"The header line of the {role} file {str(path)!r} {problem}", Reason.UNREADABLE_INPUT,
                         file=str(path))
    return names


def _check_width(n_columns: int, what: str, file: str | None, *, at_least: bool = False) -> None:
    if n_columns > MAX_COLUMNS:
        count = f"at least {n_columns}" if at_least else str(n_columns)
        raise InputError(f"{what[0].upper()}{what[1:]} has {count} columns, more than the limit of {MAX_COLUMNS}; "
                         "a long table needs an item, a rater, a pool and one label column per question.",
                         Reason.UNREADABLE_INPUT, file=file, n_columns=n_columns)


def _separator(path: Path) -> str:
    return "\t" if ".tsv" in [s.lower() for s in path.suffixes] else ","


def _first_line(path: Path, limit: int) -> str:
    """The file's first line as text (UTF-8, a byte-order mark dropped; at most ``limit + 1`` characters), read
    through its compression (by extension); empty when pandas must say what is wrong (e.g. no zstandard)."""
    suffix = path.suffix.lower()
    text: dict[str, Any] = {"encoding": "utf-8-sig", "errors": "replace", "newline": ""}
    with contextlib.ExitStack() as stack:
        if suffix in (".gz", ".bz2", ".xz"):
            import bz2
            import gzip
            import lzma

            opener: Any = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}[suffix]
            handle: IO[str] = stack.enter_context(opener(path, "rt", **text))
        elif suffix == ".zip":
            import zipfile

            archive = stack.enter_context(zipfile.ZipFile(path))
            members = archive.namelist()
            if len(members) != 1:  # pandas reads a single-file archive only, and says so itself
                return ""
            handle = stack.enter_context(io.TextIOWrapper(archive.open(members[0]), **text))
        elif suffix == ".zst":
            try:
                import zstandard
            except ImportError:  # pandas needs it as well, and says so when it reads the file
                return ""
            raw = stack.enter_context(zstandard.ZstdDecompressor().stream_reader(stack.enter_context(
                open(path, "rb"))))
            handle = stack.enter_context(io.TextIOWrapper(raw, **text))
        else:
            handle = stack.enter_context(open(path, **text))
        return handle.readline(limit + 1)
    return ""  # pragma: no cover - ExitStack does not swallow exceptions


def _path(source: Source, given: str | Path | None) -> Path | None:
    if source.format == "label_studio":  # a project export or server: its fields come from the labeling config
        return None
    if given is not None:
        return Path(given).resolve()
    if source.format == "sql":
        return None
    return Path(source.path).resolve() if source.path else None
