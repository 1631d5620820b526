"""Duplicate judgements across partitions, found by a hash exchange over (pool, item, rater) keys.

Every partition splits its keys (numbered by :class:`~.kernels.KeySpace`) into buckets; one task per bucket
finds the keys that repeat. Only repeated keys reach the driver, which then locates their rows and, for
``duplicates="first"/"last"``, drops the right rows where they live.

Interface: :func:`duplicate_tasks` (Dask tasks, to compute together with other work), :func:`gather_duplicates`
(their results as sorted keys and counts) and :func:`resolve_duplicates` (new persisted codes, or the
:class:`InputError` the in-memory builder raises).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from labelgate.core.ratings import DuplicatePolicy, IntArray, _python_scalar, _row_label
from labelgate.errors import InputError, Reason
from labelgate.pipeline.dask_ratings.cluster import import_dask
from labelgate.pipeline.dask_ratings.kernels import Codes, KeySpace

# Number of buckets of the exchange (capped: each bucket is one task).
_MAX_BUCKETS = 64


def duplicate_tasks(codes: list[Any], space: KeySpace) -> list[Any]:
    """One Dask task per bucket, each computing the (keys, counts) of the keys repeated in its bucket."""
    dask = import_dask()
    n_buckets = max(1, min(len(codes), _MAX_BUCKETS))
    split = [dask.delayed(_split_keys, nout=n_buckets)(c, space, n_buckets) for c in codes]
    return [dask.delayed(_repeated_keys)(*[s[b] for s in split]) for b in range(n_buckets)]


def gather_duplicates(found: Sequence[tuple[IntArray, IntArray]]) -> tuple[IntArray, IntArray]:
    """The repeated keys of all buckets, sorted, and how many times each occurs."""
    keys = np.concatenate([k for k, _ in found]) if found else np.empty(0, np.int64)
    counts = np.concatenate([c for _, c in found]) if found else np.empty(0, np.int64)
    order = np.argsort(keys)
    return keys[order], counts[order]


def resolve_duplicates(codes: list[Any], space: KeySpace, keys: IntArray, counts: IntArray,
                       policy: DuplicatePolicy, item_labels: np.ndarray, rater_labels: np.ndarray) -> list[Any]:
    """Persisted codes keeping one row per repeated key (the first or last in table order).

    Raises
    ------
    InputError
        With ``policy="error"``, naming the rater, the item and two of the rows, as the in-memory builder does.
    """
    dask = import_dask()
    located = dask.compute(*[dask.delayed(_rows_with_keys)(c, keys, space, policy == "error") for c in codes])
    part_of = np.concatenate([np.full(k.size, i, dtype=np.int64) for i, (k, _, _) in enumerate(located)])
    key_of = np.concatenate([k for k, _, _ in located])
    position = np.concatenate([p for _, p, _ in located])
    labels = [lab for _, _, labs in located for lab in labs]
    # rows in table order within each key: (key, partition, position)
    order = np.lexsort((position, part_of, key_of))
    key_of, part_of, position = key_of[order], part_of[order], position[order]
    if policy == "error":
        rows = [labels[i] for i in order]
        raise _duplicate_error(space, keys, counts, key_of, rows, item_labels, rater_labels)
    starts = np.concatenate(([True], key_of[1:] != key_of[:-1]))
    ends = np.concatenate((key_of[1:] != key_of[:-1], [True]))
    drop = ~starts if policy == "first" else ~ends
    new = []
    for i, c in enumerate(codes):
        positions = position[drop & (part_of == i)]
        new.append(dask.delayed(Codes.without)(c, positions) if positions.size else c)
    return list(dask.persist(*new))


def _duplicate_error(space: KeySpace, keys: IntArray, counts: IntArray, key_of: IntArray, rows: list[Any],
                     item_labels: np.ndarray, rater_labels: np.ndarray) -> InputError:
    pool_of = keys // (space.n_items * space.n_raters)
    # the in-memory builder checks pool by pool (in pool order) and reports the smallest key of the first one
    in_pool = pool_of == int(pool_of.min())
    key = int(keys[in_pool][0])
    n_extra = int((counts[in_pool] - 1).sum())
    first, second = (rows[i] for i in np.flatnonzero(key_of == key)[:2])
    _, item_code, rater_code = space.split(key)
    item, rater = _python_scalar(item_labels[item_code]), _python_scalar(rater_labels[rater_code])
    return InputError(f"Rater {rater!r} judged item {item!r} more than once (rows {first!r} and {second!r}; "
                      f"{n_extra} duplicate judgement(s) in all). Pass duplicates='first' or 'last' to keep one.",
                      Reason.DUPLICATE_JUDGEMENT, item=item, rater=rater, row=first)


# ------------------------------------------------------------------------------ kernels (on the workers)
def _split_keys(codes: Codes, space: KeySpace, n_buckets: int) -> tuple[IntArray, ...]:
    keys = space.keys(codes)
    bucket = (keys % n_buckets).astype(np.uint8 if n_buckets <= 256 else np.int64)
    order = np.argsort(bucket, kind="stable")  # a radix sort for small integers
    bounds = np.cumsum(np.bincount(bucket, minlength=n_buckets))[:-1]
    return tuple(np.split(keys[order], bounds))


def _repeated_keys(*pieces: IntArray) -> tuple[IntArray, IntArray]:
    """Keys that occur more than once in a bucket, and how many times."""
    keys = np.sort(np.concatenate(pieces))
    same = keys[1:] == keys[:-1]
    if not same.any():
        return np.empty(0, np.int64), np.empty(0, np.int64)
    found = np.unique(keys[1:][same])
    counts = np.searchsorted(keys, found, side="right") - np.searchsorted(keys, found, side="left")
    return found, counts.astype(np.int64)


def _rows_with_keys(codes: Codes, keys: IntArray, space: KeySpace, with_labels: bool,
                    ) -> tuple[IntArray, IntArray, list[Any]]:
    """(key, row position, row label if asked) of the rows whose key is in ``keys``."""
    own = space.keys(codes)
    rows = np.flatnonzero(np.isin(own, keys))
    labels = [_row_label(codes.index, p) for p in codes.position[rows]] if with_labels else []
    return own[rows], codes.position[rows], labels
