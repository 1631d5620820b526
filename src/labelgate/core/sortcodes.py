"""Many distinct packed keys coded by one sort of ``(key bits, row)`` words instead of a hash table.

A hash table of 10^6 or more distinct keys outgrows the CPU caches, and every pass of a vectorised hash (place the
keys, check them, the first row of each slot, the code of each slot) is then a random access to main memory per
row. One sort is cache-friendly. What it needs is the row travelling with its key, and both fit one ``uint64``
when the bits in which the keys differ are few: ids of a fixed layout (``i13374872``: eight digits, 4 varying bits
each) differ in 32 bits, and 10^7 rows need 24 bits.

Exact, like the hash: a bit in which two keys differ is a bit in which one of them differs from the first key, so
the OR of ``key XOR first key`` over all rows marks every bit that can tell keys apart; keys are equal exactly when
those bits are. They are gathered (a software ``pext``: one shift and mask per run of marked bits) above the row
number; the words are distinct, so an unstable sort orders them by key, then row. numpy only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
KeyArray = npt.NDArray[np.uint64]

#: Rows per block when a row-sized temporary is made block by block (its temporaries stay in the cache).
BLOCK = 1 << 16


def varying_bits(words: KeyArray, reference: np.uint64) -> int:
    """The bits in which some word differs from ``reference``: the OR of ``word XOR reference``, block by block."""
    varies = np.uint64(0)
    for start in range(0, words.size, BLOCK):
        varies |= np.bitwise_or.reduce(words[start:start + BLOCK] ^ reference)
    return int(varies)


def varying_runs(keys: KeyArray) -> list[tuple[int, int]]:
    """The runs ``(first bit, length)`` of the bits in which some key differs from ``keys[0]`` (low bits first)."""
    mask, runs, bit = varying_bits(keys, keys[0]), [], 0
    while mask >> bit:
        if (mask >> bit) & 1:
            low = bit
            while (mask >> bit) & 1:
                bit += 1
            runs.append((low, bit - low))
        else:
            bit += 1
    return runs


def merged_runs(runs: list[tuple[int, int]], room: int) -> list[tuple[int, int]]:
    """``runs`` with the narrowest gaps between neighbours closed while their total length stays within ``room``
    bits: fewer runs to gather (each costs three passes over the keys). A gap's bits are the same in every key, so
    the merged runs tell keys apart exactly as the runs do, and order them alike.

    Examples
    --------
    >>> merged_runs([(0, 4), (8, 4), (16, 4), (40, 4)], 24)  # the 4-bit gaps closed; the 20-bit one stays
    [(0, 20), (40, 4)]
    """
    merged = list(runs)
    total = sum(length for _, length in merged)
    while len(merged) > 1:
        gaps = [merged[k + 1][0] - (merged[k][0] + merged[k][1]) for k in range(len(merged) - 1)]
        k = min(range(len(gaps)), key=gaps.__getitem__)
        if total + gaps[k] > room:
            break
        total += gaps[k]
        merged[k:k + 2] = [(merged[k][0], merged[k + 1][0] + merged[k + 1][1] - merged[k][0])]
    return merged


def gather_bits(keys: KeyArray, runs: list[tuple[int, int]], out: npt.NDArray[np.integer[Any]], *,
                above: int = 0) -> None:
    """Write into ``out`` each key's bits of ``runs`` side by side (a software ``pext``), from bit ``above`` up,
    and below them, when ``above`` > 0, the row number; block by block, no row-sized temporary.

    ``out`` may be ``keys`` itself (each block is read before it is written).
    """
    moves = []  # each run: its bits in the key, and the shift that puts them above the row and the earlier runs
    shift = above
    for low, length in runs:
        moves.append((np.uint64(((1 << length) - 1) << low), np.uint64(max(shift - low, 0)),
                      np.uint64(max(low - shift, 0))))
        shift += length
    n = keys.size
    part = np.empty(min(n, BLOCK), dtype=np.uint64)
    gathered = np.empty(min(n, BLOCK), dtype=np.uint64)
    for start in range(0, n, BLOCK):
        block = keys[start:start + BLOCK]
        into, word = part[:block.size], gathered[:block.size]
        if above:
            word[:] = np.arange(start, start + block.size, dtype=np.uint64)
        else:
            word.fill(0)
        for run_mask, up, down in moves:
            np.bitwise_and(block, run_mask, out=into)
            if up:
                np.left_shift(into, up, out=into)
            elif down:
                np.right_shift(into, down, out=into)
            np.bitwise_or(word, into, out=word)
        out[start:start + block.size] = word


def sorted_codes(keys: KeyArray, *, overwrite: bool = False, runs: list[tuple[int, int]] | None = None,
                 ) -> tuple[npt.NDArray[np.signedinteger[Any]], IntArray] | None:
    """``(codes, first)`` of packed keys, as :func:`labelgate.core.keycodes.hash_codes` returns them (codes in
    order of first appearance, int64, in the memory of the sorted words; ``first[c]`` the first row of code ``c``),
    by one sort.

    None when the varying bits and the row number do not fit one ``uint64`` together. ``overwrite``: ``keys`` is
    the caller's own scratch array and may be overwritten (no second row-sized uint64 array); the codes are then
    written into it. ``runs``: :func:`varying_runs` of the keys, if the caller has them.
    """
    n = keys.size
    if n == 0:
        return None
    runs = varying_runs(keys) if runs is None else runs
    row_bits = max(int(n - 1).bit_length(), 1)
    if sum(length for _, length in runs) + row_bits > 64:
        return None
    runs = merged_runs(runs, 64 - row_bits)
    words = keys if overwrite and keys.flags.c_contiguous and keys.flags.writeable else np.empty(n, dtype=np.uint64)
    gather_bits(keys, runs, words, above=row_bits)  # word = varying bits of the key, then the row
    words.sort()
    index = np.dtype(np.int32 if n < 2**31 else np.int64)
    # a new key starts where the word's key bits change; the word's low bits are its row
    start_of = np.empty(n, dtype=bool)
    start_of[0] = True
    top = np.uint64(row_bits)
    for start in range(0, n - 1, BLOCK):
        high = words[start:start + BLOCK + 1] >> top
        np.not_equal(high[1:], high[:-1], out=start_of[start + 1:start + high.size])
    rows = np.empty(n, dtype=index)
    row_mask = np.uint64((1 << row_bits) - 1)
    for start in range(0, n, BLOCK):
        np.bitwise_and(words[start:start + BLOCK], row_mask, out=rows[start:start + BLOCK], casting="unsafe")
    group_start = np.flatnonzero(start_of)
    del start_of
    first_of_group = rows[group_start]  # sorted by key, then row: a group's first word holds its first row
    # codes in order of first appearance: the rank of each group's first row among the first rows (a counting
    # sort on a mark per row: the first rows are distinct), read back through a row -> rank table written at the
    # first rows only. The words are spent: their memory holds that table, then the codes (int64, what a column
    # keeps) — no new row-sized array, whose first touch costs more than the pass that fills it
    is_first = np.zeros(n, dtype=bool)
    is_first[first_of_group] = True
    first = np.flatnonzero(is_first)  # the first rows, ascending: first[c] is code c's first row
    del is_first
    rank = words.view(index)[:n]  # only the first rows are written, and only they are read
    rank[first] = np.arange(first.size, dtype=index)
    code_of_group = rank[first_of_group]
    del rank, first_of_group
    sizes = np.diff(np.append(group_start, n))
    codes = words.view(np.int64)
    codes[rows] = np.repeat(code_of_group, sizes)
    return codes, first.astype(np.int64, copy=False)
