"""Factorising one column of a long table into integer codes, by the cheapest route its form allows.

Every route returns codes in order of first appearance (the order of ``pandas.factorize``), so that a
table gives the same `Ratings` — codes, labels and hence bootstrap resamples — whether it arrives as a
DataFrame, a mapping of numpy arrays, a pandas categorical, an Arrow table or Arrow dictionary columns.

Routes, cheapest first:

* already encoded — a pandas ``Categorical`` (``codes`` / ``categories``), an Arrow dictionary array,
  or an :class:`EncodedColumn`: the codes pass through; only the order is made canonical (chunks whose
  dictionaries list their values in order of first appearance, as Arrow's CSV reader writes them, need no
  renumbering pass over the rows);
* Arrow strings of one byte width up to 8, or wider with every varying byte inside one window of 8 (pandas'
  default ``str`` storage, Arrow tables) — their bytes read in place as integer keys: a lookup table, a search
  among a few values or a vectorised hash table (:mod:`labelgate.core.strings`); the labels become Python
  strings for the distinct values only, when first read (:meth:`Column.deferred`: a build reads them after its
  duplicate check);
* numeric numpy arrays — dense integers by a lookup table (O(N), no sort), others by one sort;
* objects with a ``factorize`` method (pandas Series with Arrow or nullable storage): theirs;
* other Arrow arrays — Arrow's own hash ``dictionary_encode``, then as a dictionary array;
* object arrays (Python strings) — short ASCII strings of one length from their bytes, joined by ``str.join``
  (as above);
  others by Python's cached string hashes, one int64 sort and an exact equality check of every row
  against its group's representative (a hash collision falls back to the exact sort / dict route, so
  the result never depends on the hash).

The module imports numpy only: pandas and pyarrow objects are recognised by their attributes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from labelgate.core.column import CodeArray, Column, IntArray, code_counts, code_type, is_missing
from labelgate.core.column import EncodedColumn as EncodedColumn  # re-exported: its documented import path
from labelgate.core.strings import (
    STRING_TYPES,
    arrow_strings,
    fixed_width_codes,
    object_string_codes,
    stacked_codes,
)

# A dense integer column (max - min below this many times its length) is coded through a lookup
# table instead of a sort.
_DENSE_FACTOR = 4

# Values taken from an Arrow column per call of its ``take``: small allocations, which Arrow's pool reuses.
TAKE_BLOCK = 1 << 12


def factorize(column: Any, *, ordered: bool = True) -> Column:
    """Integer codes and uniques of one column; missing values coded -1.

    Codes follow the order of first appearance; with ``ordered=False`` (a label column, whose categories are
    sorted afterwards) numeric values may keep the sorted order of their uniques, which spares a pass.
    """
    encoded = getattr(column, "array", column)  # a pandas Series holds its data in ``.array``
    if hasattr(encoded, "codes") and hasattr(encoded, "categories"):
        labels = np.asarray(encoded.categories, dtype=object)
        # a copy: the codes become the Ratings' own arrays, never an alias of the caller's
        return _canonical(np.array(encoded.codes, dtype=np.int64), labels, check_missing=True)
    arrow = _arrow_dictionary(column)
    if arrow is not None:
        return _from_dictionary(arrow)
    strings = arrow_strings(column)
    if strings is not None:
        fixed = _from_fixed_width(strings)
        if fixed is not None:
            return fixed
    dtype = getattr(column, "dtype", None)
    if isinstance(dtype, np.dtype) and dtype.kind in "biuf":
        return _factorize_numeric(np.asarray(column).ravel(), ordered)
    if hasattr(column, "factorize") and not (isinstance(dtype, np.dtype) and dtype.kind == "O"):
        codes, uniques = column.factorize()
        return Column(np.asarray(codes, dtype=np.int64), np.asarray(uniques, dtype=object))
    if hasattr(column, "dictionary_encode") and hasattr(column, "type"):  # a plain Arrow array
        return _from_dictionary(column.dictionary_encode())
    arr = np.asarray(column)
    if arr.dtype.kind in "biuf":
        return _factorize_numeric(arr.ravel(), ordered)
    return factorize_objects(arr.astype(object, copy=False).ravel())


def visits_objects(column: Any) -> bool:
    """Whether :func:`factorize` codes ``column`` value by value as Python objects: a list or tuple, an array or
    pandas column of objects, pandas strings stored as Python objects, and numpy arrays that are not numbers
    (strings, bytes, dates, complex numbers: made objects first). Such coding holds the interpreter lock, so it
    gains nothing from threads (:func:`labelgate.core.parallel.run_steps`, ``holds_interpreter_lock``)."""
    if isinstance(column, (list, tuple)):
        return True
    dtype = getattr(column, "dtype", None)
    if getattr(dtype, "storage", None) == "python":  # pandas' StringDtype("python"): its own factorize hashes objects
        return True
    if not isinstance(dtype, np.dtype):  # categoricals, Arrow-backed columns, Arrow arrays: codes or buffers
        return False
    # pandas columns of dates and other non-object numpy dtypes have their own (compiled) factorize
    return dtype.kind == "O" or (dtype.kind not in "biuf" and not hasattr(column, "factorize"))


# ------------------------------------------------------------------ encoded inputs
def _arrow_dictionary(column: Any) -> Any:
    """The Arrow dictionary array behind ``column`` (pyarrow or a pandas ``ArrowDtype``), else None."""
    arrow_type = getattr(getattr(column, "dtype", None), "pyarrow_dtype", None)
    if arrow_type is not None and hasattr(arrow_type, "index_type"):
        return column.array.__arrow_array__()
    if hasattr(getattr(column, "type", None), "index_type") and hasattr(column, "dictionary_encode"):
        return column
    return None


def _from_dictionary(array: Any) -> Column:
    """Codes of an Arrow dictionary (Chunked)Array: its indices, over one dictionary for all chunks."""
    if hasattr(array, "chunks"):
        if array.num_chunks > 1:
            joint = _joint_dictionary(array)
            if joint is not None:
                return joint
            array = array.unify_dictionaries()  # chunks may carry their own dictionaries
        chunks = list(array.chunks)
    else:
        chunks = [array]
    if not chunks:
        return Column(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=object))
    parts = [_indices(c) for c in chunks]
    codes = np.concatenate(parts).astype(np.int64, copy=False) if len(parts) > 1 else parts[0].astype(np.int64)
    dictionary = chunks[0].dictionary
    # a dictionary may hold one value twice (Arrow does not forbid it): its entries are merged, so that one id has
    # one code (else two codes for one item would split it, and a rater's repeated judgement would pass unseen)
    distinct = dictionary.dictionary_encode()
    if len(distinct.dictionary) < len(dictionary):
        merged = np.asarray(distinct.indices.fill_null(-1), dtype=np.int64)
        codes = np.where(codes >= 0, merged[np.maximum(codes, 0)], -1)
        dictionary = distinct.dictionary
    labels = np.asarray(dictionary.to_numpy(zero_copy_only=False), dtype=object)
    return _canonical(codes, labels, check_missing=True)


def _indices(chunk: Any) -> np.ndarray:
    """A dictionary chunk's indices as numpy, -1 for null."""
    return np.asarray(chunk.indices.fill_null(-1) if chunk.null_count else chunk.indices)


