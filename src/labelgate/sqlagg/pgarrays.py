"""Integer query results from PostgreSQL as a few rows of arrays: ``COPY (SELECT array_agg(…) … GROUP BY id % K)``.

Why: a binary ``COPY`` (:mod:`labelgate.sqlagg.pgcopy`) sends one message per result row, and the driver hands each
to the client through its read loop: for the counts of 400,000 items, 1.3–1.5 s of client CPU on the test machine.
Grouped on the server by the integer item id modulo :data:`BUCKETS`, with every column collected by ``array_agg``,
the same rows come as at most :data:`BUCKETS` messages, parsed by :func:`numpy.frombuffer` (0.06 s). The grouping
is one more hash aggregate over the rows (not over the judgements): the query's own plan, parallel workers
included, is unchanged below it.

The aggregates of one group read its rows in one pass, so the arrays of a group are in the same row order; each row
of the copy is checked (one-dimensional ``bigint`` arrays without NULLs, all of one length), and a stream that does
not end after whole rows is refused, as in :mod:`~labelgate.sqlagg.pgcopy`. Used with psycopg 3 for queries with
an integer key column (the item id); the rows come back in no particular order (the caller numbers and sorts them).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from labelgate.errors import InputError, Reason
from labelgate.sqlagg.pgcopy import _TRAILER, columns_of, copy_binary, framed
from labelgate.sqlagg.values import INT8_OID

#: Groups of rows (copy messages) at most: the integer key modulo this.
BUCKETS = 256
#: One element of a binary bigint array: a 4-byte length (8) and 8 big-endian bytes.
_ELEMENT = np.dtype([("n", ">i4"), ("v", ">i8")])


def copy_int64_arrays(connection: Any, query: Any, width: int, key: int) -> np.ndarray:
    """The rows of ``query`` (``width`` integer columns, none NULL; column ``key`` an integer) as an (n, width)
    int64 array, through ``COPY`` of their columns aggregated into arrays per ``key % BUCKETS``.

    Raises
    ------
    InputError
        When the copy is not whole rows of ``width`` one-dimensional bigint arrays of one length without NULLs,
        or the query fails (reason ``unreadable_input``).
    """
    import sqlalchemy as sa

    inner = columns_of(query, width)
    wrapped = (sa.select(*[sa.func.array_agg(sa.cast(c, sa.BigInteger)) for c in inner])
               .group_by(inner[key] % BUCKETS))
    return copy_binary(connection, wrapped, lambda copy: arrays_of(copy, width))


def arrays_of(blocks: Iterable[bytes | bytearray | memoryview], width: int) -> np.ndarray:
    """The rows of a binary copy stream whose every row is ``width`` bigint arrays of one length, as one (n, width)
    int64 array (the rows' arrays stacked), however the stream is cut in blocks
    (:func:`~labelgate.sqlagg.pgcopy.framed`)."""
    parts: list[np.ndarray] = [np.empty((0, width), dtype=np.int64)]
    framed(blocks, lambda data, final: _rows(data, width, parts), f"{width} bigint arrays")
    return np.concatenate(parts)


def _rows(data: bytearray, width: int, parts: list[np.ndarray]) -> int:
    """Parse the whole rows at the start of ``data`` into ``parts``, up to the trailer; the bytes used."""
    view = memoryview(data)
    pos = 0
    try:
        while len(data) - pos >= 2:
            if bytes(view[pos:pos + 2]) == _TRAILER:
                return pos  # the end of the rows: the trailer is checked by the framing
            fields = int.from_bytes(view[pos:pos + 2], "big", signed=True)
            if fields != width:
                raise InputError(f"The database's binary COPY rows are not {width} fields.", Reason.UNREADABLE_INPUT)
            spans, at = [], pos + 2
            for _ in range(width):
                if len(data) - at < 4:
                    return pos
                size = int.from_bytes(view[at:at + 4], "big", signed=True)
                if size < 0:
                    raise InputError("The database's binary COPY rows hold a NULL array.", Reason.UNREADABLE_INPUT)
                spans.append((at + 4, size))
                at += 4 + size
            if at > len(data):
                return pos  # the row's end has not arrived
            arrays = [_array(view[start:start + size]) for start, size in spans]
            if len({len(a) for a in arrays}) != 1:
                raise InputError("The database's binary COPY arrays of one row differ in length.",
                                 Reason.UNREADABLE_INPUT)
            parts.append(np.column_stack(arrays))
            pos = at
        return pos
    finally:
        view.release()


def _array(field: memoryview) -> np.ndarray:
    """A one-dimensional bigint array without NULLs, from its binary form."""
    head = np.frombuffer(field, dtype=">i4", count=3) if len(field) >= 12 else None
    if head is None or int(head[0]) != 1 or int(head[1]) != 0 or int(head[2]) != INT8_OID or len(field) < 20:
        raise InputError("The database's binary COPY rows are not one-dimensional bigint arrays without NULLs.",
                         Reason.UNREADABLE_INPUT)
    n = int(np.frombuffer(field, dtype=">i4", count=1, offset=12)[0])
    if len(field) != 20 + n * _ELEMENT.itemsize:
        raise InputError("The database's binary COPY array is not whole bigint elements.", Reason.UNREADABLE_INPUT)
    elements = np.frombuffer(field, dtype=_ELEMENT, count=n, offset=20)
    if n and not (elements["n"] == 8).all():
        raise InputError("The database's binary COPY array holds a NULL or a non-bigint element.",
                         Reason.UNREADABLE_INPUT)
    return elements["v"].astype(np.int64)
