"""Deliveries: the annotations that arrived since the last look, from a drop folder, a Parquet dataset or a SQL table.

Every read returns :class:`Delivery` objects, each with a ``delivery_id`` and a content hash; the merge
skips a delivery whose content hash was merged before (and, for files, one whose name, size and
modification time are unchanged, without reading it again), so merging the same delivery twice never
double-counts. For ``parquet`` and ``sql`` sources rows with ``timestamp >= watermark`` are read (the
watermark is the latest timestamp merged from the source): rows already merged come back at the boundary
and are recognised judgement by judgement. A ``sql`` source is read through one query per pass, in chunks of at most
``chunk_rows`` rows (:class:`SqlChunks`), each one delivery merged and committed before the next is taken. A Label
Studio project is read as a :func:`restatement` of the tasks that changed
(:mod:`labelgate.pipeline.sources.label_studio_delivery`): their judgements replace the stored ones.
"""

from __future__ import annotations

import hashlib
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from labelgate.errors import InputError, Reason
from labelgate.pipeline.config import MonitorConfig
from labelgate.pipeline.sources.folders import Folder
from labelgate.pipeline.sources.sql import connected, subquery_text
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
    chunk : int or None
        The chunk's number in its pass's read of a ``sql`` source (0, 1, ...); None for other deliveries. A chunk's
        rows are dropped once it is merged, so that a pass holds one chunk at a time.
    more : callable or None
        The read goes on past this chunk: called once the chunk is merged and committed, it reads the next one (a list
        of at most one delivery). None: the read ended with this delivery.
    close : callable or None
        Ends the read this chunk belongs to (an open cursor, spooled files) when a pass stops before reading it all;
        None for other deliveries.
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
    chunk: int | None = None
    more: Callable[[], list[Delivery]] | None = None
    close: Callable[[], None] | None = None


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
    """Rows of a Parquet dataset or SQL table with ``timestamp >= watermark`` (all rows the first time).

    A Parquet dataset is read in one delivery. A SQL source returns its first chunk (:class:`SqlChunks`), whose
    :attr:`Delivery.more` reads the next.
    """
    src = config.monitor.source
    if src.kind == "sql":
        return SqlChunks(config, watermark_us).next_chunk()
    ts = config.columns.timestamp or ""
    since = None if watermark_us is None else pd.Timestamp(watermark_us, unit="us", tz="UTC")
    frame = _read_parquet(src.path or "", ts, since).reset_index(drop=True)
    if frame.empty:
        return []
    stamps = parse_timestamps(frame[ts])
    first, last = stamps.min(), stamps.max()
    delivery_id = f"{src.kind}:{iso_utc(first)}..{iso_utc(last)}"
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


#: How the monitor names its SQL source in messages.
_WHAT = "the monitor SQL source"
#: A text timestamp's UTC offset other than zero (``+01:00``, ``-0500``): its text order is not its time order.
_OFFSET = r"[+-](?!00:?00$)\d{2}:?\d{2}$"


