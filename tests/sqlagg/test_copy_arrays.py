"""The counts copied as a few rows of arrays (``labelgate.sqlagg.pgarrays``): the same rows as the row-per-result copy.

The parser is checked on synthetic binary copy streams (any cut into blocks; malformed streams refused), and, with
``LABELGATE_TEST_POSTGRES_URL``, against PostgreSQL: the same rows as :func:`~labelgate.sqlagg.pgcopy.copy_int64`.
"""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest

from labelgate.errors import InputError
from labelgate.sqlagg.pgarrays import BUCKETS, arrays_of

HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)


def array(values: list[int], oid: int = 20, null: bool = False) -> bytes:
    body = struct.pack(">iiiii", 1, int(null), oid, len(values), 1)
    body += b"".join(struct.pack(">iq", 8, v) for v in values)
    return struct.pack(">i", len(body)) + body


def stream(rows: list[list[list[int]]]) -> bytes:
    out = HEADER
    for row in rows:
        out += struct.pack(">h", len(row)) + b"".join(array(column) for column in row)
    return out + b"\xff\xff"


def cut(data: bytes, n: int, seed: int) -> list[bytes]:
    cuts = sorted(np.random.default_rng(seed).choice(np.arange(1, len(data)), n, replace=False).tolist())
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


ROWS = [[[5, -3, 2**40], [1, 2, 3], [0, 0, 7]], [[9], [4], [1]], [[11, 12], [-1, 6], [2, 2]]]
EXPECTED = np.array([[5, 1, 0], [-3, 2, 0], [2**40, 3, 7], [9, 4, 1], [11, -1, 2], [12, 6, 2]], dtype=np.int64)


@pytest.mark.parametrize("pieces", [0, 1, 7, 40])
def test_rows_of_arrays_are_stacked_however_the_stream_is_cut(pieces):
    data = stream(ROWS)
    blocks = cut(data, pieces, pieces) if pieces else [data]
    assert np.array_equal(arrays_of(blocks, 3), EXPECTED)


@pytest.mark.parametrize("broken", ["truncated", "no_trailer", "width", "null_array", "element_type", "lengths",
                                    "null_element"])
def test_a_malformed_stream_is_refused(broken):
    data = stream(ROWS)
    if broken == "truncated":
        data = data[:-7]
    elif broken == "no_trailer":
        data = data[:-2]
    elif broken == "width":
        data = stream([[[1], [2]]])
    elif broken == "null_array":
        data = HEADER + struct.pack(">hi", 3, -1) + array([1]) + array([1]) + b"\xff\xff"
    elif broken == "element_type":
        data = HEADER + struct.pack(">h", 3) + array([1], oid=23) + array([1]) + array([1]) + b"\xff\xff"
    elif broken == "lengths":
        data = stream([[[1, 2], [1], [1, 2]]])
    else:  # an element of length -1 (NULL)
        body = struct.pack(">iiiii", 1, 1, 20, 1, 1) + struct.pack(">i", -1)
        data = HEADER + struct.pack(">h", 3) + struct.pack(">i", len(body)) + body + array([1]) + array([1])
        data += b"\xff\xff"
    with pytest.raises(InputError, match="binary COPY"):
        arrays_of([data], 3)


def test_the_copy_of_arrays_equals_the_copy_of_rows_on_postgresql():
    url = os.environ.get("LABELGATE_TEST_POSTGRES_URL")
    if not url:
        pytest.skip("LABELGATE_TEST_POSTGRES_URL is not set")
    pytest.importorskip("psycopg", reason="the PostgreSQL tests need the psycopg driver")
    sa = pytest.importorskip("sqlalchemy")
    from labelgate.sqlagg.pgarrays import copy_int64_arrays
    from labelgate.sqlagg.pgcopy import copy_int64

    g = sa.literal_column("g")
    query = (sa.select(g.label("i"), (g * 3 % 7).label("a"), (g % 5).label("b"))
             .select_from(sa.text("generate_series(-500, 20000) AS g")).where(g != sa.bindparam("skip", 17)))
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            rows = copy_int64(conn, query, 3)
            arrays = copy_int64_arrays(conn, query, 3, 0)
    finally:
        engine.dispose()
    assert arrays.shape == rows.shape == (20500, 3)
    assert np.array_equal(arrays[np.argsort(arrays[:, 0])], rows[np.argsort(rows[:, 0])])
    assert BUCKETS == 256


def fixed_rows(rows: list[list[int]]) -> bytes:
    """A binary copy stream of rows of bigint fields (as :func:`~labelgate.sqlagg.pgcopy.rows_of` reads)."""
    body = b"".join(struct.pack(">h", len(row)) + b"".join(struct.pack(">iq", 8, v) for v in row) for row in rows)
    return HEADER + body + b"\xff\xff"


@pytest.mark.parametrize("parser", ["rows", "arrays"])
@pytest.mark.parametrize("broken", ["signature", "header_only", "after_trailer", "trailer_only_short"])
def test_both_copy_parsers_refuse_a_malformed_frame(parser, broken):
    # one framing (pgcopy.framed) for the row-per-result copy and the copy of arrays: the same refusals
    from labelgate.sqlagg.pgcopy import rows_of

    data = stream(ROWS) if parser == "arrays" else fixed_rows([[1, 2, 3], [4, 5, 6]])
    parse = (lambda blocks: arrays_of(blocks, 3)) if parser == "arrays" else (lambda blocks: rows_of(blocks, 3))
    assert parse(cut(data, 5, 1)).shape[1] == 3
    assert parse([HEADER + b"\xff\xff"]).shape == (0, 3)  # no rows
    match = {"signature": "signature", "header_only": "before its header"}.get(broken, "trailer")
    if broken == "signature":
        data = b"PGCOPY\n\xff\r\n\x01" + data[11:]
    elif broken == "header_only":
        data = HEADER[:-3]
    elif broken == "after_trailer":
        data += b"\x00"
    else:  # the trailer cut in half
        data = data[:-1]
    with pytest.raises(InputError, match=match):
        parse(cut(data, 3, 2))
