"""The fast routes from a table to `Ratings` give the Ratings of a plain, row-by-row reference build.

Every input form — pandas object and Arrow strings, categoricals, Arrow tables and dictionary columns (several
chunks with their own dictionaries), pre-encoded columns, numpy object / string / integer arrays, lists — must
give the same codes, labels, categories and dropped-row count as :func:`reference_build`, a dict-based loop over
the rows (first-appearance ids, sorted categories, duplicates resolved in row order), on random tables with
duplicates, missing labels, Unicode and whitespace ids. The metrics that share work (the six SPA weightings, κx
between separately built Ratings) must equal their unshared computation.
"""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pandas as pd
import pytest

import labelgate as lg
from labelgate.core.align import align_items, on_one_index
from labelgate.core.build import _any_repeated_pair
from labelgate.core.column import Column, EncodedColumn
from labelgate.core.columns import factorize, factorize_objects, take_values
from labelgate.core.keycodes import HEAD, hash_codes
from labelgate.core.strings import (
    JOIN_BLOCK,
    fixed_width_codes,
    object_string_codes,
    stacked_codes,
    window_keys,
)
from labelgate.metrics.panel import metrics_panel
from labelgate.metrics.spa import WEIGHTINGS

try:
    import pyarrow as pa
except ImportError:  # a core-only install: the tests of Arrow input skip (needs_pyarrow)
    pa = None

#: pandas' Arrow-stored strings with NaN for missing: "str" from pandas 3 on; pandas 2.2 reads "str" as numpy's str
#: (Python objects, another route) and names this type "string[pyarrow_numpy]" (without pyarrow: "str" itself).
_STR_IS_PANDAS_STRINGS = isinstance(pd.api.types.pandas_dtype("str"), pd.StringDtype)
ARROW_STR = "str" if pa is None or _STR_IS_PANDAS_STRINGS else "string[pyarrow_numpy]"

#: The tests of Arrow input: Arrow tables, arrays and dictionary chunks, and pandas' ``str`` columns, which pandas
#: stores in Arrow only when pyarrow is installed (pyarrow is not a core dependency).
needs_pyarrow = pytest.mark.skipif(pa is None, reason="pyarrow is not installed: the Arrow input routes are not testable")

ID_POOL = ["i1", "i 1", " i1", "é", "ß-7", "日本", "i1 ", "", "0", "ID-ÆØÅ", "a\tb", "x" * 40]


def _missing(value):
    return value is None or (isinstance(value, float) and math.isnan(value))


def reference_build(items, raters, values, duplicates="error"):
    """A row-by-row build: ids in first-appearance order, categories sorted, duplicates in row order."""
    item_ids, rater_ids = {}, {}
    for i, r in zip(items, raters, strict=True):
        item_ids.setdefault(i, len(item_ids))
        rater_ids.setdefault(r, len(rater_ids))
    rows = [j for j, v in enumerate(values) if not _missing(v)]
    chosen = {}
    for j in rows:
        key = (items[j], raters[j])
        if key in chosen and duplicates == "error":
            raise AssertionError("unexpected duplicate")
        if key not in chosen or duplicates == "last":
            chosen[key] = j
    kept = sorted(chosen.values())
    used_items = sorted({items[j] for j in kept}, key=item_ids.__getitem__)
    used_raters = sorted({raters[j] for j in kept}, key=rater_ids.__getitem__)
    cats = sorted({values[j] for j in kept})
    return {"item_labels": used_items, "rater_labels": used_raters, "categories": tuple(cats),
            "item_codes": [used_items.index(items[j]) for j in kept],
            "rater_codes": [used_raters.index(raters[j]) for j in kept],
            "value_codes": [cats.index(values[j]) for j in kept], "n_dropped_missing": len(values) - len(rows)}


def assert_same(r, ref):
    assert list(r.item_labels) == ref["item_labels"]
    assert list(r.rater_labels) == ref["rater_labels"]
    assert r.categories == ref["categories"]
    assert r.item_codes.tolist() == ref["item_codes"]
    assert r.rater_codes.tolist() == ref["rater_codes"]
    assert r.value_codes.tolist() == ref["value_codes"]
    assert r.n_dropped_missing == ref["n_dropped_missing"]