class SqlChunks:
    """The rows of a ``sql`` source past the watermark, read through one query in chunks of at most ``chunk_rows``.

    A pass runs one query, ``SELECT * FROM source WHERE timestamp >= watermark ORDER BY timestamp, item, rater, pool,
    question, labels`` (the columns of those the source has; on the first pass every row, those without a timestamp
    first), and fetches its rows ``chunk_rows`` at a time: the user's query runs once, the database sorts once, and
    what a pass reads is one statement's snapshot (on PostgreSQL, a server-side cursor: rows changed while the pass
    runs are read as they were when it started, none is lost to a shifted page). On PostgreSQL the session reads in
    UTC (``SET TIME ZONE 'UTC'``), so a ``timestamp`` column without zone compares with the watermark as UTC, as
    :func:`parse_timestamps` reads it.

    On SQLite the whole read is first spooled to temporary files, one per chunk, and the chunks are then merged one by
    one: a SQLite read left open would hold its lock on the file and block the store's commits when the source table
    lives in the store's database file (rollback journal). Memory still holds one chunk.

    A chunk may end inside a run of equal timestamps: the monitor's source watermark moves to the latest timestamp
    merged, and a pass that stops after a chunk resumes at ``timestamp >= watermark``, where the rows of that run come
    back and the merged ones are recognised judgement by judgement (a whole chunk by its content hash).

    The timestamps must come in time order (they are compared by the database, parsed as UTC by the monitor): a row
    whose parsed timestamp is earlier than the row read before it, in this chunk or an earlier one of the pass, or a
    text timestamp with a non-zero UTC offset, raises :class:`~labelgate.errors.InputError` naming the row and its
    spelling (SQLite stores text: one spelling of UTC, e.g. ``YYYY-MM-DD HH:MM:SS[.ffffff]``, or a number of seconds).

    A ``query`` runs as a subquery with ``:watermark`` bound to the pass's starting watermark (the epoch on the first
    pass); trailing ``;``, whitespace and comments are stripped first (:func:`.sql.bare_query`).
    """

    def __init__(self, config: MonitorConfig, watermark_us: int | None) -> None:
        self.config = config
        self.ts = config.columns.timestamp or ""
        self.bound = int(config.monitor.source.chunk_rows)
        self.since = None if watermark_us is None else pd.Timestamp(watermark_us, unit="us", tz="UTC")
        self.chunks = 0
        self.rows = 0  # rows read so far in the pass (a row's number in messages)
        self.last: tuple[int, Any, int] | None = None  # the latest timestamp read: (microseconds, spelling, row)
        self._frames: Iterator[pd.DataFrame] | None = None

    def next_chunk(self) -> list[Delivery]:
        """The next chunk as a list of at most one delivery (empty: nothing more to read)."""
        if self._frames is None:
            self._frames = self._read()
        frame = next(self._frames, None)
        if frame is None or frame.empty:
            self.close()
            return []
        more = len(frame) == self.bound  # a short chunk is the last; a full one may be followed by an empty read
        if not more:
            self.close()
        return [self._delivery(frame, more=more)]

    def close(self) -> None:
        """End the read (its cursor, connection and spooled files); idempotent."""
        frames, self._frames = self._frames, iter(())
        if frames is not None and hasattr(frames, "close"):
            frames.close()

    def _delivery(self, frame: pd.DataFrame, *, more: bool) -> Delivery:
        frame = frame.reset_index(drop=True)
        stamps = parse_timestamps(frame[self.ts]).dropna()
        span = f"{iso_utc(stamps.min())}..{iso_utc(stamps.max())}" if len(stamps) else "no timestamp"
        delivery = Delivery(
            f"sql:{span}", frame, content_hash(frame), arrived_at=now_us(),
            default_pool=self.config.monitor.source.default_pool, chunk=self.chunks,
            more=self.next_chunk if more else None, close=self.close,
        )
        self.chunks += 1
        return delivery

    def _read(self) -> Iterator[pd.DataFrame]:
        """The pass's chunks, checked (:meth:`_check`): streamed, or spooled first on SQLite."""
        with tempfile.TemporaryDirectory(prefix="labelgate-sql-") as spool:
            paths: list[Path] = []
            with connected(self.config.monitor.source.url_env, _WHAT) as conn:
                if conn.dialect.name != "sqlite":
                    yield from self._stream(conn)
                    return
                for frame in self._stream(conn):
                    paths.append(Path(spool) / f"{len(paths)}.pkl")
                    frame.to_pickle(paths[-1])
            # the SQLite read is over (its connection closed) before the first chunk is merged
            for path in paths:
                frame = pd.read_pickle(path)
                path.unlink()
                yield frame

    def _stream(self, conn: Any) -> Iterator[pd.DataFrame]:
        from sqlalchemy import column, select, table, text

        src, ts = self.config.monitor.source, self.ts
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql("SET TIME ZONE 'UTC'")  # naive timestamps compare as UTC (parse_timestamps)

        def source(names: list[str]) -> tuple[Any, dict[str, Any]]:
            columns: list[Any] = [column(name) for name in names]
            if src.query:
                low = self.since if self.since is not None else pd.Timestamp(0, tz="UTC")
                return (text(subquery_text(src.query)).columns(*columns).subquery("labelgate_source"),
                        {"watermark": _sql_time(conn, low.to_pydatetime())})
            schema, _, name_only = (src.table or "").rpartition(".")
            return table(name_only, *columns, schema=schema or None), {}

        sel, params = source([ts])
        probe = pd.read_sql_query(select(text("*")).select_from(sel).limit(0), conn, params=params)
        if ts not in probe.columns:
            raise InputError(f"The monitor SQL source has no timestamp column {ts!r}; it has "
                             f"{sorted(map(str, probe.columns))}.", Reason.MISSING_COLUMN, column=ts)
        cols = self.config.columns
        wanted = [cols.item, cols.rater, cols.pool, cols.question,
                  *(self.config.label_column(q) for q in self.config.questions)]
        order = [c for c in dict.fromkeys(wanted) if c and c != ts and c in probe.columns]
        sel, params = source([ts, *order])
        stamp = sel.c[ts]
        query = select(text("*")).select_from(sel)
        if self.since is not None:
            query = query.where(stamp >= _sql_time(conn, self.since.to_pydatetime()))
        query = query.order_by(stamp.asc().nulls_first(), *(sel.c[name] for name in order))
        streamed = conn.execution_options(stream_results=True, max_row_buffer=self.bound)
        for frame in pd.read_sql_query(query, streamed, params=params, chunksize=self.bound):
            self._check(frame)
            yield frame

    def _check(self, frame: pd.DataFrame) -> None:
        """Refuse timestamps out of time order in the read (within the chunk and after the previous one), and text
        timestamps with a non-zero UTC offset: the database's order and the watermark's comparison would not be
        the monitor's, and rows would be merged out of order or skipped for good."""
        values = frame[self.ts]
        first = self.rows
        self.rows += len(frame)
        if not (pd.api.types.is_numeric_dtype(values) or pd.api.types.is_datetime64_any_dtype(values)):
            text = values.map(lambda v: v if isinstance(v, str) else "").str.strip()
            offset = text.str.contains(_OFFSET, regex=True).to_numpy(bool)
            if offset.any():
                at = int(np.argmax(offset))
                raise InputError(
                    f"The monitor SQL source's timestamp {values.iloc[at]!r} (row {first + at + 1} of this pass's "
                    f"read, column {self.ts!r}) carries a UTC offset: its text does not sort in time order. Store UTC "
                    "times in one spelling, or use a timestamp type.", Reason.UNREADABLE_INPUT, column=self.ts,
                    row=first + at + 1)
        stamps = parse_timestamps(values)
        keep = ~stamps.isna().to_numpy(bool)
        if not keep.any():
            return
        us = stamps.to_numpy(dtype=np.int64, na_value=0)[keep]
        where = np.flatnonzero(keep)
        previous = np.concatenate(([self.last[0]] if self.last is not None else [us[0]], us[:-1]))
        back = np.flatnonzero(us < previous)
        if len(back):
            k = int(back[0])
            row = first + int(where[k]) + 1
            if k:
                before, before_row = values.iloc[int(where[k - 1])], first + int(where[k - 1]) + 1
            else:
                assert self.last is not None
                before, before_row = self.last[1], self.last[2]
            raise InputError(
                f"The monitor SQL source's timestamps are not in time order: row {row} of this pass's read "
                f"({self.ts}={values.iloc[int(where[k])]!r}, {iso_utc(us[k])}) comes after row {before_row} "
                f"({before!r}, {iso_utc(previous[k])}). The database sorts them otherwise than their times (on SQLite: "
                "text in more than one spelling); store UTC times in one spelling, or use a timestamp type.",
                Reason.UNREADABLE_INPUT, column=self.ts, row=row)
        self.last = (int(us[-1]), values.iloc[int(where[-1])], first + int(where[-1]) + 1)


def _sql_time(conn: Any, stamp: Any) -> Any:
    # SQLite stores datetimes as text 'YYYY-MM-DD HH:MM:SS[.ffffff]' without zone: compare like with like. The
    # fraction's trailing zeros are dropped: the shortest text of the instant sorts at or before each of its spellings
    # ('...:05' <= '...:05.000000'), so the rows at the watermark are read again as they must be.
    if conn.dialect.name == "sqlite":
        text = pd.Timestamp(stamp).tz_convert("UTC").tz_localize(None).strftime("%Y-%m-%d %H:%M:%S.%f")
        return text.rstrip("0").rstrip(".")
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


def iso_utc(us: Any) -> str:
    """Microseconds since the epoch as an ISO 8601 time (UTC)."""
    return pd.Timestamp(int(us), unit="us", tz="UTC").isoformat()
