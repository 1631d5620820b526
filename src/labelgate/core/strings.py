"""Arrow string columns whose values share one byte width: integer codes without hashing strings.

Ids of one width (``i0012345``, ``w01234``, pool names ``A`` / ``B``) are common, and with one width a row's
UTF-8 bytes are its identity: up to 8 bytes they pack into one ``uint64`` (zero-padded, injective because no
length is lost), and the column is coded with numpy alone, reading the Arrow buffers in place:

* values of 0-2 bytes — a lookup table on the bytes (O(N), no sort, no hash);
* a few distinct values (at most :data:`FEW_VALUES` in the column's head) — a binary search among them, every
  row verified against the value found;
* more distinct values that differ in few bits (ids of a fixed layout: ``w01234`` varies in 16 bits) — those bits,
  gathered side by side, index a table directly (:func:`direct_codes`): no hash, no probing;
* more distinct values otherwise — a vectorised open-addressing hash table on the packed keys (:func:`hash_codes`):
  every round places the keys of the pending rows in their slots and moves the rows whose slot holds another
  key to the next slot; equal keys are equal strings, so the grouping is exact, not probabilistic. Slots and
  row numbers are int32 and intermediates are dropped as soon as used: the peak is a few bytes per row, and
  nothing is allocated by Arrow (whose memory pool keeps several times what it hands out);
* so many distinct values that the hash table outgrows the cache (:data:`SORT_BITS`) — one sort of words that hold
  the bits in which keys differ above the row number (:mod:`labelgate.core.sortcodes`), when they fit 64 bits.

Wider values of one width (9 to :data:`MAX_WINDOW_WIDTH` bytes: ``i13374872``, ``item-000123``) whose bytes vary
only inside one window of 8 bytes — the rest a prefix or suffix shared by every row, checked on every row
(:func:`window_keys`) — are keyed by that window and take the same routes.

Anything else — nulls, values of different widths, wider values that vary over more than 8 bytes (UUIDs) —
returns None and takes the general route of :func:`labelgate.core.columns.factorize`. numpy only: Arrow arrays are
read through their buffers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from labelgate.core.column import CodeArray, code_counts, code_type
from labelgate.core.sortcodes import BLOCK, gather_bits, sorted_codes, varying_bits, varying_runs

IntArray = npt.NDArray[np.int64]
KeyArray = npt.NDArray[np.uint64]

#: Arrow string types and the bytes of one offset.
STRING_TYPES = {"string": 4, "utf8": 4, "large_string": 8, "large_utf8": 8}

#: The storages of pandas' ``StringDtype`` that hold an Arrow array: "pyarrow" (and, from pandas 3 on, the default
#: "str"); pandas 2.2 names its Arrow strings with NaN for missing, the forerunner of pandas 3's "str",
#: "pyarrow_numpy".
_ARROW_STORAGES = ("pyarrow", "pyarrow_numpy")

#: Up to this many distinct values in the head, a wide column is coded by a binary search among them.
FEW_VALUES = 64

#: Rows of the head: they decide the route (width, nulls) and, by their distinct values, whether the values are few.
HEAD = 4096

#: Rows whose distinct keys size the hash table (:func:`table_bits`).
SAMPLE = 1 << 16

#: The widest values (bytes) coded from their bytes: one uint64 word. (Two words — each coded, then the pair of
#: codes — were tried: at 10^7 rows of 9-byte ids, slower than Arrow's hash, so not kept.)
MAX_WIDTH = 8

#: Wider values of one width are coded from their bytes when every byte outside one window of 8 bytes is the
#: same in every row (a constant prefix or suffix: ``i13374872``, ``item-000123``): the window is then the key.
MAX_WINDOW_WIDTH = 64

#: Above a hash table of ``2**SORT_BITS`` slots (8 bytes each: 4 MiB, four times a core's L2 cache here), keys are coded
#: by one sort when they fit (:mod:`.sortcodes`): each pass of the hash is then a cache miss per row. Measured at
#: 10^7 rows of 1.7·10^6 distinct 9-byte ids (2·10^6 slots): the hash 1.6–2.1 s of CPU, the sort 0.6–0.8 s.
SORT_BITS = 19

#: Up to 2**20 rows the sort is cheaper from a table of 2**18 slots (2 MiB) on: 14 ms against 19 ms of CPU for
#: 334,000 rows of 111,000 distinct 8-byte ids; at 2·10^6 rows and 2**19 slots the two were equal.
SMALL_SORT_BITS, SMALL_SORT_ROWS = 17, 1 << 20


#: Keys that differ in at most this many bits are coded by a table indexed by those bits (:func:`direct_codes`)
#: when the table is no larger than the rows, or than ``2**DIRECT_FREE_BITS`` slots: no hash, no probing, no sort.
#: Measured on 334,000 rows of 10^4 distinct ids ``w01234`` (16 varying bits): 4.0 ms of CPU against 6.4 ms for
#: the hash; on 10^6 rows, 10.9 against 17.7 ms.
DIRECT_BITS, DIRECT_FREE_BITS = 24, 16

#: Python strings are turned into bytes this many at a time (:func:`object_block_keys`): the block's objects stay in
#: the cache from listing them to joining them to releasing them. Measured on 10^6 ids of 8 and of 6 characters
#: (medians of 25 interleaved runs): 23.8 and 21.6 ms a column in blocks of 2**14 against 30.2 and 27.6 ms for the
#: whole column at once; blocks of 2**12 and 2**16 gained too.
JOIN_BLOCK = 1 << 14

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: multiply, keep the high bits


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
    in order of first appearance, of the narrowest type that holds them), else :func:`codes_of_keys` on the packed
    rows."""
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