def random_table(seed, n=80, ids="strings"):
    rng = np.random.default_rng(seed)
    n_items, n_raters = int(rng.integers(1, 25)), int(rng.integers(1, 8))
    if ids == "ascii":  # ASCII ids of one length, more than the head's few values: the vectorised hash,
        n_items, n = int(rng.integers(70, 200)), 600  # item labels made on demand, object arrays joined
        item_ids = [f"i{k:07d}" for k in rng.permutation(n_items)]
        rater_ids = [f"w{k:03d}" for k in rng.permutation(n_raters)]
    elif ids == "strings":
        item_ids = [ID_POOL[k % len(ID_POOL)] + str(k // len(ID_POOL)) for k in rng.permutation(n_items)]
        rater_ids = [f"r{k}-ü" for k in rng.permutation(n_raters)]
    elif ids == "fixed":  # one byte width per column (Arrow strings are coded from their bytes)
        item_ids = [f"é{k:03d}" for k in rng.permutation(n_items)]
        rater_ids = [f"r{k}" for k in rng.permutation(n_raters)]
    elif ids == "dense":
        item_ids = [int(k) for k in rng.permutation(n_items) - 3]
        rater_ids = [int(k) for k in rng.permutation(n_raters)]
    else:  # sparse integers: a lookup table would be huge
        item_ids = [int(k) for k in rng.choice(2**40, size=n_items, replace=False)]
        rater_ids = [int(k) * 10**12 for k in rng.permutation(n_raters)]
    items = [item_ids[k] for k in rng.integers(0, n_items, n)]
    raters = [rater_ids[k] for k in rng.integers(0, n_raters, n)]
    labels = [["no", "yes", "maybe"][k] for k in rng.integers(0, 3, n)]
    for j in np.flatnonzero(rng.random(n) < 0.1):
        labels[j] = None
    return items, raters, labels


def forms(items, raters, labels):
    """The same table in every input form the core reads."""
    frame = pd.DataFrame({"item_id": pd.Series(items, dtype=object), "rater_id": pd.Series(raters, dtype=object),
                          "label": pd.Series(labels, dtype=object)})
    yield "object frame", frame
    yield "lists", {"item_id": items, "rater_id": raters, "label": labels}
    yield "numpy objects", {k: np.asarray(v, dtype=object) for k, v in frame.items()}
    cats = {}
    for name in ("item_id", "rater_id"):
        values = [*list(dict.fromkeys(frame[name]))[::-1], "never used"]  # another order, an unused category
        cats[name] = pd.Categorical(frame[name], categories=values)
    yield "categoricals", pd.DataFrame({**cats, "label": frame["label"]})
    codes = {name: EncodedColumn(cats[name].codes, list(cats[name].categories)) for name in cats}
    yield "encoded", {**codes, "label": labels}
    if isinstance(items[0], str):
        yield "arrow strings", frame.astype({"item_id": ARROW_STR, "rater_id": ARROW_STR})
        yield "numpy unicode", {"item_id": np.asarray(items), "rater_id": np.asarray(raters), "label": labels}
    else:
        yield "numpy integers", {"item_id": np.asarray(items, dtype=np.int64),
                                 "rater_id": np.asarray(raters, dtype=np.int64), "label": labels}
        yield "integer frame", frame.astype({"item_id": "int64", "rater_id": "int64"})
    table = pa.table({"item_id": pa.array(items), "rater_id": pa.array(raters), "label": pa.array(labels)})
    yield "arrow table", table
    half = len(items) // 2
    chunked = {name: pa.chunked_array([pa.array(v[:half]).dictionary_encode(), pa.array(v[half:]).dictionary_encode()])
               for name, v in (("item_id", items), ("rater_id", raters))}
    yield "arrow dictionary chunks", pa.table({**chunked, "label": pa.array(labels)})
    dtype = pd.ArrowDtype(pa.dictionary(pa.int32(), pa.array(items).type))
    yield "pandas arrow dictionary", pd.DataFrame({"item_id": pd.array(items, dtype=dtype),
                                                   "rater_id": pd.Series(raters, dtype=object), "label": labels})


@needs_pyarrow
@pytest.mark.parametrize("ids", ["strings", "fixed", "ascii", "dense", "sparse"])
@pytest.mark.parametrize("duplicates", ["first", "last"])
@pytest.mark.parametrize("seed", range(6))
def test_every_input_form_gives_the_reference_ratings(seed, duplicates, ids):
    assert_every_form_is_the_reference(*random_table(seed, ids=ids), duplicates)


def assert_every_form_is_the_reference(items, raters, labels, duplicates="first"):
    """``Ratings.from_long`` of the table in every input form equals the row-by-row reference build."""
    ref = reference_build(items, raters, labels, duplicates)
    for name, data in forms(items, raters, labels):
        try:
            assert_same(lg.Ratings.from_long(data, duplicates=duplicates), ref)
        except AssertionError as exc:
            raise AssertionError(f"input form {name!r}: {exc}") from exc


@needs_pyarrow
@pytest.mark.parametrize("seed", range(4))
def test_pools_give_the_reference_ratings_of_each_pool(seed):
    items, raters, labels = random_table(seed, n=120)
    rng = np.random.default_rng(seed)
    pool = [["crowd", "trusted"][k] for k in rng.integers(0, 2, len(items))]
    frames = {"object": pd.DataFrame({"item_id": items, "rater_id": raters, "label": labels, "pool": pool}),
              "arrow": pa.table({"item_id": items, "rater_id": raters, "label": labels, "pool": pool})}
    for data in frames.values():
        pools = lg.ratings_by_pool(data, duplicates="first")
        assert list(pools) == list(dict.fromkeys(pool))
        for name, r in pools.items():
            rows = [j for j, p in enumerate(pool) if p == name]
            ref = reference_build([items[j] for j in rows], [raters[j] for j in rows], [labels[j] for j in rows],
                                  "first")
            decoded = [(r.item_labels[i], r.rater_labels[k], r.categories[v])
                       for i, k, v in zip(r.item_codes, r.rater_codes, r.value_codes, strict=True)]
            expected = [(ref["item_labels"][i], ref["rater_labels"][k], ref["categories"][v])
                        for i, k, v in zip(ref["item_codes"], ref["rater_codes"], ref["value_codes"], strict=True)]
            assert decoded == expected
        assert pools["crowd"].item_labels is pools["trusted"].item_labels


@needs_pyarrow
def test_missing_ids_are_named_in_every_form():
    items = ["a", "b", None, "c"]
    for data in ({"item_id": items, "rater_id": list("wxyz"), "label": [1, 1, 0, 1]},
                 pa.table({"item_id": pa.array(items).dictionary_encode(), "rater_id": list("wxyz"),
                           "label": [1, 1, 0, 1]}),
                 pd.DataFrame({"item_id": pd.Categorical(items), "rater_id": list("wxyz"), "label": [1, 1, 0, 1]})):
        with pytest.raises(lg.InputError, match="Column 'item_id' has a missing id in 1 row.*row 2"):
            lg.Ratings.from_long(data)


def test_duplicates_are_found_and_named_on_every_route():
    data = {"item_id": np.asarray([5, 7, 5], dtype=np.int64), "rater_id": ["u", "u", "u"], "label": [1, 0, 0]}
    with pytest.raises(lg.InputError, match="Rater 'u' judged item 5 more than once \\(rows 0 and 2"):
        lg.Ratings.from_long(data)
    pools = {**data, "pool": ["p", "q", "p"]}
    with pytest.raises(lg.InputError, match="rows 0 and 2"):
        lg.ratings_by_pool(pd.DataFrame(pools, index=[10, 11, 12]).reset_index(drop=True))
    with pytest.raises(lg.InputError, match="rows 'a' and 'c'"):
        lg.ratings_by_pool(pd.DataFrame(pools, index=["a", "b", "c"]))


@pytest.mark.parametrize("n_raters", [2**16, 2**16 + 1])  # 2^16 * 2^16 keys fit uint32; one rater more does not
def test_the_duplicate_check_is_exact_at_the_edge_of_its_key_width(n_raters):
    top = 2**16 - 1  # the largest item code: the largest key is 2^32 - 1 with 2^16 raters
    last = n_raters - 1
    items = np.asarray([top, 0, top], dtype=np.int64)
    assert _any_repeated_pair(items, np.asarray([last, last, last], dtype=np.int64), n_raters)
    assert not _any_repeated_pair(items, np.asarray([last, last, last - 1], dtype=np.int64), n_raters)
    # with 2^16 + 1 raters, (top, 1) has the key 2^32: a uint32 key would wrap it onto (0, 0)
    assert not _any_repeated_pair(np.asarray([top, 0], dtype=np.int64), np.asarray([1, 0], dtype=np.int64),
                                  n_raters)


def test_factorize_routes_handle_awkward_values():
    nan = float("nan")
    col = factorize(np.asarray([nan, 1.5, nan, -0.0, 0.0, 1.5]))
    assert col.codes.tolist() == [-1, 0, -1, 1, 1, 0] and col.uniques.tolist() == [1.5, -0.0]
    col = factorize(np.asarray([True, False, True]))
    assert col.codes.tolist() == [0, 1, 0] and col.uniques.tolist() == [True, False]
    col = factorize(np.asarray([2**64 - 1, 2**64 - 3, 2**64 - 1], dtype=np.uint64))
    assert col.codes.tolist() == [0, 1, 0] and col.uniques.tolist() == [2**64 - 1, 2**64 - 3]
    col = factorize(np.asarray([-128, 127, -128], dtype=np.int8))
    assert col.codes.tolist() == [0, 1, 0] and col.uniques.tolist() == [-128, 127]
    # unhashable values and values that mix types take the exact route
    col = factorize_objects(np.asarray([[1], [2], [1], None], dtype=object)[[0, 1, 2, 3]])
    assert col.codes.tolist() == [0, 1, 0, -1]
    col = factorize_objects(np.asarray(["1", 1, 1.0, None, pd.NA, "1"], dtype=object))
    assert col.codes.tolist() == [0, 1, 1, -1, -1, 0]


def first_appearance(values):
    """Codes and uniques in order of first appearance, by a dict (the reference of every route)."""
    index = {}
    codes = [index.setdefault(v, len(index)) for v in values]
    return codes, list(index)


def assert_reference_codes(column, values, route):
    col = factorize(column)
    codes, uniques = first_appearance(values)
    assert col.codes.tolist() == codes, route
    assert list(col.uniques) == uniques, route
    assert [type(u) for u in col.uniques] == [type(u) for u in uniques], route  # str, never numpy's str_


@needs_pyarrow
@pytest.mark.parametrize("large", [False, True])
def test_fixed_width_arrow_strings_take_every_route_and_give_the_reference_codes(large):
    rng = np.random.default_rng(11)
    kind = pa.large_string() if large else pa.string()
    n = 3 * HEAD
    cases = {
        "lookup, one byte": [["A", "B", "C"][k] for k in rng.integers(0, 3, n)],
        "lookup, two bytes (one Unicode letter)": [["é", "ß", "ab"][k] for k in rng.integers(0, 3, n)],
        "lookup, empty strings": [""] * n,
        "few values": [["crowd", "trust", "gold ", " gold"][k] for k in rng.integers(0, 4, n)],
        # a few values in the head, another only after it: the search misses it and the hash route takes over
        "hash: few values, one after the head": [["crowd", "trust"][k] for k in rng.integers(0, 2, n - 5)]
        + ["late!"] * 5,
        "hash, many rows per id": [f"w{k:04d}" for k in rng.integers(0, 100, n)],
        "hash": [f"i{k:06d}" for k in rng.integers(0, n // 3, n)],
        "hash, Unicode ids of one width": [f"ü{k:05d}" for k in rng.integers(0, n // 3, n)],
        "hash, NUL bytes": [f"\x00{k:04d}\x00" for k in rng.integers(0, n // 3, n)],
        "hash, eight bytes": [f"i{k:07d}" for k in rng.integers(0, n // 3, n)],
    }
    for route, values in cases.items():
        array = pa.array(values, type=kind)
        found = fixed_width_codes(array)
        assert found is not None, route
        if route.startswith("hash"):  # the hash route numbers values in order of first appearance itself
            assert found[0].tolist() == first_appearance(values)[0], route
        assert_reference_codes(array, values, route)
        assert_reference_codes(pd.Series(values, dtype=ARROW_STR), values, route + " (pandas)")
        half = n // 2
        chunked = pa.chunked_array([array.slice(0, half), array.slice(half)])
        assert_reference_codes(chunked, values, route + " (chunks)")
        # chunks with their own dictionaries (Arrow's CSV reader): the dictionaries are coded jointly
        dictionaries = pa.chunked_array([array.slice(0, half).dictionary_encode(), array.slice(half).dictionary_encode()])
        assert_reference_codes(dictionaries, values, route + " (dictionary chunks)")
        assert_reference_codes(array.slice(7), values[7:], route + " (a slice: offsets not at zero)")


@needs_pyarrow
@pytest.mark.parametrize("large", [False, True])
def test_wide_ids_with_one_varying_window_are_coded_from_its_bytes(large):
    rng = np.random.default_rng(13)
    kind = pa.large_string() if large else pa.string()
    n = 3 * HEAD
    k = rng.integers(0, n // 3, n)
    cases = {  # one width of 9-64 bytes; every byte outside one window of 8 is the same in every row
        "constant prefix, 9 bytes": [f"i{v:08d}" for v in k],
        "constant prefix, 11 bytes": [f"item-{v:06d}" for v in k],
        "constant suffix and whitespace": [f"{v:07d} \t-batch" for v in k],
        "prefix and suffix, Unicode": [f"ÆØÅ {v:05d}日本" for v in k],
        "varying bytes in the middle of 64": ["x" * 20 + f"{v:08d}" + "y" * 36 for v in k],
        "a few values": [["crowd-pool-a", "crowd-pool-b", "crowd-pool-c"][v % 3] for v in k],
        "one value": ["trusted-pool"] * n,
        "NUL bytes": [f"\x00\x00{v:07d}" for v in k],
    }
    for route, values in cases.items():
        array = pa.array(values, type=kind)
        assert window_keys(array) is not None, route
        assert fixed_width_codes(array) is not None, route
        assert_reference_codes(array, values, route)
        assert_reference_codes(pd.Series(values, dtype=ARROW_STR), values, route + " (pandas)")
        chunked = pa.chunked_array([array.slice(0, n // 2), array.slice(n // 2)])
        assert_reference_codes(chunked, values, route + " (chunks)")
        assert_reference_codes(array.slice(7), values[7:], route + " (a slice: offsets not at zero)")
        # chunks with their own dictionaries (Arrow's CSV reader): the dictionaries are coded jointly by the window
        dictionaries = [array.slice(0, n // 2).dictionary_encode(), array.slice(n // 2).dictionary_encode()]
        assert stacked_codes([d.dictionary for d in dictionaries]) is not None, route
        assert_reference_codes(pa.chunked_array(dictionaries), values, route + " (dictionary chunks)")
    # one row that differs outside the window (late, in the second chunk): the window is not a key
    late = [f"i{v:08d}" for v in k]
    late[-3] = "j" + late[-3][1:]
    two = pa.chunked_array([pa.array(late[:n // 2], type=kind), pa.array(late[n // 2:], type=kind)])
    assert window_keys(two) is None
    assert_reference_codes(two, late, "varying bytes more than 8 apart")


@needs_pyarrow
def test_arrow_strings_outside_the_fixed_width_routes_give_the_reference_codes():
    rng = np.random.default_rng(12)
    items = [f"i{k}" for k in rng.integers(0, 500, 2000)]  # widths differ
    spread = [f"{k:04d}-item-{k % 7:05d}" for k in rng.integers(0, 500, 2000)]  # 14 bytes varying 13 apart
    too_wide = [f"{'x' * 70}{k:03d}" for k in rng.integers(0, 500, 2000)]  # wider than the window route
    with_null = [f"a{k:03d}" for k in rng.integers(0, 50, 100)]
    for values in (items, spread, too_wide):
        assert fixed_width_codes(pa.array(values)) is None
        assert_reference_codes(pa.array(values), values, "general route")
    array = pa.array([*with_null, None, *with_null])
    assert fixed_width_codes(array) is None
    col = factorize(array)
    assert col.codes[len(with_null)] == -1 and col.codes.tolist()[:len(with_null)] == first_appearance(with_null)[0]
    # the same total length as one width, widths that differ only after the first block of offsets
    uneven = [f"k{k:03d}" for k in rng.integers(0, 500, 3000)]
    uneven[2500], uneven[2501] = "k12", "k1234"
    for block in (1 << 16, 999):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("labelgate.core.strings.BLOCK", block)
            assert fixed_width_codes(pa.array(uneven)) is None
            assert_reference_codes(pa.array(uneven), uneven, "uneven widths")
    mixed = pa.chunked_array([pa.array(["ab", "cd"]), pa.array(["abc", "ab"])])  # chunks of different widths
    assert fixed_width_codes(mixed) is None
    assert_reference_codes(mixed, ["ab", "cd", "abc", "ab"], "mixed widths")


def test_object_strings_of_one_length_are_coded_from_their_bytes_exactly():
    rng = np.random.default_rng(14)
    n = JOIN_BLOCK + 2 * HEAD + 3
    taken = {  # values of one ASCII length: coded from their bytes
        "lookup": [["A", "B"][k] for k in rng.integers(0, 2, n)],
        "empty": [""] * n,
        "few": [["crowd", "trust", "gold "][k] for k in rng.integers(0, 3, n)],
        "hash": [f"w{k:05d}" for k in rng.integers(0, 2000, n)],
        "lookup, two characters": [f"{k:02d}" for k in rng.integers(0, 100, n)],
        "hash, three characters": [f"{k:03d}" for k in rng.integers(0, 1000, n)],
        "hash, eight characters": [f"v{k:07d}" for k in rng.integers(0, 5000, n)],
    }
    refused = {  # anything the fixed-width bytes could confuse: the hash-and-compare route
        "NUL inside": [f"a\x00{k:03d}" for k in rng.integers(0, 500, n)],  # NUL separates the joined values
        "a trailing NUL": [f"b{k:03d}" for k in rng.integers(0, 500, n - 1)] + ["b00\x00"],
        "a longer value": [f"c{k:03d}" for k in rng.integers(0, 500, n - 1)] + ["c0001"],
        "a shorter value": [f"d{k:03d}" for k in rng.integers(0, 500, n - 1)] + ["d00"],
        "bytes among strings": [f"e{k:03d}" for k in rng.integers(0, 500, n - 1)] + [b"e001"],
        "numbers among strings": ["1"] * (n - 1) + [1],
        "not ASCII": [f"é{k:03d}" for k in rng.integers(0, 500, n)],
        "longer than 8": [f"item-{k:05d}" for k in rng.integers(0, 500, n)],
        # values whose lengths compensate: the joined text keeps the length of one width (and its NUL count)
        "a shorter and a longer value": [f"f{k:03d}" for k in rng.integers(0, 500, n - 2)] + ["f00", "f0001"],
        "a NUL and a shorter value": [f"f{k:03d}" for k in rng.integers(0, 500, n - 2)] + ["f00", "f\x00001"],
        # a NUL after a value of the width: the NULs, counted, could be separators
        "a NUL after a whole value": [f"g{k:03d}" for k in rng.integers(0, 500, n - 1)] + ["g000\x00"],
        # the first blocks of one width, the others all of another
        "later blocks of another width": [f"h{k:03d}" for k in rng.integers(0, 500, n // 2)]
        + [f"h{k:04d}" for k in rng.integers(0, 500, n - n // 2)],
    }
    # the strings are turned into bytes a block at a time: the default block (crossed: n > JOIN_BLOCK), and blocks
    # that put the value that breaks the layout in a later block than the first, one of them a block per value
    blocks = (JOIN_BLOCK, 1, 5, 1000)
    for block, route, values in [(b, r, v) for b in blocks for r, v in {**taken, **refused}.items()]:
        array = np.empty(len(values), dtype=object)
        array[:] = values
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("labelgate.core.strings.JOIN_BLOCK", block)
            assert (object_string_codes(array) is None) == (route in refused), (block, route)
            col = factorize_objects(array)
        codes, uniques = first_appearance(values)
        assert col.codes.tolist() == codes, (block, route)
        assert [type(u) for u in col.uniques] == [type(u) for u in uniques], (block, route)
        assert list(col.uniques) == uniques, (block, route)


def test_labels_of_a_deferred_column_are_made_once_on_first_read():
    calls = []

    def make():
        calls.append(1)
        return np.asarray(["a", "b"], dtype=object)

    col = Column.deferred(np.asarray([0, 1, 0]), make, 2)
    assert col.n_uniques == 2
    assert calls == []
    assert list(col.uniques) == ["a", "b"] and list(col.uniques) == ["a", "b"]
    assert calls == [1]


@needs_pyarrow
@pytest.mark.parametrize("rows", [[0, 3, 4, 9], [9, 0, 4, 3, 5]])  # increasing (the hash's) or not (the lookup's)
def test_values_are_taken_chunk_by_chunk_in_the_order_asked(rows, monkeypatch):
    monkeypatch.setattr("labelgate.core.columns.TAKE_BLOCK", 2)  # several takes within a chunk
    values = [f"v{k}" for k in range(10)]
    chunked = pa.chunked_array([pa.array(values[:4]), pa.array([], type=pa.string()), pa.array(values[4:])])
    positions = np.asarray(rows, dtype=np.int64)
    assert take_values(chunked, positions).tolist() == [values[k] for k in rows]
    assert take_values(pa.array(values), positions).tolist() == [values[k] for k in rows]


def test_the_vectorised_hash_is_exact_and_grows_its_table():
    rng = np.random.default_rng(13)
    distinct = np.concatenate([rng.integers(0, 2**63, 3000, dtype=np.uint64) * np.uint64(2),
                               np.asarray([0, 1, 2**64 - 1], dtype=np.uint64)])  # 2^64 - 1: the empty marker
    keys = distinct[rng.integers(0, distinct.size, 20_000)]
    codes, first = first_appearance(keys.tolist())
    for bits in (10, 16):  # 10 bits: 1,024 slots for ~3,000 keys, the table must grow
        got, rows = hash_codes(keys, bits)
        assert got.tolist() == codes
        assert keys[rows].tolist() == first
        assert (rows == np.unique(got, return_index=True)[1]).all()


def test_the_hash_gives_the_same_codes_block_by_block(monkeypatch):
    rng = np.random.default_rng(15)
    keys = rng.integers(0, 5000, 20_000).astype(np.uint64) * np.uint64(7919)
    whole = hash_codes(keys, 14)
    monkeypatch.setattr("labelgate.core.keycodes.BLOCK", 999)  # 21 blocks, the last one short
    blocks = hash_codes(keys, 14)
    codes, first = first_appearance(keys.tolist())
    for got, rows in (whole, blocks):
        assert got.tolist() == codes
        assert keys[rows].tolist() == first


def test_a_hash_collision_falls_back_to_the_exact_route():
    class Colliding:
        def __init__(self, name):
            self.name = name

        def __hash__(self):
            return 7

        def __eq__(self, other):
            return isinstance(other, Colliding) and other.name == self.name

    a, b = Colliding("a"), Colliding("b")
    col = factorize_objects(np.asarray([a, b, Colliding("a"), b], dtype=object))
    assert col.codes.tolist() == [0, 1, 0, 1] and col.uniques[0] is a


def test_cross_kappa_between_separately_built_ratings_equals_the_pool_route():
    rng = np.random.default_rng(3)
    n = 3000
    item = rng.integers(0, 700, n)
    label = np.where(rng.random(n) < 0.7, item % 4, rng.integers(0, 4, n))  # agreement well above chance
    data = pd.DataFrame({"item_id": [f"i{k}" for k in item], "rater_id": [f"r{k}" for k in rng.integers(0, 40, n)],
                         "label": label, "pool": rng.choice(["A", "B"], n)})
    pools = lg.ratings_by_pool(data, duplicates="first")
    x = lg.Ratings.from_long(data[data.pool == "A"], duplicates="first")
    y = lg.Ratings.from_long(data[data.pool == "B"].iloc[::-1], duplicates="last")  # another item order
    for level in ("nominal", "ordinal"):
        xs = x if level == "nominal" else lg.Ratings.from_long(data[data.pool == "A"], duplicates="first",
                                                              level="ordinal")
        ys = y if level == "nominal" else lg.Ratings.from_long(data[data.pool == "B"].iloc[::-1],
                                                              duplicates="last", level="ordinal")
        pa_, pb = (pools if level == "nominal" else lg.ratings_by_pool(data, duplicates="first", level="ordinal")
                   ).values()
        for func in (lg.cross_kappa, lg.normalized_cross_kappa):
            assert 0.2 < float(func(pa_, pb)) < 1.2
            assert float(func(xs, ys)) == pytest.approx(float(func(pa_, pb)), abs=1e-12)
    # the alignment is cached on x: the second call reuses the re-indexed pair
    assert on_one_index(x, y)[1] is on_one_index(x, y)[1]
    cx, cy = align_items(x, y)
    assert (x.item_labels[cx] == y.item_labels[cy]).all()
    assert cx.size == len(set(x.item_labels) & set(y.item_labels))


def _every_item_pairable(seed, n_items=400, n_raters=30, q=4):
    """A table whose items all have 2-4 ratings by distinct raters (agreement above chance)."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 5, n_items)
    item = np.repeat(np.arange(n_items), sizes)
    rater = np.concatenate([rng.choice(n_raters, k, replace=False) for k in sizes])
    label = np.where(rng.random(item.size) < 0.6, item % q, rng.integers(0, q, item.size))
    return {"item_id": [f"i{k:05d}" for k in item], "rater_id": [f"r{k}" for k in rater], "label": label}


def test_a_view_of_every_item_is_the_shared_view_without_a_gather():
    from labelgate.metrics._items import is_whole_axis, item_statistics, view

    r = lg.Ratings.from_long(_every_item_pairable(21))
    every = np.arange(r.n_items)
    assert is_whole_axis(r, every)
    for codes in (every[::-1].copy(), every[:-1], np.r_[0, 0, every[2:]], np.r_[every[:-2], r.n_items - 1,
                                                                                  r.n_items - 1]):
        assert not is_whole_axis(r, codes)
    whole = view(r, every)
    assert whole is view(r) and whole is view(r, min_ratings=1)  # one view, one set of shared statistics
    counts, n = item_statistics(r, every)
    assert counts is whole.counts and n is whole.n and not counts.flags.writeable
    backwards = view(r, every[::-1].copy())  # a gather: the same numbers, in the order asked
    assert backwards is not whole
    assert np.array_equal(backwards.counts, whole.counts[::-1]) and np.array_equal(backwards.n, whole.n[::-1])
    assert np.array_equal(item_statistics(r, every[::-1].copy())[0], whole.counts[::-1])


def test_an_alignment_of_every_item_is_the_whole_axis_by_identity():
    """Pools whose every item is rated in both align on the Ratings' own read-only item axis (recognised without a
    pass over the codes); the cached category totals and rated-item counts equal their definitions."""
    from labelgate.core.align import align_items
    from labelgate.metrics._cross_disagreement import build_cross_kappa
    from labelgate.metrics._items import category_totals, is_whole_axis

    data = _every_item_pairable(23)
    n = len(data["label"])
    both = {"item_id": data["item_id"] * 2, "rater_id": data["rater_id"] * 2,
            "label": np.r_[data["label"], (data["label"] + (np.arange(n) % 3 == 0)) % 4],
            "pool": ["A"] * n + ["B"] * n}
    pools = lg.ratings_by_pool(both)
    x, y = pools["A"], pools["B"]
    cx, cy = align_items(x, y)
    assert cx is x.all_items and cy is y.all_items and not cx.flags.writeable
    assert is_whole_axis(x, cx) and is_whole_axis(y, cy)
    assert np.array_equal(cx, np.arange(x.n_items))
    # the identity path against the gathered one (every item backwards): the same numbers
    backwards = np.arange(x.n_items)[::-1].copy()
    whole, gathered = build_cross_kappa(x, y, cx, cy), build_cross_kappa(x, y, backwards, backwards)
    assert whole.point()["value"][0] == pytest.approx(gathered.point()["value"][0], abs=1e-14)
    assert [np.array_equal(a, b) for a, b in zip(whole.totals[1:], gathered.totals[1:], strict=True)] == [True] * 2
    assert whole.n_ratings == gathered.n_ratings == 2 * n
    # the category totals: from the codes before the item table exists, from the table after; both its column sums
    fresh = lg.Ratings.from_long(data)
    assert "item_counts" not in fresh.__dict__
    before = fresh.category_counts
    assert np.array_equal(before, fresh.item_counts.sum(axis=0)) and before.dtype == np.int64
    again = lg.Ratings.from_long(data)
    _ = again.item_counts
    assert np.array_equal(again.category_counts, before)
    assert np.array_equal(category_totals(x, backwards, x.item_counts[backwards]), x.category_counts)
    # an item rated in one pool only: a plain alignment of the others, and the rated items counted
    short = {k: v[:-1] for k, v in both.items()}
    last = short["item_id"][-1]
    short = {k: [v for v, item, pool in zip(short[k], short["item_id"], short["pool"], strict=True)
                 if not (item == last and pool == "B")] for k in short}
    p = lg.ratings_by_pool(short)
    cx, cy = align_items(p["A"], p["B"])
    assert cx is not p["A"].all_items and cx.size == p["A"].n_items - 1
    assert p["B"].n_rated_items == p["B"].n_items - 1 == int((p["B"].ratings_per_item > 0).sum())


def test_statistics_kept_for_a_pair_give_the_fresh_numbers_and_never_travel():
    """κx's cross disagreements kept on the first pool for the second, and α's within-item disagreements kept
    per view: repeated calls, intervals included, equal those on fresh `Ratings`; a pickle or deep copy of a pool
    carries no kept entry (a weak reference cannot travel) and computes the same numbers again."""
    import copy
    import gc
    import pickle

    from labelgate.core.cached import PairCache

    data = _every_item_pairable(24)
    n = len(data["label"])
    both = {"item_id": data["item_id"] * 2, "rater_id": data["rater_id"] * 2,
            "label": np.r_[data["label"], (data["label"] + (np.arange(n) % 4 == 0)) % 4],
            "pool": ["A"] * n + ["B"] * n}

    def numbers(x, y):
        return [lg.cross_kappa(x, y, ci=0.9, n_boot=200, seed=3).to_dict(),
                lg.normalized_cross_kappa(x, y, ci=0.9, n_boot=200, seed=3).to_dict(),
                lg.krippendorff_alpha(x, ci=0.9, n_boot=200, seed=3).to_dict()]

    pools = lg.ratings_by_pool(both)
    x, y = pools["A"], pools["B"]
    first = numbers(x, y)
    assert isinstance(x.__dict__["_cross_observed"], PairCache) and len(x.__dict__["_cross_observed"]) == 1
    assert numbers(x, y) == first  # from the kept statistics
    fresh = lg.ratings_by_pool(both)
    assert numbers(fresh["A"], fresh["B"]) == first
    for moved in (pickle.loads(pickle.dumps(x)), copy.deepcopy(x)):
        assert len(moved.__dict__["_cross_observed"]) == 0
        assert numbers(moved, y) == first
    assert numbers(copy.copy(x), y) == first  # a shallow copy shares the entries: the same judgements
    # separately built Ratings: the pair put on one index is kept the same way, and pickles
    a = lg.Ratings.from_long({k: v[:n] for k, v in both.items() if k != "pool"})
    b = lg.Ratings.from_long({k: v[n:] for k, v in both.items() if k != "pool"})
    assert numbers(a, b) == first
    assert numbers(pickle.loads(pickle.dumps(a)), b) == first
    # an entry whose partner is gone is dropped when the next one is kept
    c = lg.Ratings.from_long({k: v[n:] for k, v in both.items() if k != "pool"})
    lg.cross_kappa(a, c)
    assert len(a.__dict__["_one_index"]) == 2
    del b, c
    gc.collect()
    lg.cross_kappa(a, lg.Ratings.from_long({k: v[n:] for k, v in both.items() if k != "pool"}))
    assert len(a.__dict__["_one_index"]) == 1


@pytest.mark.parametrize("level", ["nominal", "ordinal"])
def test_the_panel_on_the_whole_item_axis_equals_the_gathered_computation(level):
    """Views on every item skip the gathers and masked copies; on a permuted axis every number is the same."""
    from labelgate.metrics._blocks import column_sums
    from labelgate.metrics._cross_disagreement import build_cross_kappa
    from labelgate.metrics.alpha import build_alpha

    data = _every_item_pairable(22)
    x = lg.Ratings.from_long(data, level=level)
    other = dict(data, label=np.where(np.arange(len(data["label"])) % 5 == 0, 0, data["label"]))
    y = lg.Ratings.from_long(other, level=level)
    every, backwards = np.arange(x.n_items), np.arange(x.n_items)[::-1].copy()
    for build, args in ((build_alpha, (x,)), (build_cross_kappa, (x, y))):
        whole = build(*args, every) if build is build_alpha else build(*args, every, every)
        permuted = build(*args, backwards) if build is build_alpha else build(*args, backwards, backwards)
        assert whole.point()["value"][0] == pytest.approx(permuted.point()["value"][0], abs=1e-14), build
        for a, b in zip(whole.get_blocks(), permuted.get_blocks(), strict=True):
            np.testing.assert_allclose(column_sums(a), column_sums(b), rtol=1e-13)
    if level == "nominal":  # the nominal shortcut n'(1 - I) n = n^2 - sum n_c^2 against the matrix product
        q = x.n_categories
        assert float(lg.cross_kappa(x, y)) == float(lg.cross_kappa(x, y, distance=1.0 - np.eye(q)))
        counts = x.item_counts.astype(float)
        n = counts.sum(axis=1)
        within = np.einsum("ic,ic->i", counts @ (1.0 - np.eye(q)), counts) * (1.0 / (n - 1.0))  # as before
        assert np.array_equal(build_alpha(x).get_blocks()[0][:, 0], within)


def test_the_six_spa_weightings_share_their_sums_and_equal_a_fresh_computation():
    rng = np.random.default_rng(5)
    n = 2000
    data = {"item_id": rng.integers(0, 500, n), "rater_id": rng.integers(0, 30, n), "label": rng.integers(0, 3, n)}
    shared = lg.Ratings.from_long(data, duplicates="first")
    for weighting in WEIGHTINGS:
        first = lg.spa(shared, weighting, ci=0.9, n_boot=200, seed=1)
        fresh = lg.spa(lg.Ratings.from_long(data, duplicates="first"), weighting, ci=0.9, n_boot=200, seed=1)
        assert float(first) == float(fresh) and first.ci == fresh.ci


@pytest.mark.parametrize("seed", range(4))
def test_nominal_alpha_and_kappa_x_point_totals_are_the_exact_sums_of_their_blocks(seed):
    """Nominal α's and κx's point estimates read integer sums, not the float tables: the same numbers, exactly."""
    from labelgate.metrics._blocks import column_sums
    from labelgate.metrics._cross_disagreement import build_cross_kappa
    from labelgate.metrics.alpha import build_alpha

    rng = np.random.default_rng(seed)
    n = 4000  # 1-5 ratings per item: single-rated items, hence the masked table in the blocks
    data = {"item_id": rng.integers(0, 1500, n), "rater_id": rng.integers(0, 40, n), "label": rng.integers(0, 5, n),
            "pool": rng.choice(["x", "y"], n)}
    pools = lg.ratings_by_pool(data, duplicates="first")
    x, y = pools["x"], pools["y"]
    assert (x.ratings_per_item == 1).any()
    common = np.flatnonzero((x.ratings_per_item > 0) & (y.ratings_per_item > 0))
    stats = [lambda: build_alpha(x), lambda: build_alpha(x, np.flatnonzero(x.ratings_per_item >= 2)[::2]),
             lambda: build_cross_kappa(x, y, common, common), lambda: build_cross_kappa(x, y, common[::2], common[::2])]
    for make in stats:
        stat = make()
        assert stat.blocks is None  # the point estimate builds no block ...
        assert "_float_item_counts" not in x.__dict__ and "_float_item_counts" not in y.__dict__  # ... nor floats
        point = stat.point()
        sums = [column_sums(block) for block in stat.get_blocks()]
        for total, summed in zip(stat.totals, sums, strict=True):
            assert np.array_equal(np.atleast_2d(total), summed)
        assert point["value"][0] == stat.finalize(sums)["value"][0]
        for r in (x, y):
            r.__dict__.pop("_float_item_counts", None)  # the next statistic starts without it too


@pytest.mark.parametrize("marginals", ["all_rated_items", "pairable_items"])
def test_point_totals_of_the_chance_family_equal_the_sums_of_their_blocks(marginals):
    from labelgate.metrics._blocks import column_sums
    from labelgate.metrics._chance import (
        build_bennett_s,
        build_conger_kappa,
        build_fleiss_kappa,
        build_gwet_ac,
        build_percent_agreement,
    )

    rng = np.random.default_rng(6)
    n = 3000  # 1-4 ratings per item, single-rated items among them
    data = {"item_id": rng.integers(0, 1200, n), "rater_id": rng.integers(0, 25, n), "label": rng.integers(0, 4, n)}
    r = lg.Ratings.from_long(data, duplicates="first")
    builders = [build_percent_agreement(r), build_bennett_s(r, weights="linear"),
                build_fleiss_kappa(r, marginals=marginals), build_gwet_ac(r, weights="quadratic", marginals=marginals),
                build_conger_kappa(r, marginals=marginals)]
    for stat in builders:
        assert stat.blocks is None and stat.totals is not None  # the point estimate builds no block
        from_totals = stat.point()
        from_blocks = stat.finalize([column_sums(b) for b in stat.get_blocks()])
        for key, value in from_totals.items():
            np.testing.assert_allclose(value, from_blocks[key], rtol=1e-12, atol=1e-12, err_msg=key)


def test_metrics_panel_reports_every_requested_spa_weighting():
    r = lg.Ratings.from_wide([[1, 1, 0], [0, 1, 1], [0, 0, 0], [1, 1, 1]])
    panel = metrics_panel({"all": r}, ci=None, spa_weightings=WEIGHTINGS)["all"]
    assert float(panel["spa"]) == float(lg.spa(r))
    for weighting in WEIGHTINGS[1:]:
        assert float(panel[f"spa_{weighting}"]) == float(lg.spa(r, weighting))
    assert {"krippendorff_alpha", "fleiss_kappa", "conger_kappa", "gwet_ac", "percent_agreement"} <= set(panel)


@pytest.mark.parametrize("ids", ["objects of several widths", "Arrow strings of one width"])
def test_no_route_builds_a_raters_by_items_array(ids):
    # 10^5 raters x 5 * 10^4 items would be 5 * 10^9 cells dense; the build must stay near the input's size
    rng = np.random.default_rng(0)
    n = 200_000
    items = rng.integers(0, 50_000, n)
    raters = rng.permutation(n) % 100_000
    if ids == "objects of several widths":  # the hash-and-compare route
        item_ids = np.asarray([f"item-{k}" for k in items], dtype=object)
    else:  # the vectorised hash table on the ids' bytes
        item_ids = pd.Series([f"i{k:06d}" for k in items], dtype=ARROW_STR)
    data = {"item_id": item_ids, "rater_id": pd.Categorical(raters), "label": rng.integers(0, 5, n)}
    tracemalloc.start()
    try:
        r = lg.Ratings.from_long(data, duplicates="first")
        lg.conger_kappa(r)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert r.n_raters == 100_000
    assert peak < 200 * n  # bytes: a few int64 arrays per judgement, never raters x items


@needs_pyarrow
def test_an_arrow_dictionary_that_repeats_a_value_gives_that_id_one_code():
    # Arrow allows a dictionary to hold one value twice (and a null): one id must still be one item, and a rater
    # judging it through both entries has judged it twice
    dictionary = pa.array(["q1", "q2", "q1", None])
    items = pa.DictionaryArray.from_arrays(pa.array([0, 2, 1, 1], pa.int32()), dictionary)
    raters, labels = ["a", "b", "a", "b"], [1, 1, 0, 0]
    plain = lg.Ratings.from_long({"item_id": ["q1", "q1", "q2", "q2"], "rater_id": raters, "label": labels})
    for form in (pa.table({"item_id": items, "rater_id": raters, "label": labels}),
                 pd.DataFrame({"item_id": pd.Series(items.to_pandas(types_mapper=pd.ArrowDtype)).astype(
                     pd.ArrowDtype(items.type)), "rater_id": raters, "label": labels})):
        built = lg.Ratings.from_long(form)
        assert list(built.item_labels) == list(plain.item_labels) == ["q1", "q2"]
        assert float(lg.krippendorff_alpha(built)) == float(lg.krippendorff_alpha(plain))
    twice = pa.DictionaryArray.from_arrays(pa.array([0, 2, 1], pa.int32()), dictionary)
    with pytest.raises(lg.InputError, match="Rater 'a' judged item 'q1' more than once"):
        lg.Ratings.from_long(pa.table({"item_id": twice, "rater_id": ["a", "a", "b"], "label": [1, 0, 1]}))
    missing = pa.DictionaryArray.from_arrays(pa.array([0, 3], pa.int32()), dictionary)  # the null entry
    with pytest.raises(lg.InputError, match="missing"):
        lg.Ratings.from_long(pa.table({"item_id": missing, "rater_id": ["a", "b"], "label": [1, 0]}))


@needs_pyarrow
def test_columns_of_few_values_keep_narrow_codes_and_ratings_get_int64():
    """Label and pool columns keep a byte a row; the Ratings built from them hold int64 codes, the same ones."""
    from labelgate.core.column import code_counts, int64_codes, used_codes

    rng = np.random.default_rng(8)
    n = 5000
    frame = pd.DataFrame({"item_id": rng.integers(0, 900, n), "rater_id": rng.integers(0, 30, n).astype(str),
                          "label": rng.integers(0, 5, n), "pool": pd.array(rng.choice(["A", "B"], n), dtype=ARROW_STR)})
    labels = factorize(frame["label"], ordered=False)
    assert labels.codes.dtype == np.int8
    assert factorize(frame["pool"]).codes.dtype == np.int8
    assert np.array_equal(labels.uniques[labels.codes], frame["label"].to_numpy())
    pools = lg.ratings_by_pool(frame, duplicates="first")
    for name, part in pools.items():
        reference = lg.Ratings.from_long(frame[frame["pool"] == name].reset_index(drop=True), duplicates="first")
        for attribute in ("item_codes", "rater_codes", "value_codes"):
            assert getattr(part, attribute).dtype == np.int64
        assert np.array_equal(part.value_codes, reference.value_codes)
        assert np.array_equal(part.rater_labels[part.rater_codes], reference.rater_labels[reference.rater_codes])
    read_only = frame["label"].to_numpy()
    if read_only.flags.writeable:  # pandas < 3 (no copy-on-write) hands out writeable arrays: one made read-only
        read_only = read_only.view()
        read_only.flags.writeable = False
    assert not read_only.flags.writeable  # pandas' arrays: the case the blockwise count spares a copy of
    assert np.array_equal(code_counts(read_only, 5), np.bincount(read_only, minlength=5))
    narrow = np.array([3, -1, 0, 3, 1], dtype=np.int8)
    assert used_codes(narrow, 5).tolist() == [True, True, False, True, False]
    rows = np.array([4, 0, 2])
    assert int64_codes(narrow, rows).dtype == np.int64 and int64_codes(narrow, rows).tolist() == [1, 3, 0]


def test_pair_counts_block_by_block_equal_one_bincount():
    from labelgate.core.sortcodes import BLOCK
    from labelgate.core.statistics import pair_counts

    rng = np.random.default_rng(9)
    n = 5 * BLOCK + 123  # several blocks and a short last one
    raters, labels = rng.integers(0, 40, n), rng.integers(0, 3, n)
    counts = pair_counts(raters, labels, 3, 40 * 3)
    assert counts.dtype == np.int64
    assert np.array_equal(counts, np.bincount(raters * 3 + labels, minlength=120))
    r = lg.Ratings.from_long({"item_id": np.arange(n) // 4, "rater_id": raters, "label": labels}, duplicates="first")
    expected = np.zeros((r.n_raters, r.n_categories), dtype=np.int64)
    np.add.at(expected, (r.rater_codes, r.value_codes), 1)
    assert np.array_equal(r.rater_counts, expected)


def test_the_shared_vector_of_ones_is_read_only_grows_and_is_capped(monkeypatch):
    from labelgate.metrics import _blocks

    monkeypatch.setattr(_blocks, "_ones_kept", np.ones(0))
    monkeypatch.setattr(_blocks, "ONES_KEPT", 100)
    short = _blocks.ones(10)
    assert np.array_equal(short, np.ones(10)) and not short.flags.writeable
    assert _blocks._ones_kept.size == 10
    longer = _blocks.ones(15)  # grown to twice the kept length, within the cap
    assert longer.size == 15 and _blocks._ones_kept.size == 20 and not longer.flags.writeable
    assert _blocks.ones(20).base is _blocks._ones_kept  # within the kept length: a view, nothing made
    beyond = _blocks.ones(101)  # past the cap: made for the call, not kept
    assert np.array_equal(beyond, np.ones(101)) and _blocks._ones_kept.size == 20


def test_ids_are_compacted_only_when_a_dropped_row_can_leave_one_unused(monkeypatch):
    """``factorize`` keeps only the values its rows hold: with no row dropped the codes are kept as they are; a
    rater whose only judgement has a missing label (or a categorical's unused category) is still left out."""
    import labelgate.core.build as build

    calls = []
    real = build.compact_codes

    def spy(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(build, "compact_codes", spy)
    frame = pd.DataFrame({"item_id": ["a", "a", "b", "b", "c"], "rater_id": ["x", "y", "x", "y", "z"],
                          "label": [1, 2, 1, 1, None]})
    whole = lg.Ratings.from_long(frame.iloc[:4])
    assert calls == [] and list(whole.rater_labels) == ["x", "y"] and list(whole.item_labels) == ["a", "b"]
    dropped = lg.Ratings.from_long(frame)  # rater z and item c have only the missing label
    assert calls == [3, 3]
    assert list(dropped.rater_labels) == ["x", "y"] and list(dropped.item_labels) == ["a", "b"]
    assert dropped.n_raters == 2 and dropped.n_items == 2 and dropped.n_dropped_missing == 1
    categorical = frame.iloc[:4].astype({"rater_id": pd.CategoricalDtype(["w", "x", "y"])})  # "w": no row
    calls.clear()
    assert list(lg.Ratings.from_long(categorical).rater_labels) == ["x", "y"] and calls == []
    pools = lg.ratings_by_pool(frame.assign(pool="A"))  # one pool: every row, the table's own factorisation
    assert list(pools["A"].rater_labels) == ["x", "y"]
    two = lg.ratings_by_pool(frame.iloc[:4].assign(pool=["A", "B", "A", "B"]))  # each pool: part of the raters
    assert list(two["A"].rater_labels) == ["x"] and list(two["B"].rater_labels) == ["y"]
    assert two["A"].n_raters == 1 and two["B"].n_raters == 1
