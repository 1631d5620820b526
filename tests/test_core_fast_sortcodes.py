"""The sort route of the id coding and the in-order route of Arrow dictionary chunks give the plain route's Ratings.

* :func:`labelgate.core.sortcodes.sorted_codes` (many distinct keys: one sort of ``(key bits, row)`` words) must
  return exactly the codes and first rows of the vectorised hash, on keys of every shape, and refuse keys whose
  varying bits and row number do not fit one word;
* forced onto every build (``SORT_BITS`` below every table), every input form must still give the reference
  Ratings of ``test_fast_build`` (a row-by-row dict build);
* Arrow dictionary chunks whose dictionaries list their values in order of first appearance (what Arrow's CSV
  reader writes) skip the renumbering; chunks whose dictionaries do not (sorted, unused or repeated entries, null
  indices) must take the general route and give the same Ratings.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import labelgate as lg
from labelgate.core import columns, strings
from labelgate.core.columns import _entry_order, factorize
from labelgate.core.sortcodes import sorted_codes, varying_runs
from labelgate.core.strings import hash_codes, table_bits
from test_fast_build import assert_every_form_is_the_reference, assert_same, random_table, reference_build


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


def test_varying_runs_mark_exactly_the_bits_that_differ():
    keys = np.asarray([0b1000_0110, 0b1000_0000, 0b1010_0010], dtype=np.uint64)
    assert varying_runs(keys) == [(1, 2), (5, 1)]


@pytest.mark.parametrize("ids", ["fixed", "ascii"])
@pytest.mark.parametrize("seed", range(5))
def test_every_input_form_on_the_sort_route_gives_the_reference_ratings(seed, ids, monkeypatch):
    monkeypatch.setattr(strings, "SORT_BITS", -1)  # every column with more values than the few-values search
    assert_every_form_is_the_reference(*random_table(seed, ids=ids))


def test_pools_on_the_sort_route_equal_the_hash_route(monkeypatch):
    rng = np.random.default_rng(11)
    n = 30_000
    frame = pd.DataFrame({"item_id": [f"i{k:07d}" for k in rng.integers(0, 9_000, n)],
                          "rater_id": [f"w{k:04d}" for k in rng.integers(0, 700, n)],
                          "label": rng.integers(1, 6, n), "pool": rng.choice(["A", "B"], n)}).astype(
                              {"item_id": "str", "rater_id": "str", "pool": "str"})
    hashed = lg.ratings_by_pool(frame, duplicates="last")
    monkeypatch.setattr(strings, "SORT_BITS", -1)
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


@pytest.mark.parametrize("order", ["first", "sorted", "unused", "twice"])
@pytest.mark.parametrize("seed", range(4))
def test_dictionary_chunks_in_any_entry_order_give_the_reference_ratings(order, seed, monkeypatch):
    if seed % 2:
        monkeypatch.setattr(strings, "SORT_BITS", -1)
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


def test_null_indices_in_dictionary_chunks_are_missing_ids():
    chunk = pa.DictionaryArray.from_arrays(pa.array([0, None, 1, 0], type=pa.int32()), pa.array(["ab", "cd"]))
    other = pa.array(["cd", "ef"]).dictionary_encode()
    coded = factorize(pa.chunked_array([chunk, other]))
    assert coded.codes.tolist() == [0, -1, 1, 0, 1, 2] and list(coded.uniques) == ["ab", "cd", "ef"]


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