def _joint_dictionary(array: Any) -> Column | None:
    """Chunks with their own dictionaries of fixed-width strings (Arrow's multithreaded CSV reader writes one per
    block): the dictionaries stacked and coded from their bytes (:mod:`.strings`), each chunk's indices mapped
    through them — no second hash of the strings, as ``unify_dictionaries`` would do. None: another route.
    """
    chunks = [c for c in array.chunks if len(c)]
    if not chunks or str(chunks[0].dictionary.type) not in STRING_TYPES:
        return None
    found = stacked_codes([chunk.dictionary for chunk in chunks])
    if found is None:  # nulls, widths that differ, or values no byte route codes
        return None
    joint, first = found
    starts = np.cumsum([0] + [len(c.dictionary) for c in chunks])
    if not any(c.null_count for c in chunks):
        if first.size > 1 and not (first[1:] > first[:-1]).all():  # the few-values routes number values sorted
            order = np.argsort(first, kind="stable")
            renumber = np.empty(order.size, dtype=np.int64)
            renumber[order] = np.arange(order.size, dtype=np.int64)
            joint, first = renumber[joint], first[order]  # the stack's codes in order of first entry
        local_parts = [np.asarray(c.indices) for c in chunks]
        if all(_entry_order(local, len(c.dictionary)) for local, c in zip(local_parts, chunks, strict=True)):
            return _stacked_in_order(joint, first, starts, chunks, local_parts)
    joint = np.append(joint, -1)  # the entry of a null index
    codes = np.concatenate([joint[np.where(local >= 0, local + start, joint.size - 1)]
                            for local, start in zip((_indices(c) for c in chunks), starts, strict=False)])
    owner = np.searchsorted(starts, first, side="right") - 1  # the chunk whose dictionary holds each value
    labels = np.empty(first.size, dtype=object)
    for k in np.unique(owner):
        mine = np.flatnonzero(owner == k)
        labels[mine] = chunks[k].dictionary.take(first[mine] - starts[k]).to_numpy(zero_copy_only=False)
    return _canonical(codes, labels, check_missing=True)


