"""The sort route of the id coding and the in-order route of Arrow dictionary chunks give the plain route's Ratings.

* :func:`labelgate.core.sortcodes.sorted_codes` (many distinct keys: one sort of ``(key bits, row)`` words) must
  return exactly the codes and first rows of the vectorised hash, on keys of every shape, and refuse keys whose
  varying bits and row number do not fit one word;
* forced onto every build (``SORT_BITS`` below every table), every input form must still give the reference
  Ratings of ``test_build_routes`` (a row-by-row dict build);
* the direct route (keys that differ in few bits index a table by those bits) must return exactly the hash's codes
  and first rows, be taken exactly when the table is small enough, and, forced onto every build (or forbidden, so
  that the hash codes every column), give the reference Ratings too;
* Arrow strings narrower than 8 bytes are keyed by 8-byte reads at each value's start, masked: equal to the bytes
  packed one by one, on chunks, slices, and buffers that end right after the last value;
* Arrow dictionary chunks whose dictionaries list their values in order of first appearance (what Arrow's CSV
  reader writes) skip the renumbering; chunks whose dictionaries do not (sorted, unused or repeated entries, null
  indices) must take the general route and give the same Ratings.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

import labelgate as lg
from labelgate.core import columns, keycodes
from labelgate.core.columns import _entry_order, factorize
from labelgate.core.keycodes import codes_of_keys, direct_codes, hash_codes, table_bits
from labelgate.core.sortcodes import merged_runs, sorted_codes, varying_runs
from labelgate.core.strings import fixed_width_bytes, fixed_width_keys, packed
from tests.core.test_build_routes import (
    assert_every_form_is_the_reference,
    assert_same,
    needs_pyarrow,
    pa,
    random_table,
    reference_build,
)


def _digit_keys(rng, n, k, width=8):
    """Packed ASCII digit ids (``"01234567"``): 4 varying bits a byte, as the ids of a CSV file."""
    ids = rng.choice(10**width, size=k, replace=False)
    text = np.char.zfill(ids.astype(str), width).astype(f"S{width}")
    padded = np.zeros((k, 8), dtype=np.uint8)
    padded[:, :width] = np.frombuffer(text.tobytes(), dtype=np.uint8).reshape(k, width)
    return padded.view(np.uint64).reshape(-1)[rng.integers(0, k, n)]


def _key_sets():
    rng = np.random.default_rng(7)
    yield "digits", _digit_keys(rng, 20_000, 3_000)
    yield "few digits", _digit_keys(rng, 5_000, 7, width=3)
    yield "one key", np.full(1_000, 0x1234, dtype=np.uint64)
    yield "one row", np.asarray([42], dtype=np.uint64)
    yield "all ones", rng.choice(np.asarray([2**64 - 1, 2**64 - 2, 2**63 - 1], dtype=np.uint64), 4_000)
    yield "scattered bits", (rng.integers(0, 2**12, 30_000).astype(np.uint64) * np.uint64(0x0101_0101_0001))
    yield "random 30 bits", rng.integers(0, 2**30, 50_000).astype(np.uint64) << np.uint64(20)


@pytest.mark.parametrize("overwrite", [False, True])
def test_sorted_codes_equal_the_hash_on_every_key_shape(overwrite):
    for name, keys in _key_sets():
        expected = hash_codes(keys, table_bits(keys[:1 << 16], keys.size))
        given = keys.copy()
        found = sorted_codes(given, overwrite=overwrite)
        assert found is not None, name
        assert np.array_equal(found[0], expected[0]), name
        assert np.array_equal(found[1], expected[1]), name
        if not overwrite:
            assert np.array_equal(given, keys), f"{name}: the caller's keys were written"


def test_sorted_codes_across_blocks_equal_the_hash(monkeypatch):
    monkeypatch.setattr("labelgate.core.sortcodes.BLOCK", 1000)  # many blocks, a last one shorter
    keys = _digit_keys(np.random.default_rng(3), 12_345, 2_000)
    expected = hash_codes(keys, 14)
    found = sorted_codes(keys.copy(), overwrite=True)
    assert found is not None
    assert np.array_equal(found[0], expected[0]) and np.array_equal(found[1], expected[1])


def test_sorted_codes_refuse_keys_whose_bits_and_row_do_not_fit_a_word():
    rng = np.random.default_rng(1)
    keys = rng.integers(0, 2**63, 1_000, dtype=np.int64).astype(np.uint64) | np.uint64(2**63)
    assert sum(length for _, length in varying_runs(keys)) > 54  # 63 varying bits + 10 row bits > 64
    assert sorted_codes(keys) is None


def test_merged_runs_cover_every_run_within_their_room():
    rng = np.random.default_rng(23)
    for _ in range(300):
        mask = int(rng.integers(1, 2**63)) & int(rng.integers(1, 2**63))
        keys = np.asarray([0, mask], dtype=np.uint64)
        runs = varying_runs(keys)
        total = sum(length for _, length in runs)
        room = int(rng.integers(total, 65))
        merged = merged_runs(runs, room)
        covered = sum(((1 << length) - 1) << low for low, length in merged)
        assert covered & mask == mask  # every varying bit is still gathered
        assert sum(length for _, length in merged) <= room
        assert all(a[0] + a[1] < b[0] for a, b in itertools.pairwise(merged))  # apart, in order
        assert len(merged) <= len(runs)
        if room >= 64 - runs[0][0]:  # room for the whole span: one run
            assert len(merged) == 1


def test_varying_runs_mark_exactly_the_bits_that_differ():
    keys = np.asarray([0b1000_0110, 0b1000_0000, 0b1010_0010], dtype=np.uint64)
    assert varying_runs(keys) == [(1, 2), (5, 1)]


@needs_pyarrow
@pytest.mark.parametrize("ids", ["fixed", "ascii"])
@pytest.mark.parametrize("seed", range(5))
def test_every_input_form_on_the_sort_route_gives_the_reference_ratings(seed, ids, monkeypatch):
    monkeypatch.setattr(keycodes, "SORT_BITS", -1)  # every column with more values than the few-values search
    monkeypatch.setattr(keycodes, "DIRECT_BITS", -1)  # ... and whatever bits its keys differ in
    assert_every_form_is_the_reference(*random_table(seed, ids=ids))


@needs_pyarrow
def test_pools_on_the_sort_route_equal_the_hash_route(monkeypatch):
    rng = np.random.default_rng(11)
    n = 30_000
    frame = pd.DataFrame({"item_id": [f"i{k:07d}" for k in rng.integers(0, 9_000, n)],
                          "rater_id": [f"w{k:04d}" for k in rng.integers(0, 700, n)],
                          "label": rng.integers(1, 6, n), "pool": rng.choice(["A", "B"], n)}).astype(
                              {"item_id": "str", "rater_id": "str", "pool": "str"})
    monkeypatch.setattr(keycodes, "DIRECT_BITS", -1)
    hashed = lg.ratings_by_pool(frame, duplicates="last")
    monkeypatch.setattr(keycodes, "SORT_BITS", -1)
    for data in (frame, pa.Table.from_pandas(frame, preserve_index=False)):
        sorted_ = lg.ratings_by_pool(data, duplicates="last")
        assert list(sorted_) == list(hashed)
        for name, r in hashed.items():
            s = sorted_[name]
            assert list(s.item_labels) == list(r.item_labels) and list(s.rater_labels) == list(r.rater_labels)
            for attr in ("item_codes", "rater_codes", "value_codes"):
                assert np.array_equal(getattr(s, attr), getattr(r, attr)), (name, attr)


def test_entry_order_accepts_only_indices_that_meet_every_entry_in_order():
    assert _entry_order(np.asarray([0, 1, 0, 2, 1, 3], dtype=np.int32), 4)
    assert not _entry_order(np.asarray([0, 2, 1], dtype=np.int32), 3)  # entry 2 met before entry 1
    assert not _entry_order(np.asarray([1, 0], dtype=np.int32), 2)  # does not start at entry 0
    assert not _entry_order(np.asarray([0, 1, 1], dtype=np.int32), 3)  # entry 2 never used
    assert _entry_order(np.zeros(0, dtype=np.int32), 0)
    assert not _entry_order(np.zeros(0, dtype=np.int32), 1)


def _dictionary_chunk(values, order):
    """One chunk of ``values`` whose dictionary lists the distinct values in ``order`` ('first', 'sorted',
    'unused': sorted with a value no row uses, 'twice': first appearance with its first value again at the end)."""
    distinct = list(dict.fromkeys(values))
    if order == "sorted":
        distinct = sorted(distinct)
    elif order == "unused":
        distinct = sorted([*distinct, "zz" + "9" * (len(values[0]) - 2)])
    elif order == "twice":
        distinct = [*distinct, distinct[0]]
    position = {v: distinct.index(v) for v in dict.fromkeys(values)}
    indices = pa.array([position[v] for v in values], type=pa.int32())
    return pa.DictionaryArray.from_arrays(indices, pa.array(distinct))


@needs_pyarrow
@pytest.mark.parametrize("order", ["first", "sorted", "unused", "twice"])
@pytest.mark.parametrize("seed", range(4))
def test_dictionary_chunks_in_any_entry_order_give_the_reference_ratings(order, seed, monkeypatch):
    if seed % 2:
        monkeypatch.setattr(keycodes, "SORT_BITS", -1)
        monkeypatch.setattr(keycodes, "DIRECT_BITS", -1)
    items, raters, labels = random_table(seed, ids="ascii")
    cut = [0, len(items) // 3, len(items) // 2, len(items)]  # three chunks, each with its own dictionary
    table = pa.table({
        name: pa.chunked_array([_dictionary_chunk(values[a:b], order) for a, b in itertools.pairwise(cut)])
        for name, values in (("item_id", items), ("rater_id", raters))} | {"label": pa.array(labels)})
    ref = reference_build(items, raters, labels, "last")
    assert_same(lg.Ratings.from_long(table, duplicates="last"), ref)
    plain = factorize(pa.chunked_array([pa.array(items[a:b]) for a, b in itertools.pairwise(cut)]))
    coded = factorize(table.column("item_id"))
    assert np.array_equal(coded.codes, plain.codes) and list(coded.uniques) == list(plain.uniques)


@needs_pyarrow
def test_in_order_dictionary_chunks_skip_the_renumbering_pass(monkeypatch):
    """Arrow's CSV reader's chunks (dictionaries in order of first appearance) are coded without ``_canonical``."""
    items = [f"i{k:04d}" for k in np.random.default_rng(5).integers(0, 300, 2_000)]
    array = pa.chunked_array([pa.array(items[:700]).dictionary_encode(), pa.array(items[700:]).dictionary_encode()])

    def refuse(*_args, **_kwargs):
        raise AssertionError("renumbered")

    expected = factorize(pa.array(items))
    monkeypatch.setattr(columns, "_canonical", refuse)
    coded = factorize(array)
    assert np.array_equal(coded.codes, expected.codes) and list(coded.uniques) == list(expected.uniques)


@needs_pyarrow
def test_null_indices_in_dictionary_chunks_are_missing_ids():
    chunk = pa.DictionaryArray.from_arrays(pa.array([0, None, 1, 0], type=pa.int32()), pa.array(["ab", "cd"]))
    other = pa.array(["cd", "ef"]).dictionary_encode()
    coded = factorize(pa.chunked_array([chunk, other]))
    assert coded.codes.tolist() == [0, -1, 1, 0, 1, 2] and list(coded.uniques) == ["ab", "cd", "ef"]


@needs_pyarrow
def test_a_dictionary_met_out_of_order_is_renumbered_by_the_rows():
    """Indices that start at entry 0 and use every entry, but meet entry 2 before entry 1: the rows decide."""
    chunk = pa.DictionaryArray.from_arrays(pa.array([0, 2, 1, 2], type=pa.int32()), pa.array(["xa", "ya", "za"]))
    other = pa.array(["ya", "wa"]).dictionary_encode()
    coded = factorize(pa.chunked_array([chunk, other]))
    assert list(coded.uniques) == ["xa", "za", "ya", "wa"]
    assert coded.codes.tolist() == [0, 1, 2, 1, 2, 3]


@pytest.mark.parametrize("pools", [["p", "p", "p", "p"], ["q", "p", "q", "p"]])
def test_pool_errors_name_the_table_rows_with_one_pool_or_several(pools):
    """One pool takes every row as it is (no mask); several pools find a row's label from a mask when asked."""
    frame = pd.DataFrame({"item_id": ["a", "a", "b", "a"], "rater_id": ["u", "v", "u", "u"], "label": [1, 0, 1, 1],
                          "pool": pools}, index=[10, 20, 30, 40])
    expected = "rows 10 and 40" if pools[0] == "p" else "rows 20 and 40"
    if pools[0] == "q":
        frame.loc[20, "rater_id"] = "u"  # pool p: rows 20 and 40, rater u on item a twice
    with pytest.raises(lg.InputError, match=expected):
        lg.ratings_by_pool(frame)
    built = lg.ratings_by_pool(frame.drop(index=40))
    assert sum(r.n_ratings for r in built.values()) == 3


