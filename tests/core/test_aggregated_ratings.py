"""`Ratings.from_aggregates`: ratings built from (item, category, count) rows equal those built from the judgements.

Every coefficient that needs no rater identity gives the same value (1e-12) and the same interval with the same seed
as on ``Ratings.from_long`` of the judgements the rows count, and none of them makes the aggregated ratings expand
into one entry per judgement.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

import labelgate as lg
from labelgate.core.ratings import AggregatedRatings, align_items
from labelgate.errors import DesignError, InputError
from labelgate.metrics.cross import irr_comparison

TOL = 1e-12
BOOT = {"ci": 0.9, "n_boot": 300, "seed": 11, "ci_method": "bca"}  # the item bootstrap: identical resamples


def judgements(level: str, seed: int, n_items: int = 60) -> pd.DataFrame:
    """Sparse random judgements of two pools, some items with one rating; ids in random order."""
    rng = np.random.default_rng(seed)
    scale: list[Any] = {"nominal": ["x", "y", "z"], "ordinal": [1, 2, 3, 4],
                        "interval": [0.25, 1.0, 2.5, 4.0, 7.5], "ratio": [0.5, 1.0, 2.0, 4.0]}[level]
    rows = []
    for item in rng.permutation(n_items):
        truth = rng.integers(len(scale))
        for pool, k in (("crowd", rng.integers(1, 6)), ("trusted", rng.integers(1, 4))):
            for rater in rng.choice(12, k, replace=False):
                code = truth if rng.random() < 0.7 else rng.integers(len(scale))
                rows.append((f"item-{item}", f"{pool}-{rater}", scale[int(code)], pool))
    return pd.DataFrame(rows, columns=["item_id", "rater_id", "label", "pool"])


def aggregate(df: pd.DataFrame, level: str) -> dict[str, lg.Ratings]:
    """The pools of ``df`` from its (pool, item, label) counts, on the item index and categories of from_long."""
    reference = lg.ratings_by_pool(df, level=level)
    labels = reference["crowd"].item_labels
    categories = list(reference["crowd"].categories)
    counts = df.groupby(["pool", "item_id", "label"]).size().reset_index(name="n")
    item_code = pd.Index(labels).get_indexer(counts["item_id"])
    category_code = pd.Index(categories).get_indexer(counts["label"])
    index = np.empty(len(labels), dtype=object)
    index[:] = list(labels)
    return {pool: lg.Ratings.from_aggregates(item_code[mine], category_code[mine], counts["n"].to_numpy()[mine],
                                             item_labels=index, categories=categories, level=level)
            for pool in ("crowd", "trusted") for mine in [(counts["pool"] == pool).to_numpy()]}


def same(a: lg.Estimate, b: lg.Estimate) -> None:
    for x, y in ((a.value, b.value), *zip(a.ci or (), b.ci or (), strict=True)):
        assert (math.isnan(x) and math.isnan(y)) or abs(x - y) <= TOL, (a, b)
    assert (a.ci is None) == (b.ci is None)
    assert a.n_items == b.n_items and a.n_ratings == b.n_ratings


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_every_count_coefficient_equals_the_judgements_path(level):
    df = judgements(level, seed=3)
    long, agg = lg.ratings_by_pool(df, level=level), aggregate(df, level)
    for pool in ("crowd", "trusted"):
        assert isinstance(agg[pool], AggregatedRatings)
        assert np.array_equal(agg[pool].item_counts, long[pool].item_counts)
        assert np.array_equal(agg[pool].ratings_per_item, long[pool].ratings_per_item)
        assert np.allclose(agg[pool].item_moments, long[pool].item_moments, rtol=0, atol=TOL)
        assert agg[pool].n_ratings == long[pool].n_ratings
    x, y = agg["crowd"], agg["trusted"]
    for function in (lg.fleiss_kappa, lg.gwet_ac, lg.krippendorff_alpha, lg.spa, lg.percent_agreement):
        same(function(x, **BOOT), function(long["crowd"], **BOOT))
    same(lg.cross_kappa(x, y, **BOOT), lg.cross_kappa(long["crowd"], long["trusted"], **BOOT))
    for irr in ("krippendorff_alpha", "fleiss_kappa", "gwet_ac"):
        same(lg.normalized_cross_kappa(x, y, irr=irr, **BOOT),
             lg.normalized_cross_kappa(long["crowd"], long["trusted"], irr=irr, **BOOT))
        same(irr_comparison(x, y, irr=irr, **BOOT), irr_comparison(long["crowd"], long["trusted"], irr=irr, **BOOT))
    # none of them read single judgements: the rows were never expanded
    assert not x.expanded and not y.expanded
    assert x.row_counts.size < x.n_ratings


def test_rater_identity_is_refused_and_single_judgements_come_on_demand():
    r = lg.Ratings.from_aggregates([0, 0, 1, 1], [0, 1, 1, 1], [2, 1, 1, 2], item_labels=["a", "b"],
                                   categories=["n", "p"])
    assert r.item_counts.tolist() == [[2, 1], [0, 3]]  # the repeated pair (1, 1) adds up
    with pytest.raises(DesignError, match="which rater gave each rating"):
        lg.conger_kappa(r)
    assert not r.expanded
    assert r.item_codes.tolist() == [0, 0, 0, 1, 1, 1] and r.rater_codes.tolist() == [0, 1, 2, 0, 1, 2]
    assert r.value_codes.tolist() == [0, 0, 1, 1, 1, 1] and r.expanded
    assert r.n_raters == 3  # placeholder raters: positions on an item


def test_an_object_index_is_shared_not_copied():
    index = np.asarray(["a", "b", "c"], dtype=object)
    x = lg.Ratings.from_aggregates([0, 1], [0, 0], [2, 2], item_labels=index, categories=[0, 1])
    y = lg.Ratings.from_aggregates([1, 2], [1, 0], [2, 2], item_labels=index, categories=[0, 1])
    assert x.item_labels is y.item_labels is index
    cx, cy = align_items(x, y)  # by code, on the shared index
    assert cx.tolist() == cy.tolist() == [1]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"item_codes": [0, 1], "category_codes": [0], "counts": [1, 1]}, "one entry per row"),
    ({"item_codes": [0, 2], "category_codes": [0, 0], "counts": [1, 1]}, "item_codes has the code 2 at row 1"),
    ({"item_codes": [0, 1], "category_codes": [0, -1], "counts": [1, 1]}, "category_codes has the code -1"),
    ({"item_codes": [0, 1], "category_codes": [0, 1], "counts": [1, -3]}, "negative count -3 at row 1"),
    ({"item_codes": [0.5, 1], "category_codes": [0, 1], "counts": [1, 1]}, "must hold integers"),
    ({"item_codes": [[0, 1]], "category_codes": [0, 1], "counts": [1, 1]}, "one-dimensional"),
    ({"item_codes": [0, 1], "category_codes": [0, 1], "counts": [0, 0]}, "empty"),
])
def test_malformed_rows_are_refused_with_the_row(kwargs, message):
    with pytest.raises(InputError, match=message):
        lg.Ratings.from_aggregates(**kwargs, item_labels=["a", "b"], categories=["n", "p"])
