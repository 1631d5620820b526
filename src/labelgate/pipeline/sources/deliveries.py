"""Deliveries: the annotations that arrived since the last look, from a drop folder, a Parquet dataset or a SQL table.

Every read returns :class:`Delivery` objects, each with a ``delivery_id`` and a content hash; the merge
skips a delivery whose content hash was merged before (and, for files, one whose name, size and
modification time are unchanged, without reading it again), so merging the same delivery twice never
double-counts. For ``parquet`` and ``sql`` sources rows with ``timestamp >= watermark`` are read (the
watermark is the latest timestamp merged from the source): rows already merged come back at the boundary
and are recognised judgement by judgement. A Label Studio project is read as a :func:`restatement` of the tasks that
changed (:mod:`labelgate.pipeline.sources.label_studio_delivery`): their judgements replace the stored ones.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from labelgate.errors import InputError, Reason
from labelgate.pipeline.config import MonitorConfig
from labelgate.pipeline.sources.folders import Folder
from labelgate.pipeline.sources.sql import read_sql
from labelgate.pipeline.sources.tables import content_hash, load_table


@dataclass
class Delivery:
    """One delivery of annotations.

    Attributes
    ----------
    delivery_id : str
        File path relative to the drop folder, or ``"<kind>:<first>..<last>"`` for watermark reads.
    frame : DataFrame or None
        The rows (None for a file skipped without reading).
    content_hash : str
        :func:`labelgate.pipeline.sources.tables.content_hash` of the rows.
    size, mtime_ns : int or None
        File size and modification time (files only).
    arrived_at : int
        Microseconds since the epoch used as the timestamp of rows without one (file modification time, or
        the read time).
    default_pool : str or None
        Pool of rows from a table without a pool column.
    restates : tuple of str or None
        Items (ids as text) whose judgements this delivery states completely, as they are now at the source: every
        stored judgement of such an item is replaced by the delivery's judgement with the same key (pool, item,
        rater), or removed when the delivery has none (a deleted or cancelled annotation); an item restated with no
        rows loses all its judgements. None: the delivery only adds (a re-delivered judgement is counted, never
        merged twice).
    source_watermark : int or None
        Microseconds since the epoch up to which the source was read (the monitor's source watermark moves there
        when the delivery is merged), for sources that keep their own clock (Label Studio's ``updated_at``).
    """

    delivery_id: str
    frame: pd.DataFrame | None
    content_hash: str
    size: int | None = None
    mtime_ns: int | None = None
    arrived_at: int = 0
    default_pool: str | None = None
    restates: tuple[str, ...] | None = None
    source_watermark: int | None = None


def now_us() -> int:
    """Current time in microseconds since the epoch."""
    return time.time_ns() // 1000


def restatement(
    delivery_id: str, frame: pd.DataFrame, items: Iterable[str], *, source_watermark: int | None = None
) -> Delivery:
    """A delivery that restates ``items`` (ids as text): ``frame`` holds every current judgement of those items.

    Its content hash covers the rows and the restated items. A restatement is merged even when an earlier one had
    the same content (restating the current state changes nothing, and a state can come back after a change).
    """
    restates = tuple(sorted({str(item) for item in items}))
    digest = hashlib.sha256(f"{content_hash(frame)}|{','.join(restates)}".encode()).hexdigest()
    return Delivery(delivery_id, frame, digest, arrived_at=now_us(), restates=restates,
                    source_watermark=source_watermark)


def list_files(config: MonitorConfig, known: Callable[[str, int, int], bool]) -> list[Delivery]:
    """New or changed files of the drop folder, oldest first.

    ``known(delivery_id, size, mtime_ns)`` says whether a file with this name, size and modification time
    was merged before; such files are not read again.
    """
    src = config.monitor.source
    folder = Folder(src.path or ".", "monitor drop folder")
    cache = Path(config.reports.dir) / ".deliveries"  # local copies of a remote folder's files
    out = []
    for arrival in folder.settled(src.pattern, src.settle_seconds):
        if known(arrival.name, arrival.size, arrival.mtime_ns):
            continue
        frame = load_table(
            config.batch.model_copy(update={"format": "auto", "path": None}),
            folder.local_copy(arrival.name, cache),
            columns=config.columns,
            role="delivery",
        )
        out.append(_file_delivery(arrival.name, frame, arrival.size, arrival.mtime_ns, src.default_pool))
    return out


def read_trusted(config: MonitorConfig, known: Callable[[str, int, int], bool]) -> list[Delivery]:
    """The trusted replication file of the gate configuration (``trusted.path``), when new or changed."""
    path = config.trusted.path
    if not path:
        return []
    file = Path(path)
    if not file.is_file():
        raise InputError(
            f"The trusted replication file {path!r} does not exist.", Reason.UNREADABLE_INPUT, file=path
        )
    stat = file.stat()
    delivery_id = f"trusted:{file.resolve().as_posix()}"
    if known(delivery_id, stat.st_size, stat.st_mtime_ns):
        return []
    frame = load_table(config.trusted, None, columns=config.columns, role="trusted")
    if config.columns.pool not in frame.columns:
        frame[config.columns.pool] = config.pools.trusted
    return [_file_delivery(delivery_id, frame, stat.st_size, stat.st_mtime_ns, config.pools.trusted)]


def _file_delivery(delivery_id: str, frame: pd.DataFrame, size: int, mtime_ns: int, pool: str | None) -> Delivery:
    # a file's rows without their own timestamp arrived when the file was last written
    return Delivery(delivery_id, frame, content_hash(frame), size, mtime_ns, mtime_ns // 1000, pool)


def read_since(config: MonitorConfig, watermark_us: int | None) -> list[Delivery]:
    """Rows of a Parquet dataset or SQL table with ``timestamp >= watermark`` (all rows the first time)."""
    src = config.monitor.source
    ts = config.columns.timestamp or ""
    since = None if watermark_us is None else pd.Timestamp(watermark_us, unit="us", tz="UTC")
    frame = (
        _read_parquet(src.path or "", ts, since) if src.kind == "parquet" else _read_sql(config, ts, since)
    )
    frame = frame.reset_index(drop=True)
    if frame.empty:
        return []
    stamps = parse_timestamps(frame[ts])
    first, last = stamps.min(), stamps.max()
    delivery_id = f"{src.kind}:{_iso(first)}..{_iso(last)}"
    return [
        Delivery(
            delivery_id, frame, content_hash(frame), arrived_at=now_us(), default_pool=src.default_pool
        )
    ]


def _read_parquet(path: str, ts: str, since: pd.Timestamp | None) -> pd.DataFrame:
    if not Path(path).exists():
        raise InputError(
            f"The monitor Parquet dataset {path!r} does not exist.", Reason.UNREADABLE_INPUT, file=path
        )
    try:
        import pyarrow.dataset as ds
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        raise InputError("Reading a Parquet dataset needs pyarrow.", Reason.UNREADABLE_INPUT) from None
    dataset = ds.dataset(path, format="parquet", partitioning="hive")
    if ts not in dataset.schema.names:
        raise InputError(
            f"The Parquet dataset {path!r} has no timestamp column {ts!r}.", Reason.MISSING_COLUMN, column=ts
        )
    table = (
        dataset.to_table() if since is None else dataset.to_table(filter=_arrow_filter(dataset, ts, since))
    )
    return table.to_pandas()


def _arrow_filter(dataset: Any, ts: str, since: pd.Timestamp) -> Any:
    import pyarrow as pa
    import pyarrow.dataset as ds

    field = dataset.schema.field(ts)
    if pa.types.is_timestamp(field.type):
        value = pa.scalar(
            since.to_pydatetime() if field.type.tz else since.tz_localize(None).to_pydatetime(),
            type=field.type,
        )
        return ds.field(ts) >= value
    # text timestamps (ISO 8601) compare correctly as text only in one format: cast them
    stamp = pa.timestamp("us", tz="UTC")
    return ds.field(ts).cast(stamp) >= pa.scalar(since.to_pydatetime(), type=stamp)


def _read_sql(config: MonitorConfig, ts: str, since: pd.Timestamp | None) -> pd.DataFrame:
    from sqlalchemy import column, select, table, text

    src = config.monitor.source

    def statement(conn: Any) -> tuple[Any, dict[str, Any]]:
        if src.query:
            low = since if since is not None else pd.Timestamp(0, tz="UTC")
            return text(src.query), {"watermark": _sql_time(conn, low.to_pydatetime())}
        schema, _, name_only = (src.table or "").rpartition(".")
        tbl = table(name_only, column(ts), schema=schema or None)
        query = select(text("*")).select_from(tbl)
        if since is not None:
            query = query.where(tbl.c[ts] >= _sql_time(conn, since.to_pydatetime()))
        return query.order_by(tbl.c[ts]), {}

    return read_sql(src.url_env, "the monitor SQL source", statement)


def _sql_time(conn: Any, stamp: Any) -> Any:
    # SQLite stores datetimes as text 'YYYY-MM-DD HH:MM:SS[.ffffff]' without zone: compare like with like
    if conn.dialect.name == "sqlite":
        return pd.Timestamp(stamp).tz_convert("UTC").tz_localize(None).strftime("%Y-%m-%d %H:%M:%S.%f")
    return stamp


def parse_timestamps(values: pd.Series) -> pd.Series:
    """Microseconds since the epoch (int64, NA where missing or unreadable); naive times are taken as UTC."""
    if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
        parsed = pd.to_datetime(values, unit="s", utc=True, errors="coerce")
    else:
        parsed = pd.to_datetime(values, utc=True, errors="coerce", format="mixed")
    missing = parsed.isna().to_numpy()
    micros = parsed.dt.tz_localize(None).to_numpy(dtype="datetime64[us]").astype(np.int64)
    return pd.Series(pd.arrays.IntegerArray(np.where(missing, 0, micros), missing), index=values.index)


def _iso(us: Any) -> str:
    return pd.Timestamp(int(us), unit="us", tz="UTC").isoformat()
