"""Arrow string columns whose values share one byte width: integer codes without hashing strings.

Ids of one width (``i0012345``, ``w01234``, pool names ``A`` / ``B``) are common, and with one width a row's
UTF-8 bytes are its identity: up to 8 bytes they pack into one ``uint64`` (zero-padded, injective because no
length is lost), and the column is coded with numpy alone, reading the Arrow buffers in place:

* values of 0-2 bytes — a lookup table on the bytes (O(N), no sort, no hash);
* a few distinct values (at most :data:`FEW_VALUES` in the column's head) — a binary search among them, every
  row verified against the value found;
* many distinct values — a vectorised open-addressing hash table on the packed keys (:func:`hash_codes`):
  every round places the keys of the pending rows in their slots and moves the rows whose slot holds another
  key to the next slot; equal keys are equal strings, so the grouping is exact, not probabilistic.

Anything else — nulls, values of different widths or wider than 8 bytes, a column with few distinct ids (the
library's own hash is then faster than ours: its table stays in cache) — returns None and takes the general
route of :func:`labelgate.core.columns.factorize`. numpy only: Arrow arrays are read through their buffers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
KeyArray = npt.NDArray[np.uint64]

#: Arrow string types and the bytes of one offset.
STRING_TYPES = {"string": 4, "utf8": 4, "large_string": 8, "large_utf8": 8}

#: Up to this many distinct values in the head, a wide column is coded by a binary search among them.
FEW_VALUES = 64

#: Rows of the head whose distinct values decide between the few-values and the hash route.
HEAD = 4096

#: Rows read first: they decide the route (width, nulls) and size the hash table.
SAMPLE = 1 << 16

#: The vectorised hash pays off when the distinct values are at least this share of the rows (a big table);
#: with fewer, a compiled hash table stays in cache and is faster.
HASH_MIN_SHARE = 1 / 16

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: multiply, keep the high bits


def arrow_strings(column: Any) -> Any:
    """The Arrow (large) string array behind ``column`` (pyarrow, or pandas with Arrow storage), else None."""
    dtype = getattr(column, "dtype", None)
    if getattr(dtype, "storage", None) == "pyarrow" or hasattr(dtype, "pyarrow_dtype"):
        to_arrow = getattr(getattr(column, "array", None), "__arrow_array__", None)
        array = to_arrow() if to_arrow is not None else None
    elif hasattr(column, "buffers") or hasattr(column, "chunks"):
        array = column
    else:
        return None
    return array if str(getattr(array, "type", "")) in STRING_TYPES else None


def fixed_width_bytes(array: Any) -> tuple[npt.NDArray[np.uint8], int] | None:
    """The UTF-8 bytes of every row as an (n, width) matrix, when all values share one width of at most 8 bytes.

    None when a value is null or the widths differ or exceed 8 bytes.
    """
    offset_bytes = STRING_TYPES[str(array.type)]
    parts, width = [], -1
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
        if chunk_width > 8 or (width >= 0 and chunk_width != width) or last - first != chunk_width * n:
            return None
        width = chunk_width
        if width and not (np.diff(offsets) == width).all():
            return None
        data = np.frombuffer(data_buffer, dtype=np.uint8, count=last)[first:] if width else np.zeros(0, np.uint8)
        parts.append(data.reshape(n, width))
    if not parts:
        return None
    return (np.concatenate(parts) if len(parts) > 1 else parts[0]), width


def packed(rows: npt.NDArray[np.uint8]) -> KeyArray:
    """Each row of at most 8 bytes as one uint64 (zero-padded; injective for rows of one width)."""
    key = np.zeros((rows.shape[0], 8), dtype=np.uint8)
    key[:, :rows.shape[1]] = rows
    return key.view(np.uint64).reshape(-1)


def fixed_width_codes(array: Any) -> tuple[IntArray, IntArray] | None:
    """``(codes, first)`` of an Arrow string column of one width (<= 8 bytes): ``codes[j]`` groups equal values,
    ``first[c]`` is the first row of group ``c``; None when the column takes the general route (see the module).
    """
    n = len(array)
    head = fixed_width_bytes(array.slice(0, SAMPLE))
    if head is None:
        return None
    candidates, bits = None, None
    if head[1] > 2:  # the route is chosen on the head, before the whole column is read
        sample = packed(head[0])
        candidates = np.unique(sample[:HEAD])
        if candidates.size > FEW_VALUES:
            bits = table_bits(sample, n, HASH_MIN_SHARE)
            if bits is None:
                return None
    whole = fixed_width_bytes(array)
    if whole is None:
        return None
    return codes_of_rows(whole[0], candidates, bits, HASH_MIN_SHARE)


def object_string_codes(values: np.ndarray) -> tuple[IntArray, IntArray] | None:
    """``(codes, first)`` of a 1-D object array of Python strings of one length, at most 8 ASCII characters.

    The strings become an (n, width) byte matrix through numpy's fixed-width bytes type, with no Python-level
    hash; the checks keep it exact: every value is a ``str`` (numbers or bytes would convert too), ASCII (else
    the conversion raises), and every converted value — one byte wider than the first, so that a longer value
    is not cut to the width — has exactly the first value's length (a shorter value, or one ending with NUL,
    which the fixed-width type drops, shows fewer bytes). None otherwise: the caller groups the objects by their
    Python hashes.
    """
    n = values.size
    if n == 0 or type(values[0]) is not str or len(values[0]) > 8:
        return None
    width = len(values[0])
    if set(map(type, values[:HEAD])) != {str} or set(map(type, values)) != {str}:  # the head: told cheaply
        return None
    try:
        data = values.astype(f"S{width + 1}")
    except UnicodeEncodeError:  # not ASCII
        return None
    if (np.strings.str_len(data) != width).any():
        return None
    if width == 0:
        return np.zeros(n, dtype=np.int64), np.zeros(1, dtype=np.int64)
    return codes_of_rows(data.view(np.uint8).reshape(n, width + 1)[:, :width])


def codes_of_rows(rows: npt.NDArray[np.uint8], candidates: KeyArray | None = None, bits: int | None = None,
                  min_share: float = 0.0) -> tuple[IntArray, IntArray] | None:
    """``(codes, first)`` of an (n, width <= 8) byte matrix: a lookup table for widths up to 2, a search among
    ``candidates`` (the head's distinct keys) when they are few, else the hash (``bits``: its size, if known;
    None when the distinct rows are estimated below ``min_share`` of them)."""
    n, width = rows.shape
    if candidates is None and width > 2:
        candidates = np.unique(packed(rows[:HEAD]))
    if width <= 2:
        if width == 0:
            values: npt.NDArray[Any] = np.zeros(n, dtype=np.uint8)
        else:
            values = rows.reshape(-1) if width == 1 else np.ascontiguousarray(rows).view(np.uint16).reshape(-1)
        present = np.bincount(values, minlength=256) > 0
        codes = (np.cumsum(present, dtype=np.int64) - 1)[values]
        return codes, first_rows(codes, int(np.count_nonzero(present)))
    keys = packed(rows)
    if bits is None and candidates is not None and candidates.size <= FEW_VALUES:
        codes = np.minimum(np.searchsorted(candidates, keys), candidates.size - 1).astype(np.int64)
        if np.array_equal(candidates[codes], keys):
            return codes, first_rows(codes, candidates.size)
        # a value the head did not show: more values than it suggested
    if bits is None:
        bits = table_bits(keys[:SAMPLE], n, min_share)
        if bits is None:
            return None
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


def table_bits(sample: KeyArray, n: int, min_share: float) -> int | None:
    """log2 of the hash table's size for ``n`` keys (about twice the distinct ones), or None when the distinct
    keys are estimated below ``min_share`` of the rows (another hash is then faster).

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
    if estimate < min_share * n:
        return None
    return max(int(2 * estimate - 1).bit_length(), 10)


