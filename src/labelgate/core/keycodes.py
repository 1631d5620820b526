"""Integer codes of packed ``uint64`` keys: equal keys get one code, in order of first appearance.

The keys are a column's values packed into one word each (:mod:`labelgate.core.strings` makes them from the bytes
of string ids); equal keys are equal values, so every route is exact. The route is the cheapest the keys allow
(:func:`codes_of_keys`):

* a few distinct values (at most :data:`FEW_VALUES` in the head) — a binary search among them, every row verified
  against the value found;
* keys that differ in few bits (ids of a fixed layout: ``w01234`` varies in 16 bits) — those bits, gathered side
  by side, index a table directly (:func:`direct_codes`): no hash, no probing;
* more distinct values otherwise — a vectorised open-addressing hash table (:func:`hash_codes`): every round places
  the keys of the pending rows in their slots and moves the rows whose slot holds another key to the next slot.
  Slots and row numbers are int32 and intermediates are dropped as soon as used: the peak is a few bytes per row;
* so many distinct values that the hash table outgrows the cache (:data:`SORT_BITS`) — one sort of words that hold
  the bits in which keys differ above the row number (:mod:`labelgate.core.sortcodes`), when they fit 64 bits.

numpy only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from labelgate.core.sortcodes import BLOCK, IntArray, KeyArray, gather_bits, sorted_codes, varying_runs

#: Up to this many distinct values in the head, a wide column is coded by a binary search among them.
FEW_VALUES = 64

#: Rows of the head: they decide the route (width, nulls) and, by their distinct values, whether the values are few.
HEAD = 4096

#: Rows whose distinct keys size the hash table (:func:`table_bits`).
SAMPLE = 1 << 16

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

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: multiply, keep the high bits


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