def codes_of_keys(keys: KeyArray, candidates: KeyArray | None = None, bits: int | None = None, *,
                  scratch: bool = False) -> tuple[IntArray, IntArray]:
    """``(codes, first)`` of packed keys: a search among ``candidates`` (the head's distinct keys) when they are
    few; else the bits in which keys differ index a table directly when they are few (:func:`direct_codes`);
    else the hash (``bits``: its size, if known), or one sort (:func:`.sortcodes.sorted_codes`) when the hash
    table would outgrow the cache (:data:`SORT_BITS`, :data:`SMALL_SORT_BITS`) and the keys differ in few enough
    bits.

    ``scratch``: ``keys`` is the caller's own copy, which the sort may overwrite.
    """
    n = keys.size
    if candidates is None:
        candidates = np.unique(keys[:HEAD])
    if bits is None and candidates.size <= FEW_VALUES:
        codes = np.searchsorted(candidates, keys).astype(np.int64, copy=False)
        np.minimum(codes, candidates.size - 1, out=codes)
        if np.array_equal(candidates[codes], keys):
            return codes, first_rows(codes, candidates.size)
        del codes  # a value the head did not show: more values than it suggested
    runs = varying_runs(keys) if n else []
    varying = sum(length for _, length in runs)
    if varying <= DIRECT_BITS and 1 << varying <= max(n, 1 << DIRECT_FREE_BITS):
        return direct_codes(keys, runs)
    if bits is None:
        bits = table_bits(keys[:SAMPLE], n)
    if bits > SORT_BITS or (bits > SMALL_SORT_BITS and n <= SMALL_SORT_ROWS):
        found = sorted_codes(keys, overwrite=scratch, runs=runs)
        if found is not None:
            return found
    return hash_codes(keys, bits)


def first_rows(codes: IntArray, k: int) -> IntArray:
    """The first row of each of the ``k`` codes (every code occurs); a head of the rows usually settles them."""
    n = codes.size
    first = np.full(k, n, dtype=np.int64)
    head = min(n, HEAD)
    np.minimum.at(first, codes[:head], np.arange(head, dtype=np.int64))
    if (first == n).any():  # a value first seen after the head
        np.minimum.at(first, codes[head:], np.arange(head, n, dtype=np.int64))
    return first


def table_bits(sample: KeyArray, n: int) -> int:
    """log2 of the hash table's size for ``n`` keys (about twice the distinct ones, at least 2**10 slots).

    The number of distinct keys is estimated from ``sample``, the first rows (Chao's estimator,
    ``seen + f1^2 / (2 f2)`` from the keys seen once and twice); an underestimate only costs a rebuild
    (:func:`hash_codes` doubles the table until it is at most half full).
    """
    _, counts = np.unique(sample, return_counts=True)
    seen = counts.size
    if sample.size >= n:
        estimate = float(seen)
    else:
        once, twice = int(np.count_nonzero(counts == 1)), int(np.count_nonzero(counts == 2))
        estimate = seen + (once * once / (2.0 * twice) if twice else once * (once - 1) / 2.0)
    estimate = min(estimate, float(n))
    return max(int(2 * estimate - 1).bit_length(), 10)


def hash_codes(keys: KeyArray, bits: int) -> tuple[npt.NDArray[np.signedinteger[Any]], IntArray]:
    """``(codes, first)`` of the keys by a vectorised hash table of ``2**bits`` slots (grown when too full).

    Codes follow the order of first appearance; ``first[c]`` is the first row of code ``c``. Exact: a slot
    holds one key, and a row joins a slot only when its key equals the slot's. Slots, rows and the codes are
    int32 while they fit (the caller widens the codes once the keys are dropped), row-sized temporaries are
    made block by block and every intermediate is dropped as soon as it is used: the peak is a few bytes a row.
    """
    while True:
        slot = _slots(keys, bits)
        if slot is not None:
            break
        bits += 1
    return slot_codes(slot, 1 << bits)