def _entry_order(local: npt.NDArray[np.integer[Any]], k: int) -> bool:
    """Whether a chunk's indices (no null) first refer to its ``k`` dictionary entries in the order 0, 1, ..., k-1
    and refer to every one: each index is at most one above the largest before it, and the largest is ``k - 1``.

    Arrow's CSV reader builds each block's dictionary as it meets the values, so this holds for its chunks.
    """
    if local.size == 0:
        return k == 0
    running = np.maximum.accumulate(local)
    return bool(local[0] == 0 and running[-1] == k - 1 and (local[1:] <= running[:-1] + 1).all())


def _stacked_in_order(joint: npt.NDArray[np.integer[Any]], first: IntArray, starts: IntArray, chunks: list[Any],
                      local_parts: list[npt.NDArray[np.integer[Any]]]) -> Column:
    """The codes of chunks whose dictionaries are in first-appearance order (:func:`_entry_order`), through the
    stacked dictionaries' codes ``joint`` (first-appearance order of the stack, ``first``: each code's first entry).

    Every entry is used and each chunk meets its entries in order, so a value's first entry in the stack lies in the
    first chunk that holds the value, at its first appearance there: the stack's order is the rows' order, and the
    codes need no renumbering pass. The labels (Python strings) are made when first read (:meth:`Column.deferred`).
    """
    joint = joint.astype(np.int64, copy=False)
    codes = np.empty(sum(local.size for local in local_parts), dtype=np.int64)
    row = 0
    for local, start, chunk in zip(local_parts, starts, chunks, strict=False):
        np.take(joint[start:start + len(chunk.dictionary)], local, out=codes[row:row + local.size])
        row += local.size

    # ``first`` ascends (codes in order of first entry): the values each chunk's dictionary holds first are a
    # slice of it, found by one search of the chunks' starts; they are taken now (Arrow values, the distinct ones
    # only: the dictionaries are not kept) and become Python strings when first read
    return Column.deferred(codes, distinct_values([chunk.dictionary for chunk in chunks], first), first.size)


def objects_of(parts: list[Any]) -> Callable[[], np.ndarray]:
    """A maker of the values of Arrow arrays ``parts``, one after another, as one object array."""

    def make() -> np.ndarray:
        out = np.empty(sum(len(part) for part in parts), dtype=object)
        position = 0
        for part in parts:
            out[position:position + len(part)] = part.to_numpy(zero_copy_only=False)
            position += len(part)
        return out

    return make


def distinct_values(chunks: list[Any], first: IntArray) -> Callable[[], np.ndarray]:
    """A maker of the values at ascending rows ``first`` of Arrow arrays ``chunks`` read one after another, as an
    object array: the values are taken now, chunk by chunk (the chunks are not kept), and become Python objects
    when it is called."""
    parts, start = [], 0
    for chunk in chunks:
        low, high = np.searchsorted(first, [start, start + len(chunk)])
        if high > low:
            parts.append(chunk.take(first[low:high] - start))
        start += len(chunk)
    return objects_of(parts)


def _canonical(codes: IntArray, labels: np.ndarray, *, check_missing: bool) -> Column:
    """Renumber codes into first-appearance order, dropping unused labels (and missing ones: code -1).

    Costs one ``minimum.at`` and two passes: O(N + K), no sort of the rows.
    """
    n, k = codes.size, len(labels)
    if check_missing and k:
        missing_label = is_missing(labels)
        if missing_label.any():  # a dictionary may hold a null: its rows are missing ids
            codes = np.where(codes >= 0, np.where(missing_label[np.maximum(codes, 0)], -1, codes), -1)
    valid = codes >= 0
    all_valid = bool(valid.all())
    rows = None if all_valid else np.flatnonzero(valid)
    return _renumber(codes, labels, _first_rows(codes if rows is None else codes[rows], k, rows, n), all_valid)


def _first_rows(codes: IntArray, k: int, rows: IntArray | None, total: int) -> IntArray:
    """The first row of each of the ``k`` codes (``total`` when unused); ``rows``: the codes' rows (None: 0..).

    A few categories all appear in the first rows: a head of the column settles them without a full pass.
    """
    n = codes.size
    first = np.full(k, total, dtype=np.int64)
    head = min(n, 4096)

    def positions(start: int, stop: int) -> IntArray:
        return np.arange(start, stop, dtype=np.int64) if rows is None else rows[start:stop]

    np.minimum.at(first, codes[:head], positions(0, head))
    if head < n and (first[np.bincount(codes, minlength=k) > 0] == total).any():
        np.minimum.at(first, codes[head:], positions(head, n))
    return first


