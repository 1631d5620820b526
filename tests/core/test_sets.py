"""Set-valued (multi-label) judgements: reading the cells, the canonical set list, the distances, the errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import labelgate as lg
from labelgate.core.sets import SetRatings, set_distance_matrix


def table(labels, items=None, raters=None):
    n = len(labels)
    return {"item_id": items or [k // 2 for k in range(n)], "rater_id": raters or [k % 2 for k in range(n)],
            "label": labels}


def test_every_cell_type_is_a_set_and_the_empty_set_is_a_judgement():
    cells = [["a", "b"], ("b", "a"), {"a"}, frozenset({"a"}), [], set(), None, float("nan")]
    r = lg.Ratings.from_long(table(cells), level="set")
    assert isinstance(r, SetRatings) and r.level == "set" and r.set_distance == "jaccard"
    assert r.categories == (frozenset(), frozenset({"a"}), frozenset({"a", "b"}))
    assert r.n_ratings == 6 and r.n_dropped_missing == 2  # the empty sets count, the missing cells do not
    assert r.value_codes.tolist() == [2, 2, 1, 1, 0, 0]


def test_strings_are_split_at_sep_and_an_empty_string_is_the_empty_set():
    r = lg.Ratings.from_long(table(["a|b", "b | a", "", "c"]), level="set", sep="|", distance="masi")
    assert r.set_distance == "masi"
    assert r.categories == (frozenset(), frozenset({"c"}), frozenset({"a", "b"}))
    assert r.value_codes.tolist() == [2, 2, 0, 1]


def test_pandas_columns_and_row_labels_in_errors():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(table([["a"], ["b"], "a", ["c"]]), index=[10, 11, 12, 13])
    with pytest.raises(lg.InputError, match="row 12") as err:
        lg.Ratings.from_long(frame, level="set")
    assert err.value.code == lg.Reason.UNREADABLE_INPUT and "sep" in str(err.value)
    frame["label"] = [["a"], ["b"], [], None]
    assert lg.Ratings.from_long(frame, level="set").n_ratings == 3


@pytest.mark.parametrize("cell", [3, 2.5, {"a": 1}])
def test_a_cell_that_is_not_a_collection_is_refused(cell):
    with pytest.raises(lg.InputError, match="label set|set-level"):
        lg.Ratings.from_long(table([["a"], cell]), level="set")


def test_a_missing_element_inside_a_set_is_refused():
    with pytest.raises(lg.InputError, match="missing element") as err:
        lg.Ratings.from_long(table([["a"], ["b", None]]), level="set")
    assert err.value.code == lg.Reason.MISSING_VALUE


def test_parameters_are_checked():
    with pytest.raises(lg.ParameterError, match="distance"):
        lg.Ratings.from_long(table([["a"], ["b"]]), level="set", distance="cosine")
    with pytest.raises(lg.ParameterError, match="level='set'"):
        lg.Ratings.from_long(table(["a", "b"]), distance="jaccard")
    with pytest.raises(lg.ParameterError, match="sep"):
        lg.Ratings.from_long(table(["a", "b"]), level="set", sep="")


def test_explicit_categories_refuse_an_unlisted_set():
    cats = [[], ["a"], ["a", "b"]]
    r = lg.Ratings.from_long(table([["a"], ["a", "b"]]), level="set", categories=cats)
    assert r.n_categories == 3
    with pytest.raises(lg.InputError) as err:
        lg.Ratings.from_long(table([["a"], ["c"]]), level="set", categories=cats)
    assert err.value.code == lg.Reason.UNKNOWN_CATEGORY


def test_pools_share_the_set_list_and_copies_keep_the_distance():
    data = {**table([["a"], ["a", "b"], [], ["b"]]), "pool": ["x", "y", "x", "y"]}
    pools = lg.ratings_by_pool(data, level="set", distance="masi")
    x, y = pools["x"], pools["y"]
    assert x.categories == y.categories and x.shares_items_with(y)
    assert all(isinstance(p, SetRatings) and p.set_distance == "masi" for p in pools.values())
    sub = x.subset_items([0])
    assert isinstance(sub, SetRatings) and sub.set_distance == "masi" and sub.n_ratings == 1
    wider = x.with_categories([*x.categories, frozenset({"z"})])
    assert wider.set_distance == "masi" and wider.n_categories == x.n_categories + 1
    assert np.array_equal(wider.set_distances[:-1, :-1], x.set_distances)


@pytest.mark.parametrize("distance", ["jaccard", "masi"])
def test_the_distance_matrix_is_nltks_distance_with_zero_between_two_empty_sets(distance):
    nltk_distance = pytest.importorskip("nltk.metrics.distance")  # a test-only dependency (the test extra)
    reference = {"jaccard": nltk_distance.jaccard_distance, "masi": nltk_distance.masi_distance}[distance]
    elements = ["a", "b", "c", 1]
    sets = [frozenset(c) for size in range(4) for c in itertools.combinations(elements, size)]
    matrix = set_distance_matrix(sets, distance)
    for (i, a), (j, b) in itertools.product(enumerate(sets), repeat=2):
        expected = 0.0 if not a and not b else reference(set(a), set(b))
        assert matrix[i, j] == pytest.approx(expected, abs=1e-15)


def test_too_many_distinct_sets_are_refused(monkeypatch):
    from labelgate.core import sets

    monkeypatch.setattr(sets, "MAX_DISTINCT_SETS", 2)
    with pytest.raises(lg.InputError) as err:
        lg.Ratings.from_long(table([["a"], ["b"], ["c"], ["a"]]), level="set")
    assert err.value.code == lg.Reason.TOO_MANY_CATEGORIES


def test_a_duplicate_judgement_names_the_rows_of_the_frame():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"item_id": [1, 1, 1], "rater_id": ["a", "b", "a"], "label": [["x"], [], ["y"]]},
                         index=["r1", "r2", "r3"])
    with pytest.raises(lg.InputError, match="'r1'.*'r3'") as err:
        lg.Ratings.from_long(frame, level="set")
    assert err.value.code == lg.Reason.DUPLICATE_JUDGEMENT
    assert lg.Ratings.from_long(frame, level="set", duplicates="last").value_codes.tolist() == [0, 2]
