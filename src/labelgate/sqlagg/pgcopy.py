"""Integer query results from PostgreSQL through ``COPY (SELECT …) TO STDOUT (FORMAT binary)`` into numpy.

Why not a cursor: a server-side (named) cursor — the usual way to stream a large result — makes PostgreSQL plan
the query without parallel workers (a cursor's query may be suspended), and each row becomes a Python tuple on the
client. ``COPY (query) TO STDOUT`` is planned like a plain query (a ``Gather`` over parallel partial aggregates
when ``max_parallel_workers_per_gather`` allows it) and streams its rows in the binary copy format, which, with
every column cast to ``bigint`` and none NULL, is fixed-width: each row is a 2-byte field count followed, per
field, by a 4-byte length (8) and 8 big-endian bytes. The blocks the driver hands over are parsed with
:func:`numpy.frombuffer`, a bounded buffer at a time (:data:`CHUNK_BYTES`): the driver hands over one short-lived
``bytes`` block per message (about a row), and no row becomes a tuple of Python integers.

Used with psycopg 3 (SQLAlchemy's ``postgresql+psycopg`` driver, whose ``Cursor.copy`` streams a copy and binds
the statement's parameters on the client); :func:`copies` says whether a connection can. Every other database or
driver keeps the cursor path (:meth:`labelgate.sqlagg.sql.SqlAlchemyBackend.stream`).

References
----------
PostgreSQL 15 documentation, "COPY" (Binary Format) and "When Can Parallel Query Be Used?".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from labelgate.errors import InputError, Reason

#: Bytes of copy data parsed at a time (whole rows; the rest waits for the next block).
CHUNK_BYTES = 8 << 20
#: The binary copy format's signature; then a 4-byte flags field and a 4-byte header-extension length.
_SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
_TRAILER = b"\xff\xff"


def copies(connection: Any) -> bool:
    """Whether ``connection`` (a SQLAlchemy connection) reaches PostgreSQL through psycopg 3's copy support."""
    if connection.dialect.name != "postgresql":
        return False
    driver = getattr(getattr(connection, "connection", None), "driver_connection", None)
    return type(driver).__module__.split(".")[0] == "psycopg"  # psycopg 3 (psycopg2's module is "psycopg2")


def copy_int64(connection: Any, query: Any, width: int) -> np.ndarray:
    """The rows of ``query`` (``width`` integer columns, none NULL) as an (n, width) int64 array, via binary COPY.

    The query is wrapped as ``SELECT CAST(c AS bigint), … FROM (query)`` so that every field is 8 bytes, compiled
    for the connection's dialect (its parameters bound by the driver) and copied in the binary format.

    Raises
    ------
    InputError
        When a row is not ``width`` non-NULL 8-byte fields, or the stream is not a complete binary copy (reason
        ``unreadable_input``): the result is refused rather than misread.
    """
    import sqlalchemy as sa

    wrapped = sa.select(*[sa.cast(c, sa.BigInteger) for c in columns_of(query, width)])
    return copy_binary(connection, wrapped, lambda copy: rows_of(copy, width))


def columns_of(query: Any, width: int) -> Any:
    """The columns of ``query`` as a subquery's, checked to be ``width``."""
    inner = query.subquery("lg_rows")
    if len(inner.c) != width:
        raise ValueError(f"the query has {len(inner.c)} columns, not {width}")
    return inner.c


def copy_binary(connection: Any, wrapped: Any, parse: Callable[[Iterable[bytes]], np.ndarray]) -> np.ndarray:
    """``parse`` of the blocks of ``COPY (wrapped) TO STDOUT (FORMAT binary)`` on a psycopg 3 connection.

    A driver error is an :class:`~labelgate.errors.InputError` naming the failed query (reason
    ``unreadable_input``).
    """
    import psycopg

    compiled = wrapped.compile(dialect=connection.dialect, compile_kwargs={"render_postcompile": True})
    # SQLAlchemy renames a bound parameter whose column name holds characters a placeholder cannot (``.``, a space,
    # ``%``, ``(``, …: ``meta.pool_1`` is written ``%(meta_pool_1)s``); the driver is given the names in the SQL
    params = {compiled.escaped_bind_names.get(name, name): value for name, value in compiled.params.items()}
    try:
        with connection.connection.driver_connection.cursor() as cursor, cursor.copy(
                f"COPY ({compiled}) TO STDOUT (FORMAT binary)", params) as copy:
            return parse(copy)
    except psycopg.Error as exc:  # COPY bypasses SQLAlchemy: its faults are the driver's own, named here as a query's
        raise InputError(f"The batch query failed: {type(exc).__name__}: {str(exc).strip()[:500]}",
                         Reason.UNREADABLE_INPUT) from exc


