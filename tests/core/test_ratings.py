"""`Ratings` construction: equivalence of the input forms and one clear error per kind of bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import labelgate as lg
from labelgate.errors import Reason


def long_frame(**overrides):
    data = {"item_id": ["i1", "i1", "i2", "i2", "i3"], "rater_id": ["a", "b", "a", "b", "a"],
            "label": ["x", "y", "x", "x", "y"]}
    data.update(overrides)
    return pd.DataFrame(data)


def test_long_wide_and_mapping_inputs_agree():
    frame = long_frame()
    from_frame = lg.Ratings.from_long(frame)
    from_mapping = lg.Ratings.from_long({k: list(v) for k, v in frame.items()})
    wide = frame.pivot(index="item_id", columns="rater_id", values="label")
    from_wide = lg.Ratings.from_wide(wide)
    for r in (from_frame, from_mapping, from_wide):
        assert (r.n_items, r.n_raters, r.n_ratings) == (3, 2, 5)
        assert r.categories == ("x", "y")
        assert float(lg.krippendorff_alpha(r)) == pytest.approx(float(lg.krippendorff_alpha(from_frame)))
    assert list(from_wide.item_labels) == ["i1", "i2", "i3"]
    assert list(from_wide.rater_labels) == ["a", "b"]


def test_sufficient_statistics_are_sparse_shaped():
    r = lg.Ratings.from_long(long_frame())
    assert r.item_counts.shape == (3, 2)
    assert r.rater_counts.shape == (2, 2)
    assert r.item_counts.sum() == r.n_ratings
    assert list(r.ratings_per_item) == [2, 2, 1]


def test_missing_column_names_it():
    with pytest.raises(lg.InputError, match="Column 'rater' \\(the rater column\\) is missing") as info:
        lg.Ratings.from_long(long_frame(), rater="rater")
    assert info.value.code == Reason.MISSING_COLUMN and info.value.context["column"] == "rater"


@pytest.mark.parametrize("column", ["item_id", "rater_id"])
def test_missing_id_names_column_and_row(column):
    frame = long_frame()
    frame.loc[3, column] = None
    with pytest.raises(lg.InputError, match=f"Column '{column}' has a missing id .* first at row 3") as info:
        lg.Ratings.from_long(frame)
    assert info.value.code == Reason.MISSING_ID and info.value.context["row"] == 3


def test_unknown_category_names_value_and_row():
    frame = long_frame(label=["x", "y", "x", "zz", "y"])
    with pytest.raises(lg.InputError, match="value 'zz' at row 3, which is not one of the categories") as info:
        lg.Ratings.from_long(frame, categories=["x", "y"])
    assert info.value.code == Reason.UNKNOWN_CATEGORY and info.value.context["value"] == "zz"


def test_non_numeric_value_for_interval_level():
    with pytest.raises(lg.InputError, match="level='interval' needs numbers") as info:
        lg.Ratings.from_long(long_frame(), level="interval")
    assert info.value.code == Reason.NON_NUMERIC_VALUE


def test_negative_value_for_ratio_level():
    frame = long_frame(label=[1, 2, -1, 3, 4])
    with pytest.raises(lg.InputError, match="Ratio-level values must be non-negative"):
        lg.Ratings.from_long(frame, level="ratio")


def test_duplicate_judgement_is_an_error_by_default():
    frame = pd.concat([long_frame(), long_frame().iloc[[2]].assign(label="y")], ignore_index=True)
    with pytest.raises(lg.InputError, match="Rater 'a' judged item 'i2' more than once \\(rows 2 and 5") as info:
        lg.Ratings.from_long(frame)
    assert info.value.code == Reason.DUPLICATE_JUDGEMENT


@pytest.mark.parametrize(("policy", "kept"), [("first", "x"), ("last", "y")])
def test_duplicate_policies_keep_first_or_last(policy, kept):
    frame = pd.concat([long_frame(), long_frame().iloc[[2]].assign(label="y")], ignore_index=True)
    r = lg.Ratings.from_long(frame, duplicates=policy)
    assert r.n_ratings == 5
    row = np.flatnonzero((r.item_labels[r.item_codes] == "i2") & (r.rater_labels[r.rater_codes] == "a"))
    assert r.categories[r.value_codes[row[0]]] == kept


def test_empty_input():
    with pytest.raises(lg.InputError, match="empty") as info:
        lg.Ratings.from_long(long_frame().iloc[:0])
    assert info.value.code == Reason.EMPTY_INPUT
    with pytest.raises(lg.InputError, match="empty"):
        lg.Ratings.from_wide(np.empty((0, 3)))


def test_missing_labels_are_dropped_and_counted_or_rejected():
    frame = long_frame(label=["x", None, "x", np.nan, "y"])
    r = lg.Ratings.from_long(frame)
    assert r.n_ratings == 3 and r.n_dropped_missing == 2
    with pytest.raises(lg.InputError, match="missing value in 2 row\\(s\\), first at row 1"):
        lg.Ratings.from_long(frame, missing="error")


def test_only_missing_labels_is_empty():
    with pytest.raises(lg.InputError, match="no non-missing value|empty"):
        lg.Ratings.from_long(long_frame(label=[None] * 5))


def test_unorderable_ordinal_labels_need_explicit_categories():
    frame = long_frame(label=["x", 1, "x", 2, "y"])
    with pytest.raises(lg.InputError, match="cannot be ordered") as info:
        lg.Ratings.from_long(frame, level="ordinal")
    assert info.value.code == Reason.UNSORTABLE_CATEGORIES
    r = lg.Ratings.from_long(frame, level="ordinal", categories=[1, 2, "x", "y"])
    assert r.categories == (1, 2, "x", "y")


def test_bad_level_and_policy_parameters():
    with pytest.raises(lg.ParameterError, match="'level' parameter of Ratings.from_long must be one of"):
        lg.Ratings.from_long(long_frame(), level="categorical")
    with pytest.raises(lg.ParameterError, match="'duplicates' parameter"):
        lg.Ratings.from_long(long_frame(), duplicates="keep")


def test_explicit_categories_keep_unused_ones_and_order():
    r = lg.Ratings.from_long(long_frame(), categories=["y", "x", "z"], level="ordinal")
    assert r.categories == ("y", "x", "z")
    assert r.item_counts.shape == (3, 3)
    assert r.item_counts[:, 2].sum() == 0


def test_numeric_labels_match_integer_categories():
    frame = long_frame(label=[1.0, 2.0, 1.0, 1.0, 3.0])
    r = lg.Ratings.from_long(frame, level="interval", categories=[1, 2, 3, 4])
    assert r.categories == (1, 2, 3, 4)
    assert list(r.category_values) == [1.0, 2.0, 3.0, 4.0]


def test_ratings_by_pool_shares_items_and_categories():
    frame = long_frame().assign(pool=["crowd", "trusted", "crowd", "trusted", "crowd"])
    pools = lg.ratings_by_pool(frame)
    crowd, trusted = pools["crowd"], pools["trusted"]
    assert crowd.item_labels is trusted.item_labels
    assert crowd.categories == trusted.categories == ("x", "y")
    assert crowd.n_ratings == 3 and trusted.n_ratings == 2
    with pytest.raises(lg.InputError, match="Column 'replication' \\(the pool column\\) is missing"):
        lg.ratings_by_pool(frame, pool="replication")


def test_cross_metrics_align_separately_built_replications_by_item_id():
    x = lg.Ratings.from_long({"item_id": ["b", "a", "c"], "rater_id": [1, 1, 1], "label": [0, 1, 1]})
    y = lg.Ratings.from_long({"item_id": ["a", "b", "d"], "rater_id": [2, 2, 2], "label": [1, 0, 0]})
    est = lg.cross_kappa(x, y)
    assert est.n_items == 2 and float(est) == 1.0
    assert est.details["coverage_x"] == pytest.approx(2 / 3)


def test_cross_metrics_merge_category_lists():
    x = lg.Ratings.from_wide([["a"], ["b"], ["a"]])
    y = lg.Ratings.from_wide([["a"], ["c"], ["a"]])
    est = lg.cross_kappa(x, y)
    assert est.n_items == 3 and np.isfinite(float(est))


def test_cross_metrics_reject_different_levels_and_non_ratings():
    x = lg.Ratings.from_wide([[1], [2]], level="interval")
    y = lg.Ratings.from_wide([[1], [2]], level="nominal")
    with pytest.raises(lg.InputError, match="different levels"):
        lg.cross_kappa(x, y)
    with pytest.raises(lg.ParameterError, match="takes two Ratings"):
        lg.cross_kappa(x, [[1], [2]])


def test_cohen_kappa_with_three_raters_points_to_conger():
    r = lg.Ratings.from_wide([[0, 1, 1], [1, 1, 1]])
    with pytest.raises(lg.DesignError, match="Use conger_kappa") as info:
        lg.cohen_kappa(r)
    assert info.value.code == Reason.WRONG_RATER_COUNT


def test_errors_serialise_with_their_context():
    with pytest.raises(lg.InputError) as info:
        lg.Ratings.from_long(long_frame(), item="nope")
    assert info.value.to_dict() == {"code": "missing_column", "message": info.value.message, "column": "nope"}