def _renumber(codes: IntArray, labels: np.ndarray, first: IntArray, all_valid: bool) -> Column:
    """Given each label's first row (``n`` when unused), codes and labels in first-appearance order."""
    n = codes.size
    used = first < n
    if used.all() and (first.size < 2 or (first[1:] > first[:-1]).all()):  # already in order (the hash's codes)
        return Column(codes.astype(np.int64, copy=False), np.asarray(labels, dtype=object))
    if used.sum() * 16 < n:  # few labels: sort their first rows
        old = np.flatnonzero(used)
        old = old[np.argsort(first[old])]
    else:  # many labels: a counting sort on the first rows, distinct positions in [0, n)
        mark = np.full(n + 1, -1, dtype=np.int64)
        mark[first[used]] = np.flatnonzero(used)
        old = mark[mark >= 0]
    if old.size == len(labels) and (old.size == 0 or (old[1:] > old[:-1]).all()):
        return Column(codes.astype(np.int64, copy=False), np.asarray(labels, dtype=object))
    remap = np.full(len(labels) + 1, -1, dtype=np.int64)  # the last entry maps code -1 to -1
    remap[old] = np.arange(old.size, dtype=np.int64)
    out = remap[codes] if all_valid else remap[np.where(codes >= 0, codes, len(labels))]
    return Column(out, np.asarray(labels, dtype=object)[old])


# ------------------------------------------------------------------ Arrow strings of one width
def _from_fixed_width(array: Any) -> Column | None:
    """Codes of an Arrow string column of one byte width whose varying bytes lie in one 8-byte window (any width
    up to 8, or a wider one with a shared prefix or suffix), without hashing strings (:mod:`.strings`)."""
    found = fixed_width_codes(array)
    if found is None:
        return None
    codes, first = found
    if first.size < 2 or (first[1:] > first[:-1]).all():  # first-appearance codes (the hash's): labels on demand
        chunks = getattr(array, "chunks", None) or [array]
        # the codes as they come (int32 from the hash, a byte for a few values): widened where a Ratings is built
        return Column.deferred(codes, distinct_values(chunks, first), first.size)
    return _renumber(codes, take_values(array, first), first, all_valid=True)


def take_values(array: Any, rows: IntArray) -> np.ndarray:
    """The values of an Arrow (Chunked)Array at ``rows`` as an object array, taken chunk by chunk.

    ``ChunkedArray.take`` would first concatenate the whole column (Arrow's memory pool then keeps that copy's
    pages); per chunk, Arrow allocates only the values taken.
    """
    chunks = getattr(array, "chunks", None)
    if chunks is None:
        return np.asarray(array.take(rows).to_numpy(zero_copy_only=False), dtype=object)
    order = None if rows.size < 2 or (rows[1:] > rows[:-1]).all() else np.argsort(rows, kind="stable")
    ordered = rows if order is None else rows[order]
    out = np.empty(rows.size, dtype=object)
    start = 0
    for chunk in chunks:
        low, high = np.searchsorted(ordered, [start, start + len(chunk)])
        for block in range(low, high, TAKE_BLOCK):
            stop = min(block + TAKE_BLOCK, high)
            out[block:stop] = chunk.take(ordered[block:stop] - start).to_numpy(zero_copy_only=False)
        start += len(chunk)
    if order is not None:
        out[order] = out.copy()
    return out