def rows_of(blocks: Iterable[bytes | bytearray | memoryview], width: int) -> np.ndarray:
    """The rows of a binary copy stream of ``width`` non-NULL bigint fields, however the stream is cut in blocks.

    The blocks are gathered until :data:`CHUNK_BYTES`, then the whole rows among them are parsed; a row or the
    header may straddle blocks. Raises :class:`~labelgate.errors.InputError` as :func:`copy_int64`.
    """
    row = np.dtype([("fields", ">i2"), *[(f"{name}{k}", ">i4" if name == "n" else ">i8")
                                          for k in range(width) for name in ("n", "v")]])
    chunks: list[np.ndarray] = []

    def consume(data: bytearray, final: bool) -> int:
        if not final and len(data) < CHUNK_BYTES:
            return 0
        # the rest after whole rows: part of a row, or the 2-byte trailer (shorter than any row)
        chunks.append(_parse(data, row, width))
        return len(chunks[-1]) * row.itemsize

    framed(blocks, consume, f"{width} non-NULL bigint fields")
    return np.concatenate(chunks) if len(chunks) > 1 else chunks[0]


def framed(blocks: Iterable[bytes | bytearray | memoryview], consume: Callable[[bytearray, bool], int],
           rows: str) -> None:
    """Check the framing of a binary copy stream and hand its rows to ``consume``, however it is cut in blocks.

    The header (signature, flags and extension; it may straddle blocks) is checked and dropped. After each block,
    ``consume(data, False)`` is given the bytes received and not consumed yet; it parses the whole rows it wants at
    their start and returns how many bytes it used (the rest waits for more blocks). When the stream ends,
    ``consume(data, True)`` takes the last rows; what remains then must be exactly the format's trailer.

    Parameters
    ----------
    blocks : iterable of bytes-like
        The stream, cut anywhere.
    consume : callable
        The row parser, as above; it refuses a malformed row itself (:class:`~labelgate.errors.InputError`) and
        stops at the trailer, which no row can start with (a field count of -1).
    rows : str
        What a row should be, for the refusal of a stream that does not end with the trailer after whole rows
        (``"3 non-NULL bigint fields"``).

    Raises
    ------
    InputError
        A stream without the signature, ended before its header, or not ending with the trailer after whole rows
        (reason ``unreadable_input``).
    """
    pending = bytearray()
    header = True
    for block in blocks:
        pending += block
        if header:
            size = _header_size(pending) if len(pending) >= 19 else None
            if size is None or len(pending) < size:
                continue
            del pending[:size]
            header = False
        del pending[:consume(pending, False)]
    if header:
        raise InputError("The database's binary COPY stream ended before its header.", Reason.UNREADABLE_INPUT)
    del pending[:consume(pending, True)]
    if bytes(pending) != _TRAILER:
        raise InputError(f"The database's binary COPY rows are not {rows} (the stream does not end with the "
                         "format's trailer after whole rows).", Reason.UNREADABLE_INPUT)


def _header_size(data: bytearray) -> int:
    """The length of the binary copy header at the start of ``data`` (signature, flags, extension)."""
    if bytes(data[:11]) != _SIGNATURE:
        raise InputError("The database's COPY stream does not start with the binary format's signature.",
                         Reason.UNREADABLE_INPUT)
    extension = int.from_bytes(data[15:19], "big")
    return 19 + extension


def _parse(data: bytearray, row: np.dtype, width: int) -> np.ndarray:
    """The whole rows at the start of ``data`` as an (n, width) int64 array (each row checked)."""
    n = len(data) // row.itemsize  # the rest: part of a row, or the 2-byte trailer (shorter than any row)
    raw = np.frombuffer(data, dtype=row, count=n)
    if n and (not (raw["fields"] == width).all()
              or not all((raw[f"n{k}"] == 8).all() for k in range(width))):
        raise InputError(f"The database's binary COPY rows are not {width} non-NULL bigint fields.",
                         Reason.UNREADABLE_INPUT)
    out = np.empty((n, width), dtype=np.int64)
    for k in range(width):
        out[:, k] = raw[f"v{k}"]
    del raw  # release the view: the caller resizes ``data``
    return out
