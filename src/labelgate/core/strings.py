"""Arrow string columns whose values share one byte width: integer codes without hashing strings.

Ids of one width (``i0012345``, ``w01234``, pool names ``A`` / ``B``) are common, and with one width a row's
UTF-8 bytes are its identity: up to 8 bytes they pack into one ``uint64`` (zero-padded, injective because no
length is lost), and the column is coded with numpy alone, reading the Arrow buffers in place. This module owns
turning the values into bytes and keys; :mod:`labelgate.core.keycodes` codes the keys:

* values of 0-2 bytes — a lookup table on the bytes (:func:`codes_of_rows`: O(N), no sort, no hash);
* wider values — packed keys (:func:`fixed_width_keys`), coded by a binary search among a few distinct values, a
  table indexed by the few bits in which the keys differ, a vectorised hash table or one sort, whichever is
  cheapest (:func:`labelgate.core.keycodes.codes_of_keys`); equal keys are equal strings, so the grouping is
  exact, not probabilistic, and nothing is allocated by Arrow (whose memory pool keeps several times what it
  hands out).

Wider values of one width (9 to :data:`MAX_WINDOW_WIDTH` bytes: ``i13374872``, ``item-000123``) whose bytes vary
only inside one window of 8 bytes — the rest a prefix or suffix shared by every row, checked on every row
(:func:`window_keys`) — are keyed by that window and take the same routes. Short ASCII Python strings of one length
are keyed from their joined bytes (:func:`object_string_codes`).

Anything else — nulls, values of different widths, wider values that vary over more than 8 bytes (UUIDs) —
returns None and takes the general route of :func:`labelgate.core.columns.factorize`. numpy only: Arrow arrays are
read through their buffers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from labelgate.core.column import CodeArray, code_counts, code_type
from labelgate.core.keycodes import HEAD, codes_of_keys
from labelgate.core.sortcodes import BLOCK, varying_bits

IntArray = npt.NDArray[np.int64]
KeyArray = npt.NDArray[np.uint64]

#: Arrow string types and the bytes of one offset.
STRING_TYPES = {"string": 4, "utf8": 4, "large_string": 8, "large_utf8": 8}

#: The storages of pandas' ``StringDtype`` that hold an Arrow array: "pyarrow" (and, from pandas 3 on, the default
#: "str"); pandas 2.2 names its Arrow strings with NaN for missing, the forerunner of pandas 3's "str",
#: "pyarrow_numpy".
_ARROW_STORAGES = ("pyarrow", "pyarrow_numpy")

#: The widest values (bytes) coded from their bytes: one uint64 word. (Two words — each coded, then the pair of
#: codes — were tried: at 10^7 rows of 9-byte ids, slower than Arrow's hash, so not kept.)
MAX_WIDTH = 8

#: Wider values of one width are coded from their bytes when every byte outside one window of 8 bytes is the
#: same in every row (a constant prefix or suffix: ``i13374872``, ``item-000123``): the window is then the key.
MAX_WINDOW_WIDTH = 64

#: Python strings are turned into bytes this many at a time (:func:`object_block_keys`): the block's objects stay in
#: the cache from listing them to joining them to releasing them. Measured on 10^6 ids of 8 and of 6 characters
#: (medians of 25 interleaved runs): 23.8 and 21.6 ms a column in blocks of 2**14 against 30.2 and 27.6 ms for the
#: whole column at once; blocks of 2**12 and 2**16 gained too.
JOIN_BLOCK = 1 << 14


def arrow_strings(column: Any) -> Any:
    """The Arrow (large) string array behind ``column`` (pyarrow, or pandas with Arrow storage), else None."""
    dtype = getattr(column, "dtype", None)
    # pandas < 3 names its Arrow strings with NaN for missing (pandas 3's "str") storage "pyarrow_numpy"
    if getattr(dtype, "storage", None) in _ARROW_STORAGES or hasattr(dtype, "pyarrow_dtype"):
        to_arrow = getattr(getattr(column, "array", None), "__arrow_array__", None)
        array = to_arrow() if to_arrow is not None else None
    elif hasattr(column, "buffers") or hasattr(column, "chunks"):
        array = column
    else:
        return None
    return array if str(getattr(array, "type", "")) in STRING_TYPES else None


def _fixed_width_parts(array: Any, max_width: int = MAX_WIDTH) -> tuple[list[npt.NDArray[np.uint8]], int] | None:
    """The UTF-8 bytes of each chunk as an (n_chunk, width) view of its Arrow buffer (no copy), when every value
    of every chunk has one width of at most ``max_width`` bytes; None when a value is null or the widths
    differ or are too wide.
    """
    found = _fixed_width_chunks(array, max_width)
    if found is None:
        return None
    chunks, width = found
    return [data[first:first + n * width].reshape(n, width) for data, first, n in chunks], width


def _fixed_width_chunks(array: Any, max_width: int = MAX_WIDTH,
                        ) -> tuple[list[tuple[npt.NDArray[np.uint8], int, int]], int] | None:
    """As :func:`_fixed_width_parts`, each chunk as ``(data, first, n)``: its whole data buffer (with whatever
    padding follows the values), the byte where its values start, and their number."""
    offset_bytes = STRING_TYPES[str(array.type)]
    chunks, width = [], -1
    for chunk in getattr(array, "chunks", [array]):
        n = len(chunk)
        if n == 0:
            continue
        if chunk.null_count:
            return None
        _, offsets_buffer, data_buffer = chunk.buffers()
        offsets = np.frombuffer(offsets_buffer, dtype=np.int32 if offset_bytes == 4 else np.int64, count=n + 1,
                                offset=chunk.offset * offset_bytes)
        first, last = int(offsets[0]), int(offsets[-1])
        chunk_width = int(offsets[1]) - first
        if chunk_width > max_width or (width >= 0 and chunk_width != width) or last - first != chunk_width * n:
            return None
        width = chunk_width
        if width and not _even(offsets, width):
            return None
        data = np.frombuffer(data_buffer, dtype=np.uint8) if width else np.zeros(0, np.uint8)
        chunks.append((data, first, n))
    return (chunks, width) if chunks else None


def _even(offsets: npt.NDArray[Any], width: int) -> bool:
    """Whether consecutive offsets all differ by ``width``, checked block by block (no row-sized temporary)."""
    for start in range(0, offsets.size - 1, BLOCK):
        block = offsets[start:start + BLOCK + 1]
        if not (block[1:] - block[:-1] == width).all():
            return False
    return True


def fixed_width_bytes(array: Any, max_width: int = MAX_WIDTH) -> tuple[npt.NDArray[np.uint8], int] | None:
    """The UTF-8 bytes of every row as an (n, width) matrix, when all values share one width of at most
    ``max_width`` bytes.

    None when a value is null or the widths differ or are too wide.
    """
    found = _fixed_width_parts(array, max_width)
    if found is None:
        return None
    parts, width = found
    return (np.concatenate(parts) if len(parts) > 1 else parts[0]), width


def fixed_width_keys(array: Any) -> tuple[KeyArray, int] | None:
    """Every row packed into one ``uint64`` (:func:`packed`), written chunk by chunk: the bytes are not gathered
    into a matrix first, and a single chunk of 8-byte values is read in place (a view of its Arrow buffer).

    Narrower values are read as 8 bytes at each value's start (an unaligned strided view of the buffer, as far as
    the buffer reaches) with the bytes beyond the value masked off: one pass, no byte-by-byte copy.
    None as :func:`fixed_width_bytes`.
    """
    found = _fixed_width_chunks(array)
    if found is None:
        return None
    chunks, width = found
    if len(chunks) == 1 and width == 8:
        data, first, n = chunks[0]
        return packed(data[first:first + 8 * n].reshape(n, 8)), width
    keys = np.zeros(sum(n for _, _, n in chunks), dtype=np.uint64)
    start = 0
    for data, first, n in chunks:
        # rows whose 8 bytes lie inside the buffer are read in place; the last few, if the buffer ends sooner,
        # are copied byte by byte
        reach = 0 if width == 0 else min(n, max((data.size - first - 8) // width + 1, 0))
        if reach:
            keys_at_starts(data, first, reach, width, width, out=keys[start:start + reach])
        if reach < n:
            rest = data[first + reach * width:first + n * width].reshape(n - reach, width)
            keys[start + reach:start + n].view(np.uint8).reshape(-1, 8)[:, :width] = rest
        start += n
    return keys, width


def keys_at_starts(data: npt.NDArray[np.uint8], first: int, n: int, stride: int, width: int,
                   out: KeyArray | None = None) -> KeyArray:
    """The packed keys (:func:`packed`) of ``n`` values of ``width`` <= 8 bytes that start every ``stride`` bytes
    from byte ``first`` of ``data``: 8 bytes read at each start (an unaligned strided view, no copy; numpy refuses
    one that would pass the end of ``data``), the bytes beyond the value masked off."""
    at_starts: KeyArray = np.ndarray((n,), dtype=np.uint64, buffer=data, offset=first, strides=(stride,))
    mask = np.zeros(8, dtype=np.uint8)
    mask[:width] = 0xFF  # the value's bytes, in memory order: right on either byte order
    return np.bitwise_and(at_starts, mask.view(np.uint64)[0], out=out)


def window_keys(array: Any) -> KeyArray | None:
    """Every row of a column of one width ``w`` (8 < w <= :data:`MAX_WINDOW_WIDTH`) as the 8 bytes of one window,
    when the bytes outside that window are the same in every row; None otherwise.

    Which bytes vary is read from 8-byte words at offsets ``0, 8, ..., w - 8`` of every row (unaligned strided
    views of the Arrow buffer, no copy): the bitwise OR of ``word XOR word_of_row_0`` over all rows has a bit set
    exactly where some row differs from row 0. With every varying byte inside ``[s, s + 8)``, two rows are equal
    exactly when their windows are, so the window is an injective key (exact, like the narrow keys). The scan
    stops at the first word that puts the varying bytes more than 8 apart (long random ids such as UUIDs).
    """
    found = _fixed_width_parts(array, MAX_WINDOW_WIDTH)
    if found is None or found[1] <= MAX_WIDTH:
        return None
    return _window_of_parts(*found)


def stacked_codes(arrays: list[Any]) -> tuple[IntArray, IntArray] | None:
    """``(codes, first)`` of several Arrow string arrays stacked (the per-chunk dictionaries of Arrow's CSV reader),
    when all their values share one width that a byte route codes (:func:`codes_of_rows` up to 8 bytes, one
    varying window of 8 bytes above); None otherwise."""
    parts: list[npt.NDArray[np.uint8]] = []
    width = -1
    for array in arrays:
        found = _fixed_width_parts(array, MAX_WINDOW_WIDTH)
        if found is None or (width >= 0 and found[1] != width):  # nulls, or widths that differ
            return None
        parts.extend(found[0])
        width = found[1]
    if not parts:
        return None
    if width <= MAX_WIDTH:
        return codes_of_rows(np.concatenate(parts) if len(parts) > 1 else parts[0])
    keys = _window_of_parts(parts, width)
    return None if keys is None else codes_of_keys(keys, scratch=True)


def _window_of_parts(parts: list[npt.NDArray[np.uint8]], width: int) -> KeyArray | None:
    """:func:`window_keys` of the (n_chunk, width) byte views of the chunks."""
    reference = parts[0][0]  # the bytes of row 0
    low, high = width, -1  # the varying bytes seen so far: [low, high]
    for offset in sorted({min(start, width - 8) for start in range(0, width, 8)}):
        first_word = np.frombuffer(reference[offset:offset + 8].tobytes(), dtype=np.uint64)[0]
        varies = 0
        for part in parts:
            varies |= varying_bits(_words(part, offset), first_word)
        varying = np.flatnonzero(np.frombuffer(np.uint64(varies).tobytes(), dtype=np.uint8)) + offset
        if varying.size:
            low, high = min(low, int(varying[0])), max(high, int(varying[-1]))
        if high - low >= 8:
            return None
    start = min(max(low, 0), width - 8) if high >= 0 else 0
    keys = np.empty(sum(part.shape[0] for part in parts), dtype=np.uint64)
    row = 0
    for part in parts:
        keys[row:row + part.shape[0]] = _words(part, start)
        row += part.shape[0]
    return keys


def _words(part: npt.NDArray[np.uint8], offset: int) -> KeyArray:
    """The 8 bytes at ``offset`` of every row of an (n, width >= offset + 8) row view, as an unaligned uint64 view."""
    return np.ndarray((part.shape[0],), dtype=np.uint64, buffer=np.ascontiguousarray(part), offset=offset,
                      strides=(part.shape[1],))


def packed(rows: npt.NDArray[np.uint8]) -> KeyArray:
    """Each row of at most 8 bytes as one uint64 (zero-padded; injective for rows of one width).

    Rows of exactly 8 contiguous bytes are already the keys: a view, no copy.
    """
    if rows.shape[1] == 8 and rows.flags.c_contiguous:
        return rows.view(np.uint64).reshape(-1)
    key = np.zeros((rows.shape[0], 8), dtype=np.uint8)
    key[:, :rows.shape[1]] = rows
    return key.view(np.uint64).reshape(-1)


def fixed_width_codes(array: Any) -> tuple[IntArray, IntArray] | None:
    """``(codes, first)`` of an Arrow string column of one width (<= 8 bytes, or wider with one varying window of
    8 bytes): ``codes[j]`` groups equal values, ``first[c]`` is the first row of group ``c``; None when the column
    takes the general route (see the module).
    """
    head = fixed_width_bytes(array.slice(0, HEAD), MAX_WINDOW_WIDTH)  # the route, decided on the head
    if head is None:
        return None
    if head[1] > MAX_WIDTH:  # wider values: one window of 8 bytes, if the others never vary
        window = window_keys(array)
        return None if window is None else codes_of_keys(window, scratch=True)
    if head[1] <= 2:  # a lookup table on the bytes
        whole = fixed_width_bytes(array)
        return None if whole is None else codes_of_rows(whole[0])
    candidates = np.unique(packed(head[0]))  # few values or not
    keys = fixed_width_keys(array)
    if keys is None:
        return None
    # 8-byte values of one chunk are keyed in place (a view of the Arrow buffer, never written); others are copies
    in_place = keys[1] == 8 and sum(1 for chunk in getattr(array, "chunks", [array]) if len(chunk)) == 1
    return codes_of_keys(keys[0], candidates, scratch=not in_place)


def object_string_codes(values: np.ndarray) -> tuple[IntArray, IntArray] | None:
    """``(codes, first)`` of a 1-D object array of Python strings of one length, at most 8 ASCII characters.

    The strings are taken :data:`JOIN_BLOCK` at a time. A block is joined with NUL separators into one text
    (``str.join``: one C-level pass, which raises on any value that is not a ``str`` — bytes, numbers, None) and
    encoded as ASCII (which raises on any other character); its bytes are then an (m, width + 1) matrix whose last
    column must be all NUL and the others free of NUL. That layout holds exactly when every value has the first
    value's length and no NUL, so the (m, width) bytes are the values themselves, packed into keys and coded with
    no Python-level hash. None otherwise, at the first block that breaks the layout: the caller groups the objects
    by their Python hashes.
    """
    n = values.size
    if n == 0 or not isinstance(values[0], str) or len(values[0]) > 8:
        return None
    width = len(values[0])
    keys = np.empty(n, dtype=np.uint64)
    for begin in range(0, n, JOIN_BLOCK):
        m = min(JOIN_BLOCK, n - begin)
        if object_block_keys(values[begin:begin + m], width, keys[begin:begin + m]) is None:
            return None
    if width == 0:
        return np.zeros(n, dtype=np.int64), np.zeros(1, dtype=np.int64)
    if width <= 2:
        return codes_of_rows(keys.view(np.uint8).reshape(n, 8)[:, :width])
    return codes_of_keys(keys, scratch=True)


def object_block_keys(block: np.ndarray, width: int, out: KeyArray) -> KeyArray | None:
    """The packed keys (:func:`packed`) of a block of Python strings of ``width`` ASCII characters, written to
    ``out``; None when a value is not a ``str``, not ASCII, of another length or holds a NUL.

    A block's objects are visited three times (listed, joined, released): a block small enough to stay in the cache
    between the three passes makes them cheaper than three passes over the whole column (:data:`JOIN_BLOCK`).
    """
    m = block.size
    stride = width + 1
    strings = block.tolist()  # a list joins faster than the array
    strings.append("\x00" * 7)  # after the last value its separator and 7 NULs: every value can be read as 8 bytes
    try:
        text = "\x00".join(strings).encode("ascii")
    except (TypeError, UnicodeEncodeError):  # a value that is not a str, or not ASCII
        return None
    del strings
    # the layout holds when the text has the length of m values of this width and the padding, every NUL of it is
    # a separator or padding (its other bytes, counted, are m * width) and each separator lies where the layout
    # puts it (one strided read)
    if len(text) != m * stride + 7:
        return None
    buffer = np.frombuffer(text, dtype=np.uint8)  # read in place: the bytes object is not copied
    if np.count_nonzero(buffer) != m * width:
        return None
    if buffer[width:m * stride:stride].any():  # a separator elsewhere: values of other lengths
        return None
    # 8 bytes read at every value's start, the bytes beyond the value (its separator, the next value) masked off
    return keys_at_starts(buffer, 0, m, stride, width, out=out)


def codes_of_rows(rows: npt.NDArray[np.uint8]) -> tuple[CodeArray, IntArray]:
    """``(codes, first)`` of an (n, width <= 8) byte matrix: a lookup table on the bytes for widths up to 2 (codes
    in order of first appearance, of the narrowest type that holds them), else :func:`.keycodes.codes_of_keys` on
    the packed rows."""
    n, width = rows.shape
    if width > 2:
        return codes_of_keys(packed(rows))
    if width == 0:
        values: npt.NDArray[Any] = np.zeros(n, dtype=np.uint8)
    else:
        values = rows.reshape(-1) if width == 1 else np.ascontiguousarray(rows).view(np.uint16).reshape(-1)
    # the table maps each byte value to its code in order of first appearance: one gather, no renumbering pass
    distinct = np.flatnonzero(code_counts(values, 256 if width < 2 else 1 << 16))  # the bytes: read-only, narrow
    first = np.full(256 if width < 2 else 1 << 16, n, dtype=np.int64)
    head = min(n, HEAD)
    np.minimum.at(first, values[:head], np.arange(head, dtype=np.int64))
    if (first[distinct] == n).any():  # a value first seen after the head
        np.minimum.at(first, values[head:], np.arange(head, n, dtype=np.int64))
    order = distinct[np.argsort(first[distinct], kind="stable")]
    table = np.zeros(first.size, dtype=code_type(order.size))  # narrow codes: a byte a row for a few values
    table[order] = np.arange(order.size)
    return table[values], first[order]