# ------------------------------------------------------------------ the direct route
def _few_bit_key_sets():
    rng = np.random.default_rng(17)
    yield "rater ids w01234", _digit_keys(rng, 30_000, 800, width=5)
    yield "few digits", _digit_keys(rng, 5_000, 7, width=3)
    yield "one key", np.full(1_000, 0x1234, dtype=np.uint64)
    yield "one row", np.asarray([42], dtype=np.uint64)
    yield "top bits", rng.choice(np.asarray([2**64 - 1, 2**64 - 2, 2**63 - 1], dtype=np.uint64), 4_000)
    x = rng.integers(0, 2**12, 30_000).astype(np.uint64)  # three runs of 4 bits, far apart
    yield "scattered bits", ((x & np.uint64(15)) | ((x >> np.uint64(4) & np.uint64(15)) << np.uint64(21))
                             | ((x >> np.uint64(8)) << np.uint64(58)))
    yield "16 random bits", rng.integers(0, 2**16, 50_000).astype(np.uint64) << np.uint64(40)


@pytest.mark.parametrize("block", [None, 777])
def test_direct_codes_equal_the_hash_on_every_key_shape(block, monkeypatch):
    if block:  # several blocks, a last one shorter: the bit gather's and the slot numbering's
        monkeypatch.setattr("labelgate.core.sortcodes.BLOCK", block)
        monkeypatch.setattr("labelgate.core.keycodes.BLOCK", block)
    for name, keys in _few_bit_key_sets():
        runs = varying_runs(keys)
        assert sum(length for _, length in runs) <= 24, name
        expected = hash_codes(keys, table_bits(keys[:1 << 16], keys.size))
        found = direct_codes(keys, runs)
        assert np.array_equal(found[0], expected[0]), name
        assert np.array_equal(found[1], expected[1]), name