def hash_codes(keys: KeyArray, bits: int) -> tuple[IntArray, IntArray]:
    """``(codes, first)`` of the keys by a vectorised hash table of ``2**bits`` slots (grown when too full).

    Codes follow the order of first appearance; ``first[c]`` is the first row of code ``c``. Exact: a slot
    holds one key, and a row joins a slot only when its key equals the slot's.
    """
    while True:
        slot = _slots(keys, bits)
        if slot is not None:
            break
        bits += 1
    n, size = keys.size, 1 << bits
    rows = np.arange(n, dtype=np.int64)
    first_of_slot = np.full(size, n, dtype=np.int64)
    first_of_slot[slot[::-1]] = rows[::-1]  # the earliest row of a slot, if the last write wins ...
    if not (first_of_slot[slot] <= rows).all():  # ... which numpy does not promise: then the exact reduction
        first_of_slot.fill(n)
        np.minimum.at(first_of_slot, slot, rows)
    used = np.flatnonzero(first_of_slot < n)
    by_row = np.full(n, -1, dtype=np.int64)  # a counting sort of the slots by their first row (distinct rows)
    by_row[first_of_slot[used]] = used
    order = by_row[by_row >= 0]
    code_of_slot = np.empty(size, dtype=np.int64)
    code_of_slot[order] = np.arange(order.size, dtype=np.int64)
    return code_of_slot[slot], first_of_slot[order]


def _slots(keys: KeyArray, bits: int) -> npt.NDArray[np.intp] | None:
    """The slot of every key in a linear-probing table of ``2**bits`` slots; None once it is over half full.

    Keys of fewer than 8 bytes never have their top byte set, so an empty slot holds the all-ones key; for
    8-byte keys a separate mask marks the taken slots.
    """
    size = 1 << bits
    mask = size - 1
    empty = np.uint64(0xFFFFFFFFFFFFFFFF)
    position = ((keys * _GOLDEN) >> np.uint64(64 - bits)).astype(np.intp)
    table = np.full(size, empty, dtype=np.uint64)
    taken = None if not (keys == empty).any() else np.zeros(size, dtype=bool)
    slot = position  # most rows keep the slot their hash names
    pending: npt.NDArray[np.intp] | None = None  # rows still looking for their slot (None: every row)
    pending_keys = keys
    while True:
        free = table[position] == empty if taken is None else ~taken[position]
        table[position[free]] = pending_keys[free]  # one of the keys aimed at a free slot takes it
        if taken is not None:
            taken[position[free]] = True
        same = table[position] == pending_keys
        if pending is not None:
            slot[pending[same]] = position[same]
        miss = np.flatnonzero(~same)
        if miss.size == 0:
            return slot
        occupied = np.count_nonzero(table != empty) if taken is None else np.count_nonzero(taken)
        if 2 * occupied > size:
            return None
        if pending is None:
            slot = position.copy()
        pending = miss if pending is None else pending[miss]
        pending_keys = pending_keys[miss]
        position = (position[miss] + 1) & mask