def direct_codes(keys: KeyArray, runs: list[tuple[int, int]],
                 ) -> tuple[npt.NDArray[np.signedinteger[Any]], IntArray]:
    """``(codes, first)`` of keys that differ in few bits (``runs``, :func:`.sortcodes.varying_runs`): those bits,
    gathered side by side, are the key's slot in a table of ``2**bits`` slots, with no hash and no probing.

    Exact: two keys are equal exactly when their varying bits are. Ids of a fixed layout differ in few bits
    (``w01234``: four digits of 4 varying bits each, a table of 2**16 slots).
    """
    size = 1 << sum(length for _, length in runs)
    slot: npt.NDArray[np.signedinteger[Any]] = np.empty(keys.size, dtype=np.int32 if max(size, keys.size) < 2**31
                                                          else np.int64)
    gather_bits(keys, runs, slot)
    return slot_codes(slot, size)


def slot_codes(slot: npt.NDArray[np.signedinteger[Any]], size: int,
               ) -> tuple[npt.NDArray[np.signedinteger[Any]], IntArray]:
    """``(codes, first)`` from each row's slot in a table of ``size`` slots (one slot a distinct key): the slots
    numbered in order of their first row, codes of the slot's integer type."""
    n, index = slot.size, slot.dtype
    first_of_slot = np.full(size, n, dtype=index)
    for block in reversed(_blocks(n)):  # the earliest row of a slot, if the last write wins ...
        first_of_slot[slot[block][::-1]] = np.arange(block.stop - 1, block.start - 1, -1, dtype=index)
    if not all((first_of_slot[slot[block]] <= np.arange(block.start, block.stop, dtype=index)).all()
               for block in _blocks(n)):  # ... which numpy does not promise: then the exact reduction
        first_of_slot.fill(n)
        np.minimum.at(first_of_slot, slot, np.arange(n, dtype=index))
    used = np.flatnonzero(first_of_slot < n)
    if used.size * 16 < n:  # few values: sort their first rows
        order = used[np.argsort(first_of_slot[used])]
    else:  # many: a counting sort of the slots by their first row (distinct rows)
        by_row = np.full(n, -1, dtype=index)
        by_row[first_of_slot[used]] = used
        order = by_row[by_row >= 0]
        del by_row
    del used
    first = first_of_slot[order].astype(np.int64)
    del first_of_slot
    code_of_slot = np.empty(size, dtype=index)
    code_of_slot[order] = np.arange(order.size, dtype=index)
    return code_of_slot[slot], first


def _blocks(n: int) -> list[slice]:
    """Consecutive slices of at most :data:`BLOCK` rows covering ``range(n)``."""
    return [slice(start, min(start + BLOCK, n)) for start in range(0, n, BLOCK)]


def _slots(keys: KeyArray, bits: int) -> npt.NDArray[np.signedinteger[Any]] | None:
    """The slot of every key in a linear-probing table of ``2**bits`` slots; None once it is over half full.

    Keys of fewer than 8 bytes never have their top byte set, so an empty slot holds the all-ones key; for
    8-byte keys a separate mask marks the taken slots. Slots are int32 while the table and the rows fit.
    """
    size = 1 << bits
    mask = size - 1
    index = np.dtype(np.int32 if max(size, keys.size) < 2**31 else np.int64)
    empty = np.uint64(0xFFFFFFFFFFFFFFFF)
    shift = np.uint64(64 - bits)
    position: npt.NDArray[np.signedinteger[Any]] = np.empty(keys.size, dtype=index)
    for block in _blocks(keys.size):  # Fibonacci hashing, block by block: no row-sized uint64 temporary
        position[block] = (keys[block] * _GOLDEN) >> shift
    table = np.full(size, empty, dtype=np.uint64)
    taken = None if not (keys == empty).any() else np.zeros(size, dtype=bool)
    # the first round: every slot is free, and one of the keys aimed at a slot takes it
    table[position] = keys
    if taken is not None:
        taken[position] = True
    same = np.empty(keys.size, dtype=bool)
    for block in _blocks(keys.size):
        np.equal(table[position[block]], keys[block], out=same[block])
    slot = position  # most rows keep the slot their hash names; ``position`` is rebound, never written, below
    pending: npt.NDArray[np.intp] | None = None  # rows still looking for their slot (None: every row)
    pending_keys = keys
    while True:
        if pending is not None:
            free = table[position] == empty if taken is None else ~taken[position]
            table[position[free]] = pending_keys[free]
            if taken is not None:
                taken[position[free]] = True
            same = table[position] == pending_keys
            slot[pending[same]] = position[same]
        miss = np.flatnonzero(~same)
        del same
        if miss.size == 0:
            return slot
        occupied = np.count_nonzero(table != empty) if taken is None else np.count_nonzero(taken)
        if 2 * occupied > size:
            return None
        pending = miss if pending is None else pending[miss]
        pending_keys = pending_keys[miss]
        position = (position[miss] + 1) & mask
