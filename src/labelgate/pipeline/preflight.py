"""Checks a gate can make before it starts anything heavy: the input files exist and their headers hold the columns.

Only the header is read (a CSV's first line, a Parquet file's schema), so a misnamed column or a missing file is
reported in a fraction of a second, before the tables are loaded and before Prefect or Great Expectations start. The
full validation (``labelgate.pipeline.validation``) still runs on the loaded rows.
"""

from __future__ import annotations

import csv
from pathlib import Path

from labelgate.errors import InputError, Reason
from labelgate.pipeline.config import GateConfig, Source

_HEADER_BYTES = 1 << 20  # a header line longer than this is not a header


def check_inputs(config: GateConfig, batch: str | Path | None, trusted: str | Path | None) -> None:
    """Raise :class:`InputError` when a file source is missing or its header lacks a required column.

    SQL sources are not contacted here (their columns are checked when the rows are loaded).

    Raises
    ------
    InputError
        No batch given, a file that does not exist, or a required column missing from a header; the message names
        the file and the column.
    """
    one_table = trusted is None and not config.trusted.path and config.trusted.format != "sql"
    checked = []
    for role, source, given in (("batch", config.batch, batch), ("trusted", config.trusted, trusted)):
        path = _path(source, given)
        if path is None:
            if role == "batch" and source.format != "sql":
                raise InputError("No batch given: pass --batch or set 'batch.path' (or a SQL query) in the "
                                 "configuration.", Reason.MISSING_SETTING)
            continue
        if path in checked:
            continue
        checked.append(path)
        if not path.is_file():
            raise InputError(f"The {role} file {path} does not exist.", Reason.MISSING_SETTING, table=role)
        header = read_header(path, source.format)
        for column, what in required_columns(config, with_pool=one_table):
            if column not in header:
                raise InputError(f"Column {column!r} (the {what}) is missing from the {role} file {path.name}; it "
                                 f"has columns {sorted(header)}.", Reason.MISSING_COLUMN, column=column, table=role)


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


def read_header(path: Path, fmt: str = "auto") -> set[str]:
    """The column names of a CSV or Parquet file, read from its header only."""
    parquet = fmt == "parquet" or (fmt == "auto" and path.suffix.lower() in {".parquet", ".pq"})
    if parquet:
        import pyarrow.parquet as pq

        try:
            return set(pq.read_schema(path).names)
        except Exception as exc:  # not a Parquet file, or unreadable: say which
            raise InputError(f"{path.name} is not a readable Parquet file ({exc}).", Reason.MISSING_SETTING) from None
    with open(path, encoding="utf-8-sig", newline="") as handle:
        line = handle.readline(_HEADER_BYTES)
    row = next(csv.reader([line]), [])
    return set(row)


def _path(source: Source, given: str | Path | None) -> Path | None:
    if given is not None:
        return Path(given).resolve()
    if source.format == "sql":
        return None
    return Path(source.path).resolve() if source.path else None