def test_the_direct_route_is_taken_exactly_when_its_table_is_small(monkeypatch):
    taken = []
    real = keycodes.direct_codes

    def spy(keys, runs):
        taken.append(sum(length for _, length in runs))
        return real(keys, runs)

    monkeypatch.setattr(keycodes, "direct_codes", spy)
    rng = np.random.default_rng(19)
    raters = _digit_keys(rng, 20_000, 900, width=4)  # 4 digits: 16 varying bits, the free table of 2**16 slots
    wider = _digit_keys(rng, 20_000, 900, width=5)  # 20 bits: 2**20 slots for 20,000 rows, too large
    items = _digit_keys(rng, 20_000, 9_000, width=8)  # 8 digits: 32 varying bits
    assert sum(length for _, length in varying_runs(raters)) == 16
    assert sum(length for _, length in varying_runs(wider)) == 20
    for keys, direct in ((raters, True), (wider, False), (items, False)):
        taken.clear()
        codes, first = codes_of_keys(keys)
        expected = hash_codes(keys, table_bits(keys[:1 << 16], keys.size))
        assert np.array_equal(codes, expected[0]) and np.array_equal(first, expected[1])
        assert bool(taken) == direct
        if direct:  # 2**bits slots for 20,000 rows: within the free table of 2**16 or the rows
            assert 1 << taken[0] <= max(keys.size, 1 << keycodes.DIRECT_FREE_BITS)
    few_rows = np.asarray([0, 1 << 20, 1 << 40, 3 << 40], dtype=np.uint64)[rng.integers(0, 4, 100)]
    assert np.unique(few_rows).size == 4
    monkeypatch.setattr(keycodes, "FEW_VALUES", 1)  # not the few-values search: 3 bits, a table of 8 slots
    taken.clear()
    codes_of_keys(few_rows)
    assert taken == [3]