# ------------------------------------------------------------------ numbers
def _factorize_numeric(arr: np.ndarray, canonical: bool = True) -> Column:
    """Codes of a numeric array: a lookup table for dense integers, one sort otherwise; NaN is missing.

    The codes index the sorted uniques; ``canonical`` renumbers them into first-appearance order.
    """
    n, original = arr.size, arr.dtype
    if arr.dtype.kind == "b":
        arr = arr.view(np.uint8)
    valid_mask = None
    if arr.dtype.kind == "f":
        nan = np.isnan(arr)
        if nan.any():
            valid_mask = ~nan
    values = arr if valid_mask is None else arr[valid_mask]
    if values.size == 0:
        return Column(np.full(n, -1, dtype=np.int64), np.zeros(0, dtype=object))
    if arr.dtype.kind in "iu" and _is_dense(values):
        low = values.min()
        wide = values.dtype == np.uint64  # the only integer type int64 cannot hold
        if values.dtype == np.int64 and low >= 0:  # small non-negative integers (labels) index directly
            low, offset = 0, values
        else:
            offset = (values - low).astype(np.int64) if wide else values.astype(np.int64) - int(low)
        present = code_counts(offset, int(offset.max()) + 1) > 0  # pandas' arrays are read-only: no row copy
        code_of = np.cumsum(present, dtype=np.int64) - 1
        if not canonical:  # a label column's codes go straight to its pools: the narrowest type that holds them
            code_of = code_of.astype(code_type(int(code_of[-1]) + 1))
        sub = code_of[offset]
        uniques = np.flatnonzero(present).astype(values.dtype) + low if wide else np.flatnonzero(present) + int(low)
    else:
        order = np.argsort(values)
        ordered = values[order]
        start = np.empty(ordered.size, dtype=bool)
        start[0] = True
        np.not_equal(ordered[1:], ordered[:-1], out=start[1:])
        sub = np.empty(values.size, dtype=np.int64)
        sub[order] = np.cumsum(start, dtype=np.int64) - 1
        uniques = ordered[start]
    codes = sub if valid_mask is None else _spread(sub, valid_mask)
    labels = uniques.astype(original).astype(object)
    return _canonical(codes, labels, check_missing=False) if canonical else Column(codes, labels)


def _is_dense(values: np.ndarray) -> bool:
    low, high = int(values.min()), int(values.max())
    return high - low < max(_DENSE_FACTOR * values.size, 1 << 16)


def _spread(sub: CodeArray, valid: npt.NDArray[np.bool_]) -> CodeArray:
    codes = np.full(valid.size, -1, dtype=sub.dtype)
    codes[valid] = sub
    return codes


# ------------------------------------------------------------------ Python objects
def factorize_objects(arr: np.ndarray) -> Column:
    """Codes of a 1-D object array: grouped by Python's hash, then checked for equality row by row.

    Short ASCII strings of one length are coded from their bytes instead (:func:`.strings.object_string_codes`).
    Otherwise Python caches a string's hash on the string, and an int64 sort is fast, so this beats sorting
    the objects by 10x; equality is checked exactly, and anything unusual (unhashable values, a hash
    collision, values that refuse ``==``) takes the exact route of :func:`_factorize_exact`.
    """
    n = arr.size
    if n == 0:
        return Column(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=object))
    fixed = object_string_codes(arr)
    if fixed is not None:  # short ASCII strings of one length: their bytes, no Python hash
        codes, first = fixed
        return _renumber(codes, arr[first], first, all_valid=True)
    try:
        hashes = np.fromiter(map(hash, arr), dtype=np.int64, count=n)
    except TypeError:  # unhashable values
        return _factorize_exact(arr)
    order = np.argsort(hashes)
    ordered = hashes[order]
    start = np.empty(n, dtype=bool)
    start[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=start[1:])
    starts = np.flatnonzero(start)
    group = np.empty(n, dtype=np.int64)
    group[order] = np.cumsum(start, dtype=np.int64) - 1
    first = np.minimum.reduceat(order, starts)  # each group's first row
    reps = arr[first]
    missing_rep = is_missing(reps)
    try:
        same = np.asarray(arr == reps[group], dtype=bool)
    except Exception:  # values whose == does not give a truth value
        return _factorize_exact(arr)
    if missing_rep.any():
        in_missing = missing_rep[group]
        # NaN != NaN: rows of a missing representative are checked for being missing themselves
        same[in_missing] = is_missing(arr[in_missing])
        if not same.all():
            return _factorize_exact(arr)
        group = np.where(in_missing, -1, group)
        first = np.where(missing_rep, n, first)
        return _renumber(group, reps, first, all_valid=False)
    if not same.all():  # a hash collision between different values
        return _factorize_exact(arr)
    return _renumber(group, reps, first, all_valid=True)


def _factorize_exact(arr: np.ndarray) -> Column:
    """The slow, exact route: equal values by sort (or by dict for unorderable types), first-appearance order."""
    missing = is_missing(arr)
    codes = np.full(arr.size, -1, dtype=np.int64)
    present = arr[~missing]
    if present.size == 0:
        return Column(codes, np.asarray([], dtype=object))
    try:
        uniques, inverse = np.unique(present, return_inverse=True)
    except TypeError:  # mixed, unorderable types
        lookup: dict[Any, int] = {}
        inverse = np.asarray([lookup.setdefault(v, len(lookup)) for v in present], dtype=np.int64)
        uniques = np.asarray(list(lookup), dtype=object)
    codes[~missing] = inverse.ravel()
    return _canonical(codes, np.asarray(uniques, dtype=object), check_missing=False)