@needs_pyarrow
@pytest.mark.parametrize("route", ["direct", "hash"])
@pytest.mark.parametrize("ids", ["fixed", "ascii"])
@pytest.mark.parametrize("seed", range(3))
def test_every_input_form_on_the_direct_or_hash_route_gives_the_reference_ratings(route, seed, ids, monkeypatch):
    monkeypatch.setattr(keycodes, "SORT_BITS", 99)  # never the sort
    if route == "direct":  # every column that differs in up to 22 bits: a table of up to 2**22 slots
        monkeypatch.setattr(keycodes, "DIRECT_BITS", 22)
        monkeypatch.setattr(keycodes, "DIRECT_FREE_BITS", 22)
    else:
        monkeypatch.setattr(keycodes, "DIRECT_BITS", -1)
    assert_every_form_is_the_reference(*random_table(seed, ids=ids))


# ------------------------------------------------------------------ keys read at each value's start
def _exact_buffer_array(values):
    """An Arrow string array whose data buffer ends right after its last value (no padding to read into)."""
    data = "".join(values).encode()
    offsets = np.cumsum([0, *(len(v.encode()) for v in values)]).astype(np.int32)
    return pa.Array.from_buffers(pa.string(), len(values), [None, pa.py_buffer(offsets.tobytes()),
                                                            pa.py_buffer(data)])


@needs_pyarrow
@pytest.mark.parametrize("width", range(0, 9))
def test_keys_read_at_each_value_start_equal_the_packed_bytes(width):
    rng = np.random.default_rng(width)
    values = ["".join(chr(c) for c in rng.integers(48, 123, width)) for _ in range(500)]
    exact = _exact_buffer_array(values)
    assert exact.buffers()[2].size == width * len(values)  # the last values' 8-byte reads would pass its end
    arrays = {"one chunk, exact buffer": exact,
              "chunks": pa.chunked_array([pa.array(values[:130]), exact.slice(130, 1), pa.array(values[131:])]),
              "slices": pa.chunked_array([exact.slice(7, 200), exact.slice(250, 250)]),
              "plain": pa.array(values)}
    for name, array in arrays.items():
        keys, found_width = fixed_width_keys(array)
        rows, _ = fixed_width_bytes(array)
        assert found_width == width, name
        assert np.array_equal(keys, packed(rows)), name
        text = np.frombuffer("".join(array.to_pylist()).encode(), dtype=np.uint8)
        assert np.array_equal(keys, packed(text.reshape(len(array), width))), name
